"""Deletion ids and the records soft delete and expiry decide over (tabulae.dfs.trash)."""

from __future__ import annotations

import pytest

from tabulae.blob.softdeletion import deleted_base_name
from tabulae.dfs import trash
from tabulae.model.blobs import BlobRecord
from tabulae.model.errors import ServiceError


def test_deletion_id_is_the_slot_time_as_a_filetime() -> None:
    # 2025-02-10T21:36:13.7291364Z, as Azure answered x-ms-deletion-id for a delete then
    ticks = 133836969737291364 + trash.FILETIME_EPOCH_TICKS
    slot = deleted_base_name(ticks)
    assert trash.deletion_id(slot) == "133836969737291364"
    assert trash.slot_of("133836969737291364") == slot


@pytest.mark.parametrize("bad", ["", "abc", "-1", "1.5", "١٢٣", "9" * 20])
def test_a_deletion_id_that_is_no_number_is_refused(bad: str) -> None:
    with pytest.raises(ServiceError) as refused:
        trash.slot_of(bad)
    assert refused.value.code == "InvalidHeaderValue"


def _record(**fields: object) -> BlobRecord:
    values: dict[str, object] = {"name": "f", "snapshot": "", "blob_type": "BlockBlob", "size": 0,
                                 "ticks": 1, "created": 1, **fields}  # fmt: skip
    return BlobRecord(**values)  # type: ignore[arg-type]


def test_roots_descendants_and_expiry() -> None:
    root = _record(snapshot="~d00000000000000000001", committed=False, deleted_time=5.0)
    moved = _record(snapshot="~d00000000000000000001", committed=False)
    assert trash.is_deleted_root(root) and not trash.is_moved_descendant(root)
    assert trash.is_moved_descendant(moved) and not trash.is_deleted_root(moved)
    assert not trash.is_deleted_root(_record()) and not trash.is_moved_descendant(_record())
    expiring = _record(posix={"o": "a", "g": "b", "a": "user::rw-,group::r--,other::---", "e": 100.0})
    assert trash.expiry_of(expiring) == 100.0
    assert trash.has_expired(expiring, 100.0) and not trash.has_expired(expiring, 99.9)
    assert not trash.has_expired(_record(), 1e12)
