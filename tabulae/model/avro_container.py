"""Avro object container framing (Avro 1.x specification, "Object Container Files"), written
by hand around records fastavro encodes: the header (magic, the ``avro.codec`` = ``null`` and
``avro.schema`` metadata, sync marker), then per block the record count, byte size, records and
marker.

Two writers need the framing without fastavro's own writer: the change feed appends blocks to
a chunk without reading its header back, and Query Blob Contents sends each message as a block
of its own as soon as it exists (fastavro's writer buffers blocks and writes its own normalised
schema text, where Azure's readers expect Azure's)."""

from __future__ import annotations

MAGIC = b"Obj\x01"


def avro_long(value: int) -> bytes:
    """Avro's zigzag variable-length encoding of a long."""
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zigzag > 0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def avro_bytes(value: bytes) -> bytes:
    """Avro ``bytes``: the length, then the bytes."""
    return avro_long(len(value)) + value


def container_header(schema_text: bytes, marker: bytes) -> bytes:
    """A container's header: no compression (``null``, which every reader knows) and the schema
    exactly as ``schema_text`` spells it."""
    meta = (
        avro_bytes(b"avro.codec") + avro_bytes(b"null") + avro_bytes(b"avro.schema") + avro_bytes(schema_text)
    )
    return MAGIC + avro_long(2) + meta + avro_long(0) + marker


def container_block(count: int, records: bytes, marker: bytes) -> bytes:
    """One block of ``count`` encoded records, ended by the container's sync marker."""
    return avro_long(count) + avro_bytes(records) + marker
