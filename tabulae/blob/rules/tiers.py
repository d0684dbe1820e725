"""Access tiers of block blobs as a pure state machine with a clock ("Set Blob Tier", "Access
tiers for blob data", "Rehydrate an archived blob to an online tier", "Get Blob Properties").

A block blob is Hot, Cool, Cold (REST 2021-12-02 and later) or Archive. Until a tier is set
explicitly the blob follows the account's default and says so (``AccessTierInferred: true``).
Archive is offline: reads are 409 ``BlobArchived``. Setting an online tier on an archived blob
starts a rehydration (202 Accepted) that completes after a delay which depends on the priority
(``Standard`` or ``High``); until then the blob is still Archive with ``ArchiveStatus``
``rehydrate-pending-to-<tier>``. Set Blob Tier answers, by current state and requested tier
("Set Blob Tier" status table)::

                          to Hot   to Cool   to Cold   to Archive
    Hot / Cool / Cold      200      200       200       200
    Archive                202      202       202       200
    rehydrating to Hot     202      409       409       409
    rehydrating to Cool    409      202       409       409

(the Cold and Smart rows and columns follow the same pattern; assumed). The 409 is
``BlobBeingRehydrated``. Smart (REST 2026-06-06 and later) lets the service pick the tier; a
Smart blob also reports the tier chosen (``x-ms-smart-access-tier``), here always Hot.
A pending rehydration's priority may be raised from Standard to High, never lowered (assumed
from "Rehydrate an archived blob": the priority is changed by calling Set Blob Tier again).
Setting a tier never changes the blob's ETag or Last-Modified; it sets ``AccessTierChangeTime``.
Page and append blobs take no standard tier: 400 ``AccessTierNotSupportedForBlobType``
(Azurite's code). Page blobs of a premium page blob account have tiers of their own, P4..P80
(:mod:`tabulae.blob.rules.premium`), kept in the same record field.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from tabulae.model.blobs import VERSION_PREFIX, BlobRecord
from tabulae.model.errors import ServiceError

HOT, COOL, COLD, ARCHIVE, SMART = "Hot", "Cool", "Cold", "Archive", "Smart"
STANDARD, HIGH = "Standard", "High"
ONLINE = (HOT, COOL, COLD, SMART)
COLD_VERSION = "2021-12-02"
SMART_VERSION = "2026-06-06"
SNAPSHOT_TIER_VERSION = "2018-11-09"
"""The first version that shows a snapshot's tier (in Get Blob Properties and List Blobs), as
Azure answered the JS SDK: none for a snapshot at x-ms-version 2018-03-28 (its nock recordings of
April and June 2019 on two accounts, where the base blob beside it showed Hot, inferred), Cool,
inferred at 2018-11-09 (August 2019)."""


def shows_tier(record: BlobRecord, version: str) -> bool:
    """Whether an answer at ``version`` shows ``record``'s tier: a snapshot's only from
    :data:`SNAPSHOT_TIER_VERSION` (versions and base blobs always)."""
    is_snapshot = bool(record.snapshot) and not record.snapshot.startswith(VERSION_PREFIX)
    return not is_snapshot or version >= SNAPSHOT_TIER_VERSION


#: Seconds a rehydration takes by priority, unless the caller passes its own delays.
DEFAULT_DELAYS = {STANDARD: 1.0, HIGH: 0.5}


def tiers_for(version: str) -> tuple[str, ...]:
    """The standard tiers a request of REST ``version`` may name."""
    if version >= SMART_VERSION:
        return (HOT, COOL, COLD, ARCHIVE, SMART)
    return (HOT, COOL, COLD, ARCHIVE) if version >= COLD_VERSION else (HOT, COOL, ARCHIVE)


def parse_tier(value: str, version: str, header: str = "x-ms-access-tier") -> str:
    """A tier header in Azure's spelling (matched case-insensitively), else 400 InvalidHeaderValue."""
    for tier in tiers_for(version):
        if value.strip().lower() == tier.lower():
            return tier
    raise ServiceError("InvalidHeaderValue", fields=(("HeaderName", header), ("HeaderValue", value)))


def parse_priority(value: str | None) -> str:
    """``x-ms-rehydrate-priority``: Standard (the default) or High, else 400 InvalidHeaderValue."""
    if value is None:
        return STANDARD
    for priority in (STANDARD, HIGH):
        if value.strip().lower() == priority.lower():
            return priority
    raise ServiceError(
        "InvalidHeaderValue", fields=(("HeaderName", "x-ms-rehydrate-priority"), ("HeaderValue", value))
    )


def check_blob_type(blob_type: str) -> None:
    """Standard tiers apply to block blobs only."""
    if blob_type != "BlockBlob":
        raise ServiceError("AccessTierNotSupportedForBlobType")


@dataclass(frozen=True, slots=True)
class TierState:
    """A block blob's tier. Times are epoch seconds; ``rehydrate_to`` is set while pending."""

    tier: str
    inferred: bool = True
    changed_at: float | None = None
    rehydrate_to: str | None = None
    priority: str | None = None
    rehydrated_at: float | None = None


@dataclass(frozen=True, slots=True)
class TierView:
    """What Get Blob Properties and List Blobs show: ``x-ms-access-tier`` / ``AccessTier``,
    ``-inferred``, ``x-ms-archive-status``, ``x-ms-rehydrate-priority``, ``-change-time``."""

    access_tier: str
    inferred: bool
    archive_status: str | None
    rehydrate_priority: str | None
    changed_at: float | None

    @property
    def smart_tier(self) -> str | None:
        """The tier a Smart blob is in now: this service keeps every Smart blob Hot."""
        return HOT if self.access_tier == SMART else None


@dataclass(frozen=True, slots=True)
class TierPolicy:
    """The account-wide facts tiers follow: the default tier blobs infer (the account's "access
    tier" setting) and how long a Standard rehydration takes (High takes half as long)."""

    default_tier: str = HOT
    rehydrate_seconds: float = 10.0

    def delay(self, priority: str) -> float:
        return self.rehydrate_seconds if priority == STANDARD else self.rehydrate_seconds / 2


def state_of(record: BlobRecord, account_default: str) -> TierState:
    """A block blob's tier as its record stores it (no ``tier``: the default, inferred)."""
    if record.tier is None:
        return TierState(account_default, changed_at=record.tier_changed)
    return TierState(
        record.tier,
        inferred=False,
        changed_at=record.tier_changed,
        rehydrate_to=record.rehydrate_to,
        priority=record.rehydrate_priority,
        rehydrated_at=record.rehydrate_at,
    )


def with_state(record: BlobRecord, state: TierState) -> BlobRecord:
    """``record`` keeping ``state`` (an inferred tier is stored as no tier at all)."""
    return replace(
        record,
        tier=None if state.inferred else state.tier,
        tier_changed=state.changed_at,
        rehydrate_to=state.rehydrate_to,
        rehydrate_priority=state.priority if state.rehydrate_to is not None else None,
        rehydrate_at=state.rehydrated_at if state.rehydrate_to is not None else None,
    )


def kept_on_overwrite(record: BlobRecord, base: BlobRecord) -> BlobRecord:
    """A Put Blob that names no tier over a block blob whose Hot, Cool or Cold tier was set
    keeps that tier and the time it was set: Azure answered Get Blob after such an overwrite
    with ``x-ms-access-tier: Cold`` and the earlier ``x-ms-access-tier-change-time`` (the Rust
    SDK's recording test_leased_blob_operations, x-ms-version 2026-04-06). An archived or
    rehydrating blob, a Smart tier and the other writes (Put Block List, copies) are not
    recorded: those start from the default, as before."""
    if base.tier not in (HOT, COOL, COLD) or base.rehydrate_to is not None:
        return record
    return replace(record, tier=base.tier, tier_changed=base.tier_changed)


def initial(tier: str | None, account_default: str, now: float) -> TierState:
    """A new block blob: the tier its upload named, or the account default, inferred."""
    if tier is None:
        return TierState(account_default)
    return TierState(tier, inferred=False, changed_at=now)


def settle(state: TierState, now: float) -> TierState:
    """The state at ``now``: a rehydration whose time has come is complete."""
    if state.rehydrate_to is not None and state.rehydrated_at is not None and now >= state.rehydrated_at:
        return TierState(state.rehydrate_to, inferred=False, changed_at=state.rehydrated_at)
    return state


def set_tier(
    state: TierState,
    target: str,
    now: float,
    priority: str = STANDARD,
    delay: Callable[[str], float] = DEFAULT_DELAYS.__getitem__,
) -> tuple[TierState, int]:
    """Set Blob Tier: the new state and the status to answer (200 or 202), or 409
    BlobBeingRehydrated. ``delay(priority)`` is how long a rehydration takes."""
    state = settle(state, now)
    if state.rehydrate_to is not None:
        if target != state.rehydrate_to:
            raise ServiceError("BlobBeingRehydrated")
        if priority == HIGH and state.priority == STANDARD:
            due = min(state.rehydrated_at or now, now + delay(HIGH))
            return replace(state, priority=HIGH, rehydrated_at=due), 202
        return state, 202
    if state.tier == ARCHIVE and target in ONLINE:
        pending = TierState(ARCHIVE, False, state.changed_at, target, priority, now + delay(priority))
        return pending, 202
    if state.tier == target and not state.inferred:
        return state, 200
    return TierState(target, inferred=False, changed_at=now), 200


def check_change_time(
    changed_at: float | None, created_at: float, modified_since: int | None, unmodified_since: int | None
) -> None:
    """Delete Blob's ``x-ms-access-tier-if-(un)modified-since`` (REST 2024-08-04 and later), to the
    second, against the tier's change time (a blob whose tier never changed: its creation time,
    assumed); 412 AccessTierChangeTimeConditionNotMet when one fails."""
    second = int(changed_at if changed_at is not None else created_at)
    if (modified_since is not None and second <= modified_since) or (
        unmodified_since is not None and second > unmodified_since
    ):
        raise ServiceError("AccessTierChangeTimeConditionNotMet")


def check_readable(state: TierState, now: float) -> None:
    """Reads of an archived blob, rehydrating or not, are 409 BlobArchived."""
    if settle(state, now).tier == ARCHIVE:
        raise ServiceError("BlobArchived")


def view(state: TierState, now: float) -> TierView:
    """The tier properties at ``now``."""
    state = settle(state, now)
    status = None if state.rehydrate_to is None else f"rehydrate-pending-to-{state.rehydrate_to.lower()}"
    return TierView(state.tier, state.inferred, status, state.priority, state.changed_at)


def header_pairs(view: TierView, time_text: Callable[[float], str]) -> list[tuple[str, str]]:
    """Get Blob Properties' tier headers ("Get Blob Properties"): the inferred flag only when
    true, the archive status and priority only while a rehydration is pending, the change time
    only once a tier was set. ``time_text`` writes an RFC 1123 date."""
    pairs = [("x-ms-access-tier", view.access_tier)]
    if view.inferred:
        pairs.append(("x-ms-access-tier-inferred", "true"))
    if view.archive_status is not None:
        pairs.append(("x-ms-archive-status", view.archive_status))
    if view.smart_tier is not None:
        pairs.append(("x-ms-smart-access-tier", view.smart_tier))
    if view.rehydrate_priority is not None:
        pairs.append(("x-ms-rehydrate-priority", view.rehydrate_priority))
    if view.changed_at is not None:
        pairs.append(("x-ms-access-tier-change-time", time_text(view.changed_at)))
    return pairs


def listing_pairs(view: TierView, time_text: Callable[[float], str]) -> list[tuple[str, str]]:
    """The same facts as List Blobs ``Properties`` elements, in the order of the service's own
    schema (as azure-storage-blob's generated ``BlobPropertiesInternal`` lists them)."""
    pairs = [("AccessTier", view.access_tier)]
    if view.inferred:
        pairs.append(("AccessTierInferred", "true"))
    if view.archive_status is not None:
        pairs.append(("ArchiveStatus", view.archive_status))
    if view.smart_tier is not None:
        pairs.append(("SmartAccessTier", view.smart_tier))
    if view.changed_at is not None:
        pairs.append(("AccessTierChangeTime", time_text(view.changed_at)))
    if view.rehydrate_priority is not None:
        pairs.append(("RehydratePriority", view.rehydrate_priority))
    return pairs
