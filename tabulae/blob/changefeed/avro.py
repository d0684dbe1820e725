"""Chunks of a shard log: Avro object container files, written whole or appended to.

Azure's chunks are append blobs (``x-ms-blob-type: AppendBlob``, ``Content-Type:
avro/binary``) that grow by whole Avro blocks while their hour lasts, so a chunk is written as
its header plus blocks, and each later Append Block carries more blocks ending in the same sync
marker. The header is the one real Azure writes, byte for byte apart from the marker: metadata
``avro.codec`` = ``null`` then ``avro.schema`` = the compact schema text (checked against the
recorded chunk). Microsoft's Python reader (``azure.storage.blob._shared.avro``) only knows the
``null`` and ``deflate`` codecs and, resuming from a continuation token inside a file, decodes
records straight from the stream, so ``null`` is the only safe codec.

Records are encoded by fastavro (``schemaless_writer``); the container framing around them
(header, then per block: record count, byte size, records, sync marker; Avro 1.x
specification, "Object Container Files") is written here because fastavro's writer puts its own
normalised schema text in the header and, to append, reads and re-parses the whole header on
every call. The sync marker is derived from the chunk's path, so appending needs no read of the
existing blob; readers look for a marker only where a block ends, so a deterministic marker is
as good as Azure's random one.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Iterable
from typing import Any

import fastavro

from tabulae.blob.changefeed.events import ChangeEvent
from tabulae.blob.changefeed.schema import SCHEMA
from tabulae.model.avro_container import container_block, container_header

_SCHEMA_TEXT = json.dumps(SCHEMA, separators=(",", ":")).encode()
_PARSED = fastavro.parse_schema(SCHEMA)
#: Records per block; Azure's recorded chunk has blocks of about a hundred.
BLOCK_RECORDS = 100


def sync_marker(path: str) -> bytes:
    """The 16-byte sync marker of the chunk at ``path`` (inside ``$blobchangefeed``)."""
    return hashlib.blake2b(path.encode(), digest_size=16, person=b"tabulae-cfchunk").digest()


def render_chunk(path: str, events: Iterable[ChangeEvent]) -> bytes:
    """A whole chunk: the header (codec, schema, sync marker) then the events' blocks."""
    return container_header(_SCHEMA_TEXT, sync_marker(path)) + append_to_chunk(path, events)


def append_to_chunk(path: str, events: Iterable[ChangeEvent]) -> bytes:
    """The bytes to append to the chunk at ``path`` (begun by ``render_chunk``) to add ``events``.

    Empty when there are no events: an Append Block of nothing is not a valid request."""
    marker = sync_marker(path)
    out = bytearray()
    block = io.BytesIO()
    count = 0
    for event in events:
        fastavro.schemaless_writer(block, _PARSED, event.record())
        count += 1
        if count == BLOCK_RECORDS:
            out += container_block(count, block.getvalue(), marker)
            block = io.BytesIO()
            count = 0
    if count:
        out += container_block(count, block.getvalue(), marker)
    return bytes(out)


def read_chunk(data: bytes) -> list[dict[str, Any]]:
    """The records of a chunk, for tests and the console (Microsoft's client reads them itself)."""
    return [record for record in fastavro.reader(io.BytesIO(data)) if isinstance(record, dict)]
