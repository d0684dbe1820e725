"""Shared access signatures: what every service's SAS has in common, and the account SAS.

Pure functions. ``parse_sas`` reads the already URL-decoded query; the checks here are the ones
every service applies the same way (signed version, signature, stored-policy merge, validity
window, protocol, IP), and :func:`verify_account_sas` authenticates an account SAS for one
service. A service SAS's own string-to-sign and the permissions each operation needs belong to
that service's ``api`` package (``tabulae.table.api.sas`` for tables): the grant a service builds
is then checked per operation, once per sub-operation for a batch, so a batch is authenticated
once and authorised per change.

What a token's repeated use can reuse is cached, per exact token and resource, in bounded LRUs:
the verified signature (keyed by the signature, the whole string-to-sign, which names the
resource and every signed field, and the keys), the parsed start and expiry times and the parsed
IP range. What can change between two requests with the same token is checked on every one: the
validity window against the clock, the stored access policy (looked up again, so revoking or
editing it takes effect at once), the protocol, the client's address and the permissions the
operation needs. A cache hit can never change an answer, only skip recomputing it.

Never put an account key into a message. The SAS string-to-sign is safe to show (it contains no
secret) and Azure shows it in the failure detail, so we do too.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ipaddress
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta, timezone
from email.utils import format_datetime
from functools import lru_cache

from tabulae.model.errors import ServiceError
from tabulae.model.policies import SignedIdentifier

# Clock skew tolerated on the start time only: a freshly minted token used from a machine whose
# clock runs a little behind must work, but an expired token must not.
START_SKEW = timedelta(minutes=5)
# First version whose account-SAS string-to-sign carries the encryption scope (``ses``) line.
ACCOUNT_SAS_SES_VERSION = "2020-12-06"
# First version whose SAS authorization refusals carry an ExtendedErrorDetail (resource_type_mismatch).
AUTHORIZATION_DETAIL_VERSION = "2024-08-04"


_VERSION = re.compile(r"\d{4}-\d{2}-\d{2}")
# ISO 8601 as Azure accepts it for st/se: a date, optionally with hh:mm[:ss[.fffffff]] and a zone.
_ISO8601 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})"
    r"(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,7}))?)?(Z|[+-]\d{2}:\d{2})?)?"
)


@dataclass(frozen=True, slots=True)
class StoredPolicy:
    """A stored access policy of a table ACL (``SignedIdentifier``); any field may be unset."""

    start: str | None
    expiry: str | None
    permission: str | None


@dataclass(frozen=True, slots=True)
class SasToken:
    """The SAS fields of a request, raw (decoded but otherwise exactly as sent), None when absent.

    The raw strings are kept because the signature covers the values as written: ``srt=soc`` and
    ``srt=sco`` sign differently although they grant the same.
    """

    sig: str
    sv: str | None = None
    sp: str | None = None
    st: str | None = None
    se: str | None = None
    si: str | None = None
    sip: str | None = None
    spr: str | None = None
    tn: str | None = None
    spk: str | None = None
    srk: str | None = None
    epk: str | None = None
    erk: str | None = None
    ss: str | None = None
    srt: str | None = None
    ses: str | None = None

    @property
    def is_account(self) -> bool:
        """Account SAS carry ``ss``/``srt``; a table SAS has ``tn`` and neither ("Create an account SAS")."""
        return self.ss is not None or self.srt is not None


_TOKEN_FIELDS = frozenset(f.name for f in fields(SasToken))


def stored_policies(identifiers: Iterable[SignedIdentifier]) -> dict[str, StoredPolicy]:
    """The stored access policies of an ACL by id, for ``apply_policy``'s lookup (identifiers
    without an AccessPolicy, or with an empty one, grant nothing, so they are left out)."""
    return {i.id: StoredPolicy(i.start, i.expiry, i.permission) for i in identifiers if i.policy_given}


def parse_sas(query: Mapping[str, str]) -> SasToken | None:
    """Extract the SAS from decoded query parameters; None when the request carries no ``sig``.

    Names match case-insensitively (as .NET clients rely on). The same name given twice in
    different case is refused rather than guessed at, because the signed value and the value used
    for authorisation must be the same one.
    """
    found: dict[str, str] = {}
    for name, value in query.items():
        lowered = name.lower()
        if lowered not in _TOKEN_FIELDS:
            continue
        if lowered in found:
            raise ServiceError("AuthenticationFailed", detail=f"The SAS parameter '{lowered}' is repeated.")
        found[lowered] = value
    if "sig" not in found:
        return None
    return SasToken(**found)


# --------------------------------------------------------------------------- string-to-sign


def account_sas_string_to_sign(token: SasToken, account: str) -> str:
    """Every field followed by LF; ``ses`` only from version 2020-12-06 on ("Create an account SAS")."""
    values = [account, token.sp, token.ss, token.srt, token.st, token.se, token.sip, token.spr, token.sv]
    if (token.sv or "") >= ACCOUNT_SAS_SES_VERSION:
        values.append(token.ses)
    return "".join(f"{v or ''}\n" for v in values)


class VerifiedSignatures:
    """The (signature, string-to-sign, keys) triples that verified, most recently used last,
    at most ``capacity`` of them, each with a string-to-sign of at most ``max_length`` characters
    (a SAS's is a few hundred; longer ones are verified every time, so the cache stays small).

    Only successes are kept: a forged or tampered token (any changed field changes the
    string-to-sign) never matches an entry, so it always goes through the HMAC and fails.
    """

    def __init__(self, capacity: int = 4096, max_length: int = 2048) -> None:
        self.capacity = capacity
        self.max_length = max_length
        self._entries: OrderedDict[tuple[str, str, tuple[bytes, ...]], None] = OrderedDict()

    def __contains__(self, triple: tuple[str, str, tuple[bytes, ...]]) -> bool:
        if triple in self._entries:
            self._entries.move_to_end(triple)
            return True
        return False

    def add(self, triple: tuple[str, str, tuple[bytes, ...]]) -> None:
        if len(triple[1]) > self.max_length:
            return
        self._entries[triple] = None
        if len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()


VERIFIED = VerifiedSignatures()


def signature_matches(sig: str, string_to_sign: str, keys: Sequence[bytes]) -> bool:
    """Constant-time compare against each key. A space can only be a '+' mangled by form decoding.

    A triple that verified before is answered from :data:`VERIFIED` without the HMAC.
    """
    triple = (sig, string_to_sign, tuple(keys))
    if triple in VERIFIED:
        return True
    try:
        mac = base64.b64decode(sig.replace(" ", "+"), validate=True)
    except (binascii.Error, ValueError):
        return False
    data = string_to_sign.encode("utf-8")
    if any(hmac.compare_digest(mac, hmac.new(k, data, hashlib.sha256).digest()) for k in keys):
        VERIFIED.add(triple)
        return True
    return False


# --------------------------------------------------------------------------- verification


@dataclass(frozen=True, slots=True)
class AccountSas:
    """What an authenticated account SAS allows: permission letters and resource types
    (``s`` service, ``c`` container/queue/table, ``o`` object)."""

    permissions: frozenset[str]
    resource_types: frozenset[str]


def verify_account_sas(
    token: SasToken,
    *,
    account: str,
    keys: Sequence[bytes],
    service: str,
    is_https: bool,
    client_ip: str | None,
    now: datetime,
) -> AccountSas:
    """Authenticate an account SAS for ``service`` (its ``ss`` letter: ``b``, ``q`` or ``t``)."""
    require_version(token)
    if not token.ss or not token.srt or not token.sp:
        raise ServiceError("AuthenticationFailed", detail="An account SAS needs ss, srt and sp.")
    verify_signature(token.sig, account_sas_string_to_sign(token, account), keys)
    check_window(token.st, token.se, now, blob=service == "b")
    check_protocol(token.spr, is_https)
    check_ip(token.sip, client_ip, service=service)
    if service not in token.ss:
        raise ServiceError("AuthorizationServiceMismatch")
    return AccountSas(permissions=frozenset(token.sp), resource_types=frozenset(token.srt))


def resource_type_mismatch(needed: str | None, version: str | None) -> ServiceError:
    """403 AuthorizationResourceTypeMismatch for an account SAS whose ``srt`` lacks the resource
    type ``needed`` (one letter, or None where no single letter is known).

    From x-ms-version 2024-08-04 Azure names the missing letter in an ``ExtendedErrorDetail``
    element: ``SignedResourceTypes 'o' is required to perform this operation.`` for Get Blob and
    ``'s'`` for List Queues, both with ``srt=s``/``srt`` lacking the letter (the C++ SDK's
    recordings BlobSasTest.AccountSasAuthorizationErrorDetail and
    QueueSasTest.AccountSasAuthorizationErrorDetail, x-ms-version 2024-08-04, Content-Length 389).
    The JS SDK's recordings at 2018-03-28 and 2019-02-02 have no such element, so earlier versions
    keep the bare body; whether Azure now adds it for them too is not recorded. Where an
    operation is allowed by more than one resource type, which one Azure would name is not
    recorded either, so no detail is given."""
    if needed is None or len(needed) != 1 or (version or "") < AUTHORIZATION_DETAIL_VERSION:
        return ServiceError("AuthorizationResourceTypeMismatch")
    detail = f"SignedResourceTypes '{needed}' is required to perform this operation."
    return ServiceError("AuthorizationResourceTypeMismatch", fields=(("ExtendedErrorDetail", detail),))


def require_version(token: SasToken) -> None:
    if token.sv is None or not _VERSION.fullmatch(token.sv):
        raise ServiceError("AuthenticationFailed", detail="The signed version (sv) is missing or malformed.")


def verify_signature(sig: str, string_to_sign: str, keys: Sequence[bytes]) -> None:
    if not signature_matches(sig, string_to_sign, keys):
        raise ServiceError(
            "AuthenticationFailed",
            detail=f"Signature did not match. String to sign used was {string_to_sign}",
        )


def apply_policy(
    token: SasToken, policy_lookup: Callable[[str], StoredPolicy | None] | None
) -> tuple[str, str | None, str | None]:
    """Merge the stored policy named by ``si`` into (sp, st, se); each field may come from one side only.

    Looking the policy up on every request is what makes revoking or editing it take effect.
    """
    sp, st, se = token.sp, token.st, token.se
    if token.si is not None:
        policy = policy_lookup(token.si) if policy_lookup is not None else None
        if policy is None:
            raise ServiceError(
                "AuthenticationFailed", detail="The specified signed identifier does not exist."
            )
        sp = _merge_field("sp", sp, policy.permission)
        st = _merge_field("st", st, policy.start)
        se = _merge_field("se", se, policy.expiry)
    if not sp:
        raise ServiceError("AuthenticationFailed", detail="The signed permission (sp) is missing.")
    return sp, st, se


def _merge_field(name: str, in_token: str | None, in_policy: str | None) -> str | None:
    if in_token and in_policy:
        raise ServiceError(
            "AuthenticationFailed",
            detail=f"The field '{name}' is given both in the SAS and in the stored access policy.",
        )
    return in_token or in_policy


def check_window(st: str | None, se: str | None, now: datetime, *, blob: bool = False) -> None:
    """st - 5 min <= now <= se; ``se`` is mandatory once the stored policy has been merged in.

    Azure's reasons, as its answers word them, with every time as an RFC 1123 date. A SAS whose
    expiry is not after its start (the request's time when it names none, so an expired SAS
    without ``st`` says so) gets "Signed expiry time [...] has to be after signed start time
    [...]" (recorded for an expired account SAS on the Queue service, x-ms-version 2026-02-06),
    worded "must be after" on the Blob service (``blob``: real Azure answers to an expired Blob
    SAS, and the JS Blob SDK's "create container with invalid SAS should fail"). One used outside
    a valid window gets "Signature not valid in the specified time frame: Start [...] - Expiry
    [...] - Current [...]".
    """
    if not se:
        raise ServiceError("AuthenticationFailed", detail="The signed expiry (se) is missing.")
    expiry = parse_iso8601(se, "se")
    start = parse_iso8601(st, "st") if st else None
    current = now if now.tzinfo is not None else now.replace(tzinfo=UTC)
    effective_start = start if start is not None else current
    if effective_start >= expiry:
        raise ServiceError(
            "AuthenticationFailed",
            detail=(
                f"Signed expiry time [{_http_date(expiry)}] {'must' if blob else 'has to'} be after"
                f" signed start time [{_http_date(effective_start)}]"
            ),
        )
    if (start is not None and current + START_SKEW < start) or current > expiry:
        raise ServiceError(
            "AuthenticationFailed",
            detail=(
                f"Signature not valid in the specified time frame: Start [{_http_date(start)}] - "
                f"Expiry [{_http_date(expiry)}] - Current [{_http_date(current)}]"
            ),
        )


def _http_date(moment: datetime | None) -> str:
    """An RFC 1123 date to the second, as Azure writes the times of a SAS it refuses. A time
    whose UTC lies past year 9999 (``9999-12-31T23:59:59-23:59``) has no such date: it is
    written as given, in its own offset, rather than fail the refusal."""
    if moment is None:
        return ""
    try:
        return format_datetime(moment.astimezone(UTC).replace(microsecond=0), usegmt=True)
    except OverflowError:
        return format_datetime(moment.replace(microsecond=0))


@lru_cache(maxsize=4096)
def parse_iso8601(value: str, name: str = "time") -> datetime:
    """Parse a SAS time (date, or date-time to 100 ns, zone optional and UTC by default).

    Raises AuthenticationFailed, the code Azure uses for any malformed SAS field. Results are
    cached (a token's times are parsed once, not per request); failures are not.
    """
    match = _ISO8601.fullmatch(value)
    if match is None:
        raise _bad_time(name)
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    try:
        parsed = datetime(
            int(year), int(month), int(day), int(hour or 0), int(minute or 0), int(second or 0),
            int((fraction or "0").ljust(6, "0")[:6]), tzinfo=_zone(zone),
        )  # fmt: skip
    except ValueError:
        raise _bad_time(name) from None
    return parsed


def _bad_time(name: str) -> ServiceError:
    return ServiceError("AuthenticationFailed", detail=f"The value of '{name}' is not a valid ISO 8601 time.")


def _zone(zone: str | None) -> timezone:
    if zone is None or zone == "Z":
        return UTC
    sign = -1 if zone[0] == "-" else 1
    hours, minutes = int(zone[1:3]), int(zone[4:6])
    return timezone(sign * timedelta(hours=hours, minutes=minutes))


def check_protocol(spr: str | None, is_https: bool) -> None:
    """``spr`` is ``https`` or ``https,http``; anything else is a malformed field."""
    if spr is None:
        return
    allowed = {p.strip().lower() for p in spr.split(",")}
    if not allowed or not allowed <= {"http", "https"} or "https" not in allowed:
        raise ServiceError("AuthenticationFailed", detail="The signed protocol (spr) is not valid.")
    if not is_https and "http" not in allowed:
        raise ServiceError("AuthorizationProtocolMismatch")


def check_ip(sip: str | None, client_ip: str | None, *, service: str = "t") -> None:
    """``sip`` is one address or an inclusive ``low-high`` range, IPv4 or IPv6; ``service`` is
    the account SAS letter of the service asked (``b``, ``q`` or ``t``).

    The Blob and Queue services refuse a client outside the range with 403
    ``AuthorizationFailure`` and its plain message, for an account SAS and a service SAS alike:
    the C++ SDK's recordings BlobSasTest.AccountSasWithIP and BlobSasTest.ServiceSasWithIP
    (x-ms-version 2022-11-02, HEAD) and QueueSasTest.QueueSasWithIP (2018-03-28, Get Queue
    Metadata, a 246-byte body), each with ``sip=0.0.0.0-0.0.0.1``. The Table service keeps the
    documented ``AuthorizationSourceIPMismatch`` ("SAS error codes"): no recording shows its
    answer."""
    if sip is None:
        return
    low, high = _parse_ip_range(sip)
    client = _parse_client_ip(client_ip)
    if client is None or client.version != low.version or not low <= client <= high:  # type: ignore[operator]
        if service in ("b", "q"):
            raise ServiceError("AuthorizationFailure")
        raise ServiceError(
            "AuthorizationSourceIPMismatch",
            "This request is not authorized to perform this operation using this source IP "
            f"{client_ip or ''}.",
        )


_Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@lru_cache(maxsize=1024)
def _parse_ip_range(sip: str) -> tuple[_Address, _Address]:
    try:
        # An IPv6 address never contains '-', so the first '-' always separates a range.
        first, dash, last = sip.partition("-")
        low = ipaddress.ip_address(first.strip())
        high = ipaddress.ip_address(last.strip()) if dash else low
    except ValueError:
        raise ServiceError("AuthenticationFailed", detail="The signed IP (sip) is not valid.") from None
    if low.version != high.version or low > high:  # type: ignore[operator]
        raise ServiceError("AuthenticationFailed", detail="The signed IP (sip) is not valid.")
    return low, high


@lru_cache(maxsize=4096)
def _parse_client_ip(client_ip: str | None) -> _Address | None:
    """The peer address, with IPv4-mapped IPv6 (dual-stack sockets) unwrapped to IPv4."""
    if not client_ip:
        return None
    try:
        address = ipaddress.ip_address(client_ip.strip())
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


__all__ = [
    "AccountSas",
    "SasToken",
    "StoredPolicy",
    "VerifiedSignatures",
    "account_sas_string_to_sign",
    "apply_policy",
    "check_ip",
    "check_protocol",
    "check_window",
    "parse_iso8601",
    "parse_sas",
    "require_version",
    "signature_matches",
    "stored_policies",
    "verify_account_sas",
    "verify_signature",
]
