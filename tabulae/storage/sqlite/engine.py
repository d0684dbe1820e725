"""The embedded engine: one SQLite database in WAL mode, group commit driven by the event loop.

Every service's SQLite store (tables now) runs its statements through one :class:`SqliteDatabase`:
one file, one reader connection and one group-commit writer per process, whatever the service.

Writes queue up while the previous group is being made durable; then all that wait are applied
in one transaction, each in its own savepoint (so a failing batch rolls back alone). The SQL runs
on the event loop's own thread: a writer thread would have to win the GIL back from the loop for
every statement, and under load those hand-offs cost more than the statements. The commit writes
the WAL without syncing it (``synchronous=NORMAL``), the cross-process write lock is released, and
only then is the WAL fsynced, on a helper thread, before any write of the group is answered. So an
acknowledgement is durable, and while one worker process waits for its fsync the others can
commit: their fsyncs overlap instead of queueing behind the write lock. Checkpoints run on their
own thread so that copying the WAL back never stalls the loop.

Reads run on the loop's thread against their own connection; WAL gives them a consistent snapshot
per statement while writers commit. Long scans use a second, memory-mapped reader while they run
(:mod:`.mapped_reader`). Several processes may open the same file: a file lock orders
their writers, and SQLite's own lock still guards every transaction.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import re
import sqlite3
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from tabulae.model.errors import ServiceError
from tabulae.storage.plan import Dialect, Plan, SqliteDialect, run_sync
from tabulae.storage.sqlite.mapped_reader import MappedReader
from tabulae.storage.volume import FULL_MESSAGE, Volume

T = TypeVar("T")

GROUP_LIMIT = 512  # writes committed together at most
BUSY_TIMEOUT_MS = 30_000
log = logging.getLogger("tabulae")

CHECKPOINT_INTERVAL = 0.5  # seconds between background checkpoints while writes keep coming
VACUUM_PAGES = 1024  # free pages a reclaim hands back to the volume at a time at most (one write job)
RECLAIM_ROUNDS = 64  # slices handed back per reclaim (the next one comes a second later)
WAL_LIMIT_BYTES = 64 * 1024 * 1024  # past this a checkpoint holds writers back and restarts the WAL
_WAL_HEADER = 32  # bytes before the log's first frame
_FRAME_HEADER = 24  # bytes before each frame's page

# (function, arguments, whether it needs a savepoint of its own, its future)
_Job = tuple[Callable[..., Any], tuple[Any, ...], bool, asyncio.Future[Any]]


PAGE_SIZE = 16384  # entities run to about 1 KiB: bigger pages mean fewer B-tree hops per row
# No memory map for the point-read connection: mapped pages count in every worker's RSS (256 MiB
# each, touched by random reads of a large table) for point reads only slightly faster. Long scans
# use a mapped connection of their own while they run (mapped_reader).
MMAP_BYTES = 0
CACHE_KIB = 16 * 1024


def _connect(path: str, durable: bool) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")  # takes effect only on a new database
    # Also only on a new database: pages deletes free can be handed back to the volume (reclaim),
    # which a full volume needs; otherwise they stay in the file for later writes only. Set only
    # when the file is new: on an existing one the pragma writes, and a restart on a full volume
    # (after a kill -9, with a log to recover) must still open the store so that deletes can run.
    if conn.execute("PRAGMA page_count").fetchone()[0] == 0:
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
    # NORMAL: commits write the WAL without fsync, checkpoints still sync. The store fsyncs the
    # WAL itself after each commit and before answering (see the module docstring).
    conn.execute("PRAGMA synchronous = " + ("NORMAL" if durable else "OFF"))
    conn.execute("PRAGMA wal_autocheckpoint = 0")  # checkpoints run on their own thread
    # A delete must not log as much as it deletes: with secure_delete on (some builds of SQLite
    # have it by default, this machine's Debian one among them) every page it frees is overwritten
    # with zeros, a whole page in the log each, so a batch deleting some megabytes needed as much
    # room in the log, more than a full volume's released reserve. FAST still clears deleted
    # content in the pages a delete writes anyway; the pages it frees are reused or handed back
    # to the volume (reclaim).
    conn.execute("PRAGMA secure_delete = FAST")
    # 16 MiB of page cache (1,024 pages): the default 2 MiB holds fewer pages than the leaves that
    # writes to a hundred partitions keep touching, so every insert re-read its leaf page.
    conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
    return conn


class SqliteDatabase:
    """The database file ``directory/tabulae.db`` with the schema of every service's store.

    ``durable=False`` skips fsync (in-memory mode). ``reader`` is the connection reads use;
    writes go through :meth:`write`, which groups them into shared, durable commits.
    """

    def __init__(
        self, directory: Path, schema: str, *, durable: bool = True, volume: Volume | None = None
    ) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.volume = volume or Volume(None)
        self.path = str(directory / "tabulae.db")
        self._wal_path = self.path + "-wal"
        self._durable = durable
        # Writers of several worker processes queue on this lock, which wakes the next one the
        # moment a commit ends; SQLite's own busy handler would sleep in steps of milliseconds.
        # Correctness never depends on it: SQLite's write lock still guards every transaction.
        lock_path = str(directory / "tabulae.lock")
        self._lock_fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        self._checkpoint_lock_fd = os.open(lock_path, os.O_RDWR)  # a lock of its own (flock is per open)
        # Workers starting together would race to create the file and switch it to WAL, and
        # that switch does not wait for a busy database: one opens it at a time.
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        try:
            self._writer = _connect(self.path, durable)
            self._create_schema(schema)
            # A log reset after a checkpoint is cut back to its limit (see _log_over_limit).
            self._writer.execute(f"PRAGMA journal_size_limit = {self._log_limit()}")
            self.reader = _connect(self.path, durable)
            self._checkpointer = _connect(self.path, durable)
            self._page_size = int(self._checkpointer.execute("PRAGMA page_size").fetchone()[0])
            self._incremental = self._checkpointer.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
        finally:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
        self._pending: list[_Job] = []
        self._flusher: asyncio.Task[None] | None = None
        self._sync_thread = ThreadPoolExecutor(1, thread_name_prefix="tabulae-sync")  # lock waits, fsyncs
        self._checkpoint_thread = ThreadPoolExecutor(1, thread_name_prefix="tabulae-checkpoint")
        self._checkpoint: asyncio.Future[None] | None = None
        self._last_checkpoint = time.monotonic()
        # Long scans read through a memory map of their own (see mapped_reader).
        self.scan_reader = MappedReader(lambda: _connect(self.path, durable))
        self.dialect = SqliteDialect()

    def _create_schema(self, schema: str) -> None:
        """The schema, in one transaction (a start-up that fails part-way, as on a full volume,
        leaves no half schema). A full volume that cannot take it is no failure when every
        table is there already: a restart on a full volume must serve, so deletes can run."""
        try:
            self._writer.executescript(f"BEGIN IMMEDIATE; {schema} COMMIT;")
        except sqlite3.Error as exc:
            if self._writer.in_transaction:
                self._writer.execute("ROLLBACK")
            if not self.volume.is_full_error(exc):
                raise
            wanted = set(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", schema))
            rows = self._writer.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
            if not wanted <= {row[0] for row in rows}:
                raise

    # ----------------------------------------------------------------------------- writer side

    async def write(self, fn: Callable[..., Any], *args: Any, savepoint: bool = True) -> Any:
        """Queue a write job for the next group. ``savepoint=False`` is for jobs whose writes are
        one statement (SQLite makes each statement atomic), so a failure leaves nothing to undo."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._pending.append((fn, args, savepoint, future))
        if self._flusher is None:
            self._flusher = loop.create_task(self._flush())
        return await future

    def write_plan(
        self, plan: Plan[T], *, savepoint: bool = True, dialect: Dialect | None = None
    ) -> Coroutine[Any, Any, T]:
        """Run ``plan`` as a write job of the next group (see :meth:`write`), in ``dialect`` (a
        store's own, with markers of its own) or the engine's. (It hands back :meth:`write`'s
        coroutine rather than awaiting it in one of its own: one layer less per write.)"""
        return self.write(_run_plan, plan, dialect or self.dialect, savepoint=savepoint)

    def read_plan(self, plan: Plan[T], *, snapshot: bool = False, dialect: Dialect | None = None) -> T:
        """Run ``plan`` on the reader; with ``snapshot`` in one read transaction, so that all its
        statements see the same state of the database."""
        spelling = dialect or self.dialect
        if not snapshot:
            return run_sync(plan, self.reader, spelling)
        self.reader.execute("BEGIN")
        try:
            return run_sync(plan, self.reader, spelling)
        finally:
            self.reader.execute("COMMIT")

    async def _flush(self) -> None:
        """Commit waiting writes, group after group, until none wait. The first group forms
        while this task waits for its turn on the loop; later ones while the previous fsyncs."""
        try:
            while self._pending:
                if self._log_over_limit():  # copied back before it grows further: see _log_limit
                    await self._checkpoint_now()
                group = self._pending[:GROUP_LIMIT]
                del self._pending[:GROUP_LIMIT]
                outcomes = await self._commit_group(group)
                for (_fn, _args, _savepoint, future), (ok, value) in zip(group, outcomes, strict=True):
                    if future.cancelled():
                        continue
                    if ok:
                        future.set_result(value)
                    else:
                        future.set_exception(value)
                self._maybe_checkpoint()
        finally:
            self._flusher = None

    async def _commit_group(self, group: list[_Job]) -> list[tuple[bool, Any]]:
        loop = asyncio.get_running_loop()
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # another worker is committing: wait off the loop
            await loop.run_in_executor(self._sync_thread, fcntl.flock, self._lock_fd, fcntl.LOCK_EX)
        try:
            outcomes = self._apply_group(group)
        finally:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
        if self._durable and any(ok for ok, _value in outcomes):
            try:
                await loop.run_in_executor(self._sync_thread, self._sync_wal)
            except OSError as exc:  # durability unknown: nothing of the group is acknowledged
                outcomes = [(False, self._failure(exc, "fsync failed: "))] * len(group)
        return outcomes

    def _apply_group(self, group: list[_Job]) -> list[tuple[bool, Any]]:
        """One transaction, one savepoint per job; the commit writes the WAL but does not sync."""
        conn = self._writer
        outcomes: list[tuple[bool, Any]] = []
        try:
            conn.execute("BEGIN IMMEDIATE")
            for fn, args, savepoint, _future in group:
                if not savepoint:
                    try:
                        outcomes.append((True, fn(conn, *args)))
                    except sqlite3.Error:
                        raise  # the engine may have ended the transaction itself: fail the group
                    except Exception as exc:  # refused before or by its one statement: nothing to undo
                        outcomes.append((False, exc))
                    continue
                conn.execute("SAVEPOINT job")
                try:
                    outcomes.append((True, fn(conn, *args)))
                    conn.execute("RELEASE job")
                except Exception as exc:  # every failure is answered, never lost
                    conn.execute("ROLLBACK TO job")
                    conn.execute("RELEASE job")
                    outcomes.append((False, exc))
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            outcomes = [(False, self._failure(exc))] * len(group)
        return outcomes

    def _failure(self, exc: Exception, what: str = "") -> ServiceError:
        """What a group's requests are answered when the database failed them: 503 ServerBusy
        when the volume is full (the reserve is released for deletes), else 500."""
        if self.volume.is_full_error(exc):
            self.volume.hit_full(exc)
            return ServiceError("ServerBusy", FULL_MESSAGE, detail=f"{what}{exc}")
        return ServiceError("InternalError", detail=f"{what}{exc}")

    def _sync_wal(self) -> None:
        """Sync the WAL to disk. Any descriptor of the file will do: Linux syncs the inode's pages,
        so this also covers frames other processes wrote before ours, as the WAL's order needs.

        ``fdatasync``, as SQLite itself syncs on Linux: the data and the file size, not the
        modification time. Once the log is restarted over blocks it already has, a commit changes
        no size, and skipping the time saves a file-system journal commit per sync."""
        fd = os.open(self._wal_path, os.O_RDONLY)
        try:
            os.fdatasync(fd)
        finally:
            os.close(fd)

    def _log_limit(self) -> int:
        """The most the log may hold. Kept within the volume's reserve too: copying a log back
        can grow the database by as much as the log holds, and on a full volume only the
        released reserve has room for that (a log larger than the reserve, copied back after
        the volume filled, used up the room deletes need)."""
        return min(WAL_LIMIT_BYTES, self.volume.reserve_bytes or WAL_LIMIT_BYTES)

    def _over_limit(self, frames: int) -> bool:
        return frames * (self._page_size + _FRAME_HEADER) >= self._log_limit()

    def _log_over_limit(self) -> bool:
        """Whether the log has grown past its limit (one ``stat`` per group): background
        checkpoints now and then do not keep up with a burst of large writes, so the group
        waits for one. The file's size tells: a log restarted by a checkpoint is cut back to
        the limit (``journal_size_limit``) by its next write, and only grows past it again
        with frames written since."""
        try:
            size = os.stat(self._wal_path).st_size
        except OSError:
            return False
        return self._over_limit(max(0, size - _WAL_HEADER) // (self._page_size + _FRAME_HEADER))

    def _maybe_checkpoint(self) -> None:
        """Start a passive checkpoint on its own thread now and then; it never blocks writers."""
        # On a volume tight on space, after every group: a log copied back promptly holds little
        # that a full volume would have no room to copy back (the database grows as it does).
        interval = 0.0 if self.volume.tight or self.volume.full else CHECKPOINT_INTERVAL
        if self._checkpoint is not None or time.monotonic() - self._last_checkpoint < interval:
            return
        loop = asyncio.get_running_loop()
        self._checkpoint = loop.run_in_executor(self._checkpoint_thread, self._run_checkpoint)
        self._checkpoint.add_done_callback(self._checkpoint_done)

    def _run_checkpoint(self) -> None:
        """A PASSIVE checkpoint, which blocks nobody, copies the bulk of the log back. Under
        steady writes it never quite catches up (frames arrive while it copies), and a log that
        is never wholly copied back is never restarted, so it would only grow. So once the log
        holds ``WAL_LIMIT_BYTES`` of frames, the passive pass is followed at once by a RESTART
        checkpoint under the writers' file lock (every process honours it; its own descriptor,
        so this process's writers wait too): it copies only what arrived during the passive pass,
        a few milliseconds of writes, and the next commit starts the log again from its start,
        over blocks the file already has. (Truncating the log instead held writers back for the
        whole copy and made the file grow again from zero.)"""
        _busy, frames, _copied = self._checkpointer.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        full = self.volume.full
        if not self._over_limit(frames) and not (full and frames > 0):
            return
        # On a full volume the log's blocks are the room to win back: truncate it, not restart it.
        mode = "TRUNCATE" if full else "RESTART"
        fcntl.flock(self._checkpoint_lock_fd, fcntl.LOCK_EX)
        try:
            self._checkpointer.execute(f"PRAGMA wal_checkpoint({mode})").fetchall()
        finally:
            fcntl.flock(self._checkpoint_lock_fd, fcntl.LOCK_UN)

    def _checkpoint_done(self, future: asyncio.Future[None]) -> None:
        self._checkpoint = None
        self._last_checkpoint = time.monotonic()
        exc = None if future.cancelled() else future.exception()
        if exc is None:
            return
        if isinstance(exc, Exception) and self.volume.is_full_error(exc):
            self.volume.hit_full(exc)  # said once, by the volume; retried as room comes back
            return
        log.warning("WAL checkpoint failed (retried later): %s", exc)

    async def reclaim(self) -> None:
        """While the volume is full or low: hand the pages deletes freed back to the volume, a
        slice at a time (an incremental vacuum, a write job, on a database created with
        ``auto_vacuum``: the pages it moves go through the log, so a slice must fit in the room
        a full volume has), each followed by a checkpoint, which truncates the database file to
        its new end and, when full, the log too."""
        pages = max(16, min(VACUUM_PAGES, self.volume.reserve_bytes // self._page_size // 4))
        for _ in range(RECLAIM_ROUNDS):
            freed = self._incremental and self.reader.execute("PRAGMA freelist_count").fetchone()[0] > 0
            if freed:
                await self.write(_vacuum, pages)
            await self._checkpoint_now()
            if not freed:
                return

    async def _checkpoint_now(self) -> None:
        """A checkpoint now (after the one running, if any), awaited; its failure is the done
        callback's to tell."""
        if self._checkpoint is not None:
            await asyncio.wait([self._checkpoint])
        try:
            if os.path.getsize(self._wal_path) == 0:
                return
        except OSError:
            return
        if self._checkpoint is None:
            loop = asyncio.get_running_loop()
            self._checkpoint = loop.run_in_executor(self._checkpoint_thread, self._run_checkpoint)
            self._checkpoint.add_done_callback(self._checkpoint_done)
        await asyncio.wait([self._checkpoint])

    def account_document(self, table: str, account: str) -> bytes | None:
        """A per-account document (service properties): ``table`` has ``account`` and ``properties``."""
        row = self.reader.execute(f"SELECT properties FROM {table} WHERE account = ?", (account,)).fetchone()
        return row[0] if row else None

    async def set_account_document(self, table: str, account: str, document: bytes) -> None:
        """Replace a per-account document, durably (see :meth:`account_document`)."""
        await self.write(_set_account_document, table, account, document, savepoint=False)

    async def close(self) -> None:
        while self._flusher is not None:
            await asyncio.shield(self._flusher)
        if self._checkpoint is not None:
            await asyncio.shield(self._checkpoint)
        self._sync_thread.shutdown()
        self._checkpoint_thread.shutdown()
        self._writer.close()
        self._checkpointer.close()
        self.reader.close()
        self.scan_reader.close()
        os.close(self._lock_fd)
        os.close(self._checkpoint_lock_fd)


def _vacuum(conn: sqlite3.Connection, pages: int) -> None:
    conn.execute(f"PRAGMA incremental_vacuum({int(pages)})").fetchall()


def _run_plan(conn: sqlite3.Connection, plan: Plan[T], dialect: Dialect) -> T:
    return run_sync(plan, conn, dialect)


def _set_account_document(conn: sqlite3.Connection, table: str, account: str, document: bytes) -> None:
    conn.execute(
        f"INSERT INTO {table} (account, properties) VALUES (?, ?)"
        " ON CONFLICT (account) DO UPDATE SET properties = excluded.properties",
        (account, document),
    )


def backup(source_dir: Path, destination: Path) -> None:
    """Copy a live store into ``destination`` with SQLite's online backup: a consistent snapshot
    taken while the server keeps serving (writers wait only for each copied page batch)."""
    destination.mkdir(parents=True, exist_ok=True)
    target_path = destination / "tabulae.db"
    if target_path.exists():
        raise FileExistsError(f"{target_path} already exists")
    source = sqlite3.connect(str(source_dir / "tabulae.db"), timeout=BUSY_TIMEOUT_MS / 1000)
    target = sqlite3.connect(str(target_path))
    try:
        source.backup(target, pages=1024)
        target.execute("PRAGMA journal_mode = WAL")
        integrity = target.execute("PRAGMA integrity_check").fetchone()[0]
        if integrity != "ok":
            raise RuntimeError(f"backup failed its integrity check: {integrity}")
    finally:
        target.close()
        source.close()
