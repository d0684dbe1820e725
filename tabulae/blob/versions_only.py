"""List Blobs with ``include=deletedwithversions`` ("List Blobs", "Blob versioning").

A blob deleted while versioning was on has no current version, only previous ones, so a plain
listing leaves it out. With ``deletedwithversions`` Azure lists it once more, as its root: the
blob's name, ``<HasVersionsOnly>true</HasVersionsOnly>``, and the properties of its newest
version, with no ``VersionId`` and no ``Deleted`` (as a recorded answer of Azure shows). Blobs
that have a current version are listed as they always are.

The listing reads the versions too (they are stored beside the blob, before it in key order) and
:class:`VersionsOnlyFold` folds each name's versions into that one root, placed where the blob
itself would be. With ``include=versions`` as well every version is listed already and the fold
adds no root (assumed: the reference does not say what that combination lists).
"""

from __future__ import annotations

from dataclasses import replace

from tabulae.blob import versioning
from tabulae.model.blobs import BASE, VERSION_PREFIX, BlobRecord, Lease


def root_of(newest: BlobRecord) -> BlobRecord:
    """The item listed for a blob that has versions only: its newest version, as the blob."""
    return replace(
        newest,
        snapshot=BASE,
        version_id=None,
        lease=Lease(),
        committed=True,
        deleted_time=None,
        retention_days=0,
    )


class VersionsOnlyFold:
    """Takes a listing's records in key order and gives those to list, with a root for each name
    that has versions but no current version. ``show_versions``: the client asked for versions
    too, so they are listed and no root is made."""

    def __init__(self, show_versions: bool) -> None:
        self._show_versions = show_versions
        self._newest: BlobRecord | None = None  # the newest version of the name being read

    def feed(self, record: BlobRecord) -> list[tuple[BlobRecord, bool]]:
        """What to list on reading ``record``: ``(record, is_root)`` pairs, in order."""
        out: list[tuple[BlobRecord, bool]] = []
        newest = self._newest
        if newest is not None and record.name != newest.name:
            out += self.flush()
        if versioning.is_version(record.snapshot):
            if self._show_versions:
                out.append((record, False))
            else:
                self._newest = record
            return out
        if record.snapshot == BASE and record.committed:
            self._newest = None  # the blob has a current version: it is listed as itself
        elif self._newest is not None and record.snapshot != BASE:
            out += self.flush()  # a deleted base kept aside sorts after where the blob would be
        out.append((record, False))
        return out

    def flush(self) -> list[tuple[BlobRecord, bool]]:
        """The root of the name being read, if it has versions only; at a name's end or the listing's."""
        newest, self._newest = self._newest, None
        return [] if newest is None else [(root_of(newest), True)]


def root_marker_version() -> str:
    """Where a page that begins with a root resumes: at the first version of its name, so the
    fold sees all of them again."""
    return VERSION_PREFIX
