"""Get User Delegation Key (``POST /?restype=service&comp=userdelegationkey``), as the Blob and
Queue services both answer it: a key, for the Microsoft Entra identity of the request's bearer
token, with which it signs user delegation SAS tokens (:mod:`tabulae.auth.delegation` derives
and checks them).

Only a bearer token may ask (403 ``AuthenticationFailed`` for Shared Key or a SAS, with Azure's
detail "Only authentication scheme Bearer is supported"). The body is ``<KeyInfo>`` with
``Start`` (optional: now), ``Expiry`` and, from 2025-07-05, ``DelegatedUserTid``; an expiry
that is not after the start, or more than seven days from now, is 400 ``InvalidXmlNodeValue``
naming the value in both ``XmlNodeName`` and ``XmlNodeValue`` (what Azure writes for it). The
answer echoes the key's signed fields as the request gave them, the service's letter (``b``,
``q``), the request's version, and the key.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from xml.sax.saxutils import escape

from tabulae.auth.bearer import token_claims
from tabulae.auth.delegation import MAX_KEY_LIFETIME, DelegationKey
from tabulae.auth.flow import is_bearer
from tabulae.http.documents import parse_document, text_of
from tabulae.model.errors import ServiceError

BEARER_ONLY = "Only authentication scheme Bearer is supported"  # Azure's AuthenticationErrorDetail
#: An identity whose token lacks the claim (a hand-made development token) gets the nil GUID.
NIL_GUID = "00000000-0000-0000-0000-000000000000"


def _bad_value(value: str) -> ServiceError:
    return ServiceError("InvalidXmlNodeValue", fields=(("XmlNodeName", value), ("XmlNodeValue", value)))


def _time(value: str) -> datetime:
    """A KeyInfo time: ISO 8601 in UTC (``2026-01-01T00:00:00Z``, fractions allowed)."""
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise _bad_value(value) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def _claim(claims: dict[str, object], name: str) -> str:
    value = claims.get(name)
    return value if isinstance(value, str) and value else NIL_GUID


def render_key(key: DelegationKey, value: bytes) -> bytes:
    delegated = (
        f"<SignedDelegatedUserTid>{escape(key.delegated_tid)}</SignedDelegatedUserTid>"
        if key.delegated_tid
        else ""
    )
    return (
        '<?xml version="1.0" encoding="utf-8"?><UserDelegationKey>'
        f"<SignedOid>{escape(key.oid)}</SignedOid><SignedTid>{escape(key.tid)}</SignedTid>"
        f"<SignedStart>{escape(key.start)}</SignedStart><SignedExpiry>{escape(key.expiry)}</SignedExpiry>"
        f"<SignedService>{key.service}</SignedService><SignedVersion>{escape(key.version)}</SignedVersion>"
        f"{delegated}<Value>{base64.b64encode(value).decode()}</Value></UserDelegationKey>"
    ).encode()


def issue_key(
    authorization: str | None, document: bytes, *, service: str, version: str, account_key: bytes
) -> bytes:
    """The ``<UserDelegationKey>`` document answering a request with this ``Authorization``
    header and body, for ``service`` (``b`` or ``q``), under the account's first key."""
    if authorization is None or not is_bearer(authorization):
        raise ServiceError("AuthenticationFailed", detail=BEARER_ONLY)
    root = parse_document(document, "KeyInfo")
    if root is None:
        raise ServiceError("InvalidXmlDocument")
    expiry_text = text_of(root, "Expiry")
    if not expiry_text:
        raise ServiceError("MissingRequiredXmlNode")
    now = datetime.now(UTC).replace(microsecond=0)
    start_text = text_of(root, "Start") or now.strftime("%Y-%m-%dT%H:%M:%SZ")
    start, expiry = _time(start_text), _time(expiry_text)
    if expiry <= start or expiry > now + MAX_KEY_LIFETIME:
        raise _bad_value(expiry_text)
    claims = token_claims(authorization)
    key = DelegationKey(
        oid=_claim(claims, "oid"),
        tid=_claim(claims, "tid"),
        start=start_text,
        expiry=expiry_text,
        service=service,
        version=version,
        delegated_tid=text_of(root, "DelegatedUserTid") or "",
    )
    return render_key(key, key.value(account_key))
