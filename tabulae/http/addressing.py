"""Which account a request addresses, from its Host and path, for every service alike.

Path-style URLs (``http://127.0.0.1:10002/devstoreaccount1/...``, what the emulator endpoints
use) carry the account as the first path segment; host-style ones
(``https://devstoreaccount1.table.core.windows.net/...``) as the first label of the host. IP
literals, ``localhost`` and dotless hosts are path-style, as is any host whose first label is not
a known account. ``acct-secondary`` addresses the read-only secondary endpoint of ``acct``.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import unquote

from tabulae.http.hosts import host_name
from tabulae.model.errors import ServiceError
from tabulae.model.names import SECONDARY_SUFFIX

# (account, secondary?, base, segments): ``base`` is {scheme}://{host}[/{account}], the endpoint as
# the client addressed it; ``segments`` the decoded path segments after the account. A plain
# tuple, as one is made for every request.
Addressed = tuple[str, bool, str, list[str]]


_STYLE_CACHE: dict[str, bool] = {}
_BAD_ESCAPE = re.compile("%(?![0-9A-Fa-f]{2})")
_PATH_STYLE_ONLY = [False]  # set once per worker at start-up (`--path-style-only`)


def path_style_only(on: bool) -> None:
    """Take the account from the path whatever the host says (Azurite's ``--disableProductStyleUrl``):
    for a proxy or DNS name whose first label happens to be an account name."""
    _PATH_STYLE_ONLY[0] = on
    _STYLE_CACHE.clear()


def decode_segments(raw_path: str) -> list[str]:
    """Split a raw path on ``/`` and percent-decode each piece once (strict UTF-8); splitting
    before decoding keeps an encoded ``%2F`` inside its segment. A ``%`` not followed by two hex
    digits is malformed, as bytes that are not UTF-8 are: 400 ``InvalidUri`` (Azure's front end
    refuses both as an invalid URL) rather than a name holding a literal ``%``."""
    if "%" in raw_path and _BAD_ESCAPE.search(raw_path):
        raise ServiceError("InvalidUri")
    try:
        return [unquote(piece, errors="strict") for piece in raw_path.split("/")]
    except UnicodeDecodeError as exc:
        raise ServiceError("InvalidUri") from exc


def is_path_style(host: str, accounts: dict[str, list[bytes]]) -> bool:
    """Whether requests to ``host`` name the account in the path (cached per host)."""
    cached = _STYLE_CACHE.get(host)
    if cached is None:
        cached = _compute_path_style(host, accounts)
        if len(_STYLE_CACHE) < 1024:
            _STYLE_CACHE[host] = cached
    return cached


def _compute_path_style(host: str, accounts: dict[str, list[bytes]]) -> bool:
    if _PATH_STYLE_ONLY[0]:
        return True
    bare = host_name(host)
    try:
        ipaddress.ip_address(bare)
        return True
    except ValueError:
        pass
    if bare == "localhost" or "." not in bare:
        return True
    label = bare.split(".", 1)[0]
    return label.removesuffix(SECONDARY_SUFFIX) not in accounts


def split_account(segment: str, accounts: dict[str, list[bytes]]) -> tuple[str, bool]:
    """``acct`` or ``acct-secondary`` → (``acct``, secondary?); an unknown account is refused
    with 403 AuthenticationFailed and Azure's detail naming it, whatever the operation ("GetProperties"
    is the account's lookup, as recorded for the Java SDK's ServiceApiTests.setPropsError, a Set Blob
    Service Properties at x-ms-version 2023-08-03)."""
    if segment in accounts:
        return segment, False
    if segment.endswith(SECONDARY_SUFFIX) and segment[: -len(SECONDARY_SUFFIX)] in accounts:
        return segment[: -len(SECONDARY_SUFFIX)], True
    raise ServiceError(
        "AuthenticationFailed",
        detail=f"Cannot find the claimed account when trying to GetProperties for the account {segment}.",
    )


def locate_account(
    scheme: str, host: str, segments: list[str], accounts: dict[str, list[bytes]]
) -> Addressed:
    """The account of a request whose decoded path is ``segments`` (without the leading empty
    one); a trailing empty segment (a final ``/``) is dropped."""
    if is_path_style(host, accounts):
        if not segments or not segments[0]:
            raise ServiceError("InvalidUri")
        account, secondary = split_account(segments[0], accounts)
        base = f"{scheme}://{host}/{segments[0]}"
        segments = segments[1:]
        if secondary and segments and segments[0] == account:
            segments = segments[1:]  # the Python SDK's path-style get_service_stats repeats the account
    else:
        account, secondary = split_account(host.split(".", 1)[0], accounts)
        base = f"{scheme}://{host}"
    if secondary:
        base = base.replace(f"{account}{SECONDARY_SUFFIX}", account, 1)
    if segments and segments[-1] == "":
        segments = segments[:-1]
    return account, secondary, base, segments
