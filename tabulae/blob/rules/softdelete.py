"""Soft delete of blobs and containers as pure rules with a clock ("Soft delete for blobs",
"Soft delete for containers", "Undelete Blob", "Restore Container", "List Blobs",
"List Containers").

Blob soft delete is the ``DeleteRetentionPolicy`` of Set Blob Service Properties: ``Days`` from
1 to 365 when enabled (the range is the docs'). Set Blob Service Properties refuses a missing or
out-of-range ``Days`` as Azure does, a document error naming the place (api/formats.py, as
recorded); ``retention_days`` below stays the plain rule. Container soft delete is an
account setting of the management plane with the same range. A soft-deleted item is listed
(``include=deleted``) with ``Deleted``, ``DeletedTime`` and ``RemainingRetentionDays`` and is
removed for good once its retention has passed.

Assumed where the docs are silent: an item keeps the retention in force when it was deleted
(changing the policy later does not move its purge time). ``RemainingRetentionDays`` counts the
whole days left after the one under way, as recorded: a blob, a Data Lake path or a container
deleted just now under a 7-day policy shows 6, a blob under a 1-day policy 0.

A container's version (``<Version>`` in a listing, ``x-ms-deleted-container-version`` in
Restore Container, ``containerVersion`` in change feed records) is the container's creation time
as a Windows FILETIME in 16 upper-case hex digits: the recorded ``01DC36F49F23DCB2`` decodes to
a time eleven minutes before the recorded blob write in that container. Restore Container names
the deleted container by ``x-ms-deleted-container-name`` and ``-version``; the restored
container keeps its name (the SDKs deprecated restoring under another name, which Azure refuses
in its own words, recorded for the Java SDK); a live container of that name makes it 409
``ContainerAlreadyExists`` (assumed from the code's meaning; no recording seen) and an unknown or
purged one 404 ``ContainerNotFound`` (recorded for a name never deleted: the Java SDK's
ServiceApiTests.restoreContainerError).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from tabulae.model.errors import ServiceError

MIN_DAYS, MAX_DAYS = 1, 365
_DAY = timedelta(days=1)
_FILETIME_EPOCH = datetime(1601, 1, 1, tzinfo=UTC)
K = TypeVar("K")


def retention_days(enabled: bool, days: str | None) -> int | None:
    """The retention a policy sets: ``None`` when disabled, else ``Days`` within 1..365."""
    if not enabled:
        return None
    if days is None or not days.isascii() or not days.isdigit() or not MIN_DAYS <= int(days) <= MAX_DAYS:
        raise ServiceError("InvalidXmlNodeValue")
    return int(days)


@dataclass(frozen=True, slots=True)
class Deletion:
    """When an item was soft-deleted and the retention in force then."""

    time: datetime
    days: int

    @property
    def purge_at(self) -> datetime:
        return self.time + self.days * _DAY

    def remaining_days(self, now: datetime) -> int:
        """``RemainingRetentionDays``: whole days left after the one under way (0 in the last
        day, and once due for purge)."""
        left = (self.purge_at - now) / _DAY
        return max(0, min(self.days - 1, math.ceil(left) - 1))

    def purged(self, now: datetime) -> bool:
        return now >= self.purge_at


def purge_due(deletions: Mapping[K, Deletion], now: datetime) -> list[K]:
    """The items whose retention has run out at ``now``, oldest purge first."""
    due = [(d.purge_at, i, key) for i, (key, d) in enumerate(deletions.items()) if d.purged(now)]
    return [key for _, _, key in sorted(due, key=lambda item: (item[0], item[1]))]


def container_version(created: datetime) -> str:
    """A container's version: its creation time as a FILETIME in 16 upper-case hex digits."""
    if created.tzinfo is None:
        raise ValueError("container times must be timezone-aware")
    delta = created - _FILETIME_EPOCH
    filetime = (delta.days * 86_400 + delta.seconds) * 10_000_000 + delta.microseconds * 10
    return f"{filetime:016X}"


@dataclass(frozen=True, slots=True)
class DeletedContainer:
    name: str
    version: str
    deletion: Deletion


RESTORE_NAME_MISMATCH = (
    "The value of deleted-container-name header must match the destination container name."
)


def restore_container(
    destination: str,
    name: str | None,
    version: str | None,
    deleted: Iterable[DeletedContainer],
    live: bool,
    now: datetime,
) -> DeletedContainer:
    """Which deleted container a Restore Container request brings back, or Azure's error.

    ``destination`` is the container named in the URL, ``name`` and ``version`` the
    ``x-ms-deleted-container-*`` headers, ``live`` whether a container called ``destination``
    exists now."""
    if name is None:
        raise ServiceError("MissingRequiredHeader", fields=(("HeaderName", "x-ms-deleted-container-name"),))
    if version is None:
        raise ServiceError(
            "MissingRequiredHeader", fields=(("HeaderName", "x-ms-deleted-container-version"),)
        )
    if name != destination:
        # Azure's own words and no HeaderName (the Java SDK's
        # ServiceApiTests.restoreContainerIntoExistingContainerError, x-ms-version 2023-08-03, 273 bytes)
        raise ServiceError("InvalidHeaderValue", RESTORE_NAME_MISMATCH)
    if live:
        raise ServiceError("ContainerAlreadyExists")
    for candidate in deleted:
        if candidate.name == name and candidate.version == version and not candidate.deletion.purged(now):
            return candidate
    raise ServiceError("ContainerNotFound")
