"""Blob version ids and which version is current ("Blob versioning", "Get Blob", "List Blobs").

With versioning on, every write of a blob (Put Blob, Put Block List, Copy Blob, Set Blob
Metadata...) makes a new version and returns its id in ``x-ms-version-id``; the version it
replaces becomes a previous version. Deleting the blob leaves no current version and keeps every
previous one. A version id is the UTC time of the write with seven fractional digits and a
``Z`` (``2021-01-01T00:00:00.1234567Z``), so string order is time order; reads of the current
version say ``x-ms-is-current-version: true``, and every listing marks it
``<IsCurrentVersion>true</IsCurrentVersion>`` (with or without ``include=versions``).

Two writes within one tick (100 ns) must still get distinct, increasing ids, so a new id is the
later of the clock and the previous id plus one tick (assumed: Azure's ids are unique per blob;
how it breaks ties is not documented). An unparsable ``versionid`` query parameter is answered
400 ``InvalidQueryParameterValue`` (assumed from how Azure treats other malformed query
parameters; not seen in a recording).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from tabulae.model.errors import ServiceError

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_FORMAT = re.compile(r"\A(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{7})Z\Z")
TICKS_PER_SECOND = 10_000_000


def ticks(moment: datetime) -> int:
    """``moment`` in 100 ns ticks since 1970 (Python keeps microseconds: a multiple of 10)."""
    if moment.tzinfo is None:
        raise ValueError("version times must be timezone-aware")
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * TICKS_PER_SECOND + delta.microseconds * 10


def render(tick: int) -> str:
    """The version id of a tick count: ``2021-01-01T00:00:00.1234567Z``."""
    seconds, fraction = divmod(tick, TICKS_PER_SECOND)
    moment = _EPOCH + timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{fraction:07d}Z"


def parse(version_id: str) -> int:
    """The tick count of a version id, or 400 ``InvalidQueryParameterValue``."""
    match = _FORMAT.match(version_id)
    if match is None:
        raise ServiceError("InvalidQueryParameterValue", fields=(("QueryParameterName", "versionid"),))
    year, month, day, hour, minute, second, fraction = (int(g) for g in match.groups())
    try:
        moment = datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    except ValueError:
        raise ServiceError(
            "InvalidQueryParameterValue", fields=(("QueryParameterName", "versionid"),)
        ) from None
    return ticks(moment) + fraction


def new_version_id(now: datetime, previous: str | None) -> str:
    """The id of a version written at ``now`` after the blob's newest version ``previous``."""
    tick = ticks(now)
    if previous is not None:
        tick = max(tick, parse(previous) + 1)
    return render(tick)


def current_version(version_ids: Iterable[str], deleted: bool) -> str | None:
    """The current version among a blob's versions: the newest, unless the blob was deleted.

    ``deleted`` means the base blob is gone (a Delete Blob without ``versionid``), which leaves
    only previous versions."""
    newest = max(version_ids, default=None)
    return None if deleted else newest


def is_current_header(version_id: str, current: str | None) -> tuple[bytes, bytes]:
    """The ``x-ms-is-current-version`` header of a read of ``version_id``."""
    return (b"x-ms-is-current-version", b"true" if version_id == current else b"false")


def new_version_id_ticks(tick: int, previous: str | None) -> str:
    """As :func:`new_version_id`, from a time in 100 ns ticks since 1970 (a write's timestamp)."""
    if previous is not None:
        tick = max(tick, parse(previous) + 1)
    return render(tick)
