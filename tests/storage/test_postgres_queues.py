"""What only the PostgreSQL queue store has: its Citus rules, the upgrade of a database made
before queues existed, and messages left under the id of a deleted queue."""

from __future__ import annotations

import asyncio
import uuid

import psycopg

from tabulae.model.queues import QueueMessage
from tabulae.storage import postgres
from tabulae.storage.postgres import PostgresStores
from tabulae.storage.postgres.engine import init_schema as engine_init_schema
from tests.conftest import fresh_database

T = 1_800_000_000_000_000


def test_messages_are_keyed_by_their_queue_and_nothing_triggers(pg_url: str) -> None:
    """Citus needs ``queue_id`` in every primary key and unique constraint of ``queue_messages``."""

    async def main() -> None:
        async with await psycopg.AsyncConnection.connect(pg_url) as conn:
            cursor = await conn.execute(
                "SELECT pg_get_constraintdef(oid) FROM pg_constraint"
                " WHERE conrelid = 'queue_messages'::regclass AND contype IN ('p', 'u')"
            )
            constraints = [row[0] for row in await cursor.fetchall()]
            assert constraints and all("queue_id" in definition for definition in constraints)
            cursor = await conn.execute(
                "SELECT count(*) FROM pg_trigger WHERE NOT tgisinternal AND tgrelid = ANY(ARRAY["
                "'queues', 'queue_messages', 'queue_service_properties', 'queue_tombstones']::regclass[])"
            )
            assert (await cursor.fetchone()) == (0,)

    asyncio.run(main())


def test_a_database_from_before_queues_gets_their_tables(pg_url: str) -> None:
    async def main() -> None:
        url = fresh_database(pg_url)
        await engine_init_schema(url, (postgres.TABLES_SCHEMA,))  # the Table service's tables only
        stores = await PostgresStores.open(url, max_size=2)
        try:
            await stores.queues.create_queue("acct", "upgraded", b"[]")
            assert await stores.queues.get_queue("acct", "upgraded") == (b"[]", 0)
        finally:
            await stores.close()

    asyncio.run(main())


def test_messages_under_a_deleted_queues_id_are_never_read_and_are_collected(pg_url: str) -> None:
    """A Put racing Delete Queue may commit a row under the id just deleted; no statement sees it,
    and the id's tombstone leads garbage collection to it."""

    async def main() -> None:
        account = f"acct{uuid.uuid4().hex[:12]}"
        stores = await PostgresStores.open(pg_url, max_size=2)
        queues = stores.queues
        try:
            await queues.create_queue(account, "raced", b"[]")
            async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
                row = await (
                    await conn.execute(
                        "SELECT id FROM queues WHERE account = %s AND name = 'raced'", (account,)
                    )
                ).fetchone()
                assert row is not None
                old_id = row[0]
                await queues.delete_queue(account, "raced", 100)
                await conn.execute(
                    "INSERT INTO queue_messages (queue_id, id, inserted, expires, visible, dequeues,"
                    " receipt, body) VALUES (%s, %s, %s, %s, %s, 0, 'r', 'stray')",
                    (old_id, uuid.uuid4(), T, T + 10**12, T),
                )
                await queues.create_queue(account, "raced", b"[]")  # a new queue, a new id
                assert await queues.peek_messages(account, "raced", 32, T) == []
                assert await queues.take_messages(account, "raced", 32, T, T + 1, "x") == []
                await queues.put_message(
                    account, "raced", QueueMessage(str(uuid.uuid4()), T, T + 10**9, T, 0, "r", "new")
                )
                assert [m.text for m in await queues.peek_messages(account, "raced", 32, T)] == ["new"]
                assert await queues.collect_garbage(T, 1000) >= 1
                count = await (
                    await conn.execute("SELECT count(*) FROM queue_messages WHERE queue_id = %s", (old_id,))
                ).fetchone()
                assert count == (0,)
        finally:
            await stores.close()

    asyncio.run(main())
