"""The Blob storage contract (:mod:`tabulae.storage.blobs`), the same on every engine: staged
content committed or discarded, extents read back in ranges, listing order, block bookkeeping,
copies, containers deleted with their blobs, and garbage collected once unreferenced."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from tabulae.model.errors import ServiceError
from tabulae.storage.blobs import (
    BASE,
    BlobKey,
    BlobRecord,
    BlobState,
    BlobStore,
    BlobWrite,
    ContainerRecord,
    Extent,
    Needs,
    next_ticks,
)
from tests.storage.conftest import Backend


def run(backend: Backend, body: Callable[[BlobStore, str], Awaitable[None]]) -> None:
    async def main() -> None:
        stores = await backend.open()
        try:
            await stores.blobs.create_container(backend.account, ContainerRecord("box", next_ticks(None)))
            await body(stores.blobs, backend.account)
        finally:
            await stores.close()

    asyncio.run(main())


async def chunks(data: bytes, size: int = 65536) -> AsyncIterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


def record(name: str, state: BlobState, size: int) -> BlobRecord:
    return BlobRecord(
        name=name, snapshot=BASE, blob_type="BlockBlob", size=size, ticks=state.ticks, created=state.ticks
    )


async def put(store: BlobStore, key: BlobKey, data: bytes) -> BlobRecord:
    staged = await store.stage(key, chunks(data), None)

    def decide(state: BlobState) -> BlobWrite:
        new = record(key.name, state, len(data))
        return BlobWrite(result=new, base=new, content=[staged.extent], drop_staged=True)

    result: BlobRecord = await store.write_blob(key, decide, staged=staged)
    return result


async def read_all(
    store: BlobStore, key: BlobKey, snapshot: str = BASE, start: int = 0, end: int | None = None
) -> bytes:
    found = await store.get_blob(key, snapshot, content=True)
    assert found is not None
    blob, extents = found
    assert extents is not None
    return b"".join(
        [piece async for piece in store.read(key, extents, start, blob.size if end is None else end)]
    )


@pytest.mark.parametrize("size", [0, 10, 70_000, 9 * 1024 * 1024 + 3])
def test_stage_commit_read(backend: Backend, size: int) -> None:
    async def body(store: BlobStore, account: str) -> None:
        key = BlobKey(account, "box", "a/b")
        data = os.urandom(size)
        written = await put(store, key, data)
        assert written.size == size
        assert await read_all(store, key) == data
        if size > 20:
            assert await read_all(store, key, start=7, end=size - 5) == data[7 : size - 5]

    run(backend, body)


def test_refused_write_changes_nothing(backend: Backend, tmp_path: Path) -> None:
    async def body(store: BlobStore, account: str) -> None:
        key = BlobKey(account, "box", "kept")
        await put(store, key, b"original")
        staged = await store.stage(key, chunks(os.urandom(300_000)), None)

        def refuse(state: BlobState) -> BlobWrite:
            raise ServiceError("ConditionNotMet")

        with pytest.raises(ServiceError):
            await store.write_blob(key, refuse, staged=staged)
        assert await read_all(store, key) == b"original"
        missing = BlobKey(account, "nobox", "x")
        with pytest.raises(ServiceError) as raised:
            await store.write_blob(missing, lambda state: BlobWrite())
        assert raised.value.code == "ContainerNotFound"

    run(backend, body)


def test_listing_order_snapshots_and_uncommitted(backend: Backend) -> None:
    async def body(store: BlobStore, account: str) -> None:
        names = ["b", "a", "a/x", "é", "B", "a0"]
        for name in names:
            await put(store, BlobKey(account, "box", name), name.encode())
        key = BlobKey(account, "box", "a")

        def snap(state: BlobState) -> BlobWrite:
            assert state.base is not None
            frozen = BlobRecord(
                **{
                    **{f: getattr(state.base, f) for f in state.base.__slots__},
                    "snapshot": "2020-01-01T00:00:00.0000000Z",
                }
            )
            return BlobWrite(snapshot=frozen)

        await store.write_blob(key, snap)
        staged = await store.stage(BlobKey(account, "box", "c"), chunks(b"s"), None)

        def stage_only(state: BlobState) -> BlobWrite:
            placeholder = record("c", state, 0)
            placeholder.committed = False
            return BlobWrite(
                base=placeholder, stage_block=Extent(staged.extent.ref, staged.extent.length, "YQ==")
            )

        await store.write_blob(BlobKey(account, "box", "c"), stage_only, staged=staged)
        listing = await store.list_blobs(
            account, "box", prefix="", start=None, limit=100, snapshots=False, uncommitted=False
        )
        assert [r.name for r in listing.records] == sorted(names, key=lambda n: n.encode())
        every = await store.list_blobs(
            account, "box", prefix="a", start=None, limit=100, snapshots=True, uncommitted=True
        )
        assert [(r.name, r.snapshot) for r in every.records] == [
            ("a", "2020-01-01T00:00:00.0000000Z"), ("a", BASE), ("a/x", BASE), ("a0", BASE),
        ]  # fmt: skip
        page = await store.list_blobs(
            account, "box", prefix="", start=("a/x", ""), limit=2, snapshots=False, uncommitted=True
        )
        assert [r.name for r in page.records] == ["a/x", "a0"] and page.more
        with_staged = await store.list_blobs(
            account, "box", prefix="c", start=None, limit=10, snapshots=False, uncommitted=True
        )
        assert [(r.name, r.committed) for r in with_staged.records] == [("c", False)]
        assert await store.get_blob(BlobKey(account, "box", "c")) is None  # not committed: not a blob

    run(backend, body)


def test_block_bookkeeping_and_commit(backend: Backend) -> None:
    async def body(store: BlobStore, account: str) -> None:
        key = BlobKey(account, "box", "blocks")
        seen: list[tuple[int, int | None]] = []
        for block_id, data in (("YQ==", b"aa"), ("Yg==", b"bb"), ("YQ==", b"AA")):
            staged = await store.stage(key, chunks(data), None)

            def stage(
                state: BlobState, staged_ref: Extent = staged.extent, block_id: str = block_id
            ) -> BlobWrite:
                seen.append((state.staged_count, state.staged_id_length))
                write = BlobWrite(stage_block=Extent(staged_ref.ref, staged_ref.length, block_id))
                if state.base is None:
                    write.base = record("blocks", state, 0)
                    write.base.committed = False
                return write

            await store.write_blob(key, stage, staged=staged)
        assert seen == [(0, None), (1, 1), (2, 1)]  # re-staging an id does not count twice; ids of 1 byte
        base, committed, staged_blocks = await store.list_blocks(key)
        assert (
            base is not None and committed == [] and {b.block_id for b in staged_blocks} == {"YQ==", "Yg=="}
        )

        def commit(state: BlobState) -> BlobWrite:
            assert state.staged is not None
            content = [state.staged["Yg=="], state.staged["YQ=="]]
            new = record("blocks", state, 4)
            return BlobWrite(base=new, content=content, drop_staged=True)

        await store.write_blob(key, commit, needs=Needs(staged=True))
        assert await read_all(store, key) == b"bbAA"
        _, committed, staged_blocks = await store.list_blocks(key)
        assert [b.block_id for b in committed] == ["Yg==", "YQ=="] and staged_blocks == []

        def count(state: BlobState) -> BlobWrite:
            assert (state.staged_count, state.staged_id_length) == (0, None)
            return BlobWrite()

        await store.write_blob(key, count)

    run(backend, body)


def test_copy_survives_its_source(backend: Backend) -> None:
    async def body(store: BlobStore, account: str) -> None:
        await store.create_container(account, ContainerRecord("other", next_ticks(None)))
        source = BlobKey(account, "box", "src")
        data = os.urandom(5 * 1024 * 1024)
        await put(store, source, data)

        def copy(state: BlobState) -> BlobWrite:
            assert state.source is not None and state.source_content is not None
            new = record("dst", state, state.source.size)
            return BlobWrite(result=new, base=new, content=state.source_content)

        dest = BlobKey(account, "other", "dst")
        await store.copy_blob(source, BASE, dest, copy)
        await store.write_blob(source, lambda state: BlobWrite(delete_base=True))
        assert await read_all(store, dest) == data

    run(backend, body)


def test_delete_container_takes_its_blobs(backend: Backend) -> None:
    async def body(store: BlobStore, account: str) -> None:
        await put(store, BlobKey(account, "box", "x"), b"x")
        await store.delete_container(account, "box", lambda record: None)
        assert await store.get_container(account, "box") is None
        await store.create_container(account, ContainerRecord("box", next_ticks(None)))
        assert await store.get_blob(BlobKey(account, "box", "x")) is None  # nothing comes back

    run(backend, body)


def test_garbage_is_collected_after_the_grace_period(backend: Backend) -> None:
    async def body(store: BlobStore, account: str) -> None:
        key = BlobKey(account, "box", "churn")
        first = os.urandom(200_000)
        await put(store, key, first)
        found = await store.get_blob(key, content=True)
        assert found is not None and found[1] is not None
        old_extents = found[1]
        await put(store, key, b"second")
        # Within the grace period the old extents still read (a download may be under way) ...
        assert b"".join([p async for p in store.read(key, old_extents, 0, len(first))]) == first
        assert await store.collect_garbage(-1.0) >= 1
        # ... and after it they are gone, while the current content is untouched.
        with pytest.raises(ServiceError):
            b"".join([p async for p in store.read(key, old_extents, 0, len(first))])
        assert await read_all(store, key) == b"second"

    run(backend, body)


def test_concurrent_blocks_into_one_blob_all_count(backend: Backend) -> None:
    """Eight writers on two store instances (two front-ends) stage blocks into one blob at once:
    none fails (on Citus this once deadlocked in shard locks of the container row) and the
    uncommitted-block count, which enforces Azure's 100,000 cap, is exact."""

    async def main() -> None:
        engines = [await backend.open(), await backend.open()]
        try:
            account = backend.account
            await engines[0].blobs.create_container(account, ContainerRecord("box", next_ticks(None)))
            key = BlobKey(account, "box", "many")

            async def writer(store: BlobStore, index: int) -> None:
                for n in range(12):
                    data = f"{index}-{n}".encode()
                    staged = await store.stage(key, chunks(data), None)

                    def stage(state: BlobState, extent: Extent = staged.extent, n: int = n) -> BlobWrite:
                        write = BlobWrite(
                            stage_block=Extent(extent.ref, extent.length, f"b{index:02d}{n:02d}")
                        )
                        if state.base is None:
                            write.base = record("many", state, 0)
                            write.base.committed = False
                        return write

                    await store.write_blob(key, stage, staged=staged)

            await asyncio.gather(*(writer(engines[i % 2].blobs, i) for i in range(8)))
            _, committed, staged_blocks = await engines[0].blobs.list_blocks(key)
            assert committed == [] and len({b.block_id for b in staged_blocks}) == 96
            counted: list[int] = []
            await engines[1].blobs.write_blob(
                key, lambda state: counted.append(state.staged_count) or BlobWrite()
            )
            assert counted == [96]
        finally:
            for engine in engines:
                await engine.close()

    asyncio.run(main())


def test_delete_container_during_writes_leaves_no_blob_behind(backend: Backend) -> None:
    """Writes racing Delete Container either land before it (and go with the container) or
    find the container gone: a container created again under the name is empty."""

    async def main() -> None:
        engines = [await backend.open(), await backend.open()]
        try:
            account = backend.account
            await engines[0].blobs.create_container(account, ContainerRecord("box", next_ticks(None)))
            refused: list[str] = []

            async def writer(store: BlobStore, index: int) -> None:
                for n in range(10):
                    try:
                        await put(store, BlobKey(account, "box", f"w{index}-{n}"), b"x")
                    except ServiceError as error:
                        refused.append(error.code)
                        return

            async def deleter() -> None:
                await asyncio.sleep(0.02)
                await engines[1].blobs.delete_container(account, "box", lambda record: None)

            await asyncio.gather(deleter(), *(writer(engines[i % 2].blobs, i) for i in range(4)))
            assert set(refused) <= {"ContainerNotFound"}
            await engines[0].blobs.create_container(account, ContainerRecord("box", next_ticks(None)))
            listing = await engines[0].blobs.list_blobs(
                account, "box", prefix="", start=None, limit=100, snapshots=True, uncommitted=True
            )
            assert listing.records == []
        finally:
            for engine in engines:
                await engine.close()

    asyncio.run(main())


def test_extension_fields_round_trip_and_old_records_still_read(backend: Backend) -> None:
    """Fields most blobs never set (tier, tags, sequence number, seal, version id, a copy's
    extra state) are stored only when set, and a record stored without them reads back as before."""
    from dataclasses import replace

    from tabulae.storage.blobs import CopyState, decode_blob, encode_blob

    async def body(store: BlobStore, account: str) -> None:
        key = BlobKey(account, "box", "extended")
        plain = await put(store, key, b"abc")
        assert encode_blob(plain).count(b"{") == 1  # the metadata object only: no extensions

        def decide(state: BlobState) -> BlobWrite:
            assert state.base is not None
            new = replace(
                state.base,
                ticks=state.ticks,
                tier="Archive",
                tier_changed=1.5,
                rehydrate_to="Hot",
                rehydrate_priority="High",
                rehydrate_at=2.5,
                tags={"k": "v"},
                sealed=True,
                sequence_number=7,
                version_id="2026-11-27T08:00:00.0000000Z",
                copy=CopyState("id", "http://x/y", "1/2", 5, "pending", "waiting", True, "snap"),
            )
            return BlobWrite(result=new, base=new)

        written = await store.write_blob(key, decide)
        found = await store.get_blob(key)
        assert found is not None and found[0] == written
        old_form = (
            b'["BlockBlob",1,[null,null,null,null,null,null],{},'
            b'["available",null,-1,0.0],["i","s","1/1",2,"success"],0]'
        )
        old = decode_blob("n", "~", 3, 1, True, old_form)
        assert (old.tier, old.tags, old.sealed, old.copy and old.copy.incremental) == (None, {}, False, False)

    run(backend, body)
