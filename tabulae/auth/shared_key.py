"""Shared Key and Shared Key Lite verification for the Table service ("Authorize with Shared Key").

Pure functions: the HTTP layer extracts the raw request-line path, the ``comp`` query value and
the few headers that are signed, and this module decides. Nothing here ever puts an account key
into a message; the signature the client sent is also kept out of error details so that logs of
error bodies cannot be replayed.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import re
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from email.utils import formatdate
from functools import lru_cache

from tabulae.model.errors import ServiceError
from tabulae.model.names import SECONDARY_SUFFIX

SCHEME_SHARED_KEY = "SharedKey"
SCHEME_SHARED_KEY_LITE = "SharedKeyLite"
_SCHEMES = {s.lower(): s for s in (SCHEME_SHARED_KEY, SCHEME_SHARED_KEY_LITE)}


_MONTH_NAMES = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_MONTHS = {name: number for number, name in enumerate(_MONTH_NAMES, start=1)}
# RFC 1123 as every SDK sends it: "Mon, 01 Jan 2024 00:00:00 GMT". Parsed by hand rather than with
# strptime because %a/%b depend on the process locale.
_RFC1123 = re.compile(
    r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\d{2}) ([A-Z][a-z]{2}) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT"
)


# --------------------------------------------------------------------------- canonicalisation


def canonical_paths(account: str, raw_path: str) -> list[str]:
    """Every ``/{account}{path}`` a legitimate client may have signed, best guess first.

    ``raw_path`` is the path exactly as it appeared on the request line (still percent-encoded),
    because clients sign the bytes they send and any decode/re-encode round trip breaks keys with
    quotes, spaces or non-ASCII characters. Host-style requests pass a path without the account,
    path-style ones include it, so there the account legitimately appears twice.

    Secondary-endpoint requests are signed as if for the primary, and the Python SDK's path-style
    ``get_service_stats`` even prefixes the primary path with the secondary segment, so three
    candidates are tried there.
    """
    secondary = f"/{account}{SECONDARY_SUFFIX}"
    if not raw_path.startswith(secondary):
        return [f"/{account}{raw_path}"]  # the common case, on every signed request
    paths = [raw_path]
    rest = _strip_leading_segment(raw_path, secondary)
    if rest is not None:
        paths.append(f"/{account}{rest}")
        paths.append(rest or "/")
    resources: list[str] = []
    for path in paths:
        resource = f"/{account}{path}"
        if resource not in resources:
            resources.append(resource)
    return resources


def canonical_resources(account: str, raw_path: str, comp: str | None) -> list[str]:
    """The Table service's CanonicalizedResource candidates: a path of :func:`canonical_paths`
    and ``?comp=`` when the request has one (no other query parameter is signed)."""
    paths = canonical_paths(account, raw_path)
    return paths if comp is None else [f"{path}?comp={comp}" for path in paths]


def _strip_leading_segment(path: str, segment: str) -> str | None:
    """Return ``path`` without its leading ``segment`` (a whole segment only), or None if absent."""
    if path == segment:
        return ""
    if path.startswith(segment + "/"):
        return path[len(segment) :]
    return None


def string_to_sign_shared_key(
    method: str, content_md5: str, content_type: str, date: str, resource: str
) -> str:
    """Build the Table-service SharedKey string-to-sign (no canonicalised x-ms- headers)."""
    return "\n".join((method, content_md5, content_type, date, resource))


def string_to_sign_shared_key_lite(date: str, resource: str) -> str:
    """Build the Table-service SharedKeyLite string-to-sign ("Authorize with Shared Key")."""
    return f"{date}\n{resource}"


def sign(key: bytes, string_to_sign: str) -> str:
    """Return base64(HMAC-SHA256(key, UTF-8(string_to_sign))), the signature format of Shared Key."""
    return base64.b64encode(_mac(key, string_to_sign)).decode("ascii")


def _mac(key: bytes, string_to_sign: str) -> bytes:
    return hmac.digest(key, string_to_sign.encode("utf-8"), "sha256")  # OpenSSL's one-shot HMAC


# --------------------------------------------------------------------------- header parsing


def parse_authorization(header: str) -> tuple[str, str, bytes]:
    """Split ``SharedKey acct:sig`` into (canonical scheme, account, decoded signature).

    Auth schemes are case-insensitive in HTTP, so any case is accepted; surrounding whitespace is
    tolerated because some proxies and hand-written clients add it. Anything else is a malformed
    header: 400 ``InvalidAuthenticationInfo``.
    """
    parts = header.strip().split(None, 1)
    if len(parts) != 2:
        raise ServiceError("InvalidAuthenticationInfo")
    scheme = _SCHEMES.get(parts[0].lower())
    account, colon, signature = parts[1].partition(":")
    account, signature = account.strip(), signature.strip()
    if scheme is None or not colon or not account or not signature:
        raise ServiceError("InvalidAuthenticationInfo")
    try:
        mac = base64.b64decode(signature, validate=True)
    except (binascii.Error, ValueError):
        raise ServiceError("InvalidAuthenticationInfo") from None
    return scheme, account, mac


def _primary_account(name: str) -> str:
    """Map ``acct-secondary`` to ``acct``: secondary requests are signed as the primary."""
    return name.removesuffix(SECONDARY_SUFFIX) if name.endswith(SECONDARY_SUFFIX) else name


# --------------------------------------------------------------------------- dates


def parse_rfc1123(value: str) -> datetime:
    """Parse an RFC 1123 HTTP date strictly; raise ValueError when it is not one."""
    match = _RFC1123.fullmatch(value.strip())
    if match is None or match.group(2) not in _MONTHS:
        raise ValueError("not an RFC 1123 date")
    day, _, year, hour, minute, second = match.groups()
    return datetime(
        int(year), _MONTHS[match.group(2)], int(day), int(hour), int(minute), int(second), tzinfo=UTC
    )


_BAD_DATE = "The Date header in the request is incorrect."


def _check_skew(date: str, now: float | None, max_skew_seconds: float) -> None:
    """Reject a request dated more than ``max_skew_seconds`` ago (Azure: 15 minutes), so that a
    captured request cannot be replayed for long ("Authorize with Shared Key"), and a date that is
    not an RFC 1123 date at all. Both are 403 ``AuthenticationFailed`` with Azure's detail texts.

    A date further ahead than the same skew is refused too, with a detail text of ours. Azure
    serves those (it checks only the "too old" side), but a request signed for a date in the
    future could be replayed until that date plus the skew: the replay window this check exists
    to close. A client whose clock runs more than the skew ahead is the one that notices.
    """
    when = _date_seconds(date)
    if when is None:
        raise ServiceError("AuthenticationFailed", detail=_BAD_DATE)
    current = time.time() if now is None else now
    if when < current - max_skew_seconds:
        raise ServiceError(
            "AuthenticationFailed",
            detail=f"Request date header too old: '{formatdate(when, usegmt=True)}'",
        )
    if when > current + max_skew_seconds:
        raise ServiceError(
            "AuthenticationFailed",
            detail=f"Request date header too far in the future: '{formatdate(when, usegmt=True)}'",
        )


@lru_cache(maxsize=1024)  # clients sign many requests within the same second, with the same text
def _date_seconds(date: str) -> float | None:
    """The POSIX time of an RFC 1123 date, or None when it is not one."""
    try:
        return parse_rfc1123(date).timestamp()
    except ValueError:
        return None


# --------------------------------------------------------------------------- verification


def verify_authorization(
    header: str,
    *,
    method: str,
    raw_path: str,
    comp: str | None,
    content_md5: str,
    content_type: str,
    x_ms_date: str | None,
    date: str | None,
    account: str,
    keys: Sequence[bytes],
    now: float | None = None,
    max_skew_seconds: float | None = None,
) -> None:
    """Verify a SharedKey / SharedKeyLite ``Authorization`` header; return None or raise ServiceError.

    ``account`` is the account the URL addresses, ``keys`` its decoded keys (primary, secondary):
    a signature made with either is accepted, so keys can be rotated. The date checked for skew is
    the one that was signed (x-ms-date, else Date). Signatures are compared in constant time
    against every candidate resource and every key.
    """
    scheme, header_account, mac = parse_authorization(header)
    primary = _primary_account(account)
    signed_date = x_ms_date or date
    candidates = [
        _string_to_sign(scheme, method, content_md5, content_type, signed_date or "", r)
        for r in canonical_resources(primary, raw_path, comp)
    ]
    _check_signature(header_account, primary, signed_date, mac, candidates, keys, now, max_skew_seconds)


def _check_signature(
    header_account: str,
    primary: str,
    signed_date: str | None,
    mac: bytes,
    candidates: Sequence[str],
    keys: Sequence[bytes],
    now: float | None,
    max_skew_seconds: float | None,
) -> None:
    """The checks after the string-to-sign candidates are built, the same for every service: the
    header names the URL's account, a date was signed (and is recent enough), and the MAC is one
    of the candidates' under one of the keys."""
    if _primary_account(header_account) != primary:
        raise _mac_mismatch(candidates[0])
    if not signed_date:
        raise ServiceError("AuthenticationFailed", detail="The x-ms-date or Date header is required.")
    if max_skew_seconds is not None:
        _check_skew(signed_date, now, max_skew_seconds)
    if not _any_match(mac, candidates, keys):
        raise _mac_mismatch(candidates[0])


def _string_to_sign(
    scheme: str, method: str, content_md5: str, content_type: str, date: str, resource: str
) -> str:
    if scheme == SCHEME_SHARED_KEY_LITE:
        return string_to_sign_shared_key_lite(date, resource)
    return string_to_sign_shared_key(method, content_md5, content_type, date, resource)


def _any_match(mac: bytes, strings_to_sign: Sequence[str], keys: Sequence[bytes]) -> bool:
    """True when ``mac`` is the HMAC of any string under any key (each compare constant-time)."""
    for sts in strings_to_sign:
        message = sts.encode("utf-8")
        for key in keys:
            if hmac.compare_digest(mac, hmac.digest(key, message, "sha256")):
                return True
    return False


def _mac_mismatch(string_to_sign: str) -> ServiceError:
    """Azure's failure detail, minus the received signature (kept out of logs on purpose)."""
    return ServiceError(
        "AuthenticationFailed",
        detail=(
            "The MAC signature found in the HTTP request is not the same as any computed signature. "
            f"Server used following string to sign: '{string_to_sign}'."
        ),
    )


# --------------------------------------------------------------------------- Blob and Queue services

# The headers, in order, that the Blob and Queue services' Shared Key string-to-sign carries.
_BLOB_QUEUE_SIGNED = (
    "content-encoding",
    "content-language",
    "content-length",
    "content-md5",
    "content-type",
    "date",
    "if-modified-since",
    "if-match",
    "if-none-match",
    "if-unmodified-since",
    "range",
)
# From this version on a Content-Length of 0 is signed as an empty string.
EMPTY_LENGTH_VERSION = "2015-02-21"


# The order in which the service sorts ``x-ms-`` header names for the string-to-sign is a
# culture-aware collation, not byte order: first by these characters' ranks (letters without
# case, after digits, after the punctuation listed; every other character ignored), then, between
# names equal so far, by where the ignored apostrophes and hyphens stand. Clients reproduce it,
# so a name such as ``x-ms-meta-a-c`` sorts after ``x-ms-meta-ab`` here.
_HEADER_RANKS = {c: rank for rank, c in enumerate("!#$%&*.^_`|~+0123456789abcdefghijklmnopqrstuvwxyz", 1)}
_HEADER_TIE_RANKS = {"'": 1, "-": 2}


_ORDER_CACHE: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {}


def _header_order(name: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The sort key of a header name, computed once per name (clients send the same few)."""
    cached = _ORDER_CACHE.get(name)
    if cached is None:
        lowered = name.lower()
        ranks = tuple(_HEADER_RANKS[c] for c in lowered if c in _HEADER_RANKS)
        ties = tuple(_HEADER_TIE_RANKS.get(c, 0) for c in lowered)
        cached = (ranks, ties)
        if len(_ORDER_CACHE) < 4096:
            _ORDER_CACHE[name] = cached
    return cached


def canonical_headers(headers: dict[str, str]) -> str:
    """Every ``x-ms-*`` header as ``name:value\n``, names lower-case, in the service's order."""
    names = sorted((name for name in headers if name.startswith("x-ms-")), key=_header_order)
    return "".join(f"{name}:{headers[name]}\n" for name in names)


def canonical_query(query_pairs: Sequence[tuple[str, str]]) -> str:
    """The query part of a Blob/Queue canonicalised resource: ``\\nname:v1,v2`` per parameter,
    names lower-cased and sorted, values (decoded) sorted and joined by commas."""
    grouped: dict[str, list[str]] = {}
    for name, value in query_pairs:
        grouped.setdefault(name.lower(), []).append(value)
    return "".join(f"\n{name}:{','.join(sorted(values))}" for name, values in sorted(grouped.items()))


def blob_queue_string_to_sign(
    scheme: str,
    method: str,
    headers: dict[str, str],
    resource_path: str,
    query_pairs: Sequence[tuple[str, str]],
    comp: str | None,
    version: str | None = None,
) -> str:
    """The Blob/Queue Shared Key (or Shared Key Lite) string-to-sign for one canonical path.

    ``resource_path`` is ``/{account}`` + the raw request path. Shared Key signs eleven standard
    headers, the canonicalised ``x-ms-`` headers and the path with every query parameter; Shared
    Key Lite only Content-MD5, Content-Type, Date, the ``x-ms-`` headers and the path with ``comp``.
    When ``x-ms-date`` is sent, the Date line is empty (clients sign one date, not both).
    ``version`` is the request's version when it is not in ``headers`` (a Blob batch's
    sub-requests run with the batch's).
    """
    date = "" if "x-ms-date" in headers else headers.get("date", "")
    if scheme == SCHEME_SHARED_KEY_LITE:
        resource = resource_path + (f"?comp={comp}" if comp is not None else "")
        return (
            "\n".join((method, headers.get("content-md5", ""), headers.get("content-type", ""), date, ""))
            + canonical_headers(headers)
            + resource
        )
    values = []
    for name in _BLOB_QUEUE_SIGNED:
        value = date if name == "date" else headers.get(name, "")
        if (
            name == "content-length"
            and value == "0"
            and (version or headers.get("x-ms-version", "")) >= EMPTY_LENGTH_VERSION
        ):
            value = ""
        values.append(value)
    return (
        f"{method}\n"
        + "\n".join(values)
        + "\n"
        + canonical_headers(headers)
        + resource_path
        + canonical_query(query_pairs)
    )


def verify_blob_queue_authorization(
    header: str,
    *,
    method: str,
    raw_path: str,
    headers: dict[str, str],
    query_pairs: Sequence[tuple[str, str]],
    account: str,
    keys: Sequence[bytes],
    now: float | None = None,
    max_skew_seconds: float | None = None,
    version: str | None = None,
) -> None:
    """Verify a Blob or Queue service Shared Key / Shared Key Lite header; raise ServiceError.

    As for tables, path-style requests sign the account twice (``/acct/acct/queue``) and
    secondary requests sign the primary account, so every candidate path is tried.
    """
    scheme, header_account, mac = parse_authorization(header)
    primary = _primary_account(account)
    comp = next((value for name, value in query_pairs if name.lower() == "comp"), None)
    candidates = [
        blob_queue_string_to_sign(scheme, method, headers, path, query_pairs, comp, version)
        for path in canonical_paths(primary, raw_path)
    ]
    signed_date = headers.get("x-ms-date") or headers.get("date")
    _check_signature(header_account, primary, signed_date, mac, candidates, keys, now, max_skew_seconds)
