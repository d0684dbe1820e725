"""Immutability: policy transitions, legal hold, protected appends, refusals by clock."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tabulae.blob.rules import immutability as im
from tabulae.model.errors import ServiceError

T0 = datetime(2026, 1, 1, tzinfo=UTC)
H = timedelta(hours=1)


def code(fn: Callable[..., object], *args: object) -> tuple[int, str]:
    with pytest.raises(ServiceError) as caught:
        fn(*args)
    return caught.value.status, caught.value.code


def test_unlocked_policy_can_be_shortened_extended_locked_and_deleted() -> None:
    p = im.set_policy(im.Protection(), T0 + 10 * H, im.UNLOCKED, T0)
    assert p.mode(T0) == im.UNLOCKED
    p = im.set_policy(p, T0 + 2 * H, im.UNLOCKED, T0)
    assert p.policy == im.Policy(T0 + 2 * H, im.UNLOCKED)
    p = im.set_policy(p, T0 + 20 * H, im.UNLOCKED, T0)
    assert im.delete_policy(p, T0).policy is None
    locked = im.set_policy(p, T0 + 20 * H, im.LOCKED, T0)
    assert locked.mode(T0) == im.LOCKED


def test_locked_policy_only_extends_and_cannot_be_deleted_until_it_expires() -> None:
    p = im.set_policy(im.Protection(), T0 + 10 * H, im.LOCKED, T0)
    assert code(im.set_policy, p, T0 + 5 * H, im.LOCKED, T0) == (409, "BlobImmutableDueToPolicy")
    assert code(im.set_policy, p, T0 + 20 * H, im.UNLOCKED, T0) == (409, "BlobImmutableDueToPolicy")
    assert code(im.delete_policy, p, T0) == (409, "ImmutabilityPolicyDeleteOnLockedPolicy")
    assert im.set_policy(p, T0 + 10 * H, im.LOCKED, T0).policy == p.policy
    assert im.set_policy(p, T0 + 30 * H, im.LOCKED, T0).policy == im.Policy(T0 + 30 * H, im.LOCKED)
    later = T0 + 10 * H
    assert p.mode(later) == im.MUTABLE
    assert im.delete_policy(p, later).policy is None
    assert im.set_policy(p, later + H, im.UNLOCKED, later).mode(later) == im.UNLOCKED


@pytest.mark.parametrize(
    ("until", "mode"), [(T0, im.UNLOCKED), (T0 - H, im.LOCKED), (T0 + H, "Mutable"), (T0 + H, "locked")]
)
def test_bad_policy_values_are_400(until: datetime, mode: str) -> None:
    assert code(im.set_policy, im.Protection(), until, mode, T0) == (400, "InvalidHeaderValue")


def test_writes_and_deletes_are_refused_while_the_policy_is_in_force() -> None:
    p = im.set_policy(im.Protection(), T0 + H, im.UNLOCKED, T0)
    for op in ("PutBlob", "PutBlockList", "SetBlobMetadata", "DeleteBlob", "AppendBlock", "CopyBlob"):
        assert code(im.check, op, p, T0) == (409, "BlobImmutableDueToPolicy")
    for op in ("GetBlob", "GetBlobProperties", "SetBlobTags", "SetBlobTier", "SetLegalHold"):
        im.check(op, p, T0)
    im.check("DeleteBlob", p, T0 + H)  # expired


def test_legal_hold_is_reported_first_and_has_no_expiry() -> None:
    p = im.set_legal_hold(im.set_policy(im.Protection(), T0 + H, im.LOCKED, T0), True)
    assert code(im.check, "SetBlobMetadata", p, T0) == (409, "BlobImmutableDueToLegalHold")
    assert code(im.check, "DeleteBlob", p, T0 + 1000 * H) == (409, "BlobImmutableDueToLegalHold")
    released = im.set_legal_hold(p, False)
    assert code(im.check, "SetBlobMetadata", released, T0) == (409, "BlobImmutableDueToPolicy")
    im.check("SetBlobMetadata", released, T0 + H)


def test_protected_append_writes() -> None:
    p = im.set_policy(im.Protection(allow_protected_appends=True), T0 + H, im.UNLOCKED, T0)
    im.check("AppendBlock", p, T0)
    im.check("AppendBlockFromUrl", p, T0)
    assert code(im.check, "PutBlob", p, T0) == (409, "BlobImmutableDueToPolicy")
    held = im.set_legal_hold(p, True)
    assert code(im.check, "AppendBlock", held, T0) == (409, "BlobImmutableDueToLegalHold")
    im.check("AppendBlock", im.Protection(legal_hold=True, appends_under_hold=True), T0)


ops = st.sampled_from(["set_unlocked", "set_locked", "delete", "hold", "release", "tick"])


@given(st.lists(st.tuples(ops, st.integers(1, 48)), max_size=40))
def test_a_locked_policy_never_ends_early(steps: list[tuple[str, int]]) -> None:
    """Whatever is tried, once locked the protected-until time never moves earlier."""
    now, p, floor = T0, im.Protection(), None
    for op, hours in steps:
        try:
            if op == "set_unlocked":
                p = im.set_policy(p, now + hours * H, im.UNLOCKED, now)
            elif op == "set_locked":
                p = im.set_policy(p, now + hours * H, im.LOCKED, now)
            elif op == "delete":
                p = im.delete_policy(p, now)
            elif op == "hold":
                p = im.set_legal_hold(p, True)
            elif op == "release":
                p = im.set_legal_hold(p, False)
            else:
                now += hours * H
        except ServiceError:
            pass
        if p.policy is not None and p.policy.mode == im.LOCKED and p.policy.active(now):
            floor = p.policy.until if floor is None or floor < now else max(floor, p.policy.until)
        if floor is not None and now < floor:
            assert p.policy is not None and p.policy.until >= floor
            assert code(im.check, "DeleteBlob", p, now)[0] == 409
