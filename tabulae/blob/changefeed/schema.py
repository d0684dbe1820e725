"""The Avro schema of Azure's change feed records (``Microsoft.Storage.BlobChangeEvent``).

Taken field for field from the header of a chunk that real Azure wrote (``formatSchemaVersion``
6 in its segment manifest, a recording in ``Azure/azure-sdk-assets``, test_change_feed
``test_list_changes_with_filter``), so that readers which compare against Azure's names and
enum symbols see the same ones. The record's ``schemaVersion`` field carries the same number.
"""

from __future__ import annotations

from typing import Any

SCHEMA_VERSION = 6

EVENT_TYPES = (
    "UnspecifiedEventType",
    "BlobCreated",
    "BlobDeleted",
    "BlobPropertiesUpdated",
    "BlobSnapshotCreated",
    "Control",
    "BlobTierChanged",
    "BlobAsyncOperationInitiated",
    "RestorePointMarkerCreated",
)
APIS = (
    "UnspecifiedApi",
    "PutBlob",
    "PutBlockList",
    "CopyBlob",
    "DeleteBlob",
    "SetBlobMetadata",
    "ControlEvent",
    "UndeleteBlob",
    "SetBlobProperties",
    "SnapshotBlob",
    "SetBlobTier",
    "AbortCopyBlob",
    "SetBlobTags",
    "CreateRestorePointMarker",
)
BLOB_TYPES = ("UnspecifiedBlobType", "BlockBlob", "PageBlob", "AppendBlob")
BLOB_TIERS = ("UnspecifiedBlobTier", "Hot", "Cool", "Archive", "Cold")


def _enum(name: str, symbols: tuple[str, ...]) -> dict[str, Any]:
    return {"type": "enum", "name": name, "symbols": list(symbols), "default": symbols[0]}


def _string(name: str) -> dict[str, Any]:
    return {"name": name, "type": "string", "default": ""}


def _optional(name: str, kind: Any) -> dict[str, Any]:
    return {"name": name, "type": ["null", kind], "default": None}


_STRING_MAP = {"type": "map", "values": "string"}
_CHANGE = {
    "type": "record",
    "name": "values",
    "fields": [_string("current"), _string("previous")],
}

DATA_FIELDS: list[dict[str, Any]] = [
    {"name": "api", "type": _enum("ApiEnum", APIS), "default": APIS[0]},
    _string("clientRequestId"),
    _string("requestId"),
    _string("etag"),
    _string("contentType"),
    {"name": "contentLength", "type": "long", "default": 0},
    {"name": "blobType", "type": _enum("BlobTypeEnum", BLOB_TYPES), "default": BLOB_TYPES[0]},
    _optional("blobVersion", "string"),
    _optional("containerVersion", "string"),
    _optional("blobTier", _enum("BlobTierEnum", BLOB_TIERS)),
    _string("url"),
    _string("sequencer"),
    _optional("previousInfo", _STRING_MAP),
    _optional("snapshot", "string"),
    _optional("blobPropertiesUpdated", {"type": "map", "values": _CHANGE}),
    _optional("asyncOperationInfo", _STRING_MAP),
    _optional("blobTagsUpdated", {"type": "map", "values": _STRING_MAP}),
    _optional("restorePointMarker", _STRING_MAP),
    {"name": "storageDiagnostics", "type": _STRING_MAP, "default": {}},
]

SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "BlobChangeEvent",
    "namespace": "Microsoft.Storage",
    "fields": [
        {"name": "schemaVersion", "type": "long", "default": 4},
        _string("topic"),
        _string("subject"),
        {"name": "eventType", "type": _enum("EventTypeEnum", EVENT_TYPES)},
        _string("eventTime"),
        _string("id"),
        {"name": "data", "type": {"type": "record", "name": "BlobChangeEventData", "fields": DATA_FIELDS}},
    ],
}
