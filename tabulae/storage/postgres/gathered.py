"""Reads of one event loop turn sent together: one round trip on one connection for all.

A worker serving many clients has several point reads (and one-partition range reads) in
flight at once, each of which would take a connection, send its statement (a system call that
wakes a database backend), register the socket with the loop, wait, read, and unregister. The
per-read waits, wake-ups and system calls cost the front-end and the database more CPU than
the statement itself. Here the reads that arrive in one turn of the event loop are queued and
sent at its end in one pipeline on one connection (:func:`wire.exchange`): one send, one
wake-up of one backend, one wait, whatever their number. A read alone waits for nothing more
than the end of the turn it started in.

Each read is a single autocommit statement whose answer does not depend on the others, so
batching changes no result. When a batch fails (a lost connection, a statement that failed),
each of its reads runs again alone, so every read gets its own answer or error, as before.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import TYPE_CHECKING, Any

from tabulae.storage.postgres import wire

if TYPE_CHECKING:
    from collections.abc import Sequence

    from tabulae.storage.postgres.engine import Connection, PostgresDatabase

GATHER_LIMIT = 32  # reads in one exchange at most (a larger batch starts another)


class _Alone(Exception):
    """The batch failed: the read runs again on its own."""


async def _alone(calls: Sequence[wire.Call], conn: Connection) -> list[Any]:
    return await wire.exchange(conn, calls)


def _fail(batch: list[tuple[wire.Call, asyncio.Future[Any]]]) -> None:
    for _, future in batch:
        if not future.done():
            future.set_exception(_Alone())


class Gathered:
    """Single-statement reads of one database, gathered per turn of the loop (see the module)."""

    def __init__(self, database: PostgresDatabase, limit: int = GATHER_LIMIT) -> None:
        self._db = database
        self._limit = limit
        self._waiting: list[tuple[wire.Call, asyncio.Future[Any]]] = []
        self._sending: set[asyncio.Task[None]] = set()  # references the loop does not keep

    async def run(self, call: wire.Call) -> Any:
        """The result of ``call`` (a statement that only reads), sent with the turn's others."""
        future = asyncio.get_running_loop().create_future()
        waiting = self._waiting
        waiting.append((call, future))
        if len(waiting) == 1:
            task = asyncio.create_task(self._send(waiting))  # runs once this turn's steps ran
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)
        if len(waiting) >= self._limit:
            self._waiting = []
        try:
            return await future
        except _Alone:
            return (await self._db.run(partial(_alone, (call,)), idempotent=True))[0]

    async def _send(self, batch: list[tuple[wire.Call, asyncio.Future[Any]]]) -> None:
        if self._waiting is batch:
            self._waiting = []  # reads from now on go in the next batch
        try:
            results = await self._db.run(partial(_alone, [call for call, _ in batch]), idempotent=True)
        except Exception:
            _fail(batch)
            return
        except BaseException:  # cancelled (the loop is closing): the readers try alone
            _fail(batch)
            raise
        for (_, future), result in zip(batch, results, strict=True):
            if not future.done():  # its reader may have been cancelled meanwhile
                future.set_result(result)
