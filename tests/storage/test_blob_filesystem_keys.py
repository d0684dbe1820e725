"""A file system of an account with a hierarchical namespace is kept on one distribution key
(``postgres/blob_keys.py``): its rows and content share the container's key, so a directory
rename changes names in place and never touches a content row; and a store's rows are re-keyed
when an account's namespace setting changes between starts (``postgres/rekeying.py``). On
PostgreSQL and, when configured, Citus (where the rename must also be a single-shard
transaction: ``tests/storage/test_citus.py`` reads the plans)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import psycopg
import pytest

from tabulae.storage.blobs import BASE, BlobKey, BlobState, BlobStore, BlobWrite, ContainerRecord, Extent
from tabulae.storage.blobs import next_ticks as ticks_after
from tabulae.storage.namespace import RenameState, RenameWrite
from tabulae.storage.postgres import PostgresStores, settle_blob_keys
from tabulae.storage.postgres.blob_keys import blob_dkey, container_dkey
from tests.backends import CITUS_ENV, database_backends, database_url
from tests.conftest import fresh_citus_store, fresh_database
from tests.storage.test_blob_conformance import put, read_all, record
from tests.storage.test_citus import assert_single_shard, explain, recorded, statements_of, task_counts

ACCOUNT = "lake"
FLAT = "flat"
BIG = 9 * 1024 * 1024 + 5  # three content chunks


def fresh_url(backend: str) -> str:
    base = database_url(backend)
    return fresh_database(base) if backend == "postgres" else fresh_citus_store(base)


@pytest.fixture(params=database_backends())
def url(request: pytest.FixtureRequest) -> str:
    return fresh_url(request.param)


def with_store(url: str, colocated: frozenset[str], body: Callable[[BlobStore], Awaitable[None]]) -> None:
    async def main() -> None:
        stores = await PostgresStores.open(url, max_size=4, colocated=colocated)
        try:
            await body(stores.blobs)
        finally:
            await stores.close()

    asyncio.run(main())


def rows(url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql, params).fetchall()  # type: ignore[arg-type]


def container_keys(url: str, account: str, container: str) -> dict[str, set[int]]:
    """The distinct keys of each table's rows of one container."""
    found: dict[str, set[int]] = {}
    for table in ("blobs", "blob_extents", "blob_blocks", "blob_tags"):
        found[table] = {
            int(row[0])
            for row in rows(
                url,
                f"SELECT DISTINCT t.dkey FROM {table} t JOIN blob_containers c ON c.id = t.container_id"
                " WHERE c.account = %s AND c.name = %s",
                account,
                container,
            )
        }
    return found


def chunk_rows(url: str) -> set[tuple[int, str, int]]:
    return {(int(d), str(r), int(s)) for d, r, s in rows(url, "SELECT dkey, ref, seq FROM blob_chunks")}


def move(source: BlobKey, destination: BlobKey, subtree: bool) -> Callable[[RenameState], RenameWrite]:
    def decide(state: RenameState) -> RenameWrite:
        assert state.source is not None
        moved = replace(state.source, name=destination.name, ticks=state.ticks)
        return RenameWrite(result=moved, record=moved, subtree=subtree)

    return decide


async def copy(store: BlobStore, source: BlobKey, dest: BlobKey) -> None:
    def decide(state: BlobState) -> BlobWrite:
        assert state.source is not None and state.source_content is not None
        new = record(dest.name, state, state.source.size)
        return BlobWrite(result=new, base=new, content=state.source_content)

    await store.copy_blob(source, BASE, dest, decide)


TREE = {"d/a/x": BIG, "d/a/y": 10, "d/b/z": 70_000, "d0": 3, "e-file": 5}


async def plant(store: BlobStore, account: str, container: str) -> dict[str, bytes]:
    await store.create_container(account, ContainerRecord(container, ticks_after(None)))
    data = {name: os.urandom(size) for name, size in TREE.items()}
    for name in ("d", "d/a", "d/b"):  # directories, as the DFS API makes them: empty blobs
        await put(store, BlobKey(account, container, name), b"")
        data[name] = b""
    for name, content in data.items():
        if content:
            await put(store, BlobKey(account, container, name), content)
    return data


def test_a_directory_rename_in_a_file_system_changes_names_and_no_content(url: str) -> None:
    """Every row of an HNS file system carries the container's key; renaming a directory leaves
    every content chunk as it was (same key, ref and sequence) and the files read back exactly
    under their new names, as does a copy that shares a renamed file's content."""
    expected: dict[str, bytes] = {}

    async def body(store: BlobStore) -> None:
        expected.update(await plant(store, ACCOUNT, "fs"))
        await copy(store, BlobKey(ACCOUNT, "fs", "d/a/x"), BlobKey(ACCOUNT, "fs", "copy-of-x"))
        expected["copy-of-x"] = expected["d/a/x"]
        before = chunk_rows(url)
        source, target = BlobKey(ACCOUNT, "fs", "d"), BlobKey(ACCOUNT, "fs", "moved/d")
        await store.write_blob(BlobKey(ACCOUNT, "fs", "moved"), lambda s: BlobWrite(
            result=None, base=record("moved", s, 0), content=[]))  # fmt: skip
        await store.rename_path(source, target, BlobKey(ACCOUNT, "fs", "moved"), move(source, target, True))
        assert chunk_rows(url) == before  # no content row touched
        for name, content in expected.items():
            now = "moved/" + name if name == "d" or name.startswith("d/") else name
            assert await read_all(store, BlobKey(ACCOUNT, "fs", now)) == content, name
            if now != name:
                assert await store.get_blob(BlobKey(ACCOUNT, "fs", name)) is None
        listing = await store.list_blobs(
            ACCOUNT, "fs", prefix="moved/", start=None, limit=100, snapshots=False, uncommitted=False
        )
        assert [r.name for r in listing.records] == ["moved/d", "moved/d/a", "moved/d/a/x", "moved/d/a/y",
                                                     "moved/d/b", "moved/d/b/z"]  # fmt: skip

    with_store(url, frozenset({ACCOUNT}), body)
    keys = container_keys(url, ACCOUNT, "fs")
    assert keys["blobs"] == keys["blob_extents"] == {container_dkey(ACCOUNT, "fs")}
    assert {d for d, _, _ in chunk_rows(url)} == {container_dkey(ACCOUNT, "fs")}


def test_a_rename_to_another_file_system_copies_shared_content(url: str) -> None:
    """A directory moved to another file system takes its content along (copied to that file
    system's key), while a file left behind that shares an extent with a moved one (a copy)
    still reads once the garbage the move left is collected."""

    async def body(store: BlobStore) -> None:
        data = await plant(store, ACCOUNT, "one")
        await store.create_container(ACCOUNT, ContainerRecord("two", ticks_after(None)))
        await copy(store, BlobKey(ACCOUNT, "one", "d/a/x"), BlobKey(ACCOUNT, "one", "stays"))
        source, target = BlobKey(ACCOUNT, "one", "d"), BlobKey(ACCOUNT, "two", "d")
        await store.rename_path(source, target, None, move(source, target, True))
        assert await store.collect_garbage(-1.0) >= 1
        assert await read_all(store, BlobKey(ACCOUNT, "one", "stays")) == data["d/a/x"]
        for name in ("d/a/x", "d/a/y", "d/b/z"):
            assert await read_all(store, BlobKey(ACCOUNT, "two", name)) == data[name]
            assert await store.get_blob(BlobKey(ACCOUNT, "one", name)) is None

    with_store(url, frozenset({ACCOUNT}), body)
    assert container_keys(url, ACCOUNT, "two")["blob_extents"] == {container_dkey(ACCOUNT, "two")}


def write_variety(account: str, container: str) -> Callable[[BlobStore], Awaitable[dict[str, bytes]]]:
    """Blobs of every kind of row: content, a snapshot, staged blocks, index tags."""

    async def body(store: BlobStore) -> dict[str, bytes]:
        data = await plant(store, account, container)
        tagged = BlobKey(account, container, "d/b/z")

        def tag(state: BlobState) -> BlobWrite:
            assert state.base is not None
            new = replace(state.base, ticks=state.ticks, tags={"k": "v"})
            return BlobWrite(result=new, base=new)

        await store.write_blob(tagged, tag)
        key = BlobKey(account, container, "d/a/y")

        def snapshot(state: BlobState) -> BlobWrite:
            assert state.base is not None
            return BlobWrite(
                result=None, snapshot=replace(state.base, snapshot="2026-11-27T00:00:00.0000000Z")
            )

        await store.write_blob(key, snapshot)
        pending = BlobKey(account, container, "pending")
        staged = await store.stage(pending, _one(b"block"), None)

        def stage(state: BlobState) -> BlobWrite:
            base = record("pending", state, 0)
            base.committed = False
            return BlobWrite(
                base=base, stage_block=Extent(staged.extent.ref, staged.extent.length, "YmxvY2s=")
            )

        await store.write_blob(pending, stage, staged=staged)
        return data

    return body


async def _one(data: bytes) -> Any:
    yield data


def test_turning_the_namespace_on_and_off_rekeys_every_row(url: str) -> None:
    """Rows written while the account was flat are moved to the container's key when it is
    served with a hierarchical namespace, and back blob by blob when it is flat again; every
    blob, snapshot, staged block and tag reads the same each time, a flat account alongside is
    left alone, and settling again changes nothing."""
    written: dict[str, dict[str, bytes]] = {}

    async def make(store: BlobStore) -> None:
        written[ACCOUNT] = await write_variety(ACCOUNT, "fs")(store)
        written[FLAT] = await write_variety(FLAT, "fs")(store)

    with_store(url, frozenset(), make)

    async def check(store: BlobStore) -> None:
        for account, data in written.items():
            for name, content in data.items():
                assert await read_all(store, BlobKey(account, "fs", name)) == content, (account, name)
            y = BlobKey(account, "fs", "d/a/y")
            assert await read_all(store, y, "2026-11-27T00:00:00.0000000Z") == data["d/a/y"]
            found = await store.get_blob(BlobKey(account, "fs", "d/b/z"))
            assert found is not None and found[0].tags == {"k": "v"}
            pending = BlobKey(account, "fs", "pending")
            _, _, blocks = await store.list_blocks(pending)
            assert [block.block_id for block in blocks] == ["YmxvY2s="]
            assert b"".join([piece async for piece in store.read(pending, blocks, 0, 5)]) == b"block"

    flat_keys = container_keys(url, FLAT, "fs")
    said = asyncio.run(settle_blob_keys(url, [ACCOUNT, FLAT], frozenset({ACCOUNT})))
    assert len(said) == 1 and ACCOUNT in said[0]
    tables = ("blobs", "blob_extents", "blob_blocks", "blob_tags")
    every = {table: {container_dkey(ACCOUNT, "fs")} for table in tables}
    assert container_keys(url, ACCOUNT, "fs") == every
    assert container_keys(url, FLAT, "fs") == flat_keys
    assert asyncio.run(settle_blob_keys(url, [ACCOUNT, FLAT], frozenset({ACCOUNT}))) == []
    with_store(url, frozenset({ACCOUNT}), check)

    asyncio.run(settle_blob_keys(url, [ACCOUNT, FLAT], frozenset()))
    keys = container_keys(url, ACCOUNT, "fs")
    assert keys["blobs"] == {blob_dkey(ACCOUNT, "fs", name) for name in [*written[ACCOUNT], "pending"]}
    with_store(url, frozenset(), check)
    assert rows(url, "SELECT account, colocated, settled FROM blob_key_modes") == [(ACCOUNT, False, True)]

    async def collect(store: BlobStore) -> None:  # the old keys' content, garbage now, goes
        await store.collect_garbage(-1.0)
        await check(store)

    with_store(url, frozenset(), collect)
    assert {d for d, _, _ in chunk_rows(url)} <= {
        blob_dkey(account, "fs", name) for account in written for name in [*written[account], "pending"]
    }


@pytest.mark.skipif(not os.environ.get(CITUS_ENV), reason=f"needs {CITUS_ENV} (a Citus coordinator)")
def test_on_citus_a_file_systems_rename_listing_and_delete_each_go_to_one_shard() -> None:
    """Citus's own ``EXPLAIN`` of every statement a directory rename sends (its lock reads,
    the decision's reads, the moves) names one shard, and none of them is about content; so do
    a listing of the file system and a recursive delete. A flat account's listing still asks
    every shard (its blobs spread)."""
    url = fresh_url("citus")

    async def body() -> None:
        async with recorded(url, colocated=frozenset({ACCOUNT})) as (stores, log):
            store = stores.blobs
            data = await plant(store, ACCOUNT, "fs")
            await plant(store, FLAT, "fs")
            log.clear()
            source, target = BlobKey(ACCOUNT, "fs", "d"), BlobKey(ACCOUNT, "fs", "e")
            await store.rename_path(source, target, None, move(source, target, True))
            sent = statements_of(log)
            assert any(statement[0].startswith("UPDATE blobs") for statement in sent)
            assert not any("blob_chunks" in statement[0] for statement in sent)
            assert await assert_single_shard(url, log) >= 5
            listing = await store.list_blobs(
                ACCOUNT, "fs", prefix="", start=None, limit=100, snapshots=False, uncommitted=False
            )
            assert [r.name for r in listing.records][:3] == ["d0", "e", "e-file"]
            await assert_single_shard(url, log)
            assert await read_all(store, BlobKey(ACCOUNT, "fs", "e/a/x")) == data["d/a/x"]
            log.clear()
            await store.delete_tree(BlobKey(ACCOUNT, "fs", "e"), lambda state: None)
            await assert_single_shard(url, log)
            await store.list_blobs(
                FLAT, "fs", prefix="", start=None, limit=100, snapshots=False, uncommitted=False
            )
            spread = [s for s in statements_of(log) if "FROM blobs WHERE container_id" in s[0]]
            assert spread and max(task_counts(await explain(url, spread[-1]))) > 1

    asyncio.run(body())


def test_a_soft_deleted_container_is_rekeyed_by_the_name_it_comes_back_under(url: str) -> None:
    """Container soft delete renames a container aside and restores it under its own name; its
    rows are re-keyed for that name, so a container deleted before the namespace was turned on
    reads once restored after, and its purge (deleting it under its hidden name) takes them all."""
    hidden = "~fs~01DB2C3D4E5F6A7B~7"
    written: dict[str, bytes] = {}

    async def make(store: BlobStore) -> None:
        written.update(await plant(store, ACCOUNT, "fs"))
        await store.rename_container(ACCOUNT, "fs", hidden, lambda record: None)

    with_store(url, frozenset(), make)
    asyncio.run(settle_blob_keys(url, [ACCOUNT], frozenset({ACCOUNT})))

    async def restore(store: BlobStore) -> None:
        await store.rename_container(ACCOUNT, hidden, "fs", lambda record: None)
        for name, content in written.items():
            assert await read_all(store, BlobKey(ACCOUNT, "fs", name)) == content, name
        await store.rename_container(ACCOUNT, "fs", hidden, lambda record: None)
        await store.delete_container(ACCOUNT, hidden, lambda record: None)  # its retention is over

    with_store(url, frozenset({ACCOUNT}), restore)
    assert rows(url, "SELECT count(*) FROM blobs") == [(0,)]
