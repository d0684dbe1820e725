"""Azure's built-in data roles for Blob storage, assigned to bearer-token identities.

In Azure a role assignment lives in the management plane (``az role assignment create``, the
portal); Tabulae has none, so assignments are server settings: ``--oauth-role OID=ROLE``
(repeatable) or the ``[oauth-roles]`` section of ``--config``, for every account. ``OID`` is
an object ID as a token's ``oid`` claim names a user, service principal or managed identity,
or as its ``groups`` claim names a group (an assignment to a group is every member's).

What each role allows, from "Access control model in Azure Data Lake Storage" (role
assignments are evaluated before ACLs; when a role allows the operation, no ACL is looked at;
when it does not, the ACLs decide):

- ``owner`` (Storage Blob Data Owner): everything, setting owners and every path's ACL
  included: a superuser.
- ``contributor`` (Storage Blob Data Contributor): read, write, delete and rename data; not
  the owner of a path, and ACLs only of paths it owns.
- ``reader`` (Storage Blob Data Reader): read and list.
"""

from __future__ import annotations

import enum


class Role(enum.IntEnum):
    """The data roles, each allowing all that the ones below it allow."""

    READER = 1
    CONTRIBUTOR = 2
    OWNER = 3


ROLE_NAMES = {"reader": Role.READER, "contributor": Role.CONTRIBUTOR, "owner": Role.OWNER}


class RoleError(ValueError):
    """An assignment that cannot be read; the message names what is wrong."""


def parse_assignment(spec: str) -> tuple[str, Role]:
    """``OID=ROLE`` (``owner``, ``contributor`` or ``reader``, any case) -> the object ID and
    its role."""
    oid, sep, name = spec.partition("=")
    oid, name = oid.strip(), name.strip().lower()
    if not sep or not oid or name not in ROLE_NAMES:
        raise RoleError(f"{spec!r}: expected OBJECT_ID=owner|contributor|reader")
    return oid, ROLE_NAMES[name]


def assignments(specs: tuple[str, ...] | list[str]) -> dict[str, Role]:
    """Every assignment by object ID; an ID named twice has the higher of its roles (Azure's
    role assignments add up)."""
    roles: dict[str, Role] = {}
    for spec in specs:
        oid, role = parse_assignment(spec)
        roles[oid] = max(role, roles.get(oid, role))
    return roles
