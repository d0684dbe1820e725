"""From a request's host and raw path to the account and resource it addresses.

Path-style URLs (``http://127.0.0.1:10002/account/...``) carry the account in the path; host-style
ones (``https://account.table.core.windows.net/...``) in the host name."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from tabulae.http.addressing import locate_account
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


def resolve(scheme: str, host: str, raw_path: str, accounts: dict[str, list[bytes]]) -> Route:
    """Work out the account, whether the secondary alias was used, and the resource."""
    account, secondary, base, segments = locate_account(scheme, host, decode_segments(raw_path)[1:], accounts)
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
