"""OData JSON payloads: choosing the metadata level, and rendering tables and entities.

Stored entities already hold their user properties as minimal-metadata JSON, so in the common
case (minimal metadata, no ``$select``) an entity is rendered by joining a small header object
with the stored bytes: no decoding, no re-encoding.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any
from urllib.parse import quote

import orjson

from tabulae.model import edm
from tabulae.model.entity import ANNOTATION, StoredEntity
from tabulae.model.errors import ServiceError

NONE, MINIMAL, FULL = "nometadata", "minimalmetadata", "fullmetadata"

CONTENT_TYPES = {
    level: f"application/json;odata={level};streaming=true;charset=utf-8".encode()
    for level in (NONE, MINIMAL, FULL)
}
CONTENT_TYPE_TEXT = {level: value.decode() for level, value in CONTENT_TYPES.items()}

_FORMAT_LEVELS = {
    "application/json;odata=nometadata": NONE,
    "application/json;odata=minimalmetadata": MINIMAL,
    "application/json;odata=fullmetadata": FULL,
    "application/json": MINIMAL,
    "json": MINIMAL,
}


def _media_level(media_range: str) -> str | None:
    """The metadata level one media range asks for, or None if it says nothing about JSON."""
    parts = [p.strip().lower() for p in media_range.split(";")]
    media = parts[0]
    if media in ("application/atom+xml", "application/atomsvc+xml"):
        raise ServiceError("AtomFormatNotSupported")
    if media == "application/json":
        for param in parts[1:]:
            name, _, value = param.partition("=")
            if name.strip() == "odata":
                level = value.strip() + ("" if value.strip().endswith("metadata") else "metadata")
                return level if level in (NONE, MINIMAL, FULL) else MINIMAL
        return MINIMAL
    if media in ("*/*", "application/*"):
        return MINIMAL
    return None


def metadata_level(accept: str | None, format_param: str | None) -> str:
    """``$format`` wins over ``Accept``; JSON without a level, or nothing, is minimal metadata."""
    if format_param:
        level = _FORMAT_LEVELS.get(format_param.replace(" ", "").lower())
        if level is None:
            if "atom" in format_param.lower():
                raise ServiceError("AtomFormatNotSupported")
            raise ServiceError("InvalidInput")
        return level
    if not accept:
        return MINIMAL
    return _accept_level(accept)


@lru_cache(maxsize=256)
def _accept_level(accept: str) -> str:
    """The level an ``Accept`` value asks for; clients send the same few values every time."""
    for media_range in accept.split(","):
        level = _media_level(media_range)
        if level is not None:
            return level
    return MINIMAL


def _quote_key(key: str) -> str:
    """A key as it appears in an entity URL: quotes doubled, then percent-encoded. Keys of ASCII
    letters and digits only, the usual kind, need neither and skip ``quote``."""
    if key.isascii() and key.isalnum():
        return key
    return quote(key.replace("'", "''"), safe="")


def key_path(table: str, pk: str, rk: str) -> str:
    """``table(PartitionKey='…',RowKey='…')`` with quotes doubled and then percent-encoded."""
    return f"{table}(PartitionKey='{_quote_key(pk)}',RowKey='{_quote_key(rk)}')"


def table_path(name: str) -> str:
    return f"Tables('{name}')"


# ------------------------------------------------------------------------------------ tables


def table_object(base: str, account: str, name: str, level: str) -> dict[str, Any]:
    if level == FULL:
        return {
            "odata.type": f"{account}.Tables",
            "odata.id": f"{base}/{table_path(name)}",
            "odata.editLink": table_path(name),
            "TableName": name,
        }
    return {"TableName": name}


def render_table(base: str, account: str, name: str, level: str) -> bytes:
    body = table_object(base, account, name, level)
    if level != NONE:
        body = {"odata.metadata": f"{base}/$metadata#Tables/@Element", **body}
    return orjson.dumps(body)


def render_tables(base: str, account: str, names: list[str], level: str) -> bytes:
    value = [table_object(base, account, name, level) for name in names]
    if level == NONE:
        return orjson.dumps({"value": value})
    return orjson.dumps({"odata.metadata": f"{base}/$metadata#Tables", "value": value})


# ------------------------------------------------------------------------------------ entities


def _select_properties(blob: bytes, select: list[str], level: str) -> dict[str, Any]:
    raw: dict[str, Any] = orjson.loads(blob)
    out: dict[str, Any] = {}
    for name in select:
        if name in ("PartitionKey", "RowKey", "Timestamp"):
            continue
        if name in raw:
            annotation = raw.get(name + ANNOTATION)
            if annotation is not None and level != NONE:
                out[name + ANNOTATION] = annotation
            out[name] = raw[name]
        else:
            out[name] = None
    return out


def _entity_head(
    entity: StoredEntity, base: str, account: str, table: str, level: str, select: list[str] | None
) -> dict[str, Any]:
    timestamp = edm.format_datetime(entity.ticks)
    head: dict[str, Any] = {}
    if level == FULL:
        path = key_path(table, entity.pk, entity.rk)
        head["odata.type"] = f"{account}.{table}"
        head["odata.id"] = f"{base}/{path}"
        head["odata.etag"] = edm.etag_for(timestamp)
        head["odata.editLink"] = path
    elif level == MINIMAL:
        head["odata.etag"] = edm.etag_for(timestamp)
    if select is None or "PartitionKey" in select:
        head["PartitionKey"] = entity.pk
    if select is None or "RowKey" in select:
        head["RowKey"] = entity.rk
    if select is None or "Timestamp" in select:
        if level == FULL:
            head["Timestamp@odata.type"] = edm.DATETIME
        head["Timestamp"] = timestamp
    return head


def _join(head: dict[str, Any], properties: bytes) -> bytes:
    encoded = orjson.dumps(head)
    if properties == b"{}":
        return encoded
    if encoded == b"{}":
        return properties
    return encoded[:-1] + b"," + properties[1:]


@lru_cache(maxsize=4096)  # rows written by one batch or commit group share their Timestamp
def _minimal_stamps(ticks: int) -> tuple[bytes, bytes]:
    """The JSON around an entity's keys in minimal metadata: ``{"odata.etag":…,"PartitionKey":``
    before them and ``,"Timestamp":…`` after."""
    etag = orjson.dumps(edm.etag_of_ticks(ticks))
    return b'{"odata.etag":' + etag + b',"PartitionKey":', b',"Timestamp":' + orjson.dumps(
        edm.format_datetime(ticks)
    )


def entity_json(
    entity: StoredEntity, base: str, account: str, table: str, level: str, select: list[str] | None
) -> bytes:
    """One entity object (no ``odata.metadata``) at the requested level and projection."""
    if level == MINIMAL and select is None:  # what the SDKs ask for: the stored JSON as is
        before, after = _minimal_stamps(entity.ticks)
        keys = orjson.dumps(entity.pk) + b',"RowKey":' + orjson.dumps(entity.rk)
        blob = entity.blob
        if blob == b"{}":
            return before + keys + after + b"}"
        return b"".join((before, keys, after, b",", memoryview(blob)[1:]))
    head = _entity_head(entity, base, account, table, level, select)
    if select is not None:
        properties = orjson.dumps(_select_properties(entity.blob, select, level))
    elif level == NONE:
        raw: dict[str, Any] = orjson.loads(entity.blob)
        properties = orjson.dumps({k: v for k, v in raw.items() if not k.endswith(ANNOTATION)})
    else:
        properties = entity.blob
    return _join(head, properties)


def _metadata_url(base: str, table: str, select: list[str] | None, element: bool) -> str:
    url = f"{base}/$metadata#{table}"
    if element:
        url += "/@Element"
    if select is not None:
        url += "&$select=" + ",".join(select)
    return url


def render_entity(
    entity: StoredEntity, base: str, account: str, table: str, level: str, select: list[str] | None = None
) -> bytes:
    """A single entity response body (Get Entity, Insert with return-content)."""
    body = entity_json(entity, base, account, table, level, select)
    if level == NONE:
        return body
    prefix = _element_metadata(base, table, None if select is None else tuple(select))
    return prefix + (b"}" if body == b"{}" else b"," + body[1:])


@lru_cache(maxsize=256)
def _element_metadata(base: str, table: str, select: tuple[str, ...] | None) -> bytes:
    """``{"odata.metadata":"…/$metadata#table/@Element"`` (unclosed): the same for every entity
    of a table that one client addresses, so made once."""
    url = _metadata_url(base, table, None if select is None else list(select), True)
    return orjson.dumps({"odata.metadata": url})[:-1]


def render_entities(
    entities: list[StoredEntity], base: str, account: str, table: str, level: str, select: list[str] | None
) -> bytes:
    """A Query Entities response body."""
    items = b",".join(entity_json(e, base, account, table, level, select) for e in entities)
    if level == NONE:
        return b'{"value":[' + items + b"]}"
    meta = orjson.dumps(_metadata_url(base, table, select, False))
    return b'{"odata.metadata":' + meta + b',"value":[' + items + b"]}"
