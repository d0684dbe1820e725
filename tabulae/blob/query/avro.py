"""The answer's framing: an Avro object container whose records are the union of Azure's four
messages (resultData, error, progress, end; "Query Blob Contents", Response Body).

The header goes first, then each message as a block of its own, so the client can act on each
as it arrives. Records are encoded by fastavro; the container framing (Avro 1.x, "Object
Container Files": magic, metadata map, sync marker, then per block the record count, byte size,
records and marker) is a few lines here, since fastavro's writer would buffer blocks itself.
"""

from __future__ import annotations

import io
import json
import os
from typing import Any

import fastavro

_NAMESPACE = "com.microsoft.azure.storage.queryBlobContents"
SCHEMA: list[dict[str, Any]] = [
    {"type": "record", "name": f"{_NAMESPACE}.resultData", "fields": [{"name": "data", "type": "bytes"}]},
    {
        "type": "record",
        "name": f"{_NAMESPACE}.error",
        "fields": [
            {"name": "fatal", "type": "boolean"},
            {"name": "name", "type": "string"},
            {"name": "description", "type": "string"},
            {"name": "position", "type": "long"},
        ],
    },
    {
        "type": "record",
        "name": f"{_NAMESPACE}.progress",
        "fields": [{"name": "bytesScanned", "type": "long"}, {"name": "totalBytes", "type": "long"}],
    },
    {"type": "record", "name": f"{_NAMESPACE}.end", "fields": [{"name": "totalBytes", "type": "long"}]},
]
_PARSED = fastavro.parse_schema(SCHEMA)
_SCHEMA_TEXT = json.dumps(SCHEMA, separators=(",", ":")).encode()


def _long(value: int) -> bytes:
    """Avro's zigzag variable-length encoding of a long."""
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zigzag > 0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def _bytes(value: bytes) -> bytes:
    return _long(len(value)) + value


class Framer:
    """The bytes of one answer: :meth:`header` once, then one block per message."""

    def __init__(self) -> None:
        self.marker = os.urandom(16)

    def header(self) -> bytes:
        meta = _bytes(b"avro.codec") + _bytes(b"null") + _bytes(b"avro.schema") + _bytes(_SCHEMA_TEXT)
        return b"Obj\x01" + _long(2) + meta + _long(0) + self.marker

    def _block(self, name: str, record: dict[str, Any]) -> bytes:
        body = io.BytesIO()
        fastavro.schemaless_writer(body, _PARSED, (f"{_NAMESPACE}.{name}", record))
        return _long(1) + _bytes(body.getvalue()) + self.marker

    def data(self, data: bytes) -> bytes:
        return self._block("resultData", {"data": data})

    def error(self, fatal: bool, name: str, description: str, position: int) -> bytes:
        record = {"fatal": fatal, "name": name, "description": description, "position": position}
        return self._block("error", record)

    def progress(self, scanned: int, total: int) -> bytes:
        return self._block("progress", {"bytesScanned": scanned, "totalBytes": total})

    def end(self, total: int) -> bytes:
        return self._block("end", {"totalBytes": total})
