"""Immutable storage and last access times on the wire: Set and Delete Blob Immutability Policy,
Set Blob Legal Hold, the protection an upload asks for, and the headers and listing elements
that report both ("Set Blob Immutability Policy", "Delete Blob Immutability Policy", "Set Blob
Legal Hold", "Get Blob Properties", "List Blobs").

Requests name a mode as ``Unlocked``/``Locked`` (taken in any case); answers report it in lower
case (``unlocked``), as Azure does. Dates are RFC 1123, to the second.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from tabulae.auth.shared_key import parse_rfc1123
from tabulae.blob import protection
from tabulae.blob.api.call import Call
from tabulae.blob.api.formats import epoch_date
from tabulae.blob.api.headers import bad_header, http_seconds, version_or_snapshot
from tabulae.blob.rules.immutability import LOCKED, UNLOCKED
from tabulae.http.messages import Headers, Response
from tabulae.model.blobs import BlobRecord
from tabulae.model.errors import ServiceError

UNTIL = "x-ms-immutability-policy-until-date"
MODE = "x-ms-immutability-policy-mode"
HOLD = "x-ms-legal-hold"
_MODES = {UNLOCKED.lower(): UNLOCKED, LOCKED.lower(): LOCKED}

Protect = Callable[[BlobRecord], BlobRecord]


def _until(value: str) -> datetime:
    try:
        return parse_rfc1123(value)
    except ValueError:
        raise bad_header(UNTIL, value) from None


def _mode(value: str | None) -> str:
    if value is None:
        return UNLOCKED  # the documented default
    mode = _MODES.get(value.lower())
    if mode is None:
        raise bad_header(MODE, value)
    return mode


def _hold(value: str) -> bool:
    lowered = value.lower()
    if lowered not in ("true", "false"):
        raise bad_header(HOLD, value)
    return lowered == "true"


def _snapshot(call: Call) -> str:
    """The version the operation is about: the blob, a snapshot or a version (``versionid``)."""
    return version_or_snapshot(call.request.query)


async def requested(call: Call) -> Protect | None:
    """The protection an upload or copy asks for, checked now (so a doomed upload is refused
    before its body is read), as a function that gives the new version its protection; without
    a policy of its own, the account's default policy when it has one."""
    headers = call.request.headers
    until_text, mode_text, hold_text = headers.get(UNTIL), headers.get(MODE), headers.get(HOLD)
    default = await _account_default(call)
    if until_text is None and mode_text is None and hold_text is None:
        return default
    if until_text is None and mode_text is not None:
        raise ServiceError("MissingRequiredHeader", fields=(("HeaderName", UNTIL),))
    until = _until(until_text) if until_text is not None else None
    mode = _mode(mode_text)
    hold = _hold(hold_text) if hold_text is not None else None
    now = datetime.fromtimestamp(call.service.clock(), UTC)
    protection.initial(BlobRecord("", "", "BlockBlob", 0, 0, 0), until, mode, hold, now)  # validates
    if until is None and default is not None:  # a legal hold asked for, the default policy kept
        return lambda record: protection.initial(default(record), None, None, hold, now)
    return lambda record: protection.initial(record, until, mode, hold, now)


async def _account_default(call: Call) -> Protect | None:
    """The account's default version-level policy as a :data:`Protect`, if it has one."""
    features = await call.service.features.get(call.key.account)
    days = features.default_immutability_days
    if not days:
        return None
    mode = LOCKED if features.default_immutability_locked else UNLOCKED
    return lambda record: protection.by_default(record, days, mode)


def response_headers(record: BlobRecord) -> Headers:
    """The protection headers of Get Blob and Get Blob Properties (none for an unprotected blob)."""
    headers: Headers = []
    if record.immutable_until is not None:
        headers.append((UNTIL.encode(), epoch_date(record.immutable_until).encode()))
        headers.append((MODE.encode(), (record.immutable_mode or UNLOCKED).lower().encode()))
    if record.legal_hold:
        headers.append((HOLD.encode(), b"true"))
    return headers


def listing_elements(record: BlobRecord, include: frozenset[str]) -> str:
    """``<ImmutabilityPolicyUntilDate>``, ``<ImmutabilityPolicyMode>`` and ``<LegalHold>`` of a
    listing's ``<Properties>``, each when its ``include`` asks for it."""
    parts = []
    if "immutabilitypolicy" in include and record.immutable_until is not None:
        parts.append(
            f"<ImmutabilityPolicyUntilDate>{epoch_date(record.immutable_until)}</ImmutabilityPolicyUntilDate>"
        )
        parts.append(
            f"<ImmutabilityPolicyMode>{(record.immutable_mode or UNLOCKED).lower()}</ImmutabilityPolicyMode>"
        )
    if "legalhold" in include:
        parts.append(f"<LegalHold>{'true' if record.legal_hold else 'false'}</LegalHold>")
    return "".join(parts)


async def set_immutability_policy(call: Call) -> Response:
    headers = call.request.headers
    until_text = headers.get(UNTIL)
    if until_text is None:
        raise ServiceError("MissingRequiredHeader", fields=(("HeaderName", UNTIL),))
    until, mode = _until(until_text), _mode(headers.get(MODE))
    record = await protection.set_policy(
        call.service.store,
        call.key,
        _snapshot(call),
        until,
        mode,
        http_seconds(headers.get("if-unmodified-since")),
        call.service.clock,
    )
    return Response(200, response_headers(record))


async def delete_immutability_policy(call: Call) -> Response:
    await protection.delete_policy(call.service.store, call.key, _snapshot(call), call.service.clock)
    return Response(200, [])


async def set_legal_hold(call: Call) -> Response:
    value = call.request.headers.get(HOLD)
    if value is None:
        raise ServiceError("MissingRequiredHeader", fields=(("HeaderName", HOLD),))
    record = await protection.set_legal_hold(call.service.store, call.key, _snapshot(call), _hold(value))
    return Response(200, [(HOLD.encode(), b"true" if record.legal_hold else b"false")])


# ---------------------------------------------------------------------------- last access time


async def last_access_header(call: Call, record: BlobRecord, *, read: bool) -> Headers:
    """``x-ms-last-access-time`` when the account tracks it; a read (``read``) of a blob whose
    known access time is a day old stores the new one first, unless the data volume is full (a
    read must not use the room deletes need: the time is stored by a read once there is room)."""
    if not (await call.service.features.get(call.key.account)).last_access_tracking:
        return []
    now = call.service.clock()
    volume = call.options.volume
    full = volume is not None and volume.full
    if read and not record.snapshot and not full and protection.stale(record, now):
        await protection.touch(call.service.store, call.key, now)
        return [(b"x-ms-last-access-time", epoch_date(now).encode())]
    return [(b"x-ms-last-access-time", epoch_date(protection.last_access(record)).encode())]


def last_access_element(record: BlobRecord) -> str:
    return f"<LastAccessTime>{epoch_date(protection.last_access(record))}</LastAccessTime>"
