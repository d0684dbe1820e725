"""The Blob store on SQLite: records and block lists in the engine's database, content in files.

Writes are jobs for the engine's group-commit writer: each loads the blob's state, calls the
service's ``decide`` and applies the result in its savepoint. Content is staged first by
:mod:`.blob_files` (a file synced before the job is even queued, or bytes for a ``blob_data``
row the job inserts), so an acknowledged blob never points at missing bytes.

Extents a write stops referencing go to ``blob_garbage`` in the same transaction and are deleted
after ``GARBAGE_GRACE_SECONDS`` (a download that began before may still be reading them); files
a crash left unreferenced are found by :meth:`ContentFiles.collect_orphans`. ``tabulae backup``
pauses the collector while it copies, so no file it needs can go.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

from tabulae.model.errors import TableError
from tabulae.storage.blobs import (
    BASE,
    GARBAGE_GRACE_SECONDS,
    NO_NEEDS,
    STORED_BASE,
    BlobKey,
    BlobListing,
    BlobRecord,
    BlobState,
    BlobStore,
    BlobWrite,
    ContainerRecord,
    Decide,
    Digest,
    Extent,
    Needs,
    Staged,
    container_missing,
    decode_blob,
    decode_container,
    encode_blob,
    encode_container,
    extent_offsets,
    listing_start,
    next_ticks,
    prefix_end,
    stored_version,
)
from tabulae.storage.sqlite.blob_files import (
    CONTENT_DIR,
    ContentFiles,
    SqliteStaged,
    collector_paused,
    copy_files,
    is_inline,
)
from tabulae.storage.sqlite.engine import SqliteDatabase

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
CREATE TABLE IF NOT EXISTS blob_data (
    ref TEXT PRIMARY KEY,
    data BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS blob_garbage (
    ref TEXT PRIMARY KEY,
    dropped REAL NOT NULL
) WITHOUT ROWID;
"""

_BLOB_COLUMNS = "name, version, ticks, size, committed, doc"
_BASE_ROW = "container_id = ? AND name = ? AND version = ?"
_B_COLUMNS = "b.name, b.version, b.ticks, b.size, b.committed, b.doc"
_REFERENCED = (
    "SELECT 1 FROM blob_extents WHERE ref = ?1 UNION ALL SELECT 1 FROM blob_blocks WHERE ref = ?1 LIMIT 1"
)


def _row_to_blob(row: tuple[Any, ...]) -> BlobRecord:
    name, version, ticks, size, committed, doc = row
    return decode_blob(name, version, ticks, size, committed, doc)


class SqliteBlobs(BlobStore):
    """The :class:`BlobStore` contract over a :class:`SqliteDatabase` and a content directory."""

    def __init__(self, database: SqliteDatabase, directory: Path, *, durable: bool = True) -> None:
        self._db = database
        self._files = ContentFiles(directory, durable=durable)

    async def close(self) -> None:
        self._files.close()

    # ------------------------------------------------------------------ containers

    def _container_id(self, conn: sqlite3.Connection, account: str, name: str) -> int:
        row = conn.execute(
            "SELECT id FROM blob_containers WHERE account = ? AND name = ?", (account, name)
        ).fetchone()
        if row is None:
            raise container_missing()
        return int(row[0])

    async def create_container(self, account: str, record: ContainerRecord) -> None:
        def job(conn: sqlite3.Connection) -> None:
            try:
                conn.execute(
                    "INSERT INTO blob_containers (account, name, ticks, doc) VALUES (?, ?, ?, ?)",
                    (account, record.name, record.ticks, encode_container(record)),
                )
            except sqlite3.IntegrityError:
                raise TableError("ContainerAlreadyExists") from None

        await self._db.write(job, savepoint=False)

    async def get_container(self, account: str, name: str) -> ContainerRecord | None:
        row = self._db.reader.execute(
            "SELECT ticks, doc FROM blob_containers WHERE account = ? AND name = ?", (account, name)
        ).fetchone()
        return decode_container(name, row[0], row[1]) if row else None

    async def update_container(
        self, account: str, name: str, decide: Callable[[ContainerRecord, int], tuple[ContainerRecord, Any]]
    ) -> Any:
        def job(conn: sqlite3.Connection) -> Any:
            row = conn.execute(
                "SELECT ticks, doc FROM blob_containers WHERE account = ? AND name = ?", (account, name)
            ).fetchone()
            if row is None:
                raise container_missing()
            record, result = decide(decode_container(name, row[0], row[1]), next_ticks(row[0]))
            conn.execute(
                "UPDATE blob_containers SET ticks = ?, doc = ? WHERE account = ? AND name = ?",
                (record.ticks, encode_container(record), account, name),
            )
            return result

        return await self._db.write(job)

    async def delete_container(
        self, account: str, name: str, check: Callable[[ContainerRecord], None]
    ) -> None:
        def job(conn: sqlite3.Connection) -> None:
            row = conn.execute(
                "SELECT id, ticks, doc FROM blob_containers WHERE account = ? AND name = ?", (account, name)
            ).fetchone()
            if row is None:
                raise container_missing()
            check(decode_container(name, row[1], row[2]))
            cid = row[0]
            refs = {
                r[0]
                for r in conn.execute(
                    "SELECT ref FROM blob_extents WHERE container_id = ?1 "
                    "UNION SELECT ref FROM blob_blocks WHERE container_id = ?1",
                    (cid,),
                )
            }
            for table in ("blob_extents", "blob_blocks", "blobs"):
                conn.execute(f"DELETE FROM {table} WHERE container_id = ?", (cid,))
            conn.execute("DELETE FROM blob_containers WHERE id = ?", (cid,))
            _drop(conn, refs)

        await self._db.write(job)

    async def list_containers(
        self, account: str, prefix: str, start: str | None, limit: int
    ) -> list[ContainerRecord]:
        sql = "SELECT name, ticks, doc FROM blob_containers WHERE account = ? AND name >= ?"
        args: list[Any] = [account, max(prefix, start or "")]
        if prefix:
            sql += " AND name < ?"
            args.append(prefix_end(prefix))
        rows = self._db.reader.execute(sql + " ORDER BY name LIMIT ?", (*args, limit)).fetchall()
        return [decode_container(row[0], row[1], row[2]) for row in rows]

    async def get_service_properties(self, account: str) -> bytes | None:
        return self._db.account_document("blob_service_properties", account)

    async def set_service_properties(self, account: str, properties: bytes) -> None:
        await self._db.set_account_document("blob_service_properties", account, properties)

    # ------------------------------------------------------------------ content

    async def stage(self, key: BlobKey, chunks: AsyncIterable[bytes], digest: Digest | None) -> Staged:
        return await self._files.stage(chunks, digest)

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
            row = self._db.reader.execute(
                "SELECT substr(data, ?, ?) FROM blob_data WHERE ref = ?", (low + 1, high - low, extent.ref)
            ).fetchone()
            if row is None:
                raise TableError("InternalError", detail="blob content is gone")
            yield bytes(row[0])

    # ------------------------------------------------------------------ blobs

    async def get_blob(
        self, key: BlobKey, snapshot: str = BASE, *, content: bool = False
    ) -> tuple[BlobRecord, list[Extent] | None] | None:
        conn = self._db.reader
        version = stored_version(snapshot)
        conn.execute("BEGIN")  # one snapshot of the database for the record and its extents
        try:
            row = conn.execute(
                f"SELECT c.id, {_B_COLUMNS} "
                "FROM blob_containers c JOIN blobs b ON b.container_id = c.id "
                "WHERE c.account = ? AND c.name = ? AND b.name = ? AND b.version = ? AND b.committed",
                (key.account, key.container, key.name, version),
            ).fetchone()
            if row is None:
                return None
            extents = _extents(conn, row[0], key.name, version) if content else None
        finally:
            conn.execute("COMMIT")
        return _row_to_blob(row[1:]), extents

    async def write_blob(
        self, key: BlobKey, decide: Decide, *, needs: Needs = NO_NEEDS, staged: Staged | None = None
    ) -> Any:
        assert staged is None or isinstance(staged, SqliteStaged)
        try:
            result, used = await self._db.write(_write_job, key, decide, needs, staged, None)
        except BaseException:
            if staged is not None:
                staged.release(remove=True)
            raise
        if staged is not None:
            staged.release(remove=not used)
        return result

    async def copy_blob(self, source: BlobKey, snapshot: str, dest: BlobKey, decide: Decide) -> Any:
        result, _used = await self._db.write(
            _write_job, dest, decide, Needs(), None, (source, stored_version(snapshot))
        )
        return result

    async def list_blocks(self, key: BlobKey) -> tuple[BlobRecord | None, list[Extent], list[Extent]]:
        conn = self._db.reader
        conn.execute("BEGIN")
        try:
            cid = self._container_id(conn, key.account, key.container)
            row = conn.execute(
                f"SELECT {_BLOB_COLUMNS} FROM blobs WHERE container_id = ? AND name = ? AND version = ?",
                (cid, key.name, STORED_BASE),
            ).fetchone()
            if row is None:
                return None, [], []
            committed = _extents(conn, cid, key.name, STORED_BASE)
            staged = _staged(conn, cid, key.name)
        finally:
            conn.execute("COMMIT")
        return _row_to_blob(row), committed, list(staged.values())

    async def list_blobs(
        self,
        account: str,
        container: str,
        *,
        prefix: str,
        start: tuple[str, str] | None,
        limit: int,
        snapshots: bool,
        uncommitted: bool,
    ) -> BlobListing:
        conn = self._db.reader
        cid = self._container_id(conn, account, container)
        low_name, low_version = listing_start(prefix, start)
        where = "container_id = ? AND (name, version) >= (?, ?)"
        args: list[Any] = [cid, low_name, low_version]
        if prefix:
            where += " AND name < ?"
            args.append(prefix_end(prefix))
        if not snapshots:
            where += f" AND version = '{STORED_BASE}'"
        if not uncommitted:
            where += " AND committed"
        rows = conn.execute(
            f"SELECT {_BLOB_COLUMNS} FROM blobs WHERE {where} ORDER BY name, version LIMIT ?",
            (*args, limit + 1),
        ).fetchall()
        return BlobListing([_row_to_blob(row) for row in rows[:limit]], len(rows) > limit)

    # ------------------------------------------------------------------ maintenance

    async def collect_garbage(self) -> int:
        """Delete expired garbage (rows in a write job, files after it commits), then look for
        files a crash orphaned, under the collector's lock (so one process at a time, and never
        while a backup copies)."""
        with self._files.collecting() as mine:
            if not mine:
                return 0
            files = await self._db.write(_collect_job, time.time() - GARBAGE_GRACE_SECONDS)
            removed = await self._files.unlink(files)
            return removed + await self._files.collect_orphans(self._db.path, _unreferenced)


def _unreferenced(conn: sqlite3.Connection, ref: str) -> bool:
    """No row names ``ref``, and it is not garbage waiting for its grace period."""
    if conn.execute(_REFERENCED, (ref,)).fetchone() is not None:
        return False
    return conn.execute("SELECT 1 FROM blob_garbage WHERE ref = ?", (ref,)).fetchone() is None


def copy_content(root: Path, destination: Path, database: Path) -> None:
    """Copy the content files ``database`` (a backup of the store) references from ``root``.
    Call it under :func:`collector_paused`, taken before ``database`` was copied."""
    conn = sqlite3.connect(str(database))
    try:
        refs = [
            row[0] for row in conn.execute("SELECT ref FROM blob_extents UNION SELECT ref FROM blob_blocks")
        ]
    finally:
        conn.close()
    copy_files(root, destination, refs)


def _extents(conn: sqlite3.Connection, cid: int, name: str, version: str) -> list[Extent]:
    return [
        Extent(ref, length, block_id)
        for ref, length, block_id in conn.execute(
            "SELECT ref, length, block_id FROM blob_extents WHERE container_id = ? AND name = ? "
            "AND version = ? ORDER BY seq",
            (cid, name, version),
        )
    ]


def _staged(conn: sqlite3.Connection, cid: int, name: str) -> dict[str, Extent]:
    return {
        block_id: Extent(ref, length, block_id)
        for block_id, ref, length in conn.execute(
            "SELECT block_id, ref, length FROM blob_blocks WHERE container_id = ? AND name = ? "
            "ORDER BY seq, block_id",
            (cid, name),
        )
    }


def _drop(conn: sqlite3.Connection, refs: set[str]) -> None:
    """Extents that lost a reference: those no row references any more become garbage."""
    now = time.time()
    for ref in refs:
        if conn.execute(_REFERENCED, (ref,)).fetchone() is None:
            conn.execute("INSERT OR REPLACE INTO blob_garbage (ref, dropped) VALUES (?, ?)", (ref, now))


def _refs(conn: sqlite3.Connection, sql: str, args: tuple[Any, ...]) -> set[str]:
    return {row[0] for row in conn.execute(sql, args)}


def _load_state(conn: sqlite3.Connection, cid: int, name: str, needs: Needs) -> BlobState:
    row = conn.execute(
        f"SELECT {_BLOB_COLUMNS}, staged, staged_id_length FROM blobs"
        " WHERE container_id = ? AND name = ? AND version = ?",
        (cid, name, STORED_BASE),
    ).fetchone()
    base = _row_to_blob(row[:6]) if row else None
    state = BlobState(base=base, ticks=next_ticks(base.ticks if base else None))
    if base is None:
        return state
    state.staged_count, state.staged_id_length = row[6], row[7]
    if needs.snapshots:
        state.snapshots = conn.execute(
            "SELECT count(*) FROM blobs WHERE container_id = ? AND name = ? AND version <> ?",
            (cid, name, STORED_BASE),
        ).fetchone()[0]
    if needs.content:
        state.content = _extents(conn, cid, name, STORED_BASE)
    if needs.staged:
        state.staged = _staged(conn, cid, name)
    if needs.snapshot is not None:
        target = conn.execute(
            f"SELECT {_BLOB_COLUMNS} FROM blobs WHERE container_id = ? AND name = ? AND version = ?",
            (cid, name, needs.snapshot),
        ).fetchone()
        state.target = _row_to_blob(target) if target else None
    return state


def _write_job(
    conn: sqlite3.Connection,
    key: BlobKey,
    decide: Decide,
    needs: Needs,
    staged: SqliteStaged | None,
    source: tuple[BlobKey, str] | None,
) -> tuple[Any, bool]:
    """Load the state, decide, apply: one savepoint of the group commit."""
    cid = _container_id_in(conn, key.account, key.container)
    state = _load_state(conn, cid, key.name, needs)
    if source is not None:
        source_key, version = source
        source_cid = _container_id_in(conn, source_key.account, source_key.container, missing_ok=True)
        if source_cid is not None:
            row = conn.execute(
                f"SELECT {_BLOB_COLUMNS} FROM blobs WHERE container_id = ? AND name = ? AND version = ? "
                "AND committed",
                (source_cid, source_key.name, version),
            ).fetchone()
            if row is not None:
                state.source = _row_to_blob(row)
                state.source_content = _extents(conn, source_cid, source_key.name, version)
    write = decide(state)
    used = _apply(conn, cid, key.name, write, staged, state)
    return write.result, used


def _container_id_in(conn: sqlite3.Connection, account: str, name: str, *, missing_ok: bool = False) -> Any:
    row = conn.execute(
        "SELECT id FROM blob_containers WHERE account = ? AND name = ?", (account, name)
    ).fetchone()
    if row is None:
        if missing_ok:
            return None
        raise container_missing()
    return row[0]


def _apply(
    conn: sqlite3.Connection,
    cid: int,
    name: str,
    write: BlobWrite,
    staged: SqliteStaged | None,
    state: BlobState,
) -> bool:
    """Apply ``write`` in the order :class:`BlobWrite` documents; True when ``staged`` was used.
    What ``state`` says is not there (a blob that did not exist, no staged blocks) is not
    looked for, so a new small blob costs two inserts."""
    existed = state.base is not None
    dropped: set[str] = set()
    base_key = (cid, name, STORED_BASE)
    if write.delete_snapshots:
        dropped |= _refs(
            conn,
            "SELECT ref FROM blob_extents WHERE container_id = ? AND name = ? AND version <> ?",
            base_key,
        )
        conn.execute(
            "DELETE FROM blob_extents WHERE container_id = ? AND name = ? AND version <> ?", base_key
        )
        conn.execute("DELETE FROM blobs WHERE container_id = ? AND name = ? AND version <> ?", base_key)
    if write.delete_snapshot is not None:
        one = (cid, name, write.delete_snapshot)
        dropped |= _refs(
            conn, "SELECT ref FROM blob_extents WHERE container_id = ? AND name = ? AND version = ?", one
        )
        conn.execute("DELETE FROM blob_extents WHERE container_id = ? AND name = ? AND version = ?", one)
        conn.execute("DELETE FROM blobs WHERE container_id = ? AND name = ? AND version = ?", one)
    if write.snapshot is not None:
        frozen = write.snapshot
        conn.execute(
            "INSERT INTO blobs (container_id, name, version, committed, ticks, size, doc)"
            " VALUES (?, ?, ?, 1, ?, ?, ?)",
            (cid, name, frozen.snapshot, frozen.ticks, frozen.size, encode_blob(frozen)),
        )
        conn.execute(
            "INSERT INTO blob_extents (container_id, name, version, seq, ref, length, block_id) "
            "SELECT container_id, name, ?, seq, ref, length, block_id FROM blob_extents "
            "WHERE container_id = ? AND name = ? AND version = ?",
            (frozen.snapshot, *base_key),
        )
    if write.delete_base:
        dropped |= _refs(
            conn, "SELECT ref FROM blob_extents WHERE container_id = ? AND name = ? AND version = ?", base_key
        )
        dropped |= _refs(conn, "SELECT ref FROM blob_blocks WHERE container_id = ? AND name = ?", (cid, name))
        conn.execute("DELETE FROM blob_extents WHERE container_id = ? AND name = ? AND version = ?", base_key)
        conn.execute("DELETE FROM blob_blocks WHERE container_id = ? AND name = ?", (cid, name))
        conn.execute("DELETE FROM blobs WHERE container_id = ? AND name = ? AND version = ?", base_key)
    if write.base is not None:
        record = write.base
        conn.execute(
            "INSERT INTO blobs (container_id, name, version, committed, ticks, size, doc) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (container_id, name, version) DO UPDATE SET "
            "committed = excluded.committed, ticks = excluded.ticks, size = excluded.size, "
            "doc = excluded.doc",
            (cid, name, STORED_BASE, int(record.committed), record.ticks, record.size, encode_blob(record)),
        )
    referenced: set[str] = set()
    if write.content is not None:
        if existed:
            dropped |= _refs(conn, "SELECT ref FROM blob_extents WHERE " + _BASE_ROW, base_key)
            conn.execute("DELETE FROM blob_extents WHERE " + _BASE_ROW, base_key)
        conn.executemany(
            "INSERT INTO blob_extents (container_id, name, version, seq, ref, length, block_id) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (cid, name, STORED_BASE, seq, e.ref, e.length, e.block_id)
                for seq, e in enumerate(write.content)
            ],
        )
        referenced.update(e.ref for e in write.content)
    if write.append is not None:
        extent = write.append
        conn.execute(
            "INSERT INTO blob_extents (container_id, name, version, seq, ref, length, block_id) "
            "SELECT ?1, ?2, ?3, coalesce(max(seq) + 1, 0), ?4, ?5, ?6 FROM blob_extents "
            "WHERE container_id = ?1 AND name = ?2 AND version = ?3",
            (cid, name, STORED_BASE, extent.ref, extent.length, extent.block_id),
        )
        referenced.add(extent.ref)
    if write.drop_staged and state.staged_count:
        dropped |= _refs(conn, "SELECT ref FROM blob_blocks WHERE container_id = ? AND name = ?", (cid, name))
        conn.execute("DELETE FROM blob_blocks WHERE container_id = ? AND name = ?", (cid, name))
        conn.execute("UPDATE blobs SET staged = 0, staged_id_length = NULL WHERE " + _BASE_ROW, base_key)
    if write.stage_block is not None:
        block = write.stage_block
        replaced = _refs(
            conn,
            "SELECT ref FROM blob_blocks WHERE container_id = ? AND name = ? AND block_id = ?",
            (cid, name, block.block_id),
        )
        dropped |= replaced
        conn.execute(
            "UPDATE blobs SET staged = staged + ?, staged_id_length = ? WHERE " + _BASE_ROW,
            (0 if replaced else 1, len(block.block_id or ""), *base_key),
        )
        conn.execute(
            "INSERT OR REPLACE INTO blob_blocks (container_id, name, block_id, seq, ref, length) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (cid, name, block.block_id, time.time_ns(), block.ref, block.length),
        )
        referenced.add(block.ref)
    used = staged is not None and staged.extent.ref in referenced
    if used and staged is not None and staged.data is not None:
        conn.execute("INSERT INTO blob_data (ref, data) VALUES (?, ?)", (staged.extent.ref, staged.data))
    _drop(conn, dropped - referenced)
    return used


def _collect_job(conn: sqlite3.Connection, before: float) -> list[str]:
    """Delete garbage dropped before ``before`` that is still unreferenced: inline rows here,
    files (returned) once this commits."""
    files: list[str] = []
    for (ref,) in conn.execute("SELECT ref FROM blob_garbage WHERE dropped < ?", (before,)).fetchall():
        conn.execute("DELETE FROM blob_garbage WHERE ref = ?", (ref,))
        if conn.execute(_REFERENCED, (ref,)).fetchone() is not None:
            continue
        if is_inline(ref):
            conn.execute("DELETE FROM blob_data WHERE ref = ?", (ref,))
        else:
            files.append(ref)
    return files
