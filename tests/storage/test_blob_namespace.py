"""The hierarchical namespace's part of the Blob storage contract, the same on every engine: a
recursive delete that keeps its tree (soft delete) and brings it back whole (undelete), and one
cut into bounded pieces that always leaves a tree behind."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from tabulae.model.errors import ServiceError
from tabulae.storage.blobs import BlobKey, BlobRecord, BlobState, BlobStore, BlobWrite, Needs
from tabulae.storage.namespace import TreeState, TreeWrite, UndeleteState
from tests.storage.conftest import Backend
from tests.storage.test_blob_conformance import put, read_all, run

TREE = ["d", "d/a", "d/a/x", "d/a/y", "d/b", "d/b/z", "d0", "d-sibling"]


async def _names(store: BlobStore, account: str, deleted: bool = False) -> list[tuple[str, str]]:
    listing = await store.list_blobs(
        account, "box", prefix="", start=None, limit=100, snapshots=False, uncommitted=False, deleted=deleted
    )
    return [(r.name, r.snapshot) for r in listing.records]


async def _plant(store: BlobStore, account: str) -> None:
    for name in TREE:
        await put(store, BlobKey(account, "box", name), name.encode())


def test_soft_deleted_tree_comes_back_whole(backend: Backend) -> None:
    async def body(store: BlobStore, account: str) -> None:
        await _plant(store, account)
        key = BlobKey(account, "box", "d")
        slot = "~d00000000000000000042"

        def keep(state: TreeState) -> TreeWrite:
            assert state.base is not None and state.has_children
            kept = replace(state.base, snapshot=slot, committed=False, deleted_time=1.0, retention_days=2)
            return TreeWrite(result="kept", kept=kept)

        done = await store.delete_tree(key, keep)
        assert done.result == "kept" and done.finished
        assert await _names(store, account) == [("d-sibling", ""), ("d0", "")]
        hidden = [name for name, version in await _names(store, account, deleted=True) if version == slot]
        assert hidden == TREE[:6]
        with pytest.raises(ServiceError):  # a live path in the way is the decision's to refuse
            await put(store, key, b"new")

            def refuse(state: UndeleteState) -> BlobRecord:
                assert state.live is not None
                raise ServiceError("PathAlreadyExists")

            await store.undelete_tree(key, slot, refuse)
        await store.delete_tree(key, lambda state: None)  # the new one goes for good

        def restore(state: UndeleteState) -> BlobRecord:
            assert state.live is None and not state.live_below and state.deleted is not None
            assert state.deleted.deleted_time == 1.0
            return replace(state.deleted, snapshot="", committed=True, deleted_time=None, retention_days=0)

        await store.undelete_tree(key, slot, restore)
        assert [name for name, _ in await _names(store, account)] == sorted(TREE)
        assert await read_all(store, BlobKey(account, "box", "d/b/z")) == b"d/b/z"
        assert await _names(store, account, deleted=True) == await _names(store, account)

    run(backend, body)


def test_tree_deleted_in_pieces_stays_a_tree(backend: Backend) -> None:
    async def body(store: BlobStore, account: str) -> None:
        await _plant(store, account)
        key = BlobKey(account, "box", "d")
        rounds = 0
        while True:
            done = await store.delete_tree(key, lambda state: TreeWrite(result=None, limit=2))
            rounds += 1
            names = [name for name, _ in await _names(store, account)]
            for name in names:  # every remaining path's parent remains
                parent = name.rpartition("/")[0]
                assert not parent or parent in names
            if done.finished:
                break
            assert "d" in names and rounds < 10
        assert rounds == 3  # five descendants, two a piece, then the rest with the directory
        assert [name for name, _ in await _names(store, account)] == ["d-sibling", "d0"]

    run(backend, body)


def test_a_namespace_write_sees_the_directories_above_it_and_what_is_below(backend: Backend) -> None:
    """``Needs.namespace``: ``state.ancestors`` holds the base of each directory above the blob,
    outermost first (None where there is none), and ``state.has_children`` whether a base is
    named below it (a name that merely shares the prefix, ``d0`` or ``d-sibling``, is not)."""

    async def body(store: BlobStore, account: str) -> None:
        await _plant(store, account)
        seen: dict[str, BlobState] = {}

        def look(name: str) -> Callable[[BlobState], BlobWrite]:
            def decide(state: BlobState) -> BlobWrite:
                seen[name] = state
                return BlobWrite()

            return decide

        for name in ("d", "d/a/x", "d/missing/deeper", "d0", "top"):
            await store.write_blob(BlobKey(account, "box", name), look(name), needs=Needs(namespace=True))
        assert seen["d"].ancestors == [] and seen["d"].has_children
        above = seen["d/a/x"].ancestors
        assert [record.name if record else None for record in above or ()] == ["d", "d/a"]
        assert not seen["d/a/x"].has_children
        deeper = seen["d/missing/deeper"].ancestors or []
        assert [record.name if record else None for record in deeper] == ["d", None]
        assert not seen["d0"].has_children and not seen["top"].has_children
        await store.write_blob(BlobKey(account, "box", "d/b/z"), look("plain"))
        assert seen["plain"].ancestors is None  # not asked for: nothing read

    run(backend, body)
