"""From a request's host and raw path to the account and resource it addresses.

Path-style URLs (``http://127.0.0.1:10002/account/...``) carry the account in the path; host-style
ones (``https://account.table.core.windows.net/...``) in the host name."""

from __future__ import annotations

import enum
import ipaddress
from dataclasses import dataclass

from tabulae.model.errors import TableError
from tabulae.table.api.urls import decode_segments, parse_segment


class Resource(enum.Enum):
    SERVICE = "service"  # account root: service properties and stats
    TABLES = "tables"  # Tables, Tables()
    TABLE = "table"  # Tables('name')
    BATCH = "batch"  # $batch
    METADATA = "metadata"  # $metadata
    ENTITIES = "entities"  # name, name()
    ENTITY = "entity"  # name(PartitionKey='…',RowKey='…')


@dataclass(slots=True)  # not frozen: built on every request, and frozen ones cost ~3x to build
class Route:
    account: str
    secondary: bool
    resource: Resource
    base: str  # {scheme}://{host}[/{account}]: the endpoint as the client addressed it
    table: str | None = None
    pk: str | None = None
    rk: str | None = None


def _is_path_style(host: str, accounts: dict[str, list[bytes]]) -> bool:
    """IP literals, ``localhost`` and dotless hosts are path-style (cached per host)."""
    cached = _STYLE_CACHE.get(host)
    if cached is None:
        cached = _compute_path_style(host, accounts)
        if len(_STYLE_CACHE) < 1024:
            _STYLE_CACHE[host] = cached
    return cached


_STYLE_CACHE: dict[str, bool] = {}


def _compute_path_style(host: str, accounts: dict[str, list[bytes]]) -> bool:
    hostname = host.rsplit(":", 1)[0] if not host.startswith("[") else host.split("]")[0] + "]"
    bare = hostname.strip("[]")
    try:
        ipaddress.ip_address(bare)
        return True
    except ValueError:
        pass
    if bare == "localhost" or "." not in bare:
        return True
    label = bare.split(".", 1)[0]
    return label.removesuffix("-secondary") not in accounts


def _split_account(segment: str, accounts: dict[str, list[bytes]]) -> tuple[str, bool]:
    if segment in accounts:
        return segment, False
    if segment.endswith("-secondary") and segment[: -len("-secondary")] in accounts:
        return segment[: -len("-secondary")], True
    raise TableError("AuthenticationFailed", detail="The account in the request is not known to this server.")


def resolve(scheme: str, host: str, raw_path: str, accounts: dict[str, list[bytes]]) -> Route:
    """Work out the account, whether the secondary alias was used, and the resource."""
    segments = decode_segments(raw_path)[1:]  # the path starts with "/"
    if _is_path_style(host, accounts):
        if not segments or not segments[0]:
            raise TableError("InvalidUri")
        account, secondary = _split_account(segments[0], accounts)
        base = f"{scheme}://{host}/{segments[0]}"
        segments = segments[1:]
        if secondary and segments and segments[0] == account:
            segments = segments[1:]  # the Python SDK's get_service_stats quirk ("Get Table Service Stats")
    else:
        label = host.split(".", 1)[0]
        account, secondary = _split_account(label, accounts)
        base = f"{scheme}://{host}"
    if secondary:
        base = base.replace(f"{account}-secondary", account, 1)
    if segments and segments[-1] == "" and len(segments) > 0:
        segments = segments[:-1]
    if not segments:
        return Route(account, secondary, Resource.SERVICE, base)
    if len(segments) != 1:
        raise TableError("InvalidUri")
    return _resource(account, secondary, base, segments[0])


def _resource(account: str, secondary: bool, base: str, segment: str) -> Route:
    if segment == "$batch":
        return Route(account, secondary, Resource.BATCH, base)
    if segment == "$metadata":
        return Route(account, secondary, Resource.METADATA, base)
    parsed = parse_segment(segment)
    if parsed.name == "Tables":
        if parsed.literal is not None:
            return Route(account, secondary, Resource.TABLE, base, table=parsed.literal)
        if parsed.keys is not None:
            raise TableError("InvalidUri")
        return Route(account, secondary, Resource.TABLES, base)
    if parsed.literal is not None:
        raise TableError("InvalidInput")
    if parsed.keys is not None:
        return Route(
            account,
            secondary,
            Resource.ENTITY,
            base,
            parsed.name,
            parsed.keys["PartitionKey"],
            parsed.keys["RowKey"],
        )
    return Route(account, secondary, Resource.ENTITIES, base, parsed.name)
