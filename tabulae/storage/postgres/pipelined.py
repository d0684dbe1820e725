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
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

import psycopg

from tabulae.storage.plan import Dialect, Plan, Sql

if TYPE_CHECKING:
    from psycopg import AsyncPipeline

    from tabulae.storage.postgres.engine import Connection

T = TypeVar("T")

SAVEPOINT = "tabulae_commit"  # the staged upload's savepoint a commit step runs in


async def run_pipelined(plan: Plan[T], conn: Connection, dialect: Dialect, pipe: AsyncPipeline) -> T:
    """Run ``plan`` on ``conn`` in pipeline ``pipe``: a statement whose rows the plan reads waits
    for its answer (and everything queued before it); the others are queued."""
    send, execute, prepared = plan.send, conn.execute, dialect.prepared
    reply: Any = None
    try:
        while True:
            text, params, fetch, rows = send(reply)
            if fetch == "batch":  # every statement sent, then every answer read: one round trip
                steps = cast("Sequence[Sql]", rows)
                sent = [
                    await execute((prepared.get(s.text) or dialect.prepare(s.text))[0], s.params)
                    for s in steps
                ]
                reply = [
                    await cursor.fetchone()
                    if step.fetch == "one"
                    else await cursor.fetchall()
                    if step.fetch == "all"
                    else None
                    for step, cursor in zip(steps, sent, strict=True)
                ]
                continue
            text, _convert = prepared.get(text) or dialect.prepare(text)  # psycopg takes mappings
            if rows is not None:
                async with conn.cursor() as cursor:
                    await cursor.executemany(text, rows)
                reply = None
            elif fetch == "one":
                reply = await (await execute(text, params)).fetchone()
            elif fetch == "all":
                reply = await (await execute(text, params)).fetchall()
            elif fetch == "rowcount":
                cursor = await execute(text, params)
                await pipe.sync()  # a count is known only once the statement completed
                reply = cursor.rowcount
            else:
                await execute(text, params)
                reply = None
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def transaction(conn: Connection, make: Callable[[], Plan[T]], dialect: Dialect) -> T:
    """``BEGIN``, the plan, ``COMMIT`` in one pipeline; rolled back when anything failed."""
    try:
        async with conn.pipeline() as pipe:
            await conn.execute("BEGIN")
            result = await run_pipelined(make(), conn, dialect, pipe)
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
            result = await run_pipelined(make(), conn, dialect, pipe)
            await conn.execute("COMMIT")
    except BaseException:
        if _in_transaction(conn):  # else the COMMIT ended it: nothing is left to run again
            await conn.execute(f"ROLLBACK TO SAVEPOINT {SAVEPOINT}")
        raise
    return result


def _in_transaction(conn: Connection) -> bool:
    """Whether the connection is still in the transaction (the COMMIT failed or never ran)."""
    return not conn.closed and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE
