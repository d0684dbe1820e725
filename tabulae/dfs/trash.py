"""Soft-deleted paths and expired files of a hierarchical namespace: how a deletion is named,
and which records are gone.

With blob soft delete on (the account's ``DeleteRetentionPolicy``), deleting a path keeps it,
as Delete Blob keeps a blob: the path's record moves to a deleted slot beside its name (the
Blob service's ``~d`` and the time of the deletion, :func:`tabulae.blob.softdeletion.
deleted_base_name`), and a directory's descendants move to the same slot with it, so Undelete
Path restores the tree whole. Only the path deleted carries the deletion time: it is what List
Deleted Paths shows and what Undelete names; its descendants are found by their slot and purged
once that path is gone (:meth:`DataLakeService.sweep`).

A deletion's id (``x-ms-deletion-id``, ``DeletionId`` in the listing, ``deletionid=`` of
``x-ms-undelete-source``) is the slot's time as a Windows FILETIME, as Azure's ids are (18
digits, 100 ns since 1601: ``133836969737291364`` was recorded for a delete on 10 Feb 2025).

A file's expiry (Set Expiry) is kept with its owner and ACL; once it has passed, the file is
gone: reads answer 404 and listings leave it out at once, and the sweep deletes it.
"""

from __future__ import annotations

from tabulae.blob.softdeletion import deleted_base_name, is_deleted_base
from tabulae.model.blobs import DELETED_BASE_PREFIX, BlobRecord
from tabulae.model.errors import ServiceError

# .NET ticks (100 ns since 0001-01-01, the records' clock) at FILETIME's epoch, 1601-01-01.
FILETIME_EPOCH_TICKS = 504_911_232_000_000_000
_MAX_ID_DIGITS = 19


def deletion_id(slot: str) -> str:
    """The deletion id of a deleted slot (``~d`` and ticks)."""
    return str(int(slot[len(DELETED_BASE_PREFIX) :]) - FILETIME_EPOCH_TICKS)


def is_deletion_id(deletion: str) -> bool:
    """Whether a ``deletionid`` can name a deleted slot: a number of at most 18 digits."""
    return deletion.isascii() and deletion.isdigit() and len(deletion) <= _MAX_ID_DIGITS


def slot_of(deletion: str) -> str:
    """The deleted slot a deletion id names; 400 ``InvalidHeaderValue`` for one that is not a
    number (``x-ms-undelete-source``'s ``deletionid``)."""
    if not is_deletion_id(deletion):
        raise ServiceError(
            "InvalidHeaderValue", fields=(("HeaderName", "x-ms-undelete-source"), ("HeaderValue", deletion))
        )
    return deleted_base_name(int(deletion) + FILETIME_EPOCH_TICKS)


def is_deleted_root(record: BlobRecord) -> bool:
    """Whether a record is a path deleted as itself (listed and restorable), not a descendant
    moved with a deleted directory or a live record."""
    return not record.committed and record.deleted_time is not None and is_deleted_base(record.snapshot)


def is_moved_descendant(record: BlobRecord) -> bool:
    return not record.committed and record.deleted_time is None and is_deleted_base(record.snapshot)


def expiry_of(record: BlobRecord) -> float | None:
    """When a path expires (epoch seconds), read straight from its record: cheap enough for
    every record of a listing."""
    posix = record.posix
    if not posix:
        return None
    expiry = posix.get("e")
    return float(expiry) if expiry is not None else None  # type: ignore[arg-type]


def has_expired(record: BlobRecord, now: float) -> bool:
    expiry = expiry_of(record)
    return expiry is not None and expiry <= now
