"""Container and blob names: what the service accepts ("Naming and Referencing Containers, Blobs,
and Metadata"), and the exact error when it doesn't. Metadata follows ``model.metadata``'s rules,
checked as the headers are read (``http.metadata``)."""

from __future__ import annotations

import re

from tabulae.model.errors import MSG_NAME_LENGTH, ServiceError

SPECIAL_CONTAINERS = frozenset({"$root", "$logs", "$web"})
# Containers the service keeps for itself: List Containers shows them only with include=system.
# Every account has $logs (Storage Analytics writes there); the change feed has $blobchangefeed.
LOGS_CONTAINER = "$logs"
SYSTEM_CONTAINERS = frozenset({LOGS_CONTAINER, "$blobchangefeed"})
MAX_BLOB_NAME = 1024
MAX_SEGMENTS = 254

_CONTAINER = re.compile(r"[a-z0-9](?!.*--)[a-z0-9-]*[a-z0-9]")
# Characters a blob name may not hold even percent-encoded: C0 and C1 controls, DEL, the
# private-use U+E000 Azure names, and lone surrogates. (U+FFFE and U+FFFF are allowed; listings
# then give the name percent-encoded, as XML cannot carry them.)
_BAD_BLOB_CHARS = re.compile("[\x00-\x1f\x7f-\x9f\ue000\ud800-\udfff]")
XML_UNSAFE = re.compile("[\ufffe\uffff]")


def check_container_name(name: str) -> None:
    """Length first (OutOfRangeInput), then characters (InvalidResourceName)."""
    if name in SPECIAL_CONTAINERS:
        return
    if not 3 <= len(name) <= 63:
        raise ServiceError("OutOfRangeInput", MSG_NAME_LENGTH)
    if not _CONTAINER.fullmatch(name):
        raise ServiceError("InvalidResourceName")


def check_blob_name(name: str) -> None:
    if not name or len(name) > MAX_BLOB_NAME:
        raise ServiceError("OutOfRangeInput", MSG_NAME_LENGTH)
    if _BAD_BLOB_CHARS.search(name) or name.count("/") >= MAX_SEGMENTS:
        raise ServiceError("InvalidResourceName")
