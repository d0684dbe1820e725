"""The plan of every blob write: load the state, let the service decide, apply what it decided.

Applying follows the order :class:`~tabulae.storage.blobs.BlobWrite` documents and never looks
for what the state says is not there (the extents of a blob that did not exist, staged blocks
when there are none), so a new small blob costs two inserts. Extents a write stops naming
become garbage unless another row still names them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import cache
from typing import Any

from tabulae.model.blobs import Extent, block_id_size
from tabulae.storage.blob_pages import EVERY_PAGE, PageEdit, PageSpan
from tabulae.storage.blobplan import garbage, pages, retained, tags
from tabulae.storage.blobplan.reads import At, committed, load_named, load_namespace
from tabulae.storage.blobs import (
    STORED_BASE,
    VERSION_PREFIX,
    BlobState,
    BlobWrite,
    ChangesTaken,
    Decide,
    Needs,
    encode_blob,
)
from tabulae.storage.plan import Plan, Restart, Sql

PAGE_BLOB = "PageBlob"
CopyExtent = Callable[[int, int, Extent], Plan[Extent]]
"""An engine's sub-plan that copies one extent from a blob's distribution key to another's."""

_ROW = "{key=} container_id = :c AND name = :name AND version = :version"
_BLOB = "{key=} container_id = :c AND name = :name"
_INSERT_BLOB = (
    "INSERT INTO blobs ({key,} container_id, name, version, committed, ticks, size, doc)"
    " VALUES ({:key,} :c, :name, :version, :committed, :ticks, :size, :doc)"
)
_EXTENT_COLUMNS = "INSERT INTO blob_extents ({key,} container_id, name, version, seq, ref, length, block_id)"
# Statements are constants, not f-strings built per call: the runners look each text up by value.
_SNAPSHOTS = _BLOB + f" AND version < '{VERSION_PREFIX}'"  # previous versions outlive the blob
_EXTENT_REFS = "SELECT ref FROM blob_extents WHERE " + _ROW
_DELETE_EXTENTS = "DELETE FROM blob_extents WHERE " + _ROW
_BLOCK_REFS = "SELECT ref FROM blob_blocks WHERE " + _BLOB
_DELETE_BLOCKS = "DELETE FROM blob_blocks WHERE " + _BLOB
_UPDATE_BLOB = (
    "UPDATE blobs SET committed = :committed, ticks = :ticks, size = :size, doc = :doc WHERE " + _ROW
)
_INSERT_EXTENT = _EXTENT_COLUMNS + " VALUES ({:key,} :c, :name, :version, :seq, :ref, :length, :block_id)"
_APPEND_EXTENT = (
    _EXTENT_COLUMNS + " SELECT {:key,} :c, :name, :version, coalesce(max(seq) + 1, 0), :ref{::uuid}, :length,"
    " :block_id FROM blob_extents WHERE " + _ROW
)
_SNAPSHOT_EXTENTS = (
    _EXTENT_COLUMNS + " SELECT {key,} container_id, name, :snapshot, seq, ref, length, block_id"
    " FROM blob_extents WHERE " + _ROW
)
_NO_STAGED = "UPDATE blobs SET staged = 0, staged_id_length = NULL WHERE " + _ROW
_BLOCK_REF = _BLOCK_REFS + " AND block_id = :block_id"
_COUNT_STAGED = "UPDATE blobs SET staged = staged + :added, staged_id_length = :length WHERE " + _ROW
_KEEP_CHANGE = "INSERT INTO blob_changes ({key,} account, doc) VALUES ({:key,} :account, :doc)"
_DROP_CHANGE = "DELETE FROM blob_changes WHERE {key=} seq = :seq"
_STAGE_BLOCK = (
    "INSERT INTO blob_blocks ({key,} container_id, name, block_id, seq, ref, length)"
    " VALUES ({:key,} :c, :name, :block_id, :seq, :ref, :length)"
    " ON CONFLICT ({key,} container_id, name, block_id)"
    " DO UPDATE SET seq = excluded.seq, ref = excluded.ref, length = excluded.length"
)


def write_blob(
    at: At,
    decide: Decide,
    needs: Needs,
    *,
    source: tuple[At, str] | None = None,
    guard: Sql | None = None,
    copy: CopyExtent | None = None,
    above: Sequence[At] = (),
    path_locks: Sequence[Sql] = (),
) -> Plan[tuple[Any, set[str]]]:
    """Load, decide, apply; returns the decision's result and the refs the write named.

    ``source`` (Copy Blob) is a blob and stored version read into ``state.source``; when it has
    another distribution key, ``copy`` brings the extents the write names over. ``guard`` runs
    first (an engine's container lock), then ``path_locks`` (with ``needs.namespace``: the
    engine's locks that serialise writes along the path), and ``above`` are the directories
    above the blob whose records ``state.ancestors`` holds."""
    if guard is not None:
        yield guard
    for lock in path_locks:
        _locked = yield lock
    spans = pages.named_spans(at, STORED_BASE, *needs.pages) if needs.pages is not None else None
    cid, state, rows = yield from load_named(at, needs, spans)
    if needs.namespace:
        yield from load_namespace(state, at, cid, above)
    if needs.pages is not None and state.base is not None:
        state.pages = pages.spans_of(rows)
    if source is not None:
        origin, version = source
        found = yield from committed(origin, version, True)
        if found is not None:
            state.source, state.source_content = found
            if found[0].blob_type == PAGE_BLOB:
                state.source_pages = yield from pages.source_spans(origin, version)
    write = decide(state)
    if source is not None and source[0].dkey != at.dkey and copy is not None:
        if write.content is not None:
            copied = []
            for extent in write.content:
                copied.append((yield from copy(source[0].dkey, at.dkey, extent)))
            write.content = copied
        if write.pages is not None:
            write.pages = yield from _copy_spans(source[0].dkey, at.dkey, write.pages, copy)
    referenced = yield from apply(at, cid, write, state)
    return write.result, referenced


def _copy_spans(source: int, dkey: int, change: PageEdit, copy: CopyExtent) -> Plan[PageEdit]:
    """The spans of ``change`` with their extents copied to distribution key ``dkey`` (each extent
    once, however many spans name it)."""
    refs: dict[str, str] = {}
    spans: list[PageSpan] = []
    for span in change.spans:
        if not span.cleared and span.ref not in refs:
            refs[span.ref] = (yield from copy(source, dkey, Extent(span.ref, 0))).ref
        spans.append(span if span.cleared else replace(span, ref=refs[span.ref]))
    return replace(change, spans=spans)


def _refs(text: str, params: dict[str, Any]) -> Plan[set[str]]:
    rows = yield Sql(text, params, "all")
    return {str(row[0]) for row in rows}


@cache
def _version_statements(where: str) -> tuple[str, str, str]:
    return (
        f"SELECT ref FROM blob_extents WHERE {where}",
        f"DELETE FROM blob_extents WHERE {where}",
        f"DELETE FROM blobs WHERE {where}",
    )


def _delete_version(where: str, params: dict[str, Any], paged: bool) -> Plan[set[str]]:
    """Delete the versions ``where`` matches with their extents and, when they may be page
    blobs (``paged``), their page spans; the refs they named."""
    refs, extents, versions = _version_statements(where)
    dropped = yield from _refs(refs, params)
    yield Sql(extents, params)
    if paged:
        dropped |= yield from pages.delete(where, params)
    yield Sql(versions, params)
    return dropped


def apply(at: At, cid: int, write: BlobWrite, state: BlobState) -> Plan[set[str]]:
    """Apply ``write``; returns the refs it named (new extents, an appended or staged block)."""
    existed = state.base is not None
    dropped: set[str] = set()
    base = at.row(cid)
    paged = state.base is not None and state.base.blob_type == PAGE_BLOB
    if write.delete_snapshots:  # snapshots may be page blobs whatever the base is now
        dropped |= yield from _delete_version(_SNAPSHOTS, base, paged or state.snapshots > 0)
    if write.delete_snapshot is not None:
        target = state.target
        snapshot_paged = target is None or target.blob_type == PAGE_BLOB
        dropped |= yield from _delete_version(_ROW, at.row(cid, write.delete_snapshot), snapshot_paged)
    for frozen in (write.snapshot, write.version):
        if frozen is None:
            continue
        values = {**at.row(cid, frozen.snapshot), "committed": frozen.committed, "ticks": frozen.ticks,
                  "size": frozen.size, "doc": encode_blob(frozen)}  # fmt: skip
        yield Sql(_INSERT_BLOB, values)
        yield Sql(_SNAPSHOT_EXTENTS, {**base, "snapshot": frozen.snapshot})
        if frozen.blob_type == PAGE_BLOB:
            yield from pages.copy(at, cid, frozen.snapshot)
    if write.delete_base:
        dropped |= yield from _refs(_BLOCK_REFS, base)
        yield Sql(_DELETE_BLOCKS, base)
        dropped |= yield from _delete_version(_ROW, base, paged)
    if write.base is not None:
        record = write.base
        values = {**base, "committed": record.committed, "ticks": record.ticks, "size": record.size,
                  "doc": encode_blob(record)}  # fmt: skip
        if existed and not write.delete_base:  # its row is locked by this transaction
            yield Sql(_UPDATE_BLOB, values)
        elif not (yield Sql(_INSERT_BLOB + " ON CONFLICT DO NOTHING", values, "rowcount")):
            raise Restart  # a concurrent write created the blob: decide again
    if write.delete_base or write.base is not None:  # the tag index follows the current version
        old = state.base.tags if existed and state.base is not None else {}
        new = write.base.tags if write.base is not None and write.base.committed else {}
        if old != new:
            yield from tags.replace_tags(at, cid, old, new)
    referenced: set[str] = set()
    if write.pages is None and existed and not write.delete_base and _replaces_pages(state, write):
        write.pages = PageEdit(0, EVERY_PAGE)  # a page blob replaced by another type keeps no spans
    if write.pages is not None:
        gone, named = yield from pages.edit(at, cid, write.pages)
        dropped |= gone
        referenced |= named
    if write.content is not None:
        if existed:
            dropped |= yield from _refs(_EXTENT_REFS, base)
            yield Sql(_DELETE_EXTENTS, base)
        if write.content:
            yield Sql(
                _INSERT_EXTENT,
                rows=[{**base, "seq": seq, "ref": e.ref, "length": e.length, "block_id": e.block_id}
                      for seq, e in enumerate(write.content)],
            )  # fmt: skip
        referenced.update(e.ref for e in write.content)
    if write.append is not None:
        extent = write.append
        yield Sql(
            _APPEND_EXTENT, {**base, "ref": extent.ref, "length": extent.length, "block_id": extent.block_id}
        )
        referenced.add(extent.ref)
    if write.drop_staged and state.staged_count:
        dropped |= yield from _refs(_BLOCK_REFS, base)
        yield Sql(_DELETE_BLOCKS, base)
        yield Sql(_NO_STAGED, base)
    if write.stage_block is not None:
        block = write.stage_block
        one = {**base, "block_id": block.block_id}
        replaced = yield from _refs(_BLOCK_REF, one)
        dropped |= replaced
        yield Sql(
            _COUNT_STAGED,
            {**base, "added": 0 if replaced else 1, "length": block_id_size(block.block_id or "")},
        )
        yield Sql(_STAGE_BLOCK, {**one, "seq": time.time_ns(), "ref": block.ref, "length": block.length})
        referenced.add(block.ref)
    if write.snapshot_record is not None:
        frozen = write.snapshot_record
        yield Sql(_UPDATE_BLOB, {**at.row(cid, frozen.snapshot), "committed": True, "ticks": frozen.ticks,
                                 "size": frozen.size, "doc": encode_blob(frozen)})  # fmt: skip
    if write.snapshot_after is not None:
        frozen = write.snapshot_after
        yield Sql(_INSERT_BLOB, {**at.row(cid, frozen.snapshot), "committed": True, "ticks": frozen.ticks,
                                 "size": frozen.size, "doc": encode_blob(frozen)})  # fmt: skip
        yield Sql(_SNAPSHOT_EXTENTS, {**base, "snapshot": frozen.snapshot})
        if frozen.blob_type == PAGE_BLOB:
            yield from pages.copy(at, cid, frozen.snapshot)
    if write.rewrite or write.moves or write.purge:
        dropped |= yield from retained.apply(at, cid, write)
        back = next((r for _, r in write.moves if not r.snapshot and r.committed), None)
        if back is not None and back.tags and not existed:  # an undeleted base: current again
            yield from tags.replace_tags(at, cid, {}, back.tags)
    if write.change is not None:
        yield Sql(_KEEP_CHANGE, {"dkey": at.dkey, "account": at.key.account, "doc": write.change})
    for change in write.consume:
        if not (yield Sql(_DROP_CHANGE, {"dkey": change.dkey, "seq": change.seq}, "rowcount")):
            raise ChangesTaken
    for ref in dropped - referenced:
        yield from garbage.drop(at.dkey, ref)
    return referenced


def _replaces_pages(state: BlobState, write: BlobWrite) -> bool:
    """Whether ``write`` turns a page blob into a blob of another type."""
    return (
        state.base is not None
        and state.base.blob_type == PAGE_BLOB
        and write.base is not None
        and write.base.blob_type != PAGE_BLOB
    )
