"""Point reads and one-partition ranges of one event loop turn go to the database together
(``tabulae/storage/postgres/gathered.py``), on PostgreSQL and Citus: each gets its own answer,
and a batch that fails leaves each read to run alone."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import psycopg
import pytest

from tabulae.model import edm
from tabulae.model.errors import ServiceError
from tabulae.model.mutation import Mutation, MutationKind
from tabulae.storage.postgres import PostgresStores, init_schema
from tabulae.storage.postgres import tables as postgres
from tabulae.storage.postgres.wire import exchange
from tabulae.storage.scans import KeyBound, KeyRange
from tests.backends import database_backends, database_url


def _partition(pk: str) -> KeyRange:
    return KeyRange(KeyBound(pk, None, True), KeyBound(pk, None, True))


def _count_exchanges() -> list[int]:
    """From now on, the number of statements of each exchange the table store sends (the real
    exchange runs; the caller puts ``exchange`` back)."""
    sent: list[int] = []

    async def recorded(conn: Any, calls: Any) -> Any:
        sent.append(len(calls))
        return await exchange(conn, calls)

    postgres.wire.exchange = recorded  # type: ignore[assignment]
    return sent


@pytest.mark.parametrize("name", database_backends())
def test_reads_of_one_turn_share_one_exchange_and_each_gets_its_own_answer(name: str) -> None:
    """Twenty point reads (one of a missing entity), two ranges of a partition and a read of a
    table that does not exist, started together: the reads of the remembered table go out in
    one exchange, and every read answers as it does alone."""
    url = database_url(name)
    asyncio.run(init_schema(url, citus=name == "citus"))
    account, table = f"acct{uuid.uuid4().hex[:16]}", "Gathered"

    async def main() -> None:
        stores = await PostgresStores.open(url, max_size=4)
        tables = stores.tables
        try:
            await tables.create_table(account, table)
            for pk in ("a", "b"):
                rows = [
                    Mutation(MutationKind.INSERT, pk, f"r{i:02d}", {"n": (edm.INT32, i)}) for i in range(20)
                ]
                await tables.apply(account, table, rows)
            assert await tables.get_entity(account, table, "a", "r00") is not None  # the id remembered
            sent = _count_exchanges()
            reads = [tables.get_entity(account, table, "a", f"r{i:02d}") for i in range(19)]
            reads.append(tables.get_entity(account, table, "a", "missing"))
            ranges = [tables.scan(account, table, [_partition(pk)], None, 100) for pk in ("a", "b")]
            answers = await asyncio.gather(
                *reads, *ranges, tables.get_entity(account, "NoSuchTable", "a", "r00"), return_exceptions=True
            )
            assert sent[0] == 22  # 19 + 1 point reads and 2 ranges in one exchange
            found = answers[:19]
            assert [(e.pk, e.rk, e.properties()["n"]) for e in found] == [  # type: ignore[union-attr]
                ("a", f"r{i:02d}", (edm.INT32, i)) for i in range(19)
            ]
            assert answers[19] is None
            for pk, page in zip(("a", "b"), answers[20:22], strict=True):
                assert [(e.pk, e.rk) for e in page] == [(pk, f"r{i:02d}") for i in range(20)]  # type: ignore[union-attr]
            assert isinstance(answers[22], ServiceError) and answers[22].code == "TableNotFound"
        finally:
            postgres.wire.exchange = exchange  # type: ignore[assignment]
            await stores.close()

    asyncio.run(main())


@pytest.mark.parametrize("name", database_backends())
def test_a_batch_that_fails_leaves_each_read_to_run_alone(name: str) -> None:
    """Both connections the store keeps are dead (their backends ended): the batch fails on one
    and again on the other, then each read runs alone on a fresh connection and gets its
    entity, as a read does after a server restart."""
    url = database_url(name)
    asyncio.run(init_schema(url, citus=name == "citus"))
    account, table = f"acct{uuid.uuid4().hex[:16]}", "Alone"

    async def main() -> None:
        stores = await PostgresStores.open(url, max_size=4)
        tables, database = stores.tables, stores.database
        try:
            await tables.create_table(account, table)
            rows = [Mutation(MutationKind.INSERT, "p", f"r{i}", {"n": (edm.INT32, i)}) for i in range(8)]
            await tables.apply(account, table, rows)
            assert await tables.get_entity(account, table, "p", "r0") is not None
            taken = [await database.take() for _ in range(2)]
            pids = [conn.info.backend_pid for conn in taken]
            for conn in taken:
                await database.give_back(conn)
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as admin:
                await admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS t(pid)", (pids,)
                )
            sent = _count_exchanges()
            found = await asyncio.gather(*(tables.get_entity(account, table, "p", f"r{i}") for i in range(8)))
            assert [(e.rk, e.properties()["n"]) for e in found] == [  # type: ignore[union-attr]
                (f"r{i}", (edm.INT32, i)) for i in range(8)
            ]
            assert sent == [8, 8, *[1] * 8]  # the batch on each dead connection, then each alone
        finally:
            postgres.wire.exchange = exchange  # type: ignore[assignment]
            await stores.close()

    asyncio.run(main())
