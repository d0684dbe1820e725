"""Stores made before ``auto_vacuum = INCREMENTAL``: converted, so that deletes give room back.

A database's ``auto_vacuum`` mode can only be chosen when it is created, or changed by a full
``VACUUM``, which rewrites the whole file (through a copy, and the log: room for about twice the
store) and holds the write lock while it does. A store made by an older version keeps the pages
its deletes free for its own later writes and never hands them to the volume, so on a full volume
deleting data makes no room. At start-up, before any worker serves, a small store is converted at
once (quick, and nobody waits for it yet); a larger one is left as it is and the log says once
how to convert it (``tabulae db vacuum``), since a start-up that rewrote gigabytes unasked would
keep the server down for minutes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("tabulae")

MIB = 1024 * 1024
CONVERT_BELOW_BYTES = 256 * MIB  # stores converted at start-up when smaller than this
INCREMENTAL = 2  # PRAGMA auto_vacuum's value for INCREMENTAL (0: NONE, 1: FULL)
BUSY_TIMEOUT_MS = 60_000  # a running server's write in progress is waited for


@dataclass(frozen=True, slots=True)
class Vacuumed:
    """What a ``VACUUM`` did: the store's size before and after, and how long it took."""

    before: int
    after: int
    seconds: float


def is_incremental(path: Path) -> bool:
    """Whether the database at ``path`` hands freed pages back (``auto_vacuum = INCREMENTAL``)."""
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA auto_vacuum").fetchone()[0]) == INCREMENTAL
    finally:
        conn.close()


def vacuum(path: Path) -> Vacuumed:
    """Rewrite the database at ``path`` with ``auto_vacuum = INCREMENTAL`` (also compacting it).
    Raises ``sqlite3.Error`` when it cannot (no room: the store is then left as it was)."""
    before = _size(path)
    started = time.monotonic()
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the rewrite went through the log
    finally:
        conn.close()
    return Vacuumed(before, _size(path), time.monotonic() - started)


def convert_at_start(path: Path, limit: int | None = None) -> None:
    """At start-up: convert an older store smaller than ``limit`` bytes (``CONVERT_BELOW_BYTES``),
    if the volume has room for the rewrite; otherwise say (once, as a warning) how to. Never
    fails the start-up: the store serves as it is either way."""
    if not path.exists() or is_incremental(path):
        return
    limit = CONVERT_BELOW_BYTES if limit is None else limit
    size = _size(path)
    how = f"stop the server and run `tabulae db vacuum --data-dir {path.parent}`"
    if size >= limit:
        log.warning(
            "the store %s (%d MiB) gives no freed space back to its volume (it was made before "
            "auto_vacuum = INCREMENTAL): to convert it, %s (it needs about %d MiB free)",
            path, size // MIB, how, 2 * size // MIB,
        )  # fmt: skip
        return
    stats = os.statvfs(path.parent)
    if stats.f_bavail * stats.f_frsize < 2 * size:
        log.warning(
            "the store %s gives no freed space back to its volume, and the volume has no room to "
            "convert it now (about %d MiB): once it has, %s",
            path, 2 * size // MIB, how,
        )  # fmt: skip
        return
    try:
        done = vacuum(path)
    except sqlite3.Error as exc:
        log.warning("the store %s was not converted to give freed space back (%s): %s", path, exc, how)
        return
    log.warning(
        "the store %s was converted to give freed space back to its volume (auto_vacuum = "
        "INCREMENTAL): %d MiB, now %d MiB, in %.1f s",
        path, done.before // MIB, done.after // MIB, done.seconds,
    )  # fmt: skip


def _size(path: Path) -> int:
    total = 0
    for name in (path, path.with_name(path.name + "-wal")):
        with contextlib.suppress(FileNotFoundError):
            total += name.stat().st_size
    return total
