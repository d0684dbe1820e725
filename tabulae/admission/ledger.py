"""The state of the server's token buckets, where every worker of the server can read it.

Azure's targets hold per partition, per queue and per account, however many front-end processes
serve them, so a worker's token bucket must be drained by the other workers' requests too. The
directory the server made for its workers (on ``/dev/shm`` where there is one) holds one
memory-mapped file per worker, ``ledger-<i>.bin``; a worker claims one by holding an exclusive
``flock`` on it for its life (a worker started in place of one that died claims the freed file)
and maps all the others.

A bucket is kept as the time it is busy until (the generic cell rate algorithm's "theoretical
arrival time"): its tokens are ``min(capacity, rate × (now − busy_until))``, and taking ``n`` sets
``busy_until = max(busy_until, now − capacity / rate) + n / rate``. Slot ``crc32(key) mod SLOTS``
of a worker's file holds the ``busy_until`` it last wrote for the keys in that slot; the bucket's
is the latest of all the workers' (:meth:`Ledger.busy_until`), and a worker that takes writes the
new value to its own file only (one 8-byte aligned store, no lock; the clock is the system's
monotonic clock, the same in every process). Two workers taking in the same microseconds may
each extend the same value, and one take is then lost: a throttle may let that much through.

Two keys in one slot share a bucket, so a key may be throttled for another's traffic: early,
never late. With 16,384 slots this needs two busy keys to collide, about one pair in sixteen
thousand.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import zlib
from pathlib import Path
from typing import BinaryIO

__all__ = ["Ledger"]

SLOTS = 1 << 14
_WORD = 8


class Ledger:
    """This worker's ``busy_until`` per slot (``own``) and the other workers' (``peers``)."""

    def __init__(self, directory: Path, workers: int, slots: int = SLOTS) -> None:
        if slots < 1 or slots & (slots - 1):
            raise ValueError("slots must be a power of two")
        self.slots = slots
        self._mask = slots - 1
        self._file: BinaryIO | None = None  # this worker's file, kept open: its lock
        maps: list[mmap.mmap] = []
        own: int | None = None
        for index in range(workers):
            file = open(directory / f"ledger-{index}.bin", "a+b")  # noqa: SIM115 (closed below or in close)
            os.ftruncate(file.fileno(), slots * _WORD)  # the same size whoever gets here first
            maps.append(mmap.mmap(file.fileno(), slots * _WORD))
            if own is None:
                try:
                    fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    own, self._file = index, file
                    continue
                except BlockingIOError:
                    pass
            file.close()
        if own is None:  # more processes than workers (a replacement racing its predecessor's exit)
            maps.append(mmap.mmap(-1, slots * _WORD))  # counts only here: the others throttle alone
            own = len(maps) - 1
        self._maps = maps
        self.own = memoryview(maps[own]).cast("d")
        self.peers = [memoryview(m).cast("d") for i, m in enumerate(maps) if i != own]

    def slot(self, key: str) -> int:
        """The slot of a bucket's key: the same in every worker (``hash()`` is salted per process)."""
        return zlib.crc32(key.encode("utf-8", "surrogatepass")) & self._mask

    def busy_until(self, slot: int) -> float:
        """The latest ``busy_until`` any worker wrote for ``slot`` (0.0: never used)."""
        latest = self.own[slot]
        for peer in self.peers:
            value = peer[slot]
            if value > latest:
                latest = value
        return latest

    def close(self) -> None:
        """Let a worker started in this one's place claim its file (the lock goes with the file)."""
        if self._file is not None:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)  # the map holds a copy of the descriptor
            self._file.close()
            self._file = None
