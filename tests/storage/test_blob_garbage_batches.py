"""Blob garbage is collected in bounded batches, one transaction each: a backlog larger than a
batch (a large container deleted, rows re-keyed) is collected whole by one collection, on every
engine, and on PostgreSQL no transaction takes more than a batch (a trigger of the test's own
database logs which transaction deleted each garbage row)."""

from __future__ import annotations

import asyncio
import os

import psycopg

from tabulae.model.errors import ServiceError
from tabulae.storage.blobs import BlobKey, BlobStore, ContainerRecord, Extent, next_ticks
from tests.backends import database_url
from tests.conftest import fresh_database
from tests.storage.conftest import Backend
from tests.storage.test_blob_conformance import put, read_all, run

BATCH = 3
OVERWRITES = 2 * BATCH + 1  # garbage extents: more than two batches


async def _backlog(store: BlobStore, key: BlobKey) -> list[list[Extent]]:
    """Overwrite ``key`` so that ``OVERWRITES`` extents become garbage; their extents."""
    old: list[list[Extent]] = []
    for i in range(OVERWRITES + 1):
        await put(store, key, os.urandom(70_000) + bytes([i]))
        found = await store.get_blob(key, content=True)
        assert found is not None and found[1] is not None
        old.append(found[1])
    return old[:-1]


async def _gone(store: BlobStore, key: BlobKey, extents: list[Extent]) -> bool:
    try:
        b"".join([piece async for piece in store.read(key, extents, 0, 70_001)])
    except ServiceError:
        return True
    return False


def test_a_backlog_larger_than_a_batch_is_collected_whole(backend: Backend) -> None:
    async def body(store: BlobStore, account: str) -> None:
        key = BlobKey(account, "box", "churn")
        old = await _backlog(store, key)
        current = await read_all(store, key)
        assert await store.collect_garbage(-1.0, batch=BATCH) >= OVERWRITES
        assert [await _gone(store, key, extents) for extents in old] == [True] * OVERWRITES
        assert await read_all(store, key) == current
        assert await store.collect_garbage(-1.0, batch=BATCH) == 0

    run(backend, body)


_LOG = (
    "CREATE TABLE garbage_log (xid bigint NOT NULL)",
    "CREATE FUNCTION log_garbage() RETURNS trigger LANGUAGE plpgsql AS"
    " $$ BEGIN INSERT INTO garbage_log VALUES (txid_current()); RETURN OLD; END $$",
    "CREATE TRIGGER log_garbage AFTER DELETE ON blob_garbage FOR EACH ROW EXECUTE FUNCTION log_garbage()",
)


def test_no_collecting_transaction_takes_more_than_a_batch() -> None:
    from tabulae.storage.postgres import PostgresStores, init_schema

    url = fresh_database(database_url("postgres"))
    asyncio.run(init_schema(url))
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in _LOG:
            conn.execute(statement)

    async def main() -> None:
        stores = await PostgresStores.open(url, max_size=2)
        try:
            await stores.blobs.create_container("acct", ContainerRecord("box", next_ticks(None)))
            await _backlog(stores.blobs, BlobKey("acct", "box", "churn"))
            assert await stores.blobs.collect_garbage(-1.0, batch=BATCH) == OVERWRITES
        finally:
            await stores.close()

    asyncio.run(main())
    with psycopg.connect(url) as conn:
        per_transaction = [row[0] for row in conn.execute("SELECT count(*) FROM garbage_log GROUP BY xid")]
    assert sum(per_transaction) == OVERWRITES
    assert max(per_transaction) <= BATCH
    assert len(per_transaction) == -(-OVERWRITES // BATCH)
