"""Run a write plan and its COMMIT in libpq's pipeline mode: one round trip per read, not per
statement.

A plan's writes need no answer (an UPDATE, an INSERT, the container's advisory lock), so in
pipeline mode they are queued and travel with the next statement whose answer the plan reads;
that one is sent with a Flush and waited for. The transaction's BEGIN (or the staged upload's
SAVEPOINT) goes with the first, and COMMIT with the last, whose Sync is the only wait after the
plan's last read. The client is answered after that Sync, so a write is acknowledged only once
its COMMIT succeeded, as before.

An error a queued statement meets surfaces at the next read or at the Sync, as the same psycopg
exception; the plan never catches those, so it makes no difference where. After it the server
skips every statement up to the Sync, which ends the pipeline; the transaction is then rolled
back (or back to its savepoint) outside pipeline mode, where the server runs it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import psycopg

from tabulae.storage.plan import Dialect, Plan, run_async

if TYPE_CHECKING:
    from tabulae.storage.postgres.engine import Connection

T = TypeVar("T")

SAVEPOINT = "tabulae_commit"  # the staged upload's savepoint a commit step runs in


async def transaction(conn: Connection, make: Callable[[], Plan[T]], dialect: Dialect) -> T:
    """``BEGIN``, the plan, ``COMMIT`` in one pipeline; rolled back when anything failed."""
    try:
        async with conn.pipeline() as pipe:
            await conn.execute("BEGIN")
            result = await run_async(make(), conn, dialect, pipe)
            await conn.execute("COMMIT")
    except BaseException:
        if _in_transaction(conn):
            with contextlib.suppress(psycopg.Error):  # a broken connection: the pool discards it
                await conn.execute("ROLLBACK")
        raise
    return result


async def commit_step(conn: Connection, make: Callable[[], Plan[T]], dialect: Dialect) -> T:
    """The plan in a savepoint of the transaction open on ``conn`` (a staged upload's), then
    ``COMMIT``, in one pipeline. When anything failed the transaction is rolled back to the
    savepoint, its staged rows kept, so the caller may run the step again or roll back."""
    try:
        async with conn.pipeline() as pipe:
            await conn.execute(f"SAVEPOINT {SAVEPOINT}")
            result = await run_async(make(), conn, dialect, pipe)
            await conn.execute("COMMIT")
    except BaseException:
        if _in_transaction(conn):  # else the COMMIT ended it: nothing is left to run again
            await conn.execute(f"ROLLBACK TO SAVEPOINT {SAVEPOINT}")
        raise
    return result


def _in_transaction(conn: Connection) -> bool:
    """Whether the connection is still in the transaction (the COMMIT failed or never ran)."""
    return not conn.closed and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE
