"""A memory-mapped reader connection for long scans, open only while scans run.

A filtered scan walks every leaf page of its key range twice per window: once to find where the
window ends (a walk of the key order) and once to test the rows inside it. Through SQLite's page
cache each leaf page missed costs a ``pread`` of 16 KiB, a large share of the walk's cost;
through a memory map the second and later touches of a page cost nothing (benchmarks/README.md
has the figures).

The point-read connection keeps no map, on purpose: pages touched through a map count in the
process's RSS for as long as the map stays, and random reads over a large table would touch
them all. This connection is opened by the first scan that runs past one window and closed
once no scan has used it for :data:`IDLE_SECONDS`, so the mapped pages leave RSS with it (they
stay in the operating system's page cache, shared by every worker).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable

__all__ = ["IDLE_SECONDS", "MMAP_BYTES", "MappedReader"]

MMAP_BYTES = 1 << 31  # SQLite caps this at its build's maximum (just under 2 GiB by default)
IDLE_SECONDS = 2.0


class MappedReader:
    """A lazily opened, idle-closed reader. ``connect`` opens a connection configured like the
    engine's reader; this class only adds the map. Statements on it finish before the loop runs
    anything else (reads are synchronous on the loop's thread), so closing between callbacks
    never cuts a statement short."""

    def __init__(self, connect: Callable[[], sqlite3.Connection]) -> None:
        self._connect = connect
        self._idle_seconds = IDLE_SECONDS  # read at construction, so tests can lower it
        self._conn: sqlite3.Connection | None = None
        self._last_used = 0.0
        self._closer: asyncio.TimerHandle | None = None

    @property
    def is_open(self) -> bool:
        return self._conn is not None

    def connection(self) -> sqlite3.Connection:
        """The mapped connection, opened if needed; each call counts as use (defers the close)."""
        conn = self._conn
        if conn is None:
            conn = self._connect()
            conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
            self._conn = conn
        self._last_used = time.monotonic()
        if self._closer is None:
            self._closer = asyncio.get_running_loop().call_later(self._idle_seconds, self._close_if_idle)
        return conn

    def _close_if_idle(self) -> None:
        self._closer = None
        idle = time.monotonic() - self._last_used
        if idle >= self._idle_seconds:
            self.close()
        elif self._conn is not None:
            delay = self._idle_seconds - idle
            self._closer = asyncio.get_running_loop().call_later(delay, self._close_if_idle)

    def close(self) -> None:
        if self._closer is not None:
            self._closer.cancel()
            self._closer = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None
