"""List Blobs as an Apache Arrow IPC stream, for a client that asks for one.

A List Blobs request whose ``Accept`` names ``application/vnd.apache.arrow.stream`` (the Python
SDK's ``response_format="arrow"``, which names ``application/xml`` too) is answered with one
Arrow stream instead of the XML document. As Azure's answers recorded for the SDK's tests (at
service version 2026-12-06) show it:

- one column per element of the XML listing, named as the element is (``Name``,
  ``Creation-Time``, ``Content-Length``, ``LeaseState``…), plus ``ResourceType`` (``blob`` or
  ``blobprefix``: a hierarchy listing's prefixes are rows too, with only a name);
- a column only when some row has a value (an empty listing has no column at all), ``Name`` and
  ``ResourceType`` never null;
- dates as ``timestamp[s]`` without a zone, ``Content-Length`` as ``uint64``, flags as ``bool``,
  the ETag without quotes;
- ``NumberOfRecords`` and ``NextMarker`` (empty on the last page) in the schema's metadata;
- the schema, one record batch, the end-of-stream marker.

Which element a blob has is decided once, by the XML listing (:mod:`tabulae.blob.api.formats`);
this module only carries the document it renders into the stream, so the two answers cannot
disagree. pyarrow writes the stream. It is not a dependency of the server: without it the
request gets the XML document, which its ``Accept`` also allows and the SDK reads.
"""

from __future__ import annotations

import importlib.util
import io
from collections.abc import Iterator
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import unquote
from xml.etree import ElementTree

ARROW_STREAM = "application/vnd.apache.arrow.stream"
AVAILABLE = importlib.util.find_spec("pyarrow") is not None

# Azure's column order where a recording shows it; the rest where the XML has them.
_ORDER = (
    "Name", "Creation-Time", "Last-Modified", "BlobType", "ResourceType", "Etag", "Content-Length",
    "Content-Type", "Content-Encoding", "Content-Language", "Content-MD5", "Cache-Control",
    "Content-Disposition", "x-ms-blob-sequence-number", "AccessTier", "AccessTierInferred",
    "AccessTierChangeTime", "ArchiveStatus", "RehydratePriority", "SmartAccessTier", "LeaseState",
    "LeaseStatus", "LeaseDuration", "CopyId", "CopyStatus", "CopySource", "CopyProgress",
    "CopyCompletionTime", "CopyStatusDescription", "IncrementalCopy", "CopyDestinationSnapshot",
    "Sealed", "ServerEncrypted", "CustomerProvidedKeySha256", "EncryptionScope", "LastAccessTime",
    "TagCount", "Expiry-Time", "ImmutabilityPolicyUntilDate", "ImmutabilityPolicyMode", "LegalHold",
    "Snapshot", "VersionId", "IsCurrentVersion", "Deleted", "DeletedTime", "RemainingRetentionDays",
    "HasVersionsOnly", "Metadata", "Tags", "OrMetadata",
)  # fmt: skip
_RANK = {name: rank for rank, name in enumerate(_ORDER)}
_DATES = frozenset(
    {"Creation-Time", "Last-Modified", "LastAccessTime", "DeletedTime", "AccessTierChangeTime",
     "CopyCompletionTime", "ImmutabilityPolicyUntilDate", "Expiry-Time"}
)  # fmt: skip
_SIZES = frozenset({"Content-Length", "x-ms-blob-sequence-number"})
_COUNTS = frozenset({"RemainingRetentionDays", "TagCount"})
_FLAGS = frozenset(
    {"AccessTierInferred", "ServerEncrypted", "Deleted", "IsCurrentVersion", "HasVersionsOnly",
     "Sealed", "IncrementalCopy", "LegalHold"}
)  # fmt: skip
_MAPS = frozenset({"Metadata", "Tags", "OrMetadata"})
_NEVER_NULL = frozenset({"Name", "ResourceType"})


def wanted(accept: str | None) -> bool:
    """Whether to answer with a stream: the client asks for one and pyarrow can write it."""
    return AVAILABLE and accept is not None and ARROW_STREAM in accept


def transcode(document: bytes) -> bytes:
    """The stream of a List Blobs XML document (``EnumerationResults``)."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    root = ElementTree.fromstring(document)
    blobs = root.find("Blobs")
    rows = list(_rows(blobs)) if blobs is not None else []
    present = {name for row in rows for name, value in row.items() if value is not None}
    columns = sorted(present, key=lambda name: (_RANK.get(name, len(_ORDER)), name))
    metadata = {"NumberOfRecords": str(len(rows)), "NextMarker": root.findtext("NextMarker") or ""}
    types = {name: _type(pa, name) for name in columns}
    schema = pa.schema([pa.field(name, types[name], name not in _NEVER_NULL) for name in columns], metadata)
    arrays = [pa.array([_value(name, row.get(name)) for row in rows], type=types[name]) for name in columns]
    batch = pa.RecordBatch.from_arrays(arrays, schema=schema) if columns else _empty(pa, schema)
    sink = io.BytesIO()
    with ipc.new_stream(sink, schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue()


def _empty(pa: Any, schema: Any) -> Any:
    """A record batch of no rows and no columns, as Azure sends for an empty listing."""
    return pa.RecordBatch.from_pydict({}, schema=schema)


def _rows(blobs: ElementTree.Element) -> Iterator[dict[str, Any]]:
    for item in blobs:
        name = _name(item.find("Name"))
        if item.tag == "BlobPrefix":
            yield {"Name": name, "ResourceType": "blobprefix"}
            continue
        row: dict[str, Any] = {"Name": name, "ResourceType": "blob"}
        for element in item:
            if element.tag == "Properties":  # an HNS path's own ResourceType is not the row's
                row.update((field.tag, field.text) for field in element if field.tag != "ResourceType")
            elif element.tag in _MAPS:
                row[element.tag] = _pairs(element)
            elif element.tag != "Name":
                row[element.tag] = element.text
        yield row


def _name(element: ElementTree.Element | None) -> str:
    text = element.text or "" if element is not None else ""
    return unquote(text) if element is not None and element.get("Encoded") == "true" else text


def _pairs(element: ElementTree.Element) -> dict[str, str] | None:
    """Metadata (one element per key), tags (``TagSet`` of ``Key``/``Value``) as a map."""
    tags = element.find("TagSet")
    if tags is not None:
        return {tag.findtext("Key") or "": tag.findtext("Value") or "" for tag in tags}
    pairs = {child.tag: child.text or "" for child in element}
    return pairs if pairs or element.tag == "Metadata" else None


def _type(pa: Any, name: str) -> Any:
    if name in _DATES:
        return pa.timestamp("s")
    if name in _SIZES:
        return pa.uint64()
    if name in _COUNTS:
        return pa.int64()
    if name in _FLAGS:
        return pa.bool_()
    if name in _MAPS:
        return pa.map_(pa.string(), pa.string())
    return pa.string()


def _value(name: str, text: Any) -> Any:
    """A column's value from the element's text (a map is already one); an empty element is null."""
    if text is None or text == "":
        return None
    if name in _MAPS:
        return list(text.items())
    if name in _DATES:
        return parsedate_to_datetime(text).astimezone(UTC).replace(tzinfo=None)
    if name in _SIZES or name in _COUNTS:
        return int(text)
    if name in _FLAGS:
        return text == "true"
    if name == "Etag":
        return text.strip('"')
    return text
