"""The Table service's SAS: the table SAS (``tn``, key ranges) and what each operation needs of
a table or account SAS. The checks every service shares live in :mod:`tabulae.auth.sas`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from tabulae.auth.sas import (
    SasToken,
    StoredPolicy,
    apply_policy,
    check_ip,
    check_protocol,
    check_window,
    require_version,
    verify_account_sas,
    verify_signature,
)
from tabulae.model.errors import ServiceError
from tabulae.table.api.operations import Operation

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

# Account SAS: (required srt letter, permission groups), as "Create an account SAS" lists them.
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

# Table ACLs are managed with the account key only; a batch is authorised per sub-operation.
_NEVER_BY_SAS = frozenset({Operation.GET_ACL, Operation.SET_ACL})


def table_sas_string_to_sign(token: SasToken, account: str) -> str:
    """Twelve fields joined by LF, no trailing LF, table name lower-cased ("Create a service SAS")."""
    resource = f"/table/{account}/{(token.tn or '').lower()}"
    values = (
        token.sp, token.st, token.se, resource, token.si, token.sip, token.spr, token.sv,
        token.spk, token.srk, token.epk, token.erk,
    )  # fmt: skip
    return "\n".join(v or "" for v in values)


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
        """Raise ServiceError unless this SAS may perform ``op`` (on entity ``pk``/``rk`` if given).

        Queries pass no key: they are clipped to ``key_range`` instead of refused. The key range
        is only enforced when both keys are known (point reads and writes). A point read outside
        it finds nothing, as a query clipped to the range would: Azure answers 404
        ResourceNotFound even when the entity exists (recorded for the .NET SDK's
        ValidateSasCredentialsWithRowKeyAndPartitionKeyRanges); a write is refused with 403.
        """
        if op is Operation.BATCH:
            return  # a batch is authorised change by change (``transactions.Authorizer``)
        if op in _NEVER_BY_SAS:
            raise ServiceError("AuthorizationResourceTypeMismatch")
        needed = self._requirement(op)
        for group in needed:
            if not self.permissions.intersection(group):
                raise ServiceError("AuthorizationPermissionMismatch")
        if pk is not None and rk is not None and not self.in_range(pk, rk):
            raise ServiceError("ResourceNotFound" if op is Operation.GET_ENTITY else "AuthorizationFailure")

    def _requirement(self, op: Operation) -> _Requirement:
        """Permission groups for ``op``; wrong resource type is refused before permissions."""
        if not self.is_account:
            if op not in _ENTITY_PERMISSIONS:
                raise ServiceError("AuthorizationResourceTypeMismatch")
            return _ENTITY_PERMISSIONS[op]
        resource_type, needed = _ACCOUNT_RULES[op]
        if resource_type not in (self.resource_types or ()):
            raise ServiceError("AuthorizationResourceTypeMismatch")
        return needed

    def in_range(self, pk: str, rk: str) -> bool:
        """The inclusive key-range test of a table SAS (spk/srk to epk/erk)."""
        spk, srk, epk, erk = self.key_range
        after_start = spk is None or pk > spk or (pk == spk and (srk is None or rk >= srk))
        before_end = epk is None or pk < epk or (pk == epk and (erk is None or rk <= erk))
        return after_start and before_end


# Table SASs without a stored policy that verified, with their grants, by (token, account, keys):
# one client sends the same token with every request. Only successes are kept, and a token is
# only ever found under the exact fields and keys it verified with.
_VERIFIED_GRANTS: dict[tuple[SasToken, str, tuple[bytes, ...]], SasGrant] = {}
_VERIFIED_GRANTS_CAPACITY = 1024


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
    read as UTC). Returns the grant; raises ServiceError with the service's codes.
    """
    cache_key = (token, account, tuple(keys))
    known = _VERIFIED_GRANTS.get(cache_key) if token.si is None else None
    if known is not None:
        # Verified before under these keys: what the token alone decides (its version, fields and
        # signature) holds still; what depends on the clock and the request is checked again.
        check_window(token.st, token.se, now)
        check_protocol(token.spr, is_https)
        check_ip(token.sip, client_ip)
        if table is not None and known.table is not None and table.lower() != known.table.lower():
            raise ServiceError("AuthorizationResourceTypeMismatch")
        return known
    require_version(token)
    if token.is_account:
        granted = verify_account_sas(
            token, account=account, keys=keys, service="t", is_https=is_https, client_ip=client_ip, now=now
        )
        return SasGrant(
            is_account=True, permissions=granted.permissions, resource_types=granted.resource_types
        )
    if not token.tn:
        raise ServiceError("AuthenticationFailed", detail="The table name (tn) is missing from the SAS.")
    verify_signature(token.sig, table_sas_string_to_sign(token, account), keys)
    sp, st, se = apply_policy(token, policy_lookup)
    check_window(st, se, now)
    check_protocol(token.spr, is_https)
    check_ip(token.sip, client_ip)
    if table is not None and table.lower() != token.tn.lower():
        raise ServiceError("AuthorizationResourceTypeMismatch")
    grant = SasGrant(
        is_account=False,
        permissions=frozenset(sp),
        table=token.tn,
        start_pk=token.spk,
        start_rk=token.srk,
        end_pk=token.epk,
        end_rk=token.erk,
    )
    if token.si is None:  # a stored policy is read on every request: its edits apply at once
        if len(_VERIFIED_GRANTS) >= _VERIFIED_GRANTS_CAPACITY:
            _VERIFIED_GRANTS.clear()
        _VERIFIED_GRANTS[cache_key] = grant
    return grant
