"""Block ids and block lists ("Put Block", "Put Block List").

A block id is Base64 of at most 64 bytes, and every block of a blob has an id of the same
length. A block list names blocks as ``Committed`` (from the blob's current content),
``Uncommitted`` (staged) or ``Latest`` (staged if there is one, else committed); the new content
is those blocks in that order, any block possibly more than once.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence

from tabulae.blob.rules.limits import MAX_BLOCK_ID_BYTES, MAX_BLOCK_LIST
from tabulae.model.blobs import Extent, block_id_size
from tabulae.model.errors import ServiceError

COMMITTED, UNCOMMITTED, LATEST = "Committed", "Uncommitted", "Latest"
KINDS = frozenset({COMMITTED, UNCOMMITTED, LATEST})


def check_block_id(block_id: str | None) -> str:
    """Valid Base64 of 1 to 64 bytes, else 400 InvalidQueryParameterValue naming ``blockid``."""
    if block_id is None:
        raise ServiceError("MissingRequiredQueryParameter", fields=(("QueryParameterName", "blockid"),))
    try:
        decoded = base64.b64decode(block_id, validate=True)
    except (binascii.Error, ValueError):
        # Azure's words for text that is no Base64 (.NET StageBlockAsync_Error, 2024-08-04).
        raise _invalid_block_id(block_id, "Not a valid base64 string.") from None
    if not decoded or len(decoded) > MAX_BLOCK_ID_BYTES:
        # An empty or over-long id: Azure's reason for these is not recorded.
        raise _invalid_block_id(block_id, "Not a valid base64 string of at most 64 bytes.")
    return block_id


def _invalid_block_id(block_id: str, reason: str) -> ServiceError:
    return ServiceError(
        "InvalidQueryParameterValue",
        fields=(("QueryParameterName", "blockid"), ("QueryParameterValue", block_id), ("Reason", reason)),
    )


def check_same_length(block_id: str, staged_length: int | None) -> None:
    """All staged blocks of a blob have ids of one length, counted in the bytes they encode
    (400 InvalidBlobOrBlock)."""
    if staged_length is not None and staged_length != block_id_size(block_id):
        raise ServiceError("InvalidBlobOrBlock")


def resolve(
    entries: Sequence[tuple[str, str]], committed: Sequence[Extent], staged: dict[str, Extent]
) -> list[Extent]:
    """The extents of the new content, for ``(kind, id)`` entries; a block that is not where an
    entry looks for it is 400 InvalidBlockList."""
    if len(entries) > MAX_BLOCK_LIST:
        raise ServiceError("BlockListTooLong")
    by_id: dict[str, Extent] = {}
    for extent in committed:
        if extent.block_id is not None:
            by_id.setdefault(extent.block_id, extent)
    content: list[Extent] = []
    for kind, block_id in entries:
        found: Extent | None
        if kind == UNCOMMITTED:
            found = staged.get(block_id)
        elif kind == COMMITTED:
            found = by_id.get(block_id)
        else:
            found = staged.get(block_id) or by_id.get(block_id)
        if found is None:
            raise ServiceError("InvalidBlockList")
        content.append(found)
    return content
