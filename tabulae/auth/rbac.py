"""Role-based access for bearer tokens: what a token's role assignments let it do.

Once ``--oauth-role`` assignments are configured (:mod:`tabulae.model.roles`), ``Frontend``
reads the actions a verified token holds, through its ``oid`` and its ``groups``, into
``Request.actions``, and each service checks them against what the operation needs (its table of
"Permissions for calling data operations") before its handler runs. A token holding none of
the alternatives gets 403 ``AuthorizationPermissionMismatch``, as Azure answers a caller without
a sufficient role assignment. Shared Key and SAS requests never carry actions: the account key
and a SAS's own permissions decide for them.
"""

from __future__ import annotations

from tabulae.auth.bearer import token_claims
from tabulae.model.errors import ServiceError
from tabulae.model.roles import Assignments, Need, allowed


def token_actions(book: Assignments, header: str) -> frozenset[str]:
    """The actions a verified ``Authorization: Bearer`` header's identity holds."""
    claims = token_claims(header)
    groups = claims.get("groups")
    members = frozenset(str(group) for group in groups) if isinstance(groups, list) else frozenset()
    return book.held(str(claims.get("oid") or ""), members)


def require(held: frozenset[str], wanted: Need | None) -> None:
    """Refuse (403 ``AuthorizationPermissionMismatch``) unless ``held`` satisfies ``wanted``;
    an operation missing from a service's table (None) needs what no data role has."""
    if wanted is None or not allowed(held, wanted):
        raise ServiceError("AuthorizationPermissionMismatch")
