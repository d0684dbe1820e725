"""The data volume's free space, and the reserve that lets a full volume be recovered.

On a full volume every write fails, deletes included: SQLite writes a delete's pages to its WAL
before it frees anything, a checkpoint needs room to copy the WAL back, and removing a blob first
records its content as garbage. So the store keeps a reserve on the volume, a preallocated file
(``tabulae.reserve`` in the data directory). The first write that runs out of space releases it,
and from then on the server is *full*: the front-ends refuse every write that does not free space
(``503 ServerBusy``), while reads and deletes run in the released room, WAL checkpoints copy back
and truncate the log, and blob content is collected without its grace period. Once the volume has
room for the reserve and as much again, the reserve is taken back and writes are accepted.

The state lives on the volume itself (the reserve is there or it is not), so every worker process
of a server sees the same one: a worker whose own write ran out releases the reserve, the others
notice its absence on their next look (:meth:`Volume.refresh`, every second). A change of state is
logged once per server, not once per worker: the workers share a small state file in the
directory their counters already share, under a lock.

Without a data directory (PostgreSQL) there is no reserve and no free space to measure: the state
is *full* from the engine's "disk full" error until a short pause has passed, after which writes
are tried again, and logged as recovered only once one succeeds.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import mmap
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

from tabulae.model.errors import VOLUME_FULL_MESSAGE

log = logging.getLogger("tabulae")

RESERVE_NAME = "tabulae.reserve"
MIB = 1024 * 1024
CHECK_SECONDS = 1.0  # how often each worker looks at the volume
RESERVE_SHARE = 10  # the reserve is at most this fraction (1/N) of the volume
NEARLY_FULL = 64 * 1024  # an I/O error of SQLite's with less free than this is a full volume
MIN_ROOM = 256 * 1024  # without a reserve, the free space at which writes are accepted again
RETRY_SECONDS = 5.0  # without a volume to measure (PostgreSQL), writes are tried again after this
FULL_MESSAGE = VOLUME_FULL_MESSAGE  # what a write refused for want of room is answered
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_SQLITE_FULL = 13  # SQLITE_FULL: "database or disk is full"
_SQLITE_IOERR = 10  # an I/O error, which a full volume causes where SQLite does not say FULL


TIGHT_RESERVES = 4
TIGHT_FLOOR = 32 * 1024 * 1024


class Volume:
    """One worker's view of the volume holding ``directory`` (None: not ours to measure).

    ``full`` is read on every write request, so it is a plain attribute; everything that changes
    it runs on the worker's event loop (or, for :meth:`hit_full`, wherever a write failed: it only
    ever sets it)."""

    def __init__(
        self,
        directory: Path | None,
        *,
        reserve_bytes: int = 0,
        warn_bytes: int = 0,
        shared_dir: Path | None = None,
    ) -> None:
        self.directory = directory
        self.reserve_bytes = reserve_bytes if directory is not None else 0
        self.warn_bytes = warn_bytes
        self._shared_dir = shared_dir
        self._full = False
        self._flag: mmap.mmap | None = None
        if shared_dir is not None:
            self._flag = _shared_flag(shared_dir / "volume-full.flag")
        self.low = False  # below the warning (--disk-warn): said in logs, /metrics and the console
        self.tight = False  # so low that space is reclaimed as it is freed: see _check_low
        self.free_bytes: int | None = None
        self.total_bytes: int | None = None
        self._full_since = 0.0
        self._probation = False  # PostgreSQL: writes let through again, none has succeeded yet
        self._announced_states: dict[str, str] = {}
        self.reserve_path = directory / RESERVE_NAME if directory is not None else None

    @property
    def full(self) -> bool:
        """Whether writes are refused: one byte the workers share in memory, so that a write
        one worker's neighbour ran out on is refused at once by all (no system call to read)."""
        return self._flag[0] == 1 if self._flag is not None else self._full

    @full.setter
    def full(self, value: bool) -> None:
        if self._flag is not None:
            self._flag[0] = 1 if value else 0
        else:
            self._full = value

    # ------------------------------------------------------------------ what writes report

    def is_full_error(self, exc: BaseException) -> bool:
        """Whether ``exc`` says the volume ran out of space: ENOSPC or a quota, SQLite's FULL, or
        an I/O error of SQLite's while the volume has (next to) no room left."""
        if isinstance(exc, OSError):
            return exc.errno in _FULL_ERRNOS
        if isinstance(exc, sqlite3.Error):
            code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
            if code == _SQLITE_FULL:
                return True
            if code == _SQLITE_IOERR and self.directory is not None:
                free = self.measure()
                return free is not None and free < NEARLY_FULL
        return False

    def hit_full(self, reason: object = "") -> None:
        """A write ran out of space (``reason``, the error it got): release the reserve (the room
        deletes need) and refuse writes from now on. Safe to call from any thread, and again
        while full."""
        self._full_since = time.monotonic()
        self._probation = False
        if self.full:
            return
        self.full = True
        released = self._release()
        if self.directory is None:
            self._announce("full", f"data volume full: writes refused (the database says: {reason})")
            return
        freed = f"{_size(released)} of reserve released so that deletes can make room; " if released else ""
        self._announce(
            "full",
            f"data volume full: writes refused ({reason}; {freed}free space in {self.directory} "
            "or delete data through the API)",
        )

    def write_succeeded(self) -> None:
        """PostgreSQL: a write went through after a pause while full (only then is it logged)."""
        if self._probation:
            self._probation = False
            self._announce("ok", "space available again: writes accepted")

    # ------------------------------------------------------------------ looking at the volume

    def still_full(self, *, probe: bool = False) -> bool:
        """Asked by a write about to be refused for ``full``, or by the readiness ``probe``:
        look again (a ``statvfs`` and a ``stat``), so that the first write after space came back
        is accepted, not one a second later, and a probe sees what another worker saw."""
        if self.full or probe:
            self.refresh()
        return self.full

    def measure(self) -> int | None:
        """Free bytes on the volume now (what an unprivileged writer may use)."""
        if self.directory is None:
            return None
        try:
            stats = os.statvfs(self.directory)
        except OSError:
            return None
        self.total_bytes = stats.f_blocks * stats.f_frsize
        self.free_bytes = stats.f_bavail * stats.f_frsize
        return self.free_bytes

    def start(self) -> None:
        """At a worker's start-up: take the reserve if the volume has the room to leave the
        full state with (a volume without that room starts full, so that
        deletes can still run: after a restart on a full volume, the released reserve is the
        room they need)."""
        free = self.measure()
        if free is not None and self.total_bytes:
            self.reserve_bytes = min(self.reserve_bytes, self.total_bytes // RESERVE_SHARE)
        if self.reserve_bytes and not self._reserve_held():
            with _locked(self._lock_path(), wait=True):  # the workers start together: one decides
                roomy = free is not None and free >= self._room_to_recover()
                if not self._reserve_held() and not (roomy and self._take(wait=True)):
                    self.hit_full("no room for the reserve")
        self.refresh()

    def _room_to_recover(self) -> int:
        """The free space at which writes are accepted again: the reserve, room for the log
        (which the engine keeps within the reserve's size, and which a full volume truncates,
        so its room comes back without a delete) and as much again for writes; with less, the
        first writes would fill the volume again at once."""
        return max(self.reserve_bytes * 3, MIN_ROOM)

    def _lock_path(self) -> Path:
        assert self.directory is not None
        return self.directory / (RESERVE_NAME + ".start.lock")

    def refresh(self) -> None:
        """Look at the volume: free space, the warning threshold, and the way into and out of
        the full state that other workers or the operator may have taken."""
        if self.directory is None:
            if self.full and time.monotonic() - self._full_since >= RETRY_SECONDS:
                self.full = False  # try writes again; a failure comes back here at once
                self._probation = True
            return
        free = self.measure()
        if free is None:
            return
        self._check_low(free)
        if self.full:
            if self.reserve_bytes and self._reserve_held():
                self.full = False  # another worker took it back (and said so)
            elif free >= self._room_to_recover() and self._take():
                self.full = False
                self._announce("ok", f"space available again: writes accepted ({_size(free)} free)")
            return
        if self.reserve_bytes and not self._reserve_held():
            # Another worker released it, or someone deleted it: full until it can be taken back.
            self._full_since = time.monotonic()
            self.full = True

    def _check_low(self, free: int) -> None:
        # Checkpointing after every write group and handing freed pages back cost writes time, so
        # they start only when little room is left (a few reserves' worth), not at the warning,
        # which on a small volume (a 64 MiB /dev/shm under --in-memory) is below it from the start.
        self.tight = free < min(self.warn_bytes, max(TIGHT_RESERVES * self.reserve_bytes, TIGHT_FLOOR))
        low = free < self.warn_bytes
        if low != self.low:
            message = (
                f"data volume low on space: {_size(free)} free in {self.directory} "
                f"(the warning is below {self.warn_bytes // MIB} MiB, --disk-warn)"
            )
            self._announce("low" if low else "roomy", message if low else "", key="low")
        self.low = low

    # ------------------------------------------------------------------ the reserve

    def _reserve_held(self) -> bool:
        if self.reserve_path is None:
            return False
        try:
            return self.reserve_path.stat().st_size >= self.reserve_bytes
        except OSError:
            return False

    def _release(self) -> int:
        if self.reserve_path is None or not self.reserve_bytes:
            return 0
        try:
            size = self.reserve_path.stat().st_size
            self.reserve_path.unlink()
        except OSError:
            return 0  # another worker released it first
        return size

    def _take(self, *, wait: bool = False) -> bool:
        """Preallocate the reserve (one worker at a time: ``wait`` for the others, else leave it to
        them); False when the volume has no room."""
        if self.reserve_path is None or not self.reserve_bytes:
            return True
        temporary = self.reserve_path.with_name(f"{RESERVE_NAME}.{os.getpid()}")
        with _locked(self.reserve_path.with_name(RESERVE_NAME + ".lock"), wait=wait) as mine:
            if not mine:
                return False  # another worker is taking it: look again next time
            if self._reserve_held():
                return True
            try:
                fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                try:
                    os.posix_fallocate(fd, 0, self.reserve_bytes)
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.replace(temporary, self.reserve_path)
            except OSError as exc:
                with contextlib.suppress(OSError):
                    temporary.unlink()
                if exc.errno not in _FULL_ERRNOS:
                    log.warning("cannot keep a reserve in %s: %s", self.directory, exc.strerror or exc)
                    self.reserve_bytes = 0  # a volume that cannot hold one runs without
                    return True
                return False
        return True

    # ------------------------------------------------------------------ telling

    def _announce(self, state: str, message: str, *, key: str = "full") -> None:
        """Log ``message`` (if any) when the server's ``key`` state was not ``state`` already:
        once per server, not per worker (the workers share the last announced state in their
        shared directory). A state never announced counts as the good one."""
        if self._shared_dir is None:
            last = self._announced_states.get(key, "")
            self._announced_states[key] = state
        else:
            path = self._shared_dir / f"volume-{key}.state"
            try:
                with _locked(self._shared_dir / "volume.lock", wait=True):
                    try:
                        last = path.read_text()
                    except FileNotFoundError:
                        last = ""
                    path.write_text(state)
            except OSError:
                last = ""  # the shared directory is gone (shutting down): say it anyway
        if last == state or (not last and state in ("ok", "roomy")):
            return
        if message:
            log.warning(message)

    def snapshot(self) -> dict[str, object]:
        """What ``/metrics`` and the console show."""
        return {
            "path": str(self.directory) if self.directory is not None else None,
            "free_bytes": self.free_bytes,
            "total_bytes": self.total_bytes,
            "reserve_bytes": self.reserve_bytes if self._reserve_held() else 0,
            "warn_bytes": self.warn_bytes,
            "low": self.low,
            "full": self.full,
        }


def _shared_flag(path: Path) -> mmap.mmap | None:
    """A byte in a file of the workers' shared directory, mapped into this process."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return None
    try:
        if os.fstat(fd).st_size < 1:
            os.ftruncate(fd, 1)
        return mmap.mmap(fd, 1)
    except OSError:
        return None
    finally:
        os.close(fd)


def _size(count: int) -> str:
    return f"{count // MIB} MiB" if count >= MIB else f"{count // 1024} KiB"


@contextlib.contextmanager
def _locked(path: Path, *, wait: bool) -> Iterator[bool]:
    """An exclusive ``flock`` on ``path``; False when another holds it (``wait=False``) or when the
    file cannot be made (a full volume)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)
