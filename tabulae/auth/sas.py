"""Shared access signatures: table (service) SAS and account SAS (spec §10.4, §10.5).

Pure functions. ``parse_sas`` reads the already URL-decoded query, ``verify_sas`` authenticates the
token once per request (signature, stored policy, validity window, protocol, IP, table) and
returns a ``SasGrant``; the request handler then calls ``SasGrant.check`` for the operation it is
about to perform, once per sub-operation for a batch. Keeping the two steps apart lets a batch be
authenticated once and authorised per change.

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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta, timezone
from enum import StrEnum

from tabulae.model.errors import TableError

# Clock skew tolerated on the start time only: a freshly minted token used from a machine whose
# clock runs a little behind must work, but an expired token must not.
START_SKEW = timedelta(minutes=5)
# First version whose account-SAS string-to-sign carries the encryption scope (``ses``) line.
ACCOUNT_SAS_SES_VERSION = "2020-12-06"


class Operation(StrEnum):
    """Every operation of the service, as far as authorisation is concerned."""

    QUERY_TABLES = "QueryTables"
    CREATE_TABLE = "CreateTable"
    DELETE_TABLE = "DeleteTable"
    GET_TABLE = "GetTable"
    QUERY_ENTITIES = "QueryEntities"
    GET_ENTITY = "GetEntity"
    INSERT_ENTITY = "InsertEntity"
    UPDATE_ENTITY = "UpdateEntity"
    MERGE_ENTITY = "MergeEntity"
    UPSERT_REPLACE = "InsertOrReplaceEntity"
    UPSERT_MERGE = "InsertOrMergeEntity"
    DELETE_ENTITY = "DeleteEntity"
    GET_ACL = "GetTableAcl"
    SET_ACL = "SetTableAcl"
    GET_SERVICE_PROPERTIES = "GetServiceProperties"
    SET_SERVICE_PROPERTIES = "SetServiceProperties"
    GET_SERVICE_STATS = "GetServiceStats"


# A permission requirement: each string is a group of alternative letters, and every group must be
# met. ("a", "u") means a AND u (upserts); ("acw",) means a OR c OR w (create table).
_Requirement = tuple[str, ...]

_ENTITY_PERMISSIONS: dict[Operation, _Requirement] = {
    Operation.QUERY_ENTITIES: ("r",),
    Operation.GET_ENTITY: ("r",),
    Operation.INSERT_ENTITY: ("a",),
    Operation.UPDATE_ENTITY: ("u",),
    Operation.MERGE_ENTITY: ("u",),
    Operation.UPSERT_REPLACE: ("a", "u"),
    Operation.UPSERT_MERGE: ("a", "u"),
    Operation.DELETE_ENTITY: ("d",),
}

# Account SAS: (required srt letter, permission groups), spec §10.5.
_ACCOUNT_RULES: dict[Operation, tuple[str, _Requirement]] = {
    Operation.GET_SERVICE_PROPERTIES: ("s", ("r",)),
    Operation.SET_SERVICE_PROPERTIES: ("s", ("w",)),
    Operation.GET_SERVICE_STATS: ("s", ("r",)),
    Operation.QUERY_TABLES: ("c", ("l",)),
    Operation.GET_TABLE: ("c", ("lr",)),
    Operation.CREATE_TABLE: ("c", ("acw",)),
    Operation.DELETE_TABLE: ("c", ("d",)),
    **{op: ("o", req) for op, req in _ENTITY_PERMISSIONS.items()},
}

_ACL_OPERATIONS = frozenset({Operation.GET_ACL, Operation.SET_ACL})

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
        """Account SAS carry ``ss``/``srt``; a table SAS has ``tn`` and neither (§10.5)."""
        return self.ss is not None or self.srt is not None


_TOKEN_FIELDS = frozenset(f.name for f in fields(SasToken))


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
            raise TableError("AuthenticationFailed", detail=f"The SAS parameter '{lowered}' is repeated.")
        found[lowered] = value
    if "sig" not in found:
        return None
    return SasToken(**found)


# --------------------------------------------------------------------------- string-to-sign


def table_sas_string_to_sign(token: SasToken, account: str) -> str:
    """Twelve fields joined by LF, no trailing LF, table name lower-cased (§10.4 step 3)."""
    resource = f"/table/{account}/{(token.tn or '').lower()}"
    values = (
        token.sp, token.st, token.se, resource, token.si, token.sip, token.spr, token.sv,
        token.spk, token.srk, token.epk, token.erk,
    )  # fmt: skip
    return "\n".join(v or "" for v in values)


def account_sas_string_to_sign(token: SasToken, account: str) -> str:
    """Every field followed by LF; ``ses`` only from version 2020-12-06 on (§10.5)."""
    values = [account, token.sp, token.ss, token.srt, token.st, token.se, token.sip, token.spr, token.sv]
    if (token.sv or "") >= ACCOUNT_SAS_SES_VERSION:
        values.append(token.ses)
    return "".join(f"{v or ''}\n" for v in values)


def _signature_matches(sig: str, string_to_sign: str, keys: Sequence[bytes]) -> bool:
    """Constant-time compare against each key. A space can only be a '+' mangled by form decoding."""
    try:
        mac = base64.b64decode(sig.replace(" ", "+"), validate=True)
    except (binascii.Error, ValueError):
        return False
    data = string_to_sign.encode("utf-8")
    return any(hmac.compare_digest(mac, hmac.new(k, data, hashlib.sha256).digest()) for k in keys)


# --------------------------------------------------------------------------- grant


@dataclass(frozen=True, slots=True)
class SasGrant:
    """What an authenticated SAS allows; ``check`` decides per operation.

    ``resource_types`` is None for a table SAS (which only reaches entities of its own table).
    """

    is_account: bool
    permissions: frozenset[str]
    resource_types: frozenset[str] | None = None
    table: str | None = None
    start_pk: str | None = None
    start_rk: str | None = None
    end_pk: str | None = None
    end_rk: str | None = None

    @property
    def key_range(self) -> tuple[str | None, str | None, str | None, str | None]:
        """(spk, srk, epk, erk), inclusive, so the query layer can AND the range into a query."""
        return (self.start_pk, self.start_rk, self.end_pk, self.end_rk)

    def check(self, op: Operation, *, pk: str | None = None, rk: str | None = None) -> None:
        """Raise TableError unless this SAS may perform ``op`` (on entity ``pk``/``rk`` if given).

        Queries pass no key: they are clipped to ``key_range`` instead of refused. The key range
        is only enforced when both keys are known (point reads and writes).
        """
        if op in _ACL_OPERATIONS:
            raise TableError("AuthorizationResourceTypeMismatch")
        needed = self._requirement(op)
        for group in needed:
            if not self.permissions.intersection(group):
                raise TableError("AuthorizationPermissionMismatch")
        if pk is not None and rk is not None and not self.in_range(pk, rk):
            raise TableError("AuthorizationFailure")

    def _requirement(self, op: Operation) -> _Requirement:
        """Permission groups for ``op``; wrong resource type is refused before permissions."""
        if not self.is_account:
            if op not in _ENTITY_PERMISSIONS:
                raise TableError("AuthorizationResourceTypeMismatch")
            return _ENTITY_PERMISSIONS[op]
        resource_type, needed = _ACCOUNT_RULES[op]
        if resource_type not in (self.resource_types or ()):
            raise TableError("AuthorizationResourceTypeMismatch")
        return needed

    def in_range(self, pk: str, rk: str) -> bool:
        """The inclusive key-range test of §10.4 step 10."""
        spk, srk, epk, erk = self.key_range
        after_start = spk is None or pk > spk or (pk == spk and (srk is None or rk >= srk))
        before_end = epk is None or pk < epk or (pk == epk and (erk is None or rk <= erk))
        return after_start and before_end


# --------------------------------------------------------------------------- verification


def verify_sas(
    token: SasToken,
    *,
    account: str,
    keys: Sequence[bytes],
    table: str | None,
    policy_lookup: Callable[[str], StoredPolicy | None] | None,
    is_https: bool,
    client_ip: str | None,
    now: datetime,
) -> SasGrant:
    """Authenticate ``token`` for a request to ``account`` (and ``table``, if the URL names one).

    ``policy_lookup`` resolves a table SAS's ``si`` in the ACL of the token's table (``tn``); None
    means no ACLs are available, so any ``si`` fails. ``now`` should be timezone-aware (naive is
    read as UTC). Returns the grant; raises TableError with the §10.4/§10.5 codes.
    """
    _require_version(token)
    if token.is_account:
        return _verify_account(token, account, keys, is_https, client_ip, now)
    return _verify_table(token, account, keys, table, policy_lookup, is_https, client_ip, now)


def _verify_table(
    token: SasToken,
    account: str,
    keys: Sequence[bytes],
    table: str | None,
    policy_lookup: Callable[[str], StoredPolicy | None] | None,
    is_https: bool,
    client_ip: str | None,
    now: datetime,
) -> SasGrant:
    if not token.tn:
        raise TableError("AuthenticationFailed", detail="The table name (tn) is missing from the SAS.")
    _verify_signature(token.sig, table_sas_string_to_sign(token, account), keys)
    sp, st, se = _apply_policy(token, policy_lookup)
    _check_window(st, se, now)
    _check_protocol(token.spr, is_https)
    _check_ip(token.sip, client_ip)
    if table is not None and table.lower() != token.tn.lower():
        raise TableError("AuthorizationResourceTypeMismatch")
    return SasGrant(
        is_account=False,
        permissions=frozenset(sp),
        table=token.tn,
        start_pk=token.spk,
        start_rk=token.srk,
        end_pk=token.epk,
        end_rk=token.erk,
    )


def _verify_account(
    token: SasToken,
    account: str,
    keys: Sequence[bytes],
    is_https: bool,
    client_ip: str | None,
    now: datetime,
) -> SasGrant:
    if not token.ss or not token.srt or not token.sp:
        raise TableError("AuthenticationFailed", detail="An account SAS needs ss, srt and sp.")
    _verify_signature(token.sig, account_sas_string_to_sign(token, account), keys)
    _check_window(token.st, token.se, now)
    _check_protocol(token.spr, is_https)
    _check_ip(token.sip, client_ip)
    if "t" not in token.ss:
        raise TableError("AuthorizationServiceMismatch")
    return SasGrant(is_account=True, permissions=frozenset(token.sp), resource_types=frozenset(token.srt))


def _require_version(token: SasToken) -> None:
    if token.sv is None or not _VERSION.fullmatch(token.sv):
        raise TableError("AuthenticationFailed", detail="The signed version (sv) is missing or malformed.")


def _verify_signature(sig: str, string_to_sign: str, keys: Sequence[bytes]) -> None:
    if not _signature_matches(sig, string_to_sign, keys):
        raise TableError(
            "AuthenticationFailed",
            detail=f"Signature did not match. String to sign used was {string_to_sign}",
        )


def _apply_policy(
    token: SasToken, policy_lookup: Callable[[str], StoredPolicy | None] | None
) -> tuple[str, str | None, str | None]:
    """Merge the stored policy named by ``si`` into (sp, st, se); each field may come from one side only.

    Looking the policy up on every request is what makes revoking or editing it take effect.
    """
    sp, st, se = token.sp, token.st, token.se
    if token.si is not None:
        policy = policy_lookup(token.si) if policy_lookup is not None else None
        if policy is None:
            raise TableError("AuthenticationFailed", detail="The specified signed identifier does not exist.")
        sp = _merge_field("sp", sp, policy.permission)
        st = _merge_field("st", st, policy.start)
        se = _merge_field("se", se, policy.expiry)
    if not sp:
        raise TableError("AuthenticationFailed", detail="The signed permission (sp) is missing.")
    return sp, st, se


def _merge_field(name: str, in_token: str | None, in_policy: str | None) -> str | None:
    if in_token and in_policy:
        raise TableError(
            "AuthenticationFailed",
            detail=f"The field '{name}' is given both in the SAS and in the stored access policy.",
        )
    return in_token or in_policy


def _check_window(st: str | None, se: str | None, now: datetime) -> None:
    """st - 5 min <= now <= se; ``se`` is mandatory once the stored policy has been merged in."""
    if not se:
        raise TableError("AuthenticationFailed", detail="The signed expiry (se) is missing.")
    expiry = parse_iso8601(se, "se")
    start = parse_iso8601(st, "st") if st else None
    current = now if now.tzinfo is not None else now.replace(tzinfo=UTC)
    if start is not None and start >= expiry:
        raise TableError(
            "AuthenticationFailed", detail=f"Signed expiry time [{se}] must be after signed start time [{st}]"
        )
    if (start is not None and current + START_SKEW < start) or current > expiry:
        raise TableError(
            "AuthenticationFailed",
            detail=(
                f"Signature not valid in the specified time frame: Start [{st or ''}] - "
                f"Expiry [{se}] - Current [{current.strftime('%Y-%m-%dT%H:%M:%SZ')}]"
            ),
        )


def parse_iso8601(value: str, name: str = "time") -> datetime:
    """Parse a SAS time (date, or date-time to 100 ns, zone optional and UTC by default).

    Raises AuthenticationFailed, the code Azure uses for any malformed SAS field.
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


def _bad_time(name: str) -> TableError:
    return TableError("AuthenticationFailed", detail=f"The value of '{name}' is not a valid ISO 8601 time.")


def _zone(zone: str | None) -> timezone:
    if zone is None or zone == "Z":
        return UTC
    sign = -1 if zone[0] == "-" else 1
    hours, minutes = int(zone[1:3]), int(zone[4:6])
    return timezone(sign * timedelta(hours=hours, minutes=minutes))


def _check_protocol(spr: str | None, is_https: bool) -> None:
    """``spr`` is ``https`` or ``https,http``; anything else is a malformed field."""
    if spr is None:
        return
    allowed = {p.strip().lower() for p in spr.split(",")}
    if not allowed or not allowed <= {"http", "https"} or "https" not in allowed:
        raise TableError("AuthenticationFailed", detail="The signed protocol (spr) is not valid.")
    if not is_https and "http" not in allowed:
        raise TableError("AuthorizationProtocolMismatch")


def _check_ip(sip: str | None, client_ip: str | None) -> None:
    """``sip`` is one address or an inclusive ``low-high`` range, IPv4 or IPv6."""
    if sip is None:
        return
    low, high = _parse_ip_range(sip)
    client = _parse_client_ip(client_ip)
    if client is None or client.version != low.version or not low <= client <= high:  # type: ignore[operator]
        raise TableError(
            "AuthorizationSourceIPMismatch",
            "This request is not authorized to perform this operation using this source IP "
            f"{client_ip or ''}.",
        )


_Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def _parse_ip_range(sip: str) -> tuple[_Address, _Address]:
    try:
        # An IPv6 address never contains '-', so the first '-' always separates a range.
        first, dash, last = sip.partition("-")
        low = ipaddress.ip_address(first.strip())
        high = ipaddress.ip_address(last.strip()) if dash else low
    except ValueError:
        raise TableError("AuthenticationFailed", detail="The signed IP (sip) is not valid.") from None
    if low.version != high.version or low > high:  # type: ignore[operator]
        raise TableError("AuthenticationFailed", detail="The signed IP (sip) is not valid.")
    return low, high


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
    "Operation",
    "SasGrant",
    "SasToken",
    "StoredPolicy",
    "account_sas_string_to_sign",
    "parse_iso8601",
    "parse_sas",
    "table_sas_string_to_sign",
    "verify_sas",
]
