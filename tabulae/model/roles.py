"""Azure's built-in data roles, assigned to bearer-token identities.

In Azure a role assignment lives in the management plane (``az role assignment create``, the
portal); Tabulae has none, so assignments are server settings: ``--oauth-role OID=ROLE``
(repeatable) or the ``[oauth-roles]`` section of ``--config``, for every account. ``OID`` is
an object ID as a token's ``oid`` claim names a user, service principal or managed identity,
or as its ``groups`` claim names a group (an assignment to a group is every member's).

Each role is the set of actions its definition lists ("Azure built-in roles for Storage":
Actions and DataActions together, relative to ``Microsoft.Storage/storageAccounts/``), and each
operation needs the actions of "Permissions for calling data operations" (the services' own
tables: ``blob/api/roles.py``, ``queue/api/roles.py``, ``table/api/roles.py``). Once any
assignment is configured every bearer request is checked against them, on every service, and a
token whose roles lack the action gets 403 ``AuthorizationPermissionMismatch``, as in Azure;
with none configured a valid token may do anything (Azurite's behaviour, and Tabulae's before
roles existed).

The Blob roles also order an HNS account's checks ("Access control model in Azure Data Lake
Storage": role assignments are evaluated before ACLs; when a role allows the operation, no ACL
is looked at; when it does not, the ACLs decide):

- ``owner`` (Storage Blob Data Owner): everything, setting owners and every path's ACL
  included: a superuser.
- ``contributor`` (Storage Blob Data Contributor): read, write, delete and rename data; not
  the owner of a path, and ACLs only of paths it owns.
- ``reader`` (Storage Blob Data Reader): read and list.

No data role has the account's service-level actions (``blobServices/read`` and ``write`` for
service properties and statistics, ``blobServices/getInfo/action`` for Get Account Information),
nor the container, queue and table ACL actions but the Blob owner's: Azure gives them with
management roles, of which Tabulae has Storage Account Contributor (``account-contributor``):
every Action of the account and no DataAction, so an identity that also reads and writes data
is given a data role beside it, as in Azure.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Role(enum.IntEnum):
    """The Blob data roles, each allowing all that the ones below it allow."""

    READER = 1
    CONTRIBUTOR = 2
    OWNER = 3


ROLE_NAMES = {"reader": Role.READER, "contributor": Role.CONTRIBUTOR, "owner": Role.OWNER}

_BLOB = "blobServices/"
_QUEUE = "queueServices/queues/"
_TABLE = "tableServices/tables/"
_MANAGED = ("read", "write", "delete", "getAcl/action", "setAcl/action")  # a container's, queue's, table's

# Each built-in data role's actions, as its definition lists them ("/*" covers what is below).
ROLE_ACTIONS: dict[str, frozenset[str]] = {
    "owner": frozenset({_BLOB + "containers/*", _BLOB + "generateUserDelegationKey/action"}),
    "contributor": frozenset(
        {
            _BLOB + "containers/delete", _BLOB + "containers/read", _BLOB + "containers/write",
            _BLOB + "generateUserDelegationKey/action", _BLOB + "containers/blobs/delete",
            _BLOB + "containers/blobs/read", _BLOB + "containers/blobs/write",
            _BLOB + "containers/blobs/move/action", _BLOB + "containers/blobs/add/action",
        }
    ),
    "reader": frozenset(
        {
            _BLOB + "containers/read", _BLOB + "generateUserDelegationKey/action",
            _BLOB + "containers/blobs/read",
        }
    ),
    "queue-contributor": frozenset(
        {
            _QUEUE + "delete", _QUEUE + "read", _QUEUE + "write", _QUEUE + "messages/delete",
            _QUEUE + "messages/read", _QUEUE + "messages/write", _QUEUE + "messages/process/action",
        }
    ),
    "queue-reader": frozenset({_QUEUE + "read", _QUEUE + "messages/read"}),
    "queue-processor": frozenset({_QUEUE + "messages/read", _QUEUE + "messages/process/action"}),
    "queue-sender": frozenset({_QUEUE + "messages/add/action"}),
    "table-contributor": frozenset(
        {
            _TABLE + "read", _TABLE + "write", _TABLE + "delete", _TABLE + "entities/read",
            _TABLE + "entities/write", _TABLE + "entities/delete", _TABLE + "entities/add/action",
            _TABLE + "entities/update/action",
        }
    ),
    "table-reader": frozenset({_TABLE + "read", _TABLE + "entities/read"}),
    # Storage Account Contributor, a management role: every Action of the account
    # (storageAccounts/*) and no DataAction, so service properties, containers, queues, tables
    # and their ACLs, but no blob, message or entity.
    "account-contributor": frozenset(
        {
            _BLOB + "read", _BLOB + "write", _BLOB + "getInfo/action",
            *(_BLOB + "containers/" + action for action in _MANAGED),
            "queueServices/read", "queueServices/write",
            *(_QUEUE + action for action in _MANAGED),
            "tableServices/read", "tableServices/write",
            *(_TABLE + action for action in _MANAGED),
        }
    ),
}  # fmt: skip

# Azure's names of the roles, accepted as well as the short ones (any case).
AZURE_NAMES = {
    "storage blob data owner": "owner",
    "storage blob data contributor": "contributor",
    "storage blob data reader": "reader",
    "storage queue data contributor": "queue-contributor",
    "storage queue data reader": "queue-reader",
    "storage queue data message processor": "queue-processor",
    "storage queue data message sender": "queue-sender",
    "storage table data contributor": "table-contributor",
    "storage table data reader": "table-reader",
    "storage account contributor": "account-contributor",
}

ROLE_CHOICES = "|".join(ROLE_ACTIONS)


class RoleError(ValueError):
    """An assignment that cannot be read; the message names what is wrong."""


def role_name(text: str) -> str | None:
    """The short name of a role named either way (``queue-reader``, ``Storage Queue Data
    Reader``), or None for a name no built-in data role has."""
    name = " ".join(text.split()).lower()
    name = AZURE_NAMES.get(name, name)
    return name if name in ROLE_ACTIONS else None


def parse_assignment(spec: str) -> tuple[str, str]:
    """``OID=ROLE`` -> the object ID and the role's short name."""
    oid, sep, text = spec.partition("=")
    oid = oid.strip()
    name = role_name(text)
    if not sep or not oid or name is None:
        raise RoleError(f"{spec!r}: expected OBJECT_ID=ROLE, ROLE one of {ROLE_CHOICES}")
    return oid, name


@dataclass(frozen=True, slots=True)
class Assignments:
    """Every assignment: the Blob role of each object ID (the highest, for an HNS account's
    checks) and the actions all its roles grant (Azure's role assignments add up)."""

    blob: dict[str, Role] = field(default_factory=dict)
    actions: dict[str, frozenset[str]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.actions)

    def held(self, oid: str, groups: frozenset[str]) -> frozenset[str]:
        """The actions an identity holds through its own assignments and its groups'."""
        found = self.actions.get(oid, frozenset())
        for group in groups:
            found = found | self.actions.get(group, frozenset())
        return found


def assignments(specs: tuple[str, ...] | list[str]) -> Assignments:
    """Every ``OID=ROLE`` assignment read; raises :class:`RoleError` for a bad one."""
    blob: dict[str, Role] = {}
    actions: dict[str, frozenset[str]] = {}
    for spec in specs:
        oid, name = parse_assignment(spec)
        actions[oid] = actions.get(oid, frozenset()) | ROLE_ACTIONS[name]
        role = ROLE_NAMES.get(name)
        if role is not None:
            blob[oid] = max(role, blob.get(oid, role))
    return Assignments(blob, actions)


def permits(held: frozenset[str], action: str) -> bool:
    """Whether the actions held include ``action``, itself or by a ``/*`` above it."""
    if action in held:
        return True
    return any(grant.endswith("/*") and action.startswith(grant[:-1]) for grant in held)


Need = tuple[frozenset[str], ...]  # alternatives: an operation is allowed when one is held whole


def need(*alternatives: str | tuple[str, ...]) -> Need:
    """An operation's need from Azure's table: each argument an action, or actions all needed."""
    return tuple(frozenset((item,) if isinstance(item, str) else item) for item in alternatives)


def allowed(held: frozenset[str], wanted: Need) -> bool:
    """Whether the actions held satisfy one alternative of ``wanted`` (an empty need: none)."""
    return any(all(permits(held, action) for action in option) for option in wanted)
