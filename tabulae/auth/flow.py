"""How every service decides who a request comes from: the one order of the checks.

An ``Authorization`` header means Shared Key or Shared Key Lite (each service signs its own
string, so the service passes its verifier) or, with ``--oauth basic``, a bearer token; without
the header a SAS in the query string (the service verifies its own SAS and returns what it
grants); with neither, 401 ``NoAuthenticationInformation`` and the bearer challenge, as Azure
answers anonymous requests to a service that has no public access.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from tabulae.auth.bearer import CHALLENGE, verify_bearer
from tabulae.auth.sas import SasToken, parse_sas
from tabulae.model.errors import ServiceError

Grant = TypeVar("Grant")


def is_bearer(authorization: str) -> bool:
    """Whether an ``Authorization`` header carries a bearer token rather than a Shared Key one."""
    return authorization.strip()[:7].lower() == "bearer "


async def authenticate(
    authorization: str | None,
    query: Mapping[str, str],
    *,
    account: str,
    service: str,
    oauth: bool,
    shared_key: Callable[[str], None],
    sas: Callable[[SasToken], Awaitable[Grant]],
) -> Grant | None:
    """Authenticate a request to ``account`` of ``service`` (``table``, ``queue``, ``blob``).

    ``shared_key`` verifies an Authorization header (raising on failure); ``sas`` verifies a
    parsed SAS and returns its grant. Returns that grant, or None for a request signed with the
    account key or a token (which may do anything).
    """
    if authorization is not None:
        if is_bearer(authorization):
            if not oauth:
                raise ServiceError("InvalidAuthenticationInfo")
            verify_bearer(authorization, account, service=service)
            return None
        shared_key(authorization)
        return None
    token = parse_sas(query)
    if token is None:
        raise ServiceError("NoAuthenticationInformation", headers=[(b"www-authenticate", CHALLENGE)])
    return await sas(token)
