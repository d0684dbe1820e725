"""From a request's host and raw path to the account and resource it addresses.

Path-style URLs (``http://127.0.0.1:10002/account/...``) carry the account in the path; host-style
ones (``https://account.table.core.windows.net/...``) in the host name."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from tabulae.http.addressing import decode_segments, locate_account
from tabulae.model.errors import ServiceError
from tabulae.table.api.urls import parse_segment


class Resource(enum.Enum):
    SERVICE = "service"  # account root: service properties and stats
    TABLES = "tables"  # Tables, Tables()
    TABLE = "table"  # Tables('name')
    BATCH = "batch"  # $batch
    METADATA = "metadata"  # $metadata
    ENTITIES = "entities"  # name, name()
    ENTITY = "entity"  # name(PartitionKey='…',RowKey='…')
    NESTED = "nested"  # name/anything: a client whose endpoint already ends in the table name


@dataclass(slots=True)  # not frozen: built on every request; frozen ones build slower
class Route:
    account: str
    secondary: bool
    resource: Resource
    base: str  # {scheme}://{host}[/{account}]: the endpoint as the client addressed it
    table: str | None = None
    pk: str | None = None
    rk: str | None = None
    nested: str | None = None  # the segment after the table name of a NESTED route


def resolve(scheme: str, host: str, raw_path: str, accounts: dict[str, list[bytes]]) -> Route:
    """Work out the account, whether the secondary alias was used, and the resource."""
    account, secondary, base, segments = locate_account(scheme, host, decode_segments(raw_path)[1:], accounts)
    if not segments:
        return Route(account, secondary, Resource.SERVICE, base)
    if len(segments) != 1:
        if len(segments) == 2:
            return _nested(account, secondary, base, *segments)
        raise ServiceError("InvalidUri")
    return _resource(account, secondary, base, segments[0])


def _nested(account: str, secondary: bool, base: str, table: str, rest: str) -> Route:
    """``{table}/{rest}``: what an SDK sends when the endpoint it was given already ends in a
    table name (``{endpoint}/Tables``, ``{endpoint}/Tables('t')``, ``{endpoint}/$batch``). Azure
    addresses such a path to the table's entities, so the request fails there, with the errors
    the SDKs turn into a hint about the account URL (:func:`handlers.nested`)."""
    if not rest or "(" in table or table in ("Tables", "$batch", "$metadata"):
        raise ServiceError("InvalidUri")
    return Route(account, secondary, Resource.NESTED, base, table, nested=rest)


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
            raise ServiceError("InvalidUri")
        return Route(account, secondary, Resource.TABLES, base)
    if parsed.literal is not None:
        raise ServiceError("InvalidInput")
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
