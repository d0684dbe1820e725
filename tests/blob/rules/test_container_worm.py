"""The container-level WORM rules (tabulae/blob/rules/container_worm.py) and the write check over
them (tabulae/blob/worm_guard.py): what an expired retention still refuses, when an append blob's
retention ends, and the transitions of unlocked and locked policies."""

from __future__ import annotations

import pytest

from tabulae.blob import worm_guard
from tabulae.blob.protection import _changes_data
from tabulae.blob.rules import container_worm as rules
from tabulae.model import edm
from tabulae.model.blobs import BlobRecord, ContainerWorm, Extent
from tabulae.model.errors import ServiceError
from tabulae.storage.blobs import BlobState, BlobWrite

DAY = rules.DAY_SECONDS
T0 = 1_800_000_000.0


def _ticks(seconds: float) -> int:
    return int(seconds * edm.TICKS_PER_SECOND) + edm.UNIX_EPOCH_TICKS


def _blob(kind: str = "BlockBlob", created: float = T0, modified: float = T0) -> BlobRecord:
    return BlobRecord(
        name="b", snapshot="", blob_type=kind, size=3, ticks=_ticks(modified), created=_ticks(created)
    )


def _code(worm: ContainerWorm, base: BlobRecord | None, write: BlobWrite, now: float) -> str | None:
    try:
        worm_guard.check(worm, BlobState(base=base, ticks=_ticks(now)), write, now, _changes_data)
    except ServiceError as error:
        return error.code
    return None


def test_retention_refuses_deletes_until_it_ends_and_overwrites_after() -> None:
    worm, base = ContainerWorm(days=2), _blob()
    delete = BlobWrite(delete_base=True)
    overwrite = BlobWrite(base=_blob(modified=T0 + 3 * DAY), content=[])
    assert _code(worm, base, delete, T0 + DAY) == "BlobImmutableDueToPolicy"
    assert _code(worm, base, delete, T0 + 2 * DAY + 1) is None
    assert _code(worm, base, overwrite, T0 + 3 * DAY) == "BlobImmutableDueToPolicy"
    assert _code(worm, None, BlobWrite(base=_blob(), content=[]), T0) is None  # a new blob
    assert (
        _code(ContainerWorm(hold_tags=("case1",)), base, delete, T0 + 99 * DAY)
        == "BlobImmutableDueToLegalHold"
    )


def test_an_append_blob_is_retained_from_its_last_append_when_appends_are_allowed() -> None:
    worm = ContainerWorm(days=1, allow_appends=True)
    log = _blob("AppendBlob", created=T0, modified=T0 + 5 * DAY)
    grown = BlobRecord(
        name="b",
        snapshot="",
        blob_type="AppendBlob",
        size=4,
        ticks=_ticks(T0 + 6 * DAY),
        created=log.created,
        block_count=1,
    )
    append = BlobWrite(base=grown, append=Extent("x", 1))
    assert _code(worm, log, append, T0 + 6 * DAY) is None
    assert _code(ContainerWorm(days=1), log, append, T0 + 6 * DAY) == "BlobImmutableDueToPolicy"
    assert _code(worm, log, BlobWrite(delete_base=True), T0 + 5.5 * DAY) == "BlobImmutableDueToPolicy"
    assert _code(worm, log, BlobWrite(delete_base=True), T0 + 6.5 * DAY) is None


def test_policy_transitions() -> None:
    unlocked = rules.change(None, {"immutability-period-days": 10})
    assert unlocked == ContainerWorm(days=10)
    assert rules.change(unlocked, {"immutability-period-days": 5}) == ContainerWorm(days=5)
    assert rules.change(unlocked, {"immutability-period-days": 0}) is None
    locked = rules.change(unlocked, {"locked": True})
    assert locked == ContainerWorm(days=10, locked=True)
    for changes in (
        {"immutability-period-days": 9},
        {"locked": False},
        {"allow-protected-append-writes": True},
    ):
        with pytest.raises(rules.WormError):
            rules.change(locked, changes)
    extended = rules.change(locked, {"immutability-period-days": 11})
    assert extended == ContainerWorm(days=11, locked=True, extensions=1)
    assert rules.change(extended, {"immutability-period-days": 11}) == extended  # no increase, no count
    for days in range(12, 16):
        extended = rules.change(extended, {"immutability-period-days": days})
    assert extended is not None and extended.extensions == rules.MAX_EXTENSIONS
    with pytest.raises(rules.WormError, match="at most 5 times"):
        rules.change(extended, {"immutability-period-days": 16})
    rules.check_container_delete(None, True)
    with pytest.raises(ServiceError) as refused:
        rules.check_container_delete(extended, True)
    assert refused.value.code == "ContainerImmutabilityPolicyLocked"
    rules.check_container_delete(extended, False)  # empty: it may go
    held = rules.change(None, {"legal-hold-tags": ["CaseA1", "casea1"]})
    assert held == ContainerWorm(hold_tags=("casea1",))
    assert rules.document(held)["state"] is None and rules.has_hold(held) and not rules.has_policy(held)
