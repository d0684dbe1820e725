"""User metadata of queues (and of blob containers and blobs): the rules of "Naming Queues and
Metadata", and the stored form.

Metadata arrives as ``x-ms-meta-{name}: {value}`` headers. A name must be a C# identifier (HTTP
headers are ASCII, so letters, digits and underscores, not starting with a digit); names keep the
case they were set with but compare case-insensitively, so two names differing only in case are a
duplicate. Names and values together may take 8 KiB.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import orjson

from tabulae.model.errors import ServiceError

MAX_METADATA_BYTES = 8 * 1024
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

Metadata = dict[str, str]  # name (as set) -> value, in the order given


def check_metadata(pairs: Iterable[tuple[str, str]]) -> Metadata:
    """Validate ``(name, value)`` pairs and return them as a dict; raise the service's error:
    ``EmptyMetadataKey`` for a header ``x-ms-meta-`` with nothing after it, ``InvalidMetadata`` for
    a name that is no identifier, a repeated name or a value with non-ASCII characters, and
    ``MetadataTooLarge`` past 8 KiB of names and values."""
    metadata: Metadata = {}
    seen: set[str] = set()
    size = 0
    for name, value in pairs:
        if not name:
            raise ServiceError("EmptyMetadataKey")
        if not _IDENTIFIER.fullmatch(name) or not value.isascii():
            raise ServiceError("InvalidMetadata")
        folded = name.lower()
        if folded in seen:
            raise ServiceError("InvalidMetadata")
        seen.add(folded)
        size += len(name) + len(value)
        metadata[name] = value
    if size > MAX_METADATA_BYTES:
        raise ServiceError("MetadataTooLarge")
    return metadata


def same_metadata(first: Metadata, second: Metadata) -> bool:
    """Equal as the service compares them: names without case, values exactly."""
    return {k.lower(): v for k, v in first.items()} == {k.lower(): v for k, v in second.items()}


def encode_metadata(metadata: Metadata) -> bytes:
    """The stored form: a JSON list of pairs, which keeps the order and the case of the names."""
    return orjson.dumps(list(metadata.items()))


def decode_metadata(blob: bytes | None) -> Metadata:
    if not blob:
        return {}
    return {name: value for name, value in orjson.loads(blob)}
