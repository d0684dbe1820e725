"""The Blob store on SQLite: records and block lists in the engine's database, content in files.

Every operation is a shared plan (:mod:`tabulae.storage.blobplan`); writes run as jobs of the
engine's group-commit writer, each in its savepoint, reads on the reader connection. Content is
staged first by :mod:`.blob_files` (a file synced before the job is even queued, or bytes for a
``blob_data`` row the job inserts), so an acknowledged blob never points at missing bytes.

Extents a write stops referencing go to ``blob_garbage`` in the same transaction and are deleted
after ``GARBAGE_GRACE_SECONDS`` (a download that began before may still be reading them; on a
volume low on space after ``LOW_GARBAGE_GRACE_SECONDS``, and on a full one at once, since the
room is needed more than a late download); files a crash left
unreferenced are found by :meth:`ContentFiles.collect_orphans`. ``tabulae backup``
pauses the collector while it copies, so no file it needs can go.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable, Coroutine, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from tabulae.model.errors import ServiceError
from tabulae.storage.blobplan.garbage import REFERENCED, collect
from tabulae.storage.blobplan.store import PlannedBlobs
from tabulae.storage.blobs import (
    GARBAGE_BATCH,
    GARBAGE_GRACE_SECONDS,
    LOW_GARBAGE_GRACE_SECONDS,
    BlobKey,
    Digest,
    Extent,
    FileRange,
    Staged,
    extent_offsets,
)
from tabulae.storage.plan import Plan, Sql, SqliteDialect, run_sync
from tabulae.storage.sqlite.blob_files import (
    CONTENT_DIR,
    ContentFiles,
    SqliteStaged,
    collector_paused,
    copy_files,
    is_inline,
)
from tabulae.storage.sqlite.engine import SqliteDatabase
from tabulae.storage.volume import FULL_MESSAGE

T = TypeVar("T")
__all__ = ["CONTENT_DIR", "SCHEMA", "SqliteBlobs", "collector_paused", "copy_content"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS blob_containers (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    account TEXT NOT NULL,
    name TEXT NOT NULL,
    ticks INTEGER NOT NULL,
    doc BLOB NOT NULL,
    UNIQUE (account, name)
);
CREATE TABLE IF NOT EXISTS blob_service_properties (
    account TEXT PRIMARY KEY,
    properties BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS blob_account_features (
    account TEXT PRIMARY KEY,
    properties BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS blobs (
    container_id INTEGER NOT NULL,
    name TEXT NOT NULL,
    version TEXT NOT NULL,
    committed INTEGER NOT NULL,
    ticks INTEGER NOT NULL,
    size INTEGER NOT NULL,
    doc BLOB NOT NULL,
    staged INTEGER NOT NULL DEFAULT 0,
    staged_id_length INTEGER,
    PRIMARY KEY (container_id, name, version)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS blob_extents (
    container_id INTEGER NOT NULL,
    name TEXT NOT NULL,
    version TEXT NOT NULL,
    seq INTEGER NOT NULL,
    ref TEXT NOT NULL,
    length INTEGER NOT NULL,
    block_id TEXT,
    PRIMARY KEY (container_id, name, version, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS blob_extents_ref ON blob_extents (ref);
CREATE TABLE IF NOT EXISTS blob_blocks (
    container_id INTEGER NOT NULL,
    name TEXT NOT NULL,
    block_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    ref TEXT NOT NULL,
    length INTEGER NOT NULL,
    PRIMARY KEY (container_id, name, block_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS blob_blocks_ref ON blob_blocks (ref);
CREATE TABLE IF NOT EXISTS blob_tags (
    dkey INTEGER NOT NULL DEFAULT 0,
    container_id INTEGER NOT NULL,
    name TEXT NOT NULL,
    tag TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (container_id, name, tag)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS blob_tags_lookup ON blob_tags (tag, value);
CREATE TABLE IF NOT EXISTS blob_pages (
    container_id INTEGER NOT NULL,
    name TEXT NOT NULL,
    version TEXT NOT NULL,
    page_start INTEGER NOT NULL,
    page_end INTEGER NOT NULL,
    ref TEXT NOT NULL,
    ref_offset INTEGER NOT NULL,
    cleared INTEGER NOT NULL,
    PRIMARY KEY (container_id, name, version, page_start)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS blob_pages_ref ON blob_pages (ref);
CREATE TABLE IF NOT EXISTS blob_data (
    ref TEXT PRIMARY KEY,
    data BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS blob_garbage (
    ref TEXT PRIMARY KEY,
    dropped REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS blob_changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    account TEXT NOT NULL,
    doc BLOB NOT NULL
);
"""

ORPHANS_INTERVAL_SECONDS = 60.0  # the content directory is scanned for crash orphans at most this often
_DIALECT = SqliteDialect()
_REFERENCED = _DIALECT.render(REFERENCED)


class SqliteBlobs(PlannedBlobs):
    """The :class:`BlobStore` contract over a :class:`SqliteDatabase` and a content directory."""

    def __init__(self, database: SqliteDatabase, directory: Path, *, durable: bool = True) -> None:
        self._db = database
        self._files = ContentFiles(directory, durable=durable)
        self._orphans_at = -1e9  # when files a crash left were last looked for

    async def close(self) -> None:
        self._files.close()

    async def _read(self, make: Callable[[], Plan[T]], *, snapshot: bool = False) -> T:
        return self._db.read_plan(make(), snapshot=snapshot)

    def _write(self, make: Callable[[], Plan[T]]) -> Coroutine[Any, Any, T]:
        return self._db.write_plan(make())  # the writer's coroutine itself: one layer less

    async def _commit(self, make: Callable[[], Plan[tuple[Any, set[str]]]], staged: Staged | None) -> Any:
        assert staged is None or isinstance(staged, SqliteStaged)
        try:
            result, used = await self._db.write(_commit_job, make(), staged)
        except BaseException:
            if staged is not None:
                staged.release(remove=True)
            raise
        if staged is not None:
            staged.release(remove=not used)
        return result

    # ------------------------------------------------------------------ containers

    async def get_service_properties(self, account: str) -> bytes | None:
        return self._db.account_document("blob_service_properties", account)

    async def set_service_properties(self, account: str, properties: bytes) -> None:
        await self._db.set_account_document("blob_service_properties", account, properties)

    async def get_account_features(self, account: str) -> bytes | None:
        return self._db.account_document("blob_account_features", account)

    async def set_account_features(self, account: str, features: bytes) -> None:
        await self._db.set_account_document("blob_account_features", account, features)

    # ------------------------------------------------------------------ content

    async def stage(self, key: BlobKey, chunks: AsyncIterable[bytes], digest: Digest | None) -> Staged:
        try:
            return await self._files.stage(chunks, digest)
        except OSError as exc:  # the partial file is gone already; a full volume is no crash
            volume = self._db.volume
            if not volume.is_full_error(exc):
                raise
            volume.hit_full(exc.strerror or exc)
            raise ServiceError("ServerBusy", FULL_MESSAGE, detail=str(exc)) from None

    async def discard(self, staged: Staged) -> None:
        assert isinstance(staged, SqliteStaged)
        staged.release(remove=True)

    async def read(
        self, key: BlobKey, extents: Sequence[Extent], start: int, end: int
    ) -> AsyncIterator[bytes]:
        for extent, low, high in extent_offsets(extents, start, end):
            if not is_inline(extent.ref):
                async for piece in self._files.read(extent.ref, low, high):
                    yield piece
                continue
            yield self._inline(extent.ref, low, high)

    async def stream(
        self, key: BlobKey, extents: Sequence[Extent], start: int, end: int
    ) -> AsyncIterator[bytes | FileRange]:
        """Inline extents as bytes, files as :class:`FileRange` pieces, each file open only while
        its piece is the current one (so a download holds one descriptor at a time)."""
        for extent, low, high in extent_offsets(extents, start, end):
            if is_inline(extent.ref):
                yield self._inline(extent.ref, low, high)
                continue
            fd = self._files.open(extent.ref)
            try:
                yield FileRange(fd, low, high - low, partial(self._files.read_open, fd, low, high))
            finally:
                os.close(fd)

    def _inline(self, ref: str, low: int, high: int) -> bytes:
        row = self._db.reader.execute(
            "SELECT substr(data, ?, ?) FROM blob_data WHERE ref = ?", (low + 1, high - low, ref)
        ).fetchone()
        if row is None:
            raise ServiceError("InternalError", detail="blob content is gone")
        return bytes(row[0])

    # ------------------------------------------------------------------ blobs

    # ------------------------------------------------------------------ maintenance

    async def collect_garbage(self, grace: float = GARBAGE_GRACE_SECONDS, batch: int = GARBAGE_BATCH) -> int:
        """Delete expired garbage (``batch`` rows a write job, their files after it commits,
        until fewer are left), then look for files a crash orphaned, under the collector's lock
        (so one process at a time, and never while a backup copies)."""
        volume = self._db.volume
        grace = 0.0 if volume.full else min(grace, LOW_GARBAGE_GRACE_SECONDS) if volume.low else grace
        before = time.time() - grace
        with self._files.collecting() as mine:
            if not mine:
                return 0
            removed = 0
            # looked for first, on the reader: collected every few seconds while the volume is
            # low, most rounds find nothing, and a write job would commit (and sync) nothing
            if self._db.reader.execute(_EXPIRED, (before,)).fetchone() is not None:
                while True:
                    taken, files = await self._db.write_plan(_collect(before, batch))
                    removed += await self._files.unlink(files)
                    if taken < batch:
                        break
            if time.monotonic() - self._orphans_at < ORPHANS_INTERVAL_SECONDS:
                return removed  # collected often while the volume is full: the scan keeps its pace
            self._orphans_at = time.monotonic()
            return removed + await self._files.collect_orphans(self._db.path, _unreferenced)


def _commit_job(
    conn: sqlite3.Connection, plan: Plan[tuple[Any, set[str]]], staged: SqliteStaged | None
) -> tuple[Any, bool]:
    """A write plan in a savepoint of the group commit; an inline upload's bytes go in with the
    write that names them. Returns the result and whether ``staged`` was named."""
    result, referenced = run_sync(plan, conn, _DIALECT)
    used = staged is not None and staged.extent.ref in referenced
    if used and staged is not None and staged.data is not None:
        conn.execute("INSERT INTO blob_data (ref, data) VALUES (?, ?)", (staged.extent.ref, staged.data))
    return result, used


def _unreferenced(conn: sqlite3.Connection, ref: str) -> bool:
    """No row names ``ref``, and it is not garbage waiting for its grace period."""
    if conn.execute(_REFERENCED, {"ref": ref}).fetchone()[0]:
        return False
    return conn.execute("SELECT 1 FROM blob_garbage WHERE ref = ?", (ref,)).fetchone() is None


def copy_content(root: Path, destination: Path, database: Path) -> None:
    """Copy the content files ``database`` (a backup of the store) references from ``root``.
    Call it under :func:`collector_paused`, taken before ``database`` was copied."""
    conn = sqlite3.connect(str(database))
    try:
        refs = [
            row[0]
            for row in conn.execute(
                "SELECT ref FROM blob_extents UNION SELECT ref FROM blob_blocks"
                " UNION SELECT ref FROM blob_pages WHERE NOT cleared"
            )
        ]
    finally:
        conn.close()
    copy_files(root, destination, refs)


_EXPIRED = "SELECT 1 FROM blob_garbage WHERE dropped < ? LIMIT 1"


def _collect(before: float, batch: int) -> Plan[tuple[int, list[str]]]:
    """Take up to ``batch`` garbage rows dropped before ``before``: inline rows go here, files
    (returned, with how many rows were taken) once this commits."""
    taken, free = yield from collect("dropped < :before", {"before": before}, batch)
    files: list[str] = []
    for _dkey, ref in free:
        if is_inline(ref):
            yield Sql("DELETE FROM blob_data WHERE ref = :ref", {"ref": ref})
        else:
            files.append(ref)
    return taken, files
