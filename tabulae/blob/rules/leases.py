"""Leases on blobs and containers ("Lease Blob", "Lease Container"): the state machine of the
five lease actions, and what a lease means for the operations that present (or omit) an id.

A lease is stored with absolute times (:class:`~tabulae.model.blobs.Lease`), and its state is
worked out against the clock when it is read: a fixed lease past its end is *expired*, a
breaking lease past its break time is *broken*. So no timer runs, and every process agrees.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import replace

from tabulae.model.blobs import Lease
from tabulae.model.errors import ServiceError

INFINITE = -1
MIN_DURATION, MAX_DURATION = 15, 60
MAX_BREAK_PERIOD = 60


def current(lease: Lease, now: float) -> Lease:
    """The lease as of ``now``: ``expired`` and ``broken`` are states time moves a lease into."""
    if lease.state == "leased" and lease.duration != INFINITE and lease.ends <= now:
        return replace(lease, state="expired")
    if lease.state == "breaking" and lease.ends <= now:
        return replace(lease, state="broken")
    return lease


_AVAILABLE = ("unlocked", "available", None)


def describe(lease: Lease, now: float) -> tuple[str, str, str | None]:
    """(status, state, duration) as the headers and listings show them."""
    if lease.state == "available":
        return _AVAILABLE
    lease = current(lease, now)
    locked = lease.state in ("leased", "breaking")
    duration = None
    if lease.state == "leased":
        duration = "infinite" if lease.duration == INFINITE else "fixed"
    return ("locked" if locked else "unlocked", lease.state, duration)


def parse_lease_id(value: str | None, header: str) -> str | None:
    """A lease id is a GUID; anything else is 400 InvalidHeaderValue."""
    if value is None:
        return None
    try:
        uuid.UUID(value)
    except ValueError:
        raise ServiceError(
            "InvalidHeaderValue", fields=(("HeaderName", header), ("HeaderValue", value))
        ) from None
    return value


def parse_duration(value: str | None) -> int:
    if value is None:
        raise ServiceError("MissingRequiredHeader", fields=(("HeaderName", "x-ms-lease-duration"),))
    try:
        duration = int(value)
    except ValueError:
        duration = 0
    if duration != INFINITE and not MIN_DURATION <= duration <= MAX_DURATION:
        raise ServiceError(
            "InvalidHeaderValue", fields=(("HeaderName", "x-ms-lease-duration"), ("HeaderValue", value))
        )
    return duration


def parse_break_period(value: str | None) -> int | None:
    if value is None:
        return None
    if not value.isdigit() or int(value) > MAX_BREAK_PERIOD:
        raise ServiceError(
            "InvalidHeaderValue", fields=(("HeaderName", "x-ms-lease-break-period"), ("HeaderValue", value))
        )
    return int(value)


def _same(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and a.lower() == b.lower()


def acquire(lease: Lease, now: float, duration: int, proposed: str | None) -> Lease:
    lease = current(lease, now)
    if lease.state == "breaking":
        raise ServiceError("LeaseIsBreakingAndCannotBeAcquired")
    if lease.state == "leased" and not _same(lease.lease_id, proposed):
        raise ServiceError("LeaseAlreadyPresent")
    lease_id = proposed or str(uuid.uuid4())
    ends = 0.0 if duration == INFINITE else now + duration
    return Lease("leased", lease_id, duration, ends)


def renew(lease: Lease, now: float, lease_id: str) -> Lease:
    lease = current(lease, now)
    if lease.state == "available":
        raise ServiceError("LeaseNotPresentWithLeaseOperation")
    if not _same(lease.lease_id, lease_id):
        raise ServiceError("LeaseIdMismatchWithLeaseOperation")
    if lease.state in ("breaking", "broken"):
        raise ServiceError("LeaseIsBrokenAndCannotBeRenewed")
    ends = 0.0 if lease.duration == INFINITE else now + lease.duration
    return Lease("leased", lease.lease_id, lease.duration, ends)


def change(lease: Lease, now: float, lease_id: str, proposed: str) -> Lease:
    lease = current(lease, now)
    if lease.state == "available":
        raise ServiceError("LeaseNotPresentWithLeaseOperation")
    if not (_same(lease.lease_id, lease_id) or _same(lease.lease_id, proposed)):
        raise ServiceError("LeaseIdMismatchWithLeaseOperation")
    if lease.state == "breaking":
        raise ServiceError("LeaseIsBreakingAndCannotBeChanged")
    if lease.state != "leased":
        raise ServiceError("LeaseNotPresentWithLeaseOperation")
    return replace(lease, lease_id=proposed)


def release(lease: Lease, now: float, lease_id: str) -> Lease:
    lease = current(lease, now)
    if lease.state == "available":
        raise ServiceError("LeaseNotPresentWithLeaseOperation")
    if not _same(lease.lease_id, lease_id):
        raise ServiceError("LeaseIdMismatchWithLeaseOperation")
    return Lease()


def break_lease(lease: Lease, now: float, period: int | None) -> tuple[Lease, int]:
    """Break a lease: at once, after ``period`` seconds, or (without one) when a fixed lease would
    have ended. Returns the lease and the whole seconds until it is broken (``x-ms-lease-time``)."""
    lease = current(lease, now)
    if lease.state == "available":
        raise ServiceError("LeaseNotPresentWithLeaseOperation")
    if lease.state in ("broken", "expired"):
        return replace(lease, state="broken", ends=now), 0
    if lease.state == "leased":
        remaining = math.inf if lease.duration == INFINITE else lease.ends - now
        wait = remaining if period is None else min(period, remaining)
        if lease.duration == INFINITE and period is None:
            wait = 0
    else:  # breaking: a shorter period brings the break forward
        remaining = lease.ends - now
        wait = remaining if period is None else min(period, remaining)
    if wait <= 0:
        return replace(lease, state="broken", ends=now), 0
    return replace(lease, state="breaking", ends=now + wait), math.ceil(wait)


def after_write(lease: Lease, now: float) -> Lease:
    """A write to a blob whose lease expired ends that lease: it can no longer be renewed."""
    return Lease() if current(lease, now).state == "expired" else lease


def check_blob_access(lease: Lease, now: float, lease_id: str | None, *, write: bool) -> None:
    """What a lease means for an operation on the blob presenting ``lease_id`` (or none)."""
    lease = current(lease, now)
    if lease_id is None:
        if write and lease.state in ("leased", "breaking"):
            raise ServiceError("LeaseIdMissing")
        return
    if lease.state == "available":
        raise ServiceError("LeaseNotPresentWithBlobOperation")
    if lease.state in ("expired", "broken"):
        raise ServiceError("LeaseLost")
    if not _same(lease.lease_id, lease_id):
        raise ServiceError("LeaseIdMismatchWithBlobOperation")


def check_container_access(lease: Lease, now: float, lease_id: str | None, *, required: bool) -> None:
    """Delete Container needs the id of an active lease (``required``); other container
    operations accept an optional id, which must then match."""
    lease = current(lease, now)
    active = lease.state in ("leased", "breaking")
    if lease_id is None:
        if required and active:
            raise ServiceError(
                "LeaseIdMissing",
                "There is currently a lease on the container and no lease ID was specified in the request.",
            )
        return
    if not active:
        if lease.state in ("expired", "broken"):
            raise ServiceError(
                "LeaseLost", "A lease ID was specified, but the lease for the container has expired."
            )
        raise ServiceError("LeaseNotPresentWithContainerOperation")
    if not _same(lease.lease_id, lease_id):
        raise ServiceError("LeaseIdMismatchWithContainerOperation")
