"""The answer's framing: an Avro object container whose records are the union of Azure's four
messages (resultData, error, progress, end; "Query Blob Contents", Response Body).

The header goes first, then each message as a block of its own, so the client can act on each
as it arrives. Records are encoded by fastavro; the container framing is
:mod:`tabulae.model.avro_container`'s, since fastavro's writer would buffer blocks itself.
"""

from __future__ import annotations

import io
import json
import os
from typing import Any

import fastavro

from tabulae.model.avro_container import container_block, container_header

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


class Framer:
    """The bytes of one answer: :meth:`header` once, then one block per message."""

    def __init__(self) -> None:
        self.marker = os.urandom(16)

    def header(self) -> bytes:
        return container_header(_SCHEMA_TEXT, self.marker)

    def _block(self, name: str, record: dict[str, Any]) -> bytes:
        body = io.BytesIO()
        fastavro.schemaless_writer(body, _PARSED, (f"{_NAMESPACE}.{name}", record))
        return container_block(1, body.getvalue(), self.marker)

    def data(self, data: bytes) -> bytes:
        return self._block("resultData", {"data": data})

    def error(self, fatal: bool, name: str, description: str, position: int) -> bytes:
        record = {"fatal": fatal, "name": name, "description": description, "position": position}
        return self._block("error", record)

    def progress(self, scanned: int, total: int) -> bytes:
        return self._block("progress", {"bytesScanned": scanned, "totalBytes": total})

    def end(self, total: int) -> bytes:
        return self._block("end", {"totalBytes": total})
