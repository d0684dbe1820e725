"""User delegation keys and the user delegation SAS ("Get User Delegation Key", "Create a user
delegation SAS").

A user delegation key is what a Microsoft Entra identity gets in place of the account key: a
secret valid for a window of at most seven days, with which its holder signs SAS tokens. A key
here is derived, never stored: its value is an HMAC, under the account key, of the key's own
signed fields (object and tenant id, start, expiry, service, version, delegated tenant), and
every token repeats those fields (``skoid``, ``sktid``, ``skt``, ``ske``, ``sks``, ``skv``,
``skdutid``). So any worker, after any restart, re-derives the key a token was signed with,
and rotating the account key revokes every key and token made from it, as on Azure.

The token's string-to-sign grew with the versions; by ``sv``:

- 2018-11-09: sp, st, se, resource, the six key fields, sip, spr, sv, sr, snapshot time,
  rscc, rscd, rsce, rscl, rsct;
- 2020-02-10: ``saoid``, ``suoid``, ``scid`` after the key fields;
- 2020-12-06: ``ses`` after the snapshot time;
- 2025-07-05: ``skdutid`` and ``sduoid`` after ``scid``;
- 2026-04-06: the signed request headers and query parameters (``srh``, ``srq``) after ``ses``,
  each as ``name:value`` lines with the request's own values.
"""

from __future__ import annotations

import hashlib
import hmac
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import unquote

from tabulae.auth.sas import parse_iso8601
from tabulae.model.errors import ServiceError

#: Query fields that make a SAS a user delegation SAS (any one of them).
KEY_FIELDS = ("skoid", "sktid", "skt", "ske", "sks", "skv")
#: "The expiry ... must be a valid date and time within seven days of the current time."
MAX_KEY_LIFETIME = timedelta(days=7)

OID_VERSION = "2020-02-10"
SCOPE_VERSION = "2020-12-06"
DELEGATED_USER_VERSION = "2025-07-05"
REQUEST_FIELDS_VERSION = "2026-04-06"
_OVERRIDES = ("rscc", "rscd", "rsce", "rscl", "rsct")
_DOMAIN = "tabulae user delegation key"  # keeps the derivation apart from every other use of the key


@dataclass(frozen=True, slots=True)
class DelegationKey:
    """A user delegation key's signed fields (what the key is derived from)."""

    oid: str
    tid: str
    start: str
    expiry: str
    service: str
    version: str
    delegated_tid: str = ""

    def value(self, account_key: bytes) -> bytes:
        """The key itself under one account key."""
        fields = (_DOMAIN, self.oid, self.tid, self.start, self.expiry, self.service, self.version)
        message = "\n".join((*fields, self.delegated_tid)).encode("utf-8")
        return hmac.new(account_key, message, hashlib.sha256).digest()


def is_delegation_sas(query: Mapping[str, str]) -> bool:
    return any(name in query for name in KEY_FIELDS)


def key_of_token(query: Mapping[str, str], now: datetime, service: str = "b") -> DelegationKey:
    """The key a user delegation SAS names, checked: every field present, for the service
    (``b`` Blob, ``q`` Queue), and within the key's own window (403 ``AuthenticationFailed``
    otherwise)."""
    missing = [name for name in KEY_FIELDS if not query.get(name)]
    if missing:
        raise ServiceError("AuthenticationFailed", detail=f"The user delegation SAS lacks {missing[0]}.")
    key = DelegationKey(
        query["skoid"], query["sktid"], query["skt"], query["ske"], query["sks"], query["skv"],
        query.get("skdutid", ""),
    )  # fmt: skip
    if key.service != service:
        raise ServiceError("AuthenticationFailed", detail=f"The signed key service (sks) must be {service}.")
    if not parse_iso8601(key.start, "skt") <= now <= parse_iso8601(key.expiry, "ske"):
        raise ServiceError("AuthenticationFailed", detail="The user delegation key is not valid now.")
    if not _is_guid(query.get("scid")):
        # recorded: a correlation id that is not a GUID (the Java Data Lake SDK's
        # SasTests.fileSystemUserDelegationCorrelationIdError, scid=invalidcid, 2023-01-03)
        raise ServiceError("AuthenticationFailed", detail="Signature fields not well formed.")
    return key


def _is_guid(value: str | None) -> bool:
    """Whether an optional SAS field, when given, is a GUID."""
    if value is None:
        return True
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def key_values(key: DelegationKey, account_keys: Sequence[bytes]) -> list[bytes]:
    """The key under each of the account's keys (a token signed with either verifies)."""
    return [key.value(account_key) for account_key in account_keys]


def _signed_pairs(names: str | None, values: Mapping[str, str], *, lower: bool) -> list[tuple[str, str]]:
    """``srh``/``srq``: comma-separated, percent-encoded names, each with the request's value
    (header names are looked up lower-cased, query names as written)."""
    if not names:
        return []
    pairs = []
    for quoted in names.split(","):
        name = unquote(quoted)
        pairs.append((name, values.get(name.lower() if lower else name, "")))
    return pairs


def string_to_sign(
    query: Mapping[str, str],
    *,
    resource: str,
    snapshot: str,
    headers: Mapping[str, str],
) -> str:
    """The user delegation SAS string-to-sign for the token's ``sv`` (the module's table).
    ``headers`` are the request's (lower-case names), for ``srh``."""
    version = query.get("sv", "")
    field = query.get
    values: list[str | None] = [field("sp"), field("st"), field("se"), resource]
    values += [field(name) for name in KEY_FIELDS]
    if version >= OID_VERSION:
        values += [field("saoid"), field("suoid"), field("scid")]
    if version >= DELEGATED_USER_VERSION:
        values += [field("skdutid"), field("sduoid")]
    values += [field("sip"), field("spr"), field("sv"), field("sr"), snapshot]
    if version >= SCOPE_VERSION:
        values.append(field("ses"))
    if version >= REQUEST_FIELDS_VERSION:
        signed_headers = _signed_pairs(field("srh"), headers, lower=True)
        signed_query = _signed_pairs(field("srq"), query, lower=False)
        values.append("".join(f"{name}:{value}\n" for name, value in signed_headers))
        values.append("".join(f"\n{name}:{value}" for name, value in signed_query))
    values += [field(name) for name in _OVERRIDES]
    return "\n".join(value or "" for value in values)
