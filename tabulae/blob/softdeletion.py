"""Blob soft delete woven into the service ("Soft delete for blobs", "Undelete Blob", "List Blobs").

With a ``DeleteRetentionPolicy`` in force, what a delete or an overwrite would destroy is kept as
a soft-deleted record instead: a row that is not committed (so reads and plain listings skip it)
whose document holds the deletion time and the retention then in force. Its extents stay named,
so its bytes are kept until the purge (:meth:`BlobService.purge_deleted`) removes it once the
retention has passed; until then a listing with ``include=deleted`` shows it and Undelete Blob
brings it back.

* Deleting a snapshot or a version soft-deletes it where it is stored.
* Deleting the base blob soft-deletes its snapshots (with ``include``) and moves the base aside,
  under ``~d`` and the time of its deletion, so a new blob of that name can be written; with
  versioning on the base becomes a previous version instead, and nothing of it is soft-deleted.
* Overwriting a blob (Put Blob, Put Block List, Copy Blob) without versioning keeps its previous
  state as a soft-deleted snapshot, as Azure does.
* Undelete Blob restores every soft-deleted snapshot and version of the blob still in retention,
  and the newest soft-deleted base when there is no live one; it makes no version current.
* Delete Blob with ``deletetype=permanent`` removes one soft-deleted snapshot or version for good
  before its retention ends, where the account allows it (:func:`permanent`).

The clock of retention is the service's own, shifted by what the file named by
``TABULAE_TEST_CLOCK_FILE`` holds (seconds), when that variable is set: a test lets days pass
by writing a number there. Nothing else reads that file.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

from tabulae.blob.rules import softdelete
from tabulae.model.blobs import DELETED_BASE_PREFIX, VERSION_PREFIX, BlobRecord, Lease
from tabulae.model.errors import ServiceError
from tabulae.storage.blobs import BASE, BlobState, BlobWrite, stored_version

CLOCK_FILE_ENV = "TABULAE_TEST_CLOCK_FILE"
_DAY = 86_400.0


def retention_clock(clock: Callable[[], float] = time.time) -> Callable[[], float]:
    """The clock soft delete reads: ``clock``, shifted in tests (see the module's docstring)."""
    path = os.environ.get(CLOCK_FILE_ENV)
    if not path:
        return clock

    def shifted() -> float:
        try:
            with open(path, encoding="ascii") as file:
                return clock() + float(file.read().strip() or 0)
        except (OSError, ValueError):
            return clock()

    return shifted


def soft(record: BlobRecord, now: float, days: int) -> BlobRecord:
    """``record`` soft-deleted at ``now`` under a ``days`` retention."""
    return replace(record, committed=False, deleted_time=now, retention_days=days, lease=Lease())


def restored(record: BlobRecord) -> BlobRecord:
    return replace(record, committed=True, deleted_time=None, retention_days=0)


def purge_at(record: BlobRecord) -> float:
    return (record.deleted_time or 0.0) + record.retention_days * _DAY


def expired(record: BlobRecord, now: float) -> bool:
    """Whether a soft-deleted record's retention has run out: it is then gone, purged or not."""
    return record.deleted_time is not None and now >= purge_at(record)


def remaining_days(record: BlobRecord, now: float) -> int:
    """``RemainingRetentionDays`` of a soft-deleted record."""
    deletion = softdelete.Deletion(
        datetime.fromtimestamp(record.deleted_time or 0.0, UTC), record.retention_days
    )
    return deletion.remaining_days(datetime.fromtimestamp(now, UTC))


def permanent(allowed: bool, snapshot: str) -> None:
    """The checks of Delete Blob with ``deletetype=permanent`` before any record is read: the
    account must allow it, and the request must name a snapshot or a version ("Delete Blob",
    Permanent delete: each is 409 Conflict). An account that does not allow it answers
    ``PermanentDeleteIsOff`` (recorded: the Go SDK's TestAppendBlockPermanentDeleteWithoutPermission,
    x-ms-version 2023-11-03); the code for a request naming neither is assumed."""
    if not allowed:
        raise ServiceError("PermanentDeleteIsOff")
    if snapshot == BASE:
        raise ServiceError("PermanentDeleteNeedsSnapshotOrVersion")


def purge_now(state: BlobState, snapshot: str) -> BlobWrite:
    """Remove the soft-deleted ``snapshot`` (or version) of ``state`` (needs ``others``) for
    good: 404 BlobNotFound when there is no such record, 409 when it is not soft-deleted."""
    for record in state.others or ():
        if record.snapshot == snapshot:
            if record.deleted_time is None:
                raise ServiceError("BlobSnapshotNotSoftDeleted")
            return BlobWrite(purge=[stored_version(snapshot)])
    raise ServiceError("BlobNotFound")


def is_deleted_base(snapshot: str) -> bool:
    return snapshot.startswith(DELETED_BASE_PREFIX)


def live_snapshots(state: BlobState) -> list[BlobRecord]:
    """The blob's snapshots that are not soft-deleted (needs ``Needs(others=True)``)."""
    return [r for r in state.others or () if r.committed and r.snapshot < VERSION_PREFIX]


def deleted_base_name(ticks: int) -> str:
    """Where a soft-deleted base is kept: ``~d`` and the deletion's time in ticks (unique per blob,
    as every write of the blob has a later timestamp)."""
    return f"{DELETED_BASE_PREFIX}{ticks:020d}"


def undelete(state: BlobState, now: float) -> tuple[list[BlobRecord], list[tuple[str, BlobRecord]]]:
    """What Undelete Blob brings back: records to restore in place, and a base to move back."""
    others = [r for r in state.others or () if r.deleted_time is not None and not expired(r, now)]
    in_place = [restored(r) for r in others if not is_deleted_base(r.snapshot)]
    moves: list[tuple[str, BlobRecord]] = []
    bases = [r for r in others if is_deleted_base(r.snapshot)]
    if bases and state.base is None:
        newest = bases[-1]
        moves.append((newest.snapshot, replace(restored(newest), snapshot="")))
    return in_place, moves


# ---------------------------------------------------------------------------- containers
# A soft-deleted container is renamed, with everything in it, to ``~name~version~days``: no
# container name can start with "~", and it sorts after every one, so listings leave it out by
# its first character. Its version is the time of its deletion as a FILETIME (unique per name:
# a name is deleted again only after it was created again).
HIDDEN = "~"


def hidden_container(name: str, now: float, days: int) -> str:
    version = softdelete.container_version(datetime.fromtimestamp(now, UTC))
    return f"{HIDDEN}{name}{HIDDEN}{version}{HIDDEN}{days}"


def parse_hidden(hidden: str) -> softdelete.DeletedContainer | None:
    """The deleted container a hidden name stands for, or None for any other name."""
    parts = hidden.split(HIDDEN)
    if len(parts) != 4 or parts[0] or not parts[3].isdigit():
        return None
    try:
        filetime = int(parts[2], 16)
    except ValueError:
        return None
    seconds = filetime / 10_000_000 - 11_644_473_600  # FILETIME epoch (1601) to Unix epoch
    when = datetime.fromtimestamp(seconds, UTC)
    return softdelete.DeletedContainer(parts[1], parts[2], softdelete.Deletion(when, int(parts[3])))
