"""What only the PostgreSQL backend has: its schema rules, retries, and schema creation.

The behaviour every backend shares is in ``test_conformance.py``; these tests check the Citus
rules the design depends on (the distribution column in every key, no triggers), the retry loop,
and what a raced deletion may leave behind.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import errors as pg_errors
from psycopg_pool import AsyncConnectionPool

from tabulae.model import edm
from tabulae.model.blobs import BlobKey
from tabulae.model.errors import ServiceError
from tabulae.model.mutation import Mutation, MutationKind
from tabulae.storage.factory import is_postgres_url, open_stores
from tabulae.storage.postgres import PostgresStores, init_schema
from tabulae.storage.postgres import tables as postgres
from tabulae.storage.postgres.engine import PostgresDatabase
from tabulae.storage.postgres.tables import PostgresTables
from tabulae.storage.postgres.wire import Statement, exchange, read_int8
from tabulae.storage.scans import FULL_RANGE, KeyBound, KeyRange
from tabulae.storage.sqlite import SqliteStores
from tabulae.storage.volume import RETRY_SECONDS
from tests.backends import database_backends, database_url


@asynccontextmanager
async def opened(url: str) -> AsyncIterator[PostgresTables]:
    stores = await PostgresStores.open(url, max_size=4)
    try:
        assert isinstance(stores.tables, PostgresTables)
        yield stores.tables
    finally:
        await stores.close()


def test_keys_carry_the_distribution_column_and_no_triggers(pg_url: str) -> None:
    """Citus needs ``dist`` in every primary key and unique constraint of ``entities``."""

    async def main() -> None:
        async with await psycopg.AsyncConnection.connect(pg_url) as conn:
            cursor = await conn.execute(
                "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
                " WHERE conrelid = 'entities'::regclass AND contype IN ('p', 'u')"
            )
            constraints = await cursor.fetchall()
            assert constraints and all("dist" in definition for _, definition in constraints)
            cursor = await conn.execute(
                "SELECT count(*) FROM pg_trigger WHERE NOT tgisinternal"
                " AND tgrelid = ANY(ARRAY['tables', 'entities', 'service_properties']::regclass[])"
            )
            assert (await cursor.fetchone()) == (0,)

    asyncio.run(main())


def test_entity_rows_are_keyed_by_table_id_and_utf16(pg_url: str) -> None:
    async def main() -> None:
        account = f"acct{uuid.uuid4().hex[:16]}"
        async with opened(pg_url) as store:
            await store.create_table(account, "T")
            await store.apply(account, "T", [Mutation(MutationKind.INSERT, "p\U0001f600", "r")])
            async with await psycopg.AsyncConnection.connect(pg_url) as conn:
                cursor = await conn.execute(
                    "SELECT id FROM tables WHERE account = %s AND name_key = 't'", (account,)
                )
                row = await cursor.fetchone()
                assert row is not None
                cursor = await conn.execute(
                    "SELECT dist, rk FROM entities WHERE dist = %s", (postgres._dist(row[0], "p\U0001f600"),)
                )
                rows = await cursor.fetchall()
        assert rows == [(row[0].to_bytes(8, "big") + "p\U0001f600".encode("utf-16-be"), b"\x00r")]

    asyncio.run(main())


def test_rows_under_a_dead_table_id_are_never_read(pg_url: str) -> None:
    """A write that raced with a table deletion can leave rows under the old id; a front-end
    that still caches that id must not return them, and a re-created table must not see them."""

    async def main() -> None:
        account = f"acct{uuid.uuid4().hex[:16]}"
        async with opened(pg_url) as store, opened(pg_url) as other:
            await store.create_table(account, "T")
            await store.apply(account, "T", [Mutation(MutationKind.INSERT, "p", "r")])
            assert len(await store.scan(account, "T", [FULL_RANGE], None, 10)) == 1
            # Delete only the table row, as if the entities had been written after the deletion.
            async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
                await conn.execute("DELETE FROM tables WHERE account = %s", (account,))
            with pytest.raises(ServiceError, match="TableNotFound"):
                await store.get_entity(account, "T", "p", "r")
            await other.create_table(account, "T")
            assert await store.get_entity(account, "T", "p", "r") is None
            assert await store.scan(account, "T", [FULL_RANGE], None, 10) == []
            [entity] = await store.apply(account, "T", [Mutation(MutationKind.INSERT, "p", "r")])
            assert entity is not None

    asyncio.run(main())


def test_serialization_failures_and_deadlocks_are_retried(pg_url: str) -> None:
    async def main() -> None:
        async with opened(pg_url) as store:
            calls = 0

            async def flaky(conn: object) -> str:
                nonlocal calls
                calls += 1
                if calls == 1:
                    raise pg_errors.SerializationFailure("simulated")
                if calls == 2:
                    raise pg_errors.DeadlockDetected("simulated")
                return "done"

            assert await store._db.run(flaky, retry=True) == "done"
            assert calls == 3

            async def hopeless(conn: object) -> None:
                raise pg_errors.SerializationFailure("simulated")

            with pytest.raises(ServiceError) as info:
                await store._db.run(hopeless, retry=True)
            assert info.value.code == "ServerBusy"

            async def broken(conn: object) -> None:
                raise pg_errors.UndefinedTable("simulated")

            with pytest.raises(ServiceError) as info:
                await store._db.run(broken, retry=True)
            assert info.value.code == "InternalError"

    asyncio.run(main())


def test_a_full_disk_is_server_busy_said_once_and_tried_again_after_a_pause(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        async with opened(pg_url) as store:
            volume = store._db.volume

            async def full(conn: object) -> None:
                raise pg_errors.DiskFull("could not extend file: No space left on device")

            for _ in range(3):
                with pytest.raises(ServiceError) as info:
                    await store._db.run(full, retry=True)
                assert (info.value.status, info.value.code) == (503, "ServerBusy")
                assert "data volume is full" in info.value.message
            assert volume.full
            volume._full_since -= RETRY_SECONDS  # the pause has passed: writes are let through again
            volume.refresh()
            assert not volume.full

            async def fine(conn: object) -> str:
                return "written"

            assert await store._db.run(fine) == "written"

    with caplog.at_level(logging.WARNING, logger="tabulae"):
        asyncio.run(main())
    said = [record.getMessage() for record in caplog.records]
    assert len([line for line in said if line.startswith("data volume full: writes refused")]) == 1, said
    assert len([line for line in said if line.startswith("space available again")]) == 1, said


def test_open_creates_the_schema_on_an_empty_database(pg_url: str) -> None:
    name = f"tabulae_empty_{uuid.uuid4().hex[:12]}"

    async def admin(sql: str) -> None:
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
            await conn.execute(sql)

    async def main() -> None:
        await admin(f"CREATE DATABASE {name}")
        url = pg_url.rsplit("/", 1)[0] + "/" + name
        try:
            # Several front-ends starting at once on the empty database.
            engines = await asyncio.gather(*(PostgresStores.open(url, max_size=2) for _ in range(3)))
            try:
                await engines[0].tables.create_table("a", "T")
                assert await engines[2].tables.get_table("a", "t") == "T"
            finally:
                for engine in engines:
                    await engine.close()
            await init_schema(url)  # idempotent
            async with opened(url) as store:
                assert await store.list_tables("a", None, 10) == ["T"]
        finally:
            await admin(f"DROP DATABASE {name}")

    asyncio.run(main())


def test_factory_chooses_the_backend(pg_url: str, tmp_path: Path) -> None:
    assert is_postgres_url("postgresql://h/db") and is_postgres_url("postgres://h/db")
    assert not is_postgres_url(None) and not is_postgres_url("") and not is_postgres_url("/var/db")

    async def main() -> None:
        store = await open_stores(pg_url, tmp_path, in_memory=False)
        try:
            assert isinstance(store, PostgresStores)
        finally:
            await store.close()

    asyncio.run(main())


def test_factory_defaults_to_sqlite(tmp_path: Path) -> None:
    async def main() -> None:
        store = await open_stores(None, tmp_path / "data", in_memory=True)
        try:
            assert isinstance(store, SqliteStores)
        finally:
            await store.close()
        with pytest.raises(ValueError, match="unsupported store URL"):
            await open_stores("mysql://h/db", tmp_path, in_memory=False)

    asyncio.run(main())


def test_reads_survive_a_dropped_connection(pg_url: str) -> None:
    """After a server restart every pooled connection is dead; a read retries on a fresh one.
    The store's connections carry a name of their own, so only they are ended: the database is
    shared with tests running in other processes."""

    async def main() -> None:
        account = f"acct{uuid.uuid4().hex[:16]}"
        name = f"dropped-{uuid.uuid4().hex[:12]}"
        separator = "&" if "?" in pg_url else "?"
        async with opened(f"{pg_url}{separator}application_name={name}") as store:
            await store.create_table(account, "T")
            await store.apply(account, "T", [Mutation(MutationKind.INSERT, "p", "r")])
            async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
                cursor = await conn.execute(
                    "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE application_name = %s",
                    (name,),
                )
                ended = await cursor.fetchone()
                assert ended is not None and ended[0] >= 1
            assert await store.get_entity(account, "T", "p", "r") is not None
            assert len(await store.scan(account, "T", [FULL_RANGE], None, 10)) == 1

    asyncio.run(main())


def test_citus_schema_calls_each_citus_function_once(pg_url: str) -> None:
    """Citus cannot be installed here, so a scratch database gets a stand-in of its catalog and
    functions (same signatures); ``init_schema(citus=True)`` must register each table once, and
    running it again must change nothing. The real thing runs when TABULAE_TEST_CITUS_URL is set."""
    name = f"tabulae_citus_{uuid.uuid4().hex[:12]}"

    async def admin(sql: str) -> None:
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
            await conn.execute(sql)

    async def main() -> None:
        await admin(f"CREATE DATABASE {name}")
        url = pg_url.rsplit("/", 1)[0] + "/" + name
        try:
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                await conn.execute(
                    """
                    CREATE TABLE pg_dist_partition (logicalrelid regclass, kind text, col text);
                    CREATE FUNCTION create_reference_table(table_name regclass) RETURNS void
                        LANGUAGE sql AS $$ INSERT INTO pg_dist_partition VALUES (table_name, 'n', NULL) $$;
                    CREATE FUNCTION create_distributed_table(table_name regclass, distribution_column text)
                        RETURNS void LANGUAGE sql
                        AS $$ INSERT INTO pg_dist_partition VALUES (table_name, 'h', distribution_column) $$;
                    """
                )
            await init_schema(url, citus=True)
            await init_schema(url, citus=True)
            async with await psycopg.AsyncConnection.connect(url) as conn:
                cursor = await conn.execute(
                    "SELECT logicalrelid::text, kind, col FROM pg_dist_partition ORDER BY 1"
                )
                registered = await cursor.fetchall()
        finally:
            await admin(f"DROP DATABASE {name}")
        assert registered == [
            ("blob_account_features", "n", None),
            ("blob_blocks", "h", "dkey"),
            ("blob_changes", "h", "dkey"),
            ("blob_chunks", "h", "dkey"),
            ("blob_containers", "n", None),
            ("blob_extents", "h", "dkey"),
            ("blob_garbage", "h", "dkey"),
            ("blob_key_modes", "n", None),
            ("blob_pages", "h", "dkey"),
            ("blob_service_properties", "n", None),
            ("blob_tags", "h", "dkey"),
            ("blobs", "h", "dkey"),
            ("entities", "h", "dist"),
            ("property_indexes", "n", None),
            ("queue_messages", "h", "queue_id"),
            ("queue_service_properties", "n", None),
            ("queue_tombstones", "n", None),
            ("queues", "n", None),
            ("service_properties", "n", None),
            ("tables", "n", None),
        ]

    asyncio.run(main())


@pytest.mark.parametrize("name", database_backends())
def test_a_point_read_never_returns_a_row_left_under_a_deleted_tables_id(name: str) -> None:
    """A write that raced Delete Table can leave its row under the dead table id (ids are never
    reused). The point read checks in the same statement that the table id still exists: a
    front-end that still has the dead id cached must answer TableNotFound, and after the
    table is created again, the new (empty) table, never the leftover row."""
    url = database_url(name)
    asyncio.run(init_schema(url, citus=name == "citus"))
    account, table = f"acct{uuid.uuid4().hex[:16]}", "Raced"

    async def main() -> None:
        one, two = await PostgresStores.open(url, max_size=2), await PostgresStores.open(url, max_size=2)
        try:
            await one.tables.create_table(account, table)
            await one.tables.apply(account, table, [Mutation(MutationKind.INSERT, "p", "r", {})])
            assert await two.tables.get_entity(account, table, "p", "r") is not None  # two caches the id
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                remembered = two.tables._ids.get((account, table.lower()))
                assert remembered is not None
                dist = postgres._dist(remembered, "p")
                cursor = await conn.execute("SELECT rk, ticks, props FROM entities WHERE dist = %s", (dist,))
                leftover = await cursor.fetchone()
                await one.tables.delete_table(account, table)
                await conn.execute(
                    "INSERT INTO entities (dist, rk, ticks, props) VALUES (%s, %s, %s, %s)", (dist, *leftover)
                )  # what the raced write leaves behind
            with pytest.raises(ServiceError) as refused:
                await two.tables.get_entity(account, table, "p", "r")
            assert refused.value.code == "TableNotFound"
            await one.tables.create_table(account, table)
            assert await one.tables.get_entity(account, table, "p", "r") is None
            assert await two.tables.get_entity(account, table, "p", "r") is None
        finally:
            await one.close()
            await two.close()

    asyncio.run(main())


@pytest.mark.parametrize("name", database_backends())
def test_a_range_within_one_partition_is_one_statement_of_its_own(name: str) -> None:
    """A range of one partition (the commonest query) is read in one statement naming the
    partition once and returning only ``rk``, ``ticks`` and ``props``; paged with cursors it
    gives the partition in key order. Like the point read it checks that the table id still
    exists: a front-end with a dead id cached answers TableNotFound, never a row left under it."""
    url = database_url(name)
    asyncio.run(init_schema(url, citus=name == "citus"))
    account, table = f"acct{uuid.uuid4().hex[:16]}", "Ranges"
    rks = [f"r{i:02d}" for i in range(25)]

    async def main() -> None:
        one, two = await PostgresStores.open(url, max_size=2), await PostgresStores.open(url, max_size=2)
        sent: list[bytes] = []

        async def recorded(conn: Any, calls: Any) -> Any:
            sent.extend(statement.text for statement, _ in calls)
            return await exchange(conn, calls)

        try:
            await one.tables.create_table(account, table)
            for pk in ("o", "p", "q"):
                rows = [
                    Mutation(MutationKind.INSERT, pk, rk, {"n": (edm.INT32, i)}) for i, rk in enumerate(rks)
                ]
                await one.tables.apply(account, table, rows)
            partition = KeyRange(KeyBound("p", None, True), KeyBound("p", None, True))
            await two.tables.scan(account, table, [partition], None, 1)  # two caches the id
            postgres.wire.exchange = recorded  # type: ignore[assignment]
            paged: list[str] = []
            after = None
            while True:
                page = await two.tables.scan(account, table, [partition], after, 7)
                assert all(e.pk == "p" for e in page)
                paged += [e.rk for e in page]
                if len(page) < 7:
                    break
                after = (page[-1].pk, page[-1].rk)
            assert paged == rks
            assert [e.properties()["n"] for e in page] == [(edm.INT32, i) for i in range(21, 25)]
            assert len(sent) == 4 and all(text.startswith(b"SELECT rk, ticks, props ") for text in sent)
            assert all(b"dist = $1 AND" in text and b"(dist, rk)" not in text for text in sent)
            within = KeyRange(KeyBound("p", "r03", False), KeyBound("p", "r06", True))
            assert [e.rk for e in await two.tables.scan(account, table, [within], None, 100)] == rks[4:7]

            # A large answer (100 KB) usually arrives in several pieces, read as they come.
            text = "x" * 4000
            big = [Mutation(MutationKind.INSERT, "big", rk, {"s": (edm.STRING, rk + text)}) for rk in rks]
            await one.tables.apply(account, table, big)
            whole = KeyRange(KeyBound("big", None, True), KeyBound("big", None, True))
            found = await two.tables.scan(account, table, [whole], None, 1000)
            assert [e.properties()["s"] for e in found] == [(edm.STRING, rk + text) for rk in rks]

            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                remembered = two.tables._ids.get((account, table.lower()))
                assert remembered is not None
                dist = postgres._dist(remembered, "p")
                cursor = await conn.execute("SELECT rk, ticks, props FROM entities WHERE dist = %s", (dist,))
                leftover = await cursor.fetchone()
                await one.tables.delete_table(account, table)
                await conn.execute(
                    "INSERT INTO entities (dist, rk, ticks, props) VALUES (%s, %s, %s, %s)", (dist, *leftover)
                )  # what a write that raced Delete Table leaves behind
            with pytest.raises(ServiceError) as refused:
                await two.tables.scan(account, table, [partition], None, 100)
            assert refused.value.code == "TableNotFound"
            await one.tables.create_table(account, table)
            assert await two.tables.scan(account, table, [partition], None, 100) == []
        finally:
            postgres.wire.exchange = exchange  # type: ignore[assignment]
            await one.close()
            await two.close()

    asyncio.run(main())


@pytest.mark.parametrize("name", database_backends())
def test_inserts_sent_in_one_round_trip_keep_the_rules_of_a_group(name: str) -> None:
    """Inserts go out without reading first (one round trip: the table's check and the
    ``INSERT`` in one transaction). With a cached id gone stale they still land in the table
    of that name, or fail with TableNotFound leaving no row behind; a key already present fails
    the whole group at its operation, writing nothing."""
    url = database_url(name)
    asyncio.run(init_schema(url, citus=name == "citus"))
    account, table = f"acct{uuid.uuid4().hex[:16]}", "Quick"

    def inserts(*rks: str) -> list[Mutation]:
        return [Mutation(MutationKind.INSERT, "p", rk, {}) for rk in rks]

    async def rows_under(conn: psycopg.AsyncConnection[tuple[object, ...]], table_id: int) -> int:
        cursor = await conn.execute(
            "SELECT count(*) FROM entities WHERE dist >= %s AND dist < %s",
            (postgres._ID.pack(table_id), postgres._ID.pack(table_id + 1)),
        )
        row = await cursor.fetchone()
        assert row is not None
        return int(row[0])

    async def main() -> None:
        one, two = await PostgresStores.open(url, max_size=2), await PostgresStores.open(url, max_size=2)
        try:
            await one.tables.create_table(account, table)
            await two.tables.apply(account, table, inserts("a"))  # two caches the id
            stale = two.tables._ids.get((account, table.lower()))
            assert stale is not None
            await one.tables.delete_table(account, table)
            await one.tables.create_table(account, table)
            [single] = await two.tables.apply(account, table, inserts("b"))
            assert single is not None and single.rk == "b"
            assert len(await two.tables.apply(account, table, inserts("c", "d", "e"))) == 3
            found = await one.tables.scan(account, table, [FULL_RANGE], None, 10)
            assert [entity.rk for entity in found] == ["b", "c", "d", "e"]

            with pytest.raises(ServiceError) as present:
                await two.tables.apply(account, table, inserts("x", "y", "z", "c", "w"))
            assert (present.value.code, present.value.index) == ("EntityAlreadyExists", 3)
            with pytest.raises(ServiceError) as present:
                await two.tables.apply(account, table, inserts("b"))
            assert present.value.code == "EntityAlreadyExists"
            assert len(await one.tables.scan(account, table, [FULL_RANGE], None, 10)) == 4

            current = two.tables._ids.get((account, table.lower()))
            assert current is not None and current != stale
            await one.tables.delete_table(account, table)
            for group in (inserts("f"), inserts("g", "h")):
                with pytest.raises(ServiceError) as missing:
                    await two.tables.apply(account, table, group)
                assert missing.value.code == "TableNotFound"
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                assert await rows_under(conn, stale) == 0
                assert await rows_under(conn, current) == 0
        finally:
            await one.close()
            await two.close()

    asyncio.run(main())


@pytest.mark.parametrize("name", database_backends())
def test_statements_prepared_through_libpq_survive_psycopg_deallocating_them(name: str) -> None:
    """Point reads and inserts prepare their statements once per connection. psycopg sends
    ``DEALLOCATE ALL`` when it sees a ``ROLLBACK`` on a connection where it has prepared
    statements of its own; the next point operation on that connection prepares again rather
    than failing (it answered 500 before)."""
    url = database_url(name)
    asyncio.run(init_schema(url, citus=name == "citus"))
    account, table = f"acct{uuid.uuid4().hex[:16]}", "Prepared"

    async def main() -> None:
        stores = await PostgresStores.open(url, max_size=1)  # one connection for everything
        tables = stores.tables
        try:
            await tables.create_table(account, table)
            await tables.apply(account, table, [Mutation(MutationKind.INSERT, "p", "a", {})])
            assert await tables.get_entity(account, table, "p", "a") is not None
            for _ in range(8):  # psycopg prepares a statement it has run five times
                assert await tables.get_table(account, table) == table
            with pytest.raises(ServiceError, match="EntityAlreadyExists"):  # the general path rolls back
                await tables.apply(account, table, [Mutation(MutationKind.INSERT, "p", "a", {})])

            async def prepared(conn: psycopg.AsyncConnection[tuple[object, ...]]) -> object:
                return await (await conn.execute("SELECT count(*) FROM pg_prepared_statements")).fetchone()

            assert await stores.database.run(prepared) == (0,)  # what psycopg did: ours went too
            await tables.apply(account, table, [Mutation(MutationKind.INSERT, "p", "b", {})])
            assert await tables.get_entity(account, table, "p", "b") is not None
        finally:
            await stores.close()

    asyncio.run(main())


@pytest.mark.parametrize("name", database_backends())
def test_every_connection_may_be_kept_and_an_upload_still_gets_one(name: str) -> None:
    """Connections are kept between operations up to the pool's size. An upload holds its
    connection across the awaits of its body; it takes it through the database like every other
    operation, so it uses one kept by earlier reads rather than waiting on an empty pool (it
    waited until the pool's timeout when it took its own from the pool)."""
    url = database_url(name)
    asyncio.run(init_schema(url, citus=name == "citus"))
    account, table = f"acct{uuid.uuid4().hex[:16]}", "Kept"

    async def chunks() -> AsyncIterator[bytes]:
        yield b"x" * 1000

    async def main() -> None:
        stores = await PostgresStores.open(url, max_size=2)
        stores.database.pool.timeout = 5  # a connection that never comes fails in seconds
        tables = stores.tables
        try:
            await tables.create_table(account, table)
            await tables.apply(account, table, [Mutation(MutationKind.INSERT, "p", "r", {})])
            taken = [await stores.database.take() for _ in range(2)]  # both of the pool's
            for conn in taken:
                await stores.database.give_back(conn)
            assert len(stores.database._kept) == 2  # both kept: the pool has none left
            assert await tables.get_entity(account, table, "p", "r") is not None
            staged = await stores.blobs.stage(BlobKey(account, "box", "b"), chunks(), None)
            try:
                assert staged.extent.length == 1000
                assert await tables.get_entity(account, table, "p", "r") is not None  # beside the upload
            finally:
                await stores.blobs.discard(staged)
            assert len(stores.database._kept) == 2
        finally:
            await stores.close()

    asyncio.run(main())


def test_kept_connections_left_unused_go_back_to_the_pool_which_closes_them(pg_url: str) -> None:
    """Kept connections are out of the pool's sight: left unused they go back to it, so its idle
    rule closes them as it would without keeping (an idle server held every connection it had
    kept for ever, and many servers share one database's connection limit)."""
    label = f"kept{uuid.uuid4().hex[:12]}"

    async def connections() -> int:
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
            cursor = await conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (label,)
            )
            row = await cursor.fetchone()
            assert row is not None
            return int(row[0])

    async def busy(conn: psycopg.AsyncConnection[Any]) -> None:
        await conn.execute("SELECT pg_sleep(0.2)")

    together = asyncio.Barrier(3)

    async def overlapping(conn: psycopg.AsyncConnection[Any]) -> None:
        """Holds its connection until all three hold one: three connections, however slow."""
        await conn.execute("SELECT 1")
        await asyncio.wait_for(together.wait(), 60)

    async def main() -> None:
        kwargs = {"autocommit": True, "application_name": label}
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            pg_url, min_size=0, max_size=3, max_idle=0.5, kwargs=kwargs, open=False
        )
        await pool.open(wait=True)
        database = PostgresDatabase(pool)
        database.kept_idle = 0.5
        try:
            await asyncio.gather(*(database.run(overlapping, idempotent=True) for _ in range(3)))
            assert len(database._kept) == 3 and await connections() == 3
            for _ in range(600):  # a minute at most, however busy the machine
                if not database._kept and await connections() == 0:
                    break
                await asyncio.sleep(0.1)
            assert not database._kept
            assert await connections() == 0
            await database.run(busy, idempotent=True)  # and new ones are opened and kept again
            assert len(database._kept) == 1
        finally:
            await database.close()

    asyncio.run(main())


def test_a_statement_prepared_in_the_exchange_that_finds_ours_gone_is_not_prepared_twice(
    pg_url: str,
) -> None:
    """An exchange that prepares a new statement and then runs one psycopg has deallocated: the
    new one was prepared before the missing one failed, so the retry must not prepare it again
    (``already exists`` answered 500 on table inserts and queries after a rollback)."""
    kept, fresh = (
        Statement.of(
            "SELECT 1::int8",
        ),
        Statement.of("SELECT 2::int8"),
    )

    async def main() -> None:
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
            await exchange(conn, [(kept, ())])
            await conn.execute("DEALLOCATE ALL")  # what psycopg does on a ROLLBACK
            results = await exchange(conn, [(fresh, ()), (kept, ())])
            assert [read_int8(result.get_value(0, 0) or b"") for result in results] == [2, 1]
            await conn.execute("BEGIN")
            await conn.execute("DEALLOCATE ALL")  # and in an open transaction
            results = await exchange(conn, [(kept, ()), (fresh, ())])
            assert [read_int8(result.get_value(0, 0) or b"") for result in results] == [1, 2]
            assert conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE

    asyncio.run(main())


@pytest.mark.parametrize("name", database_backends())
def test_point_deletes_sent_in_one_round_trip_keep_the_rules(name: str) -> None:
    """A point delete goes out without reading first (the table's check and a ``DELETE``
    conditional on the ETag, in one transaction). It still answers as the rules say: a missing
    entity is ResourceNotFound, another version's ETag (or an ETag this service never gives)
    UpdateConditionNotSatisfied, leaving the entity; with a cached id gone stale it deletes
    from the table of that name or answers ResourceNotFound / TableNotFound."""
    url = database_url(name)
    asyncio.run(init_schema(url, citus=name == "citus"))
    account, table = f"acct{uuid.uuid4().hex[:16]}", "Deletes"

    def delete(rk: str, if_match: str | None = "*") -> list[Mutation]:
        return [Mutation(MutationKind.DELETE, "p", rk, None, if_match)]

    async def main() -> None:
        one, two = await PostgresStores.open(url, max_size=2), await PostgresStores.open(url, max_size=2)
        try:
            await one.tables.create_table(account, table)
            [a, b] = await two.tables.apply(  # two caches the id
                account, table, [Mutation(MutationKind.INSERT, "p", rk, {}) for rk in ("a", "b")]
            )
            assert a is not None and b is not None
            etag, other = edm.etag_of_ticks(a.ticks), edm.etag_of_ticks(b.ticks + 1)
            assert await two.tables.apply(account, table, delete("a", etag)) == [None]
            assert await two.tables.get_entity(account, table, "p", "a") is None
            for rk, if_match, code in (
                ("a", "*", "ResourceNotFound"),
                ("a", None, "ResourceNotFound"),
                ("b", other, "UpdateConditionNotSatisfied"),
                ("b", edm.etag_of_ticks(b.ticks).replace("%3A", ":"), "UpdateConditionNotSatisfied"),
            ):
                with pytest.raises(ServiceError) as refused:
                    await two.tables.apply(account, table, delete(rk, if_match))
                assert refused.value.code == code
            assert await two.tables.get_entity(account, table, "p", "b") is not None
            assert await two.tables.apply(account, table, delete("b", None)) == [None]

            await one.tables.apply(account, table, [Mutation(MutationKind.INSERT, "p", "c", {})])
            await one.tables.delete_table(account, table)
            await one.tables.create_table(account, table)  # two's id is stale now
            with pytest.raises(ServiceError) as refused:
                await two.tables.apply(account, table, delete("c"))
            assert refused.value.code == "ResourceNotFound"
            await one.tables.apply(account, table, [Mutation(MutationKind.INSERT, "p", "d", {})])
            assert await two.tables.apply(account, table, delete("d")) == [None]
            assert await one.tables.get_entity(account, table, "p", "d") is None
            await one.tables.delete_table(account, table)
            with pytest.raises(ServiceError) as refused:
                await two.tables.apply(account, table, delete("d"))
            assert refused.value.code == "TableNotFound"
        finally:
            await one.close()
            await two.close()

    asyncio.run(main())


def test_a_full_disk_on_the_prepared_statement_path_is_server_busy(pg_url: str) -> None:
    """Point reads and inserts go through libpq's prepared statements (``postgres.wire``), not
    psycopg's ``execute``: the disk-full error (SQLSTATE 53100) the server sends there is mapped
    the same way, 503 ServerBusy and the volume full. The server raises it for real, from a
    trigger (inserts) and a view in the table's place (reads), in a database of the test's own."""
    name = f"tabulae_diskfull_{uuid.uuid4().hex[:12]}"

    async def admin(url: str, sql: str) -> None:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(sql)

    async def main() -> None:
        await admin(pg_url, f"CREATE DATABASE {name}")
        url = pg_url.rsplit("/", 1)[0] + "/" + name
        try:
            async with opened(url) as store:
                await store.create_table("a", "T")
                await store.apply("a", "T", [Mutation(MutationKind.INSERT, "p", "r0")])
                assert await store.get_entity("a", "T", "p", "r0") is not None  # the table's id is known
                await admin(
                    url,
                    "CREATE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                    " RAISE EXCEPTION 'could not extend file: No space left on device'"
                    " USING ERRCODE = '53100'; END $$;"
                    " CREATE TRIGGER disk_full BEFORE INSERT ON entities"
                    " FOR EACH ROW EXECUTE FUNCTION disk_full()",
                )
                sent = []
                exchange = postgres.wire.exchange

                async def counted(conn: object, calls: object) -> object:
                    sent.append(calls)
                    return await exchange(conn, calls)  # type: ignore[arg-type]

                postgres.wire.exchange = counted  # type: ignore[assignment]
                try:
                    with pytest.raises(ServiceError) as info:
                        await store.apply("a", "T", [Mutation(MutationKind.INSERT, "p", "r1")])
                    assert sent, "the insert did not take the prepared-statement path"
                    assert (info.value.status, info.value.code) == (503, "ServerBusy")
                    assert "data volume is full" in info.value.message
                    assert store._db.volume.full

                    await admin(
                        url,
                        "CREATE FUNCTION disk_full_read() RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN"
                        " RAISE EXCEPTION 'could not write to file: No space left on device'"
                        " USING ERRCODE = '53100'; END $$;"
                        " ALTER TABLE entities RENAME TO entities_kept;"
                        " CREATE VIEW entities AS SELECT * FROM entities_kept WHERE disk_full_read()",
                    )
                    sent.clear()
                    with pytest.raises(ServiceError) as info:
                        await store.get_entity("a", "T", "p", "r0")
                    assert sent, "the read did not take the prepared-statement path"
                    assert (info.value.status, info.value.code) == (503, "ServerBusy")
                finally:
                    postgres.wire.exchange = exchange  # type: ignore[assignment]
        finally:
            await admin(pg_url, f"DROP DATABASE {name} WITH (FORCE)")

    asyncio.run(main())
