"""Container-level WORM policies as pure rules ("Container-level WORM policies for immutable blob
data", "Time-based retention policies", "Legal holds", and the management plane's "Blob
Containers - Create Or Update / Lock / Extend / Delete Immutability Policy", "Set / Clear Legal
Hold").

Azure sets these through its resource manager, not the Blob REST API; Tabulae takes them through
its signed admin endpoint, as the document :func:`change` reads. What the data plane shows of them
(``x-ms-has-immutability-policy``, ``x-ms-has-legal-hold``) and what it refuses (:func:`check`) is
Azure's:

* While a legal hold is on, or while a blob is within its effective retention (its creation plus
  the policy's days; for an append blob under ``allowProtectedAppendWrites``, its last
  modification), Delete Blob, overwrites (Put Blob, Put Block List, Copy Blob onto an existing
  blob), Set Blob Metadata, Set Blob Properties, Put Page, Snapshot Blob, Incremental Copy and
  Append Block are refused with 409 ``BlobImmutableDueToLegalHold`` / ``BlobImmutableDueToPolicy``.
  Creating a new blob is allowed.
* Once a blob's retention is over (no hold), it may be deleted but still not overwritten.
* Append Block is allowed with ``allowProtectedAppendWrites`` (time-based policy) or
  ``allowProtectedAppendWritesAll`` (also under a legal hold); the two are mutually exclusive.
* An unlocked policy may be changed freely or deleted; a locked one may only be extended (its
  append setting fixed), never shortened, unlocked or deleted, and extended at most five times
  ("A maximum of five increases to the effective retention period is allowed over the lifetime
  of a locked policy"; the management plane's error for a sixth is not public, so the endpoint
  refuses it as any other change it refuses). Retention is 1 to 146,000 days.
  A legal hold has 1 to 10 tags of 3 to 23 alphanumeric characters.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tabulae.model.blobs import ContainerWorm
from tabulae.model.errors import ServiceError

MAX_DAYS = 146_000
MAX_TAGS = 10
MAX_EXTENSIONS = 5  # increases of a locked policy's retention over its lifetime
DAY_SECONDS = 86_400.0
_FIELDS = {
    "immutability-period-days": "days",
    "locked": "locked",
    "allow-protected-append-writes": "allow_appends",
    "allow-protected-append-writes-all": "allow_appends_all",
    "legal-hold-tags": "hold_tags",
}


class WormError(ValueError):
    """A change the admin endpoint refuses; the message says which field and why."""


def document(worm: ContainerWorm | None) -> dict[str, Any]:
    """The admin endpoint's JSON view of a container's policy and hold."""
    worm = worm or ContainerWorm()
    return {
        "immutability-period-days": worm.days,
        "state": ("Locked" if worm.locked else "Unlocked") if worm.days else None,
        "allow-protected-append-writes": worm.allow_appends,
        "allow-protected-append-writes-all": worm.allow_appends_all,
        "legal-hold-tags": list(worm.hold_tags),
    }


def change(current: ContainerWorm | None, changes: Any) -> ContainerWorm | None:
    """The policy after the admin endpoint's document ``changes`` (the fields it names), or
    :class:`WormError`. ``immutability-period-days`` 0 deletes the time-based policy."""
    if not isinstance(changes, dict):
        raise WormError("expected a JSON object of the fields to change")
    old = current or ContainerWorm()
    values: dict[str, Any] = {}
    for name, value in changes.items():
        if name not in _FIELDS:
            raise WormError(f"{name}: not a field (expected one of {', '.join(_FIELDS)})")
        values[_FIELDS[name]] = _checked(name, value)
    new = replace(old, **values)
    if new.allow_appends and new.allow_appends_all:
        raise WormError("allow-protected-append-writes and …-all: only one of them may be on")
    if old.locked and old.days:
        if not new.locked:
            raise WormError("locked: a locked policy cannot be unlocked")
        if new.days < old.days:
            raise WormError("immutability-period-days: a locked policy can only be extended")
        if (new.allow_appends, new.allow_appends_all) != (old.allow_appends, old.allow_appends_all):
            raise WormError("allow-protected-append-writes: fixed once the policy is locked")
        if new.days > old.days:
            if old.extensions >= MAX_EXTENSIONS:
                limit = f"can be extended at most {MAX_EXTENSIONS} times"
                raise WormError(f"immutability-period-days: a locked policy {limit}")
            new = replace(new, extensions=old.extensions + 1)
    if new.locked and not new.days:
        raise WormError("locked: there is no time-based policy to lock")
    if not new.days:
        new = replace(new, locked=False)
    if new == ContainerWorm():
        return None
    return new


def _checked(name: str, value: Any) -> Any:
    if name == "immutability-period-days":
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_DAYS:
            raise WormError(f"{name}: expected 0 (no policy) or a number of days from 1 to {MAX_DAYS}")
        return value
    if name == "legal-hold-tags":
        if not isinstance(value, list) or len(value) > MAX_TAGS:
            raise WormError(f"{name}: expected a list of at most {MAX_TAGS} tags")
        for tag in value:
            if not isinstance(tag, str) or not 3 <= len(tag) <= 23 or not (tag.isascii() and tag.isalnum()):
                raise WormError(f"{name}: a tag is 3 to 23 letters and digits, not {tag!r}")
        return tuple(dict.fromkeys(tag.lower() for tag in value))
    if not isinstance(value, bool):
        raise WormError(f"{name}: expected true or false")
    return value


def has_policy(worm: ContainerWorm | None) -> bool:
    return worm is not None and worm.days > 0


def has_hold(worm: ContainerWorm | None) -> bool:
    return worm is not None and bool(worm.hold_tags)


def appends_allowed(worm: ContainerWorm) -> bool:
    """Whether Append Block may add to a protected append blob."""
    if worm.hold_tags and not worm.allow_appends_all:
        return False
    return not worm.days or worm.allow_appends or worm.allow_appends_all


def retained_until(worm: ContainerWorm, created: float, modified: float, append_blob: bool) -> float:
    """When a blob's effective retention ends (epoch seconds)."""
    since = modified if append_blob and (worm.allow_appends or worm.allow_appends_all) else created
    return since + worm.days * DAY_SECONDS


def check(worm: ContainerWorm, *, delete: bool, append: bool, retained: bool) -> None:
    """Raise Azure's error if a change to an existing blob may not happen: ``delete`` (Delete
    Blob), ``append`` (Append Block and nothing else), else any other change of its data or
    properties; ``retained``: the blob is within its effective retention."""
    if append:
        if appends_allowed(worm):
            return
        raise ServiceError("BlobImmutableDueToLegalHold" if worm.hold_tags else "BlobImmutableDueToPolicy")
    if worm.hold_tags:
        raise ServiceError("BlobImmutableDueToLegalHold")
    if worm.days and (retained or not delete):
        raise ServiceError("BlobImmutableDueToPolicy")


def check_container_delete(worm: ContainerWorm | None, any_blob: bool) -> None:
    """Raise Azure's error if Delete Container may not remove a container with policy ``worm``
    ("Container-level WORM policies", Deletion: a container with a policy must be empty to be
    deleted; a legal hold refuses it outright). ``any_blob``: the container holds any blob."""
    if worm is None:
        return
    if worm.hold_tags:
        raise ServiceError("ContainerHasLegalHold")
    if worm.days and any_blob:
        # The unlocked case has no public code of its own: its blobs are what is immutable.
        raise ServiceError("ContainerImmutabilityPolicyLocked" if worm.locked else "BlobImmutableDueToPolicy")
