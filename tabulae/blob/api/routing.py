"""From a request's host and raw path to the account, container and blob it addresses.

``/{container}`` with ``restype=container`` (or ``restype=account``) names a container; any
other one-segment path names a blob of the root container ``$root``; a longer path names the
blob that is the rest of the path, slashes and a final slash included ("Naming and Referencing
Containers, Blobs, and Metadata"). Each segment is percent-decoded once, as UTF-8.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from urllib.parse import unquote

from tabulae.http.addressing import locate_account
from tabulae.model.errors import TableError

ROOT_CONTAINER = "$root"


class Kind(enum.Enum):
    SERVICE = "service"
    CONTAINER = "container"
    BLOB = "blob"


@dataclass(slots=True)  # not frozen: built on every request
class Route:
    account: str
    secondary: bool
    base: str  # {scheme}://{host}[/{account}]: the endpoint as the client addressed it
    kind: Kind
    container: str = ""
    blob: str = ""


def resolve(
    scheme: str, host: str, raw_path: str, accounts: dict[str, list[bytes]], restype: str | None
) -> Route:
    try:
        pieces = [unquote(piece, errors="strict") for piece in raw_path.split("/")[1:]]
    except UnicodeDecodeError:
        raise TableError("InvalidUri") from None
    addressed = locate_account(scheme, host, pieces, accounts)
    segments = addressed.segments
    if raw_path.endswith("/") and len(segments) >= 2:
        segments = [*segments, ""]  # a blob name may end with a slash
    account, secondary, base = addressed.account, addressed.secondary, addressed.base
    if not segments:
        return Route(account, secondary, base, Kind.SERVICE)
    if len(segments) == 1:
        if restype in ("container", "account"):
            return Route(account, secondary, base, Kind.CONTAINER, segments[0])
        return Route(account, secondary, base, Kind.BLOB, ROOT_CONTAINER, segments[0])
    return Route(account, secondary, base, Kind.BLOB, segments[0], "/".join(segments[1:]))
