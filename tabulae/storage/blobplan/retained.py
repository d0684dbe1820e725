"""Plans of soft delete: records rewritten in place, moved with their extents, or deleted for good;
and the scan that finds soft-deleted records whose retention has run out.

A soft-deleted record is a row that is not committed (reads and plain listings skip it) with its
deletion time in its document; its extents stay named, so its bytes stay until it is purged.
"""

from __future__ import annotations

from typing import Any

from tabulae.storage.blobplan.reads import At
from tabulae.storage.blobs import STORED_BASE, BlobWrite, encode_blob
from tabulae.storage.plan import Plan, Sql

_ROW = "{key=} container_id = :c AND name = :name AND version = :version"
_REWRITE = "UPDATE blobs SET committed = :committed, ticks = :ticks, size = :size, doc = :doc WHERE " + _ROW
_INSERT = (
    "INSERT INTO blobs ({key,} container_id, name, version, committed, ticks, size, doc)"
    " VALUES ({:key,} :c, :name, :to, :committed, :ticks, :size, :doc)"
)
_MOVE_EXTENTS = "UPDATE blob_extents SET version = :to WHERE " + _ROW
_DELETE_ROW = "DELETE FROM blobs WHERE " + _ROW
_REFS = "SELECT ref FROM blob_extents WHERE " + _ROW
_DELETE_EXTENTS = "DELETE FROM blob_extents WHERE " + _ROW
# Candidates for the purge: every soft-deleted record (the deletion time is in the document).
DELETED = (
    "SELECT b.container_id, a.account, a.name, b.name, b.version, b.ticks, b.size, b.committed, b.doc"
    " FROM blobs b JOIN blob_containers a ON a.id = b.container_id"
    f" WHERE NOT b.committed AND b.version <> '{STORED_BASE}'"
    " AND (b.container_id, b.name, b.version) > (:c, :name, :version)"
    " ORDER BY b.container_id, b.name, b.version LIMIT :n"
)


def stored(snapshot: str) -> str:
    return snapshot or STORED_BASE


def _values(at: At, cid: int, version: str, record: Any) -> dict[str, Any]:
    return {**at.row(cid, version), "committed": record.committed, "ticks": record.ticks,
            "size": record.size, "doc": encode_blob(record)}  # fmt: skip


def apply(at: At, cid: int, write: BlobWrite) -> Plan[set[str]]:
    """Apply a write's rewrites, moves and purges; returns the refs the purged records named."""
    dropped: set[str] = set()
    for record in write.rewrite:
        yield Sql(_REWRITE, _values(at, cid, stored(record.snapshot), record))
    for source, record in write.moves:
        target = stored(record.snapshot)
        yield Sql(_INSERT, {**_values(at, cid, source, record), "to": target})
        yield Sql(_MOVE_EXTENTS, {**at.row(cid, source), "to": target})
        yield Sql(_DELETE_ROW, at.row(cid, source))
    for version in write.purge:
        rows = yield Sql(_REFS, at.row(cid, version), "all")
        dropped.update(str(row[0]) for row in rows)
        yield Sql(_DELETE_EXTENTS, at.row(cid, version))
        yield Sql(_DELETE_ROW, at.row(cid, version))
    return dropped
