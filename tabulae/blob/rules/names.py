"""Container and blob names and metadata: what the service accepts ("Naming and Referencing
Containers, Blobs, and Metadata"), and the exact error when it doesn't."""

from __future__ import annotations

import re

from tabulae.model.errors import MSG_NAME_LENGTH, TableError

SPECIAL_CONTAINERS = frozenset({"$root", "$logs", "$web"})
MAX_BLOB_NAME = 1024
MAX_SEGMENTS = 254
MAX_METADATA_BYTES = 8 * 1024

_CONTAINER = re.compile(r"[a-z0-9](?!.*--)[a-z0-9-]*[a-z0-9]")
# Characters a blob name may not hold even percent-encoded: C0 and C1 controls, DEL, the
# private-use U+E000 Azure names, and lone surrogates. (U+FFFE and U+FFFF are allowed; listings
# then give the name percent-encoded, as XML cannot carry them.)
_BAD_BLOB_CHARS = re.compile("[\x00-\x1f\x7f-\x9f\ue000\ud800-\udfff]")
XML_UNSAFE = re.compile("[\ufffe\uffff]")
# A metadata name must be a C# identifier: a letter or underscore, then letters, digits, underscores.
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_container_name(name: str) -> None:
    """Length first (OutOfRangeInput), then characters (InvalidResourceName)."""
    if name in SPECIAL_CONTAINERS:
        return
    if not 3 <= len(name) <= 63:
        raise TableError("OutOfRangeInput", MSG_NAME_LENGTH)
    if not _CONTAINER.fullmatch(name):
        raise TableError("InvalidResourceName")


def check_blob_name(name: str) -> None:
    if not name or len(name) > MAX_BLOB_NAME:
        raise TableError("OutOfRangeInput", MSG_NAME_LENGTH)
    if _BAD_BLOB_CHARS.search(name) or name.count("/") >= MAX_SEGMENTS:
        raise TableError("InvalidResourceName")


def check_metadata(metadata: dict[str, str]) -> None:
    """Names are C# identifiers, case-insensitively unique; names and values total 8 KiB at most."""
    size = 0
    seen: set[str] = set()
    for name, value in metadata.items():
        if not name:
            raise TableError("EmptyMetadataKey")
        if not _IDENTIFIER.fullmatch(name) or name.lower() in seen:
            raise TableError("InvalidMetadata")
        seen.add(name.lower())
        size += len(name.encode()) + len(value.encode("utf-8", "surrogatepass"))
    if size > MAX_METADATA_BYTES:
        raise TableError("MetadataTooLarge")
