"""The Queue service's SAS: the queue (service) SAS and what each operation needs of a queue or an
account SAS ("Create a service SAS", "Create an account SAS"). The checks every service shares
live in :mod:`tabulae.auth.sas`.

A queue SAS grants ``r`` (metadata and Peek Messages), ``a`` (Put Message), ``u`` (Update
Message) and ``p`` (Get and Delete Message) on the one queue whose name it signs; anything else
(creating or deleting queues, metadata and ACL changes, Clear Messages, service operations) needs
the account key or an account SAS. A user delegation SAS (signed with a key from Get User
Delegation Key, ``sks=q``) grants the same as a queue SAS.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from tabulae.auth import delegation
from tabulae.auth.sas import (
    SasToken,
    StoredPolicy,
    apply_policy,
    check_ip,
    check_protocol,
    check_window,
    require_version,
    resource_type_mismatch,
    verify_account_sas,
    verify_signature,
)
from tabulae.model.errors import ServiceError
from tabulae.queue.api.operations import Operation

# From this version the signed resource starts with the service name and sip/spr are signed.
SAS_SERVICE_PREFIX_VERSION = "2015-04-05"

_QUEUE_PERMISSIONS: dict[Operation, str] = {
    Operation.GET_METADATA: "r",
    Operation.PEEK_MESSAGES: "r",
    Operation.PUT_MESSAGE: "a",
    Operation.UPDATE_MESSAGE: "u",
    Operation.GET_MESSAGES: "p",
    Operation.DELETE_MESSAGE: "p",
}

# What no queue SAS permission reaches, which Azure refuses outright (AuthorizationFailure, not
# a permission mismatch): creating its queue, as it answered the .NET SDK's
# CreateAsync_WithQueueServiceSas (sp=raup), and deleting it, as it answered the Java SDK's
# QueueSasAsyncClientTests.queueSasUpdateWithPerm (sp=raup, x-ms-version 2023-01-03). The other
# operations no letter grants (metadata and ACL changes, Clear Messages) are not recorded and keep
# AuthorizationPermissionMismatch.
_NEVER_BY_QUEUE_SAS = frozenset({Operation.CREATE_QUEUE, Operation.DELETE_QUEUE})

# Account SAS: (resource types, any one of which will do; permission letters, any one of which
# will do). Queue ACLs are managed with the account key only.
_ACCOUNT_RULES: dict[Operation, tuple[str, str]] = {
    Operation.GET_SERVICE_PROPERTIES: ("s", "r"),
    Operation.SET_SERVICE_PROPERTIES: ("s", "w"),
    Operation.GET_SERVICE_STATS: ("s", "r"),
    Operation.LIST_QUEUES: ("s", "l"),
    Operation.CREATE_QUEUE: ("c", "cw"),
    Operation.DELETE_QUEUE: ("c", "d"),
    Operation.GET_METADATA: ("c", "r"),
    Operation.SET_METADATA: ("c", "w"),
    Operation.PUT_MESSAGE: ("o", "a"),
    Operation.GET_MESSAGES: ("o", "p"),
    Operation.PEEK_MESSAGES: ("o", "r"),
    Operation.DELETE_MESSAGE: ("co", "p"),
    Operation.UPDATE_MESSAGE: ("co", "u"),
    Operation.CLEAR_MESSAGES: ("co", "d"),
}


def queue_sas_string_to_sign(token: SasToken, account: str, queue: str) -> str:
    """The queue SAS string-to-sign: from version 2015-04-05 eight fields joined by LF (no
    trailing LF), the resource ``/queue/{account}/{queue}``; before it six, without sip and spr and
    without the service name."""
    values: tuple[str | None, ...]
    if (token.sv or "") >= SAS_SERVICE_PREFIX_VERSION:
        values = (
            token.sp,
            token.st,
            token.se,
            f"/queue/{account}/{queue}",
            token.si,
            token.sip,
            token.spr,
            token.sv,
        )
    else:
        values = (token.sp, token.st, token.se, f"/{account}/{queue}", token.si, token.sv)
    return "\n".join(v or "" for v in values)


def delegation_string_to_sign(query: Mapping[str, str], account: str, queue: str) -> str:
    """A queue user delegation SAS's string-to-sign (the Queue service has them from 2025-07-05):
    the queue SAS's fields with the key's seven (``skoid`` .. ``skdutid``) and ``sduoid`` where
    ``si`` stands."""
    names = ("sp", "st", "se", None, *delegation.KEY_FIELDS, "skdutid", "sduoid", "sip", "spr", "sv")
    return "\n".join(f"/queue/{account}/{queue}" if name is None else query.get(name) or "" for name in names)


@dataclass(frozen=True, slots=True)
class QueueGrant:
    """What an authenticated SAS allows; ``check`` decides per operation."""

    is_account: bool
    permissions: frozenset[str]
    resource_types: frozenset[str] = frozenset()

    def check(self, operation: Operation, version: str | None = None) -> None:
        """Raise the service's 403 unless this SAS may perform ``operation``; ``version`` (the
        request's x-ms-version) decides whether a refused resource type is explained."""
        if not self.is_account:
            if operation in _NEVER_BY_QUEUE_SAS:
                raise ServiceError("AuthorizationFailure")
            needed = _QUEUE_PERMISSIONS.get(operation)
            if needed is None or needed not in self.permissions:
                raise ServiceError("AuthorizationPermissionMismatch")
            return
        rule = _ACCOUNT_RULES.get(operation)
        if rule is None:
            raise ServiceError("AuthorizationResourceTypeMismatch")  # ACLs: never by SAS
        resource_types, letters = rule
        if not self.resource_types.intersection(resource_types):
            raise resource_type_mismatch(resource_types, version)
        if not self.permissions.intersection(letters):
            raise ServiceError("AuthorizationPermissionMismatch")


def verify_sas(
    token: SasToken,
    *,
    account: str,
    keys: Sequence[bytes],
    queue: str,
    policy_lookup: Callable[[str], StoredPolicy | None] | None,
    is_https: bool,
    client_ip: str | None,
    now: datetime,
    query: Mapping[str, str] | None = None,
) -> QueueGrant:
    """Authenticate ``token`` for a request to ``account`` (and ``queue``, "" for the service).

    A queue SAS is signed for the queue the URL names, so a token made for another queue fails
    its signature check. ``policy_lookup`` resolves ``si`` in that queue's ACL. ``query`` is the
    request's query: a token carrying a user delegation key's fields is signed with that key.
    """
    require_version(token)
    if token.is_account:
        granted = verify_account_sas(
            token, account=account, keys=keys, service="q", is_https=is_https, client_ip=client_ip, now=now
        )
        return QueueGrant(True, granted.permissions, granted.resource_types)
    if query is not None and delegation.is_delegation_sas(query):
        if token.si is not None:
            raise ServiceError(
                "AuthenticationFailed", detail="A user delegation SAS cannot name a stored access policy."
            )
        key = delegation.key_of_token(query, now, "q")
        signed = delegation_string_to_sign(query, account, queue)
        verify_signature(token.sig, signed, delegation.key_values(key, keys))
    else:
        verify_signature(token.sig, queue_sas_string_to_sign(token, account, queue), keys)
    sp, st, se = apply_policy(token, policy_lookup)
    check_window(st, se, now)
    check_protocol(token.spr, is_https)
    check_ip(token.sip, client_ip, service="q")
    return QueueGrant(False, frozenset(sp))
