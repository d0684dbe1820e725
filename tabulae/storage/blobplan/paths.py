"""Plans of the hierarchical namespace (Data Lake Storage Gen2): a path and its whole subtree
renamed, or deleted, in one transaction.

A DFS path is the blob of the same name (one data set), so a directory's descendants are the
blobs whose names start with the directory's name and a ``/``: a name range, which the blobs'
primary key orders, so finding them is an index range scan. A rename rewrites the names (and, on
PostgreSQL, the distribution key, with the content chunks following it) of that range in one
statement per table: no content is copied, and the transaction commits all of the new tree or
none of it, so a crash leaves the old tree or the new one, never a mix.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from tabulae.model.blobs import BlobRecord
from tabulae.storage.blobplan import garbage
from tabulae.storage.blobplan.reads import At, container_id, load_state
from tabulae.storage.blobplan.writes import apply
from tabulae.storage.blobs import NO_NEEDS, BlobState, BlobWrite, encode_blob, next_ticks
from tabulae.storage.namespace import RenameDecide, RenameState, TreeState
from tabulae.storage.plan import Plan, Sql

_TABLES = ("blobs", "blob_extents", "blob_blocks")
_ONE = "container_id = :sc AND name = :src"
_TREE = "container_id = :sc AND (name = :src OR (name > :lo AND name < :hi))"
_CHILD = "SELECT 1 FROM blobs WHERE container_id = :c AND name > :lo AND name < :hi LIMIT 1"
_UPDATE_RECORD = (
    "UPDATE blobs SET ticks = :ticks, size = :size, doc = :doc"
    " WHERE {key=} container_id = :c AND name = :name AND version = :version"
)


def _range(name: str) -> tuple[str, str]:
    """The names strictly below ``name`` as a directory: after ``name/`` and before ``name0``."""
    return name + "/", name + "0"


def has_children(cid: int, name: str) -> Plan[bool]:
    low, high = _range(name)
    row = yield Sql(_CHILD, {"c": cid, "lo": low, "hi": high}, "one")
    return row is not None


@cache
def _move_statements(subtree: bool, rekey: str | None) -> tuple[str, ...]:
    """The statements that move a name (and its range): chunks first (they follow the extents'
    keys, read before those change), then each table's rows."""
    where = _TREE if subtree else _ONE
    new_name = ":dst || substr(name, :n)"
    statements = []
    if rekey is not None:
        for table in ("blob_extents", "blob_blocks"):
            moved = rekey.format(name="e.new")
            statements.append(
                f"UPDATE blob_chunks AS ch SET dkey = {moved} FROM (SELECT DISTINCT dkey, ref,"
                f" {new_name} AS new FROM {table} WHERE {where}) AS e"
                " WHERE ch.dkey = e.dkey AND ch.ref = e.ref"
            )
    for table in _TABLES:
        keyed = f", dkey = {rekey.format(name=new_name)}" if rekey is not None else ""
        statements.append(f"UPDATE {table} SET container_id = :dc, name = {new_name}{keyed} WHERE {where}")
    return tuple(statements)


def rename(
    source: At,
    destination: At,
    parent: At | None,
    decide: RenameDecide,
    rekey: str | None,
) -> Plan[Any]:
    """Load and lock the source, the destination and its parent, decide, and move. ``rekey`` is
    the engine's SQL for a row's distribution key from ``:account``, ``:dcontainer`` and a new
    name (``{name}``); None for an engine without one."""
    scid = yield from container_id(source.key.account, source.key.container)
    dcid = yield from container_id(destination.key.account, destination.key.container)
    found = yield from load_state(source, scid, NO_NEEDS)
    there = yield from load_state(destination, dcid, NO_NEEDS)
    above: BlobRecord | None = None
    if parent is not None:
        row = yield from load_state(parent, dcid, NO_NEEDS)
        above = row.base
    children = False
    if there.base is not None:
        children = yield from has_children(dcid, destination.key.name)
    ticks = next_ticks(
        max(found.base.ticks if found.base else 0, there.base.ticks if there.base else 0) or None
    )
    write = decide(RenameState(found.base, there.base, above, children, ticks))
    if not write.move:
        return write.result
    if write.replace and there.base is not None:
        yield from apply(destination, dcid, BlobWrite(delete_snapshots=True, delete_base=True), there)
    src = source.key.name
    low, high = _range(src)
    params = {"sc": scid, "dc": dcid, "src": src, "lo": low, "hi": high, "dst": destination.key.name,
              "n": len(src) + 1, "account": destination.key.account,
              "dcontainer": destination.key.container}  # fmt: skip
    for statement in _move_statements(write.subtree, rekey):
        yield Sql(statement, params)
    if write.record is not None:
        record = write.record
        yield Sql(_UPDATE_RECORD, {**destination.row(dcid), "ticks": record.ticks, "size": record.size,
                                   "doc": encode_blob(record)})  # fmt: skip
    return write.result


def delete_tree(at: At, decide: Callable[[TreeState], Any]) -> Plan[Any]:
    """Delete a path with every descendant (``Path - Delete`` with ``recursive=true``) once
    ``decide`` allows it; the extents they named become garbage."""
    cid = yield from container_id(at.key.account, at.key.container)
    state: BlobState = yield from load_state(at, cid, NO_NEEDS)
    children = yield from has_children(cid, at.key.name)
    result = decide(TreeState(state.base, children))
    low, high = _range(at.key.name)
    params = {"sc": cid, "src": at.key.name, "lo": low, "hi": high}
    refs: set[tuple[int, str]] = set()
    for table in ("blob_extents", "blob_blocks"):
        rows = yield Sql(f"SELECT {{key,}} ref FROM {table} WHERE {_TREE}", params, "all")
        refs.update((row[0] if len(row) > 1 else 0, str(row[-1])) for row in rows)
    for table in _TABLES:
        yield Sql(f"DELETE FROM {table} WHERE {_TREE}", params)
    for dkey, ref in refs:
        yield from garbage.drop(dkey, ref)
    return result
