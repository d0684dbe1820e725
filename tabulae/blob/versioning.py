"""Blob versioning woven into the service's writes ("Blob versioning", "Get Blob", "Delete Blob").

A previous version is stored beside the blob's snapshots under the name ``v`` + its version id
(:data:`~tabulae.storage.blobs.VERSION_PREFIX`), sharing the extents of the content it kept, so
keeping one costs a row and no bytes. The base blob is the current version and carries its id in
``BlobRecord.version_id``. The service names a version the way it names a snapshot: the string
that :func:`key_of` makes from a ``versionid`` query parameter, so reads, tier changes and
deletes of versions go through the snapshot paths.

A write that makes a new version (Put Blob, Put Block List, Copy Blob, Set Blob Metadata, and
Snapshot Blob, which Azure counts as one too: its answer carries a new version id) first
turns the current version into a previous one (:func:`stamp`); Delete Blob does the same and then
removes the base, so the blob has no current version and its versions stay. A blob written before
versioning was switched on has no id; when it is replaced its content is kept under the id of its
last modification (assumed: Azure keeps that state as a version and does not document its id). A
write with versioning off makes no version, and the blob it leaves has no version id.
"""

from __future__ import annotations

from dataclasses import replace

from tabulae.blob.rules import versions
from tabulae.model import edm
from tabulae.model.blobs import BASE, BlobRecord, Lease
from tabulae.model.errors import ServiceError
from tabulae.storage.blobs import VERSION_PREFIX, BlobState, BlobWrite


def key_of(version_id: str) -> str:
    """The service's name of a version (``versionid``), or 400 for a malformed id."""
    versions.parse(version_id)
    return VERSION_PREFIX + version_id


def is_version(snapshot: str) -> bool:
    return snapshot.startswith(VERSION_PREFIX)


def version_id(record: BlobRecord) -> str | None:
    """The version id of a record: a previous version's from its name, the base's its own."""
    if is_version(record.snapshot):
        return record.snapshot[len(VERSION_PREFIX) :]
    return record.version_id if record.snapshot == BASE else None


def _unix_ticks(ticks: int) -> int:
    return ticks - edm.UNIX_EPOCH_TICKS


def previous(base: BlobRecord) -> BlobRecord:
    """The record that keeps ``base`` as a previous version (without its lease: a lease is the
    blob's, not a version's)."""
    kept_id = base.version_id or versions.render(_unix_ticks(base.ticks))
    return _as_version(base, kept_id)


def _as_version(base: BlobRecord, kept_id: str) -> BlobRecord:
    return replace(base, snapshot=VERSION_PREFIX + kept_id, lease=Lease(), version_id=None)


SNAPSHOT_VERSION_DELAY = 10_000
"""Ticks (1 ms) by which the version Snapshot Blob makes follows the snapshot: Azure answers
``x-ms-version-id`` one millisecond after ``x-ms-snapshot`` (recorded for the JS SDK at
x-ms-version 2019-12-12, 2020-02-10, 2020-12-06 and 2026-02-06, e.g. node/blob_versioning/
recording_get_properties_of_a_blob_version.json: snapshot 21:24:35.0606219Z, version
21:24:35.0616219Z)."""


def stamp(
    write: BlobWrite,
    state: BlobState,
    on: bool,
    keep: tuple[float, int] | None = None,
    delay: int = 0,
) -> BlobWrite:
    """Make ``write`` (which replaces the base's content or metadata, or deletes it) version the
    blob: the current version is kept as a previous one and the new base gets a new id, ``delay``
    ticks after the write's time (:data:`SNAPSHOT_VERSION_DELAY` for a snapshot). With
    ``on`` false the new base has no id and nothing is kept, but for ``keep`` (the time and the
    days of blob soft delete): then the state the write replaces is kept as a soft-deleted
    snapshot. The base record is changed in place, so a result that is the same record carries
    the id too."""
    base = state.base if state.base is not None and state.base.committed else None
    if write.base is not None:
        if on:
            newest = base.version_id if base is not None else None
            write.base.version_id = versions.new_version_id_ticks(_unix_ticks(state.ticks) + delay, newest)
        else:
            write.base.version_id = None
    if on and base is not None:
        write.version = previous(base)
    elif keep is not None and base is not None and write.base is not None:
        now, days = keep
        name = versions.render(_unix_ticks(state.ticks))
        write.snapshot = replace(
            base, snapshot=name, committed=False, deleted_time=now, retention_days=days, lease=Lease()
        )
    return write


def is_current(state: BlobState, snapshot: str) -> bool:
    """Whether ``snapshot`` names the blob's current version."""
    base = state.base
    return (
        base is not None
        and base.committed
        and base.version_id is not None
        and (VERSION_PREFIX + base.version_id == snapshot)
    )


def current_only(state: BlobState, snapshot: str) -> BlobRecord:
    """The base blob when ``snapshot`` names its current version; else 404 BlobNotFound."""
    base = state.base
    if base is None or not base.committed or base.version_id is None or not is_version(snapshot):
        raise ServiceError("BlobNotFound")
    if VERSION_PREFIX + base.version_id != snapshot:
        raise ServiceError("BlobNotFound")
    return base
