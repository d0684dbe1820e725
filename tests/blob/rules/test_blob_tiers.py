"""Access tiers: tier names by version, the Set Blob Tier status table ("Set Blob Tier"),
rehydration with a clock and priorities, reads of archived blobs, and the properties shown."""

from __future__ import annotations

import pytest

from tabulae.blob.rules import tiers
from tabulae.blob.rules.tiers import ARCHIVE, COLD, COOL, HIGH, HOT, STANDARD, TierState
from tabulae.model.blobs import BlobRecord
from tabulae.model.errors import ServiceError

DELAYS = {STANDARD: 100.0, HIGH: 10.0}.__getitem__


def error_of(action: object) -> ServiceError:
    with pytest.raises(ServiceError) as caught:
        action()  # type: ignore[operator]
    return caught.value


def test_tier_names_by_version_and_case() -> None:
    assert tiers.parse_tier("hot", "2020-10-02") == HOT
    assert tiers.parse_tier("ARCHIVE", "2020-10-02") == ARCHIVE
    assert tiers.parse_tier("Cold", "2021-12-02") == COLD
    for value, version in (("Cold", "2021-10-04"), ("P10", "2025-01-05"), ("", "2025-01-05")):
        error = error_of(lambda value=value, version=version: tiers.parse_tier(value, version))
        assert (error.status, error.code) == (400, "InvalidHeaderValue")
        assert error.fields[0] == ("HeaderName", "x-ms-access-tier")


def test_priorities() -> None:
    assert tiers.parse_priority(None) == STANDARD
    assert tiers.parse_priority("high") == HIGH
    assert error_of(lambda: tiers.parse_priority("Urgent")).fields[0] == (
        "HeaderName",
        "x-ms-rehydrate-priority",
    )


def test_only_block_blobs_take_standard_tiers() -> None:
    tiers.check_blob_type("BlockBlob")
    for blob_type in ("PageBlob", "AppendBlob"):
        error = error_of(lambda blob_type=blob_type: tiers.check_blob_type(blob_type))
        assert (error.status, error.code) == (400, "AccessTierNotSupportedForBlobType")


def test_a_new_blob_infers_the_account_default_until_a_tier_is_set() -> None:
    state = tiers.initial(None, HOT, 5.0)
    assert tiers.view(state, 5.0) == tiers.TierView(HOT, True, None, None, None)
    state, status = tiers.set_tier(state, HOT, 7.0)
    assert status == 200
    assert tiers.view(state, 7.0) == tiers.TierView(HOT, False, None, None, 7.0)
    explicit = tiers.initial(COOL, HOT, 9.0)
    assert tiers.view(explicit, 9.0) == tiers.TierView(COOL, False, None, None, 9.0)


ONLINE_TARGETS = (HOT, COOL, COLD)


@pytest.mark.parametrize("current", ONLINE_TARGETS)
@pytest.mark.parametrize("target", (*ONLINE_TARGETS, ARCHIVE))
def test_online_blobs_change_tier_at_once(current: str, target: str) -> None:
    state, status = tiers.set_tier(TierState(current, inferred=False, changed_at=1.0), target, 2.0)
    assert status == 200
    assert state.tier == target and state.rehydrate_to is None


@pytest.mark.parametrize("target", ONLINE_TARGETS)
def test_archive_to_online_is_accepted_and_completes_after_the_delay(target: str) -> None:
    archived = TierState(ARCHIVE, inferred=False, changed_at=1.0)
    state, status = tiers.set_tier(archived, target, 10.0, STANDARD, DELAYS)
    assert status == 202
    pending = tiers.view(state, 50.0)
    assert pending == tiers.TierView(ARCHIVE, False, f"rehydrate-pending-to-{target.lower()}", STANDARD, 1.0)
    assert error_of(lambda: tiers.check_readable(state, 50.0)).code == "BlobArchived"
    done = tiers.view(state, 110.0)
    assert done == tiers.TierView(target, False, None, None, 110.0)
    tiers.check_readable(state, 110.0)


def test_archive_to_archive_is_200() -> None:
    archived = TierState(ARCHIVE, inferred=False, changed_at=1.0)
    assert tiers.set_tier(archived, ARCHIVE, 2.0) == (archived, 200)


@pytest.mark.parametrize("pending_to", ONLINE_TARGETS)
@pytest.mark.parametrize("target", (*ONLINE_TARGETS, ARCHIVE))
def test_while_rehydrating_only_the_same_target_is_accepted(pending_to: str, target: str) -> None:
    state, _ = tiers.set_tier(TierState(ARCHIVE, inferred=False), pending_to, 0.0, STANDARD, DELAYS)
    if target == pending_to:
        assert tiers.set_tier(state, target, 1.0, STANDARD, DELAYS) == (state, 202)
    else:
        error = error_of(lambda: tiers.set_tier(state, target, 1.0, STANDARD, DELAYS))
        assert (error.status, error.code) == (409, "BlobBeingRehydrated")


def test_priority_can_be_raised_not_lowered() -> None:
    state, _ = tiers.set_tier(TierState(ARCHIVE, inferred=False), HOT, 0.0, STANDARD, DELAYS)
    raised, status = tiers.set_tier(state, HOT, 5.0, HIGH, DELAYS)
    assert status == 202 and raised.priority == HIGH and raised.rehydrated_at == 15.0
    assert tiers.set_tier(raised, HOT, 6.0, STANDARD, DELAYS) == (raised, 202)
    assert tiers.view(raised, 15.0).access_tier == HOT


def test_high_priority_rehydrates_sooner() -> None:
    standard, _ = tiers.set_tier(TierState(ARCHIVE, inferred=False), COOL, 0.0, STANDARD, DELAYS)
    high, _ = tiers.set_tier(TierState(ARCHIVE, inferred=False), COOL, 0.0, HIGH, DELAYS)
    assert tiers.view(high, 20.0).access_tier == COOL
    assert tiers.view(standard, 20.0).access_tier == ARCHIVE


def test_archived_blobs_refuse_reads_online_ones_do_not() -> None:
    assert error_of(lambda: tiers.check_readable(TierState(ARCHIVE), 0.0)).status == 409
    tiers.check_readable(TierState(COOL), 0.0)


def test_rendered_properties() -> None:
    def text(seconds: float) -> str:
        return f"t{seconds:g}"

    inferred = tiers.view(tiers.initial(None, HOT, 0.0), 0.0)
    assert tiers.header_pairs(inferred, text) == [
        ("x-ms-access-tier", HOT),
        ("x-ms-access-tier-inferred", "true"),
    ]
    state, _ = tiers.set_tier(TierState(ARCHIVE, inferred=False, changed_at=3.0), COLD, 5.0, HIGH, DELAYS)
    pending = tiers.view(state, 6.0)
    assert tiers.header_pairs(pending, text) == [
        ("x-ms-access-tier", ARCHIVE),
        ("x-ms-archive-status", "rehydrate-pending-to-cold"),
        ("x-ms-rehydrate-priority", HIGH),
        ("x-ms-access-tier-change-time", "t3"),
    ]
    assert tiers.listing_pairs(pending, text) == [
        ("AccessTier", ARCHIVE),
        ("ArchiveStatus", "rehydrate-pending-to-cold"),
        ("AccessTierChangeTime", "t3"),
        ("RehydratePriority", HIGH),
    ]
    assert tiers.listing_pairs(tiers.view(state, 15.0), text) == [
        ("AccessTier", COLD),
        ("AccessTierChangeTime", "t15"),
    ]


def test_smart_from_its_version_and_what_it_shows() -> None:
    assert tiers.parse_tier("smart", "2026-06-06") == tiers.SMART
    assert error_of(lambda: tiers.parse_tier("Smart", "2026-04-06")).code == "InvalidHeaderValue"
    view = tiers.view(tiers.initial(tiers.SMART, HOT, 1.0), 1.0)
    assert view.smart_tier == HOT
    assert ("x-ms-smart-access-tier", HOT) in tiers.header_pairs(view, str)
    assert ("SmartAccessTier", HOT) in tiers.listing_pairs(view, str)
    pending, status = tiers.set_tier(tiers.initial(ARCHIVE, HOT, 1.0), tiers.SMART, 2.0, delay=DELAYS)
    assert status == 202 and tiers.view(pending, 2.0).archive_status == "rehydrate-pending-to-smart"


def test_records_keep_the_state() -> None:
    record = BlobRecord("b", "", "BlockBlob", 1, 1, 1)
    assert tiers.state_of(record, COOL) == TierState(COOL)  # no tier stored: the default, inferred
    pending, _ = tiers.set_tier(tiers.initial(ARCHIVE, HOT, 1.0), COOL, 2.0, HIGH, DELAYS)
    stored = tiers.with_state(record, pending)
    assert (stored.tier, stored.rehydrate_to, stored.rehydrate_priority, stored.rehydrate_at) == (
        ARCHIVE,
        COOL,
        HIGH,
        12.0,
    )
    assert tiers.state_of(stored, HOT) == pending
    done = tiers.with_state(stored, tiers.settle(pending, 20.0))
    assert (done.tier, done.tier_changed, done.rehydrate_to, done.rehydrate_at) == (COOL, 12.0, None, None)
    assert tiers.with_state(done, TierState(HOT)).tier is None  # inferred again: nothing stored


def test_policy_delays() -> None:
    policy = tiers.TierPolicy(COOL, 8.0)
    assert (policy.delay(STANDARD), policy.delay(HIGH)) == (8.0, 4.0)


@pytest.mark.parametrize(
    ("changed", "modified_since", "unmodified_since", "met"),
    [
        (100.5, 99, None, True),
        (100.5, 100, None, False),  # to the second: not modified after 100
        (100.5, None, 100, True),
        (100.5, None, 99, False),
        (None, 40, None, True),  # never changed: the creation time (50) counts
        (None, 50, None, False),
    ],
)
def test_change_time_conditions(
    changed: float | None, modified_since: int | None, unmodified_since: int | None, met: bool
) -> None:
    def check() -> None:
        tiers.check_change_time(changed, 50.0, modified_since, unmodified_since)

    if met:
        check()
    else:
        error = error_of(check)
        assert (error.status, error.code) == (412, "AccessTierChangeTimeConditionNotMet")
