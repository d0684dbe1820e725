"""Plans over page blobs' spans (``blob_pages``): read the spans around a range, replace them,
copy them to a snapshot, drop them with their versions.

A blob's spans are keyed by (version, first byte), and never overlap, so the spans overlapping
a range are the one that starts at or before it (found by one backward index step) and those
that start inside it: a Put Page of 4 KiB reads a handful of rows however many the blob has.
Only spans that are not tombstones name an extent, so only they ever make one garbage.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import Any

from tabulae.storage.blob_pages import EVERY_PAGE, PageEdit, PageSpan
from tabulae.storage.blobplan.reads import _COMMITTED, At, blob_of, container_id
from tabulae.storage.blobs import BlobRecord
from tabulae.storage.plan import Plan, Sql

_ROW = "{key=} container_id = :c AND name = :name AND version = :version"
_COLUMNS = "page_start, page_end, ref, ref_offset, cleared"
# Statements are constants: the runners look each text up by value.
# the span that starts at or before ``low`` (one backward index step), else ``low`` itself: the
# first start to read, found in the same statement as the spans
_FIRST = (
    "coalesce((SELECT page_start FROM blob_pages WHERE " + _ROW + " AND page_start <= :low"
    " ORDER BY page_start DESC LIMIT 1), :low)"
)
_SPANS = (
    f"SELECT {_COLUMNS} FROM blob_pages WHERE "
    + _ROW
    + " AND page_start >= "
    + _FIRST
    + " AND page_start < :high AND page_end > :low ORDER BY page_start"
)
# The same by the container's name, for a write that reads them beside its blob's record (whose
# row brings the container's id) in one round trip.
_SPANS_NAMED = _SPANS.replace(
    "container_id = :c",
    "container_id = (SELECT id FROM blob_containers WHERE account = :account AND name = :container)",
)
_IN_EDIT = _ROW + " AND page_start >= :low AND page_start < :high"
_EDIT_DELETE = "DELETE FROM blob_pages WHERE " + _IN_EDIT + " RETURNING ref, cleared"
_EDIT_DELETE_KNOWN = "DELETE FROM blob_pages WHERE " + _IN_EDIT
_INSERT = (
    f"INSERT INTO blob_pages ({{key,}} container_id, name, version, {_COLUMNS})"
    " VALUES ({:key,} :c, :name, :version, :start, :end, :ref{::uuid}, :offset, :cleared)"
)
_COPY = (
    f"INSERT INTO blob_pages ({{key,}} container_id, name, version, {_COLUMNS})"
    f" SELECT {{key,}} container_id, name, :to_version, {_COLUMNS} FROM blob_pages WHERE " + _ROW
)


def spans(at: At, cid: int, version: str, low: int, high: int) -> Plan[list[PageSpan]]:
    """The spans of one version overlapping ``[low, high)``, in order."""
    rows = yield Sql(_SPANS, {**at.row(cid, version), "low": low, "high": high}, "all")
    return spans_of(rows)


def named_spans(at: At, version: str, low: int, high: int) -> Sql:
    """The statement reading what :func:`spans` reads, by the container's name."""
    key = at.key
    params = {"dkey": at.dkey, "account": key.account, "container": key.container, "name": key.name,
              "version": version, "low": low, "high": high}  # fmt: skip
    return Sql(_SPANS_NAMED, params, "all")


def spans_of(rows: Iterable[Any]) -> list[PageSpan]:
    """Spans from the rows of :func:`spans` or :func:`named_spans`."""
    return [
        PageSpan(int(a), int(b), str(ref), int(offset), bool(cleared)) for a, b, ref, offset, cleared in rows
    ]


def version_spans(
    at: At, version: str, low: int, high: int
) -> Plan[tuple[BlobRecord, list[PageSpan]] | None]:
    """A committed version and its spans overlapping ``[low, high)``; None when it or its
    container is missing."""
    key = at.key
    params = {"dkey": at.dkey, "name": key.name, "version": version, "account": key.account,
              "container": key.container}  # fmt: skip
    row = yield Sql(_COMMITTED, params, "one")
    if row is None:
        return None
    return blob_of(row[1:]), (yield from spans(at, int(row[0]), version, low, high))


def source_spans(at: At, version: str) -> Plan[list[PageSpan]]:
    """Every span of a copy's source version (its record was read already)."""
    cid = yield from container_id(at.key.account, at.key.container)
    return (yield from spans(at, cid, version, 0, EVERY_PAGE))


def _kept(rows: Iterable[Any]) -> set[str]:
    """The extent refs among deleted rows (tombstones name none)."""
    return {str(ref) for ref, cleared in rows if not cleared}


def edit(at: At, cid: int, change: PageEdit) -> Plan[tuple[set[str], set[str]]]:
    """Apply ``change`` to the base's spans; returns the refs it dropped and those it named."""
    where = at.row(cid)
    if change.deleting is not None:
        yield Sql(_EDIT_DELETE_KNOWN, {**where, "low": change.low, "high": change.high})
        rows: Iterable[Any] = ((s.ref, s.cleared) for s in change.deleting)
    else:
        rows = yield Sql(_EDIT_DELETE, {**where, "low": change.low, "high": change.high}, "all")
    if change.spans:
        yield Sql(
            _INSERT,
            rows=[{**where, "start": s.start, "end": s.end, "ref": s.ref, "offset": s.offset,
                   "cleared": s.cleared} for s in change.spans],
        )  # fmt: skip
    return _kept(rows), {s.ref for s in change.spans if not s.cleared}


def delete(where: str, params: dict[str, Any]) -> Plan[set[str]]:
    """Delete the spans of the versions ``where`` (a condition on container, name and version)
    matches; the refs they named."""
    rows = yield Sql(_delete_text(where), params, "all")
    return _kept(rows)


@cache
def _delete_text(where: str) -> str:
    return f"DELETE FROM blob_pages WHERE {where} RETURNING ref, cleared"


def copy(at: At, cid: int, to_version: str) -> Plan[None]:
    """Give version ``to_version`` (a new snapshot) the base's spans, sharing their extents."""
    yield Sql(_COPY, {**at.row(cid), "to_version": to_version})
