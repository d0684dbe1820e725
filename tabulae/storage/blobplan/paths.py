"""Plans of the hierarchical namespace (Data Lake Storage Gen2): a path and its whole subtree
renamed, or deleted, in one transaction.

A DFS path is the blob of the same name (one data set), so a directory's descendants are the
blobs whose names start with the directory's name and a ``/``: a name range, which the blobs'
primary key orders, so finding them is an index range scan. A rename rewrites the names of that
range in one statement per table: no content is copied, and the transaction commits all of the
new tree or none of it, so a crash leaves the old tree or the new one, never a mix. On PostgreSQL
an account with a hierarchical namespace keeps each container's rows on one distribution key
(``postgres/blob_keys.py``), so that is all a rename within a file system does, on one shard;
a flat account's rows are keyed by name, so there the distribution key changes too, with the
content chunks following it. Citus refuses to update a distribution column, so there such rows
(chunks included) are deleted and inserted under their new keys instead, in the one distributed
transaction (two-phase commit across the nodes).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any, NamedTuple

from tabulae.model.blobs import BlobRecord
from tabulae.storage.blobplan import garbage, tags
from tabulae.storage.blobplan.reads import BLOB_COLUMNS, At, blob_of, container_id, has_children, load_state
from tabulae.storage.blobplan.writes import apply
from tabulae.storage.blobs import (
    NO_NEEDS,
    STORED_BASE,
    BlobState,
    BlobWrite,
    encode_blob,
    next_ticks,
    tags_of,
)
from tabulae.storage.namespace import RenameDecide, RenameState, TreeDone, TreeState, TreeWrite, UndeleteState
from tabulae.storage.plan import Plan, Sql

_TABLES = ("blobs", "blob_extents", "blob_blocks")
# The moved and deleted tables: the records' and their index tags' (a path's tags follow it).
_PATH_TABLES = (*_TABLES, "blob_tags")
_ONE = "container_id = :sc AND name = :src"
_TREE = "container_id = :sc AND (name = :src OR (name > :lo AND name < :hi))"
_VERSION_ROW = (
    f"SELECT {BLOB_COLUMNS} FROM blobs WHERE {{key=}} container_id = :c"
    " AND name = :name AND version = :version"
)
_UPDATE_RECORD = (
    "UPDATE blobs SET ticks = :ticks, size = :size, doc = :doc"
    " WHERE {key=} container_id = :c AND name = :name AND version = :version"
)


def _range(name: str) -> tuple[str, str]:
    """The names strictly below ``name`` as a directory: after ``name/`` and before ``name0``."""
    return name + "/", name + "0"


def _scoped(where: str, colocated: bool) -> str:
    """``where``, routed to the one shard of ``:dkey`` when every blob of the container has it."""
    return "{key=} " + where if colocated else where


@cache
def _move_statements(subtree: bool, rekey: str | None, colocated: bool = False) -> tuple[str, ...]:
    """The statements that move a name (and its range): chunks first (they follow the extents'
    keys, read before those change) unless the container's blobs share one key, then each
    table's rows."""
    where = _scoped(_TREE if subtree else _ONE, colocated)
    new_name = ":dst || substr(name, :n)"
    statements = []
    if rekey is not None and not colocated:
        for table in ("blob_extents", "blob_blocks"):
            moved = rekey.format(name="e.new")
            statements.append(
                f"UPDATE blob_chunks AS ch SET dkey = {moved} FROM (SELECT DISTINCT dkey, ref,"
                f" {new_name} AS new FROM {table} WHERE {where}) AS e"
                " WHERE ch.dkey = e.dkey AND ch.ref = e.ref"
            )
    for table in _PATH_TABLES:
        keyed = f", dkey = {rekey.format(name=new_name)}" if rekey is not None else ""
        statements.append(f"UPDATE {table} SET container_id = :dc, name = {new_name}{keyed} WHERE {where}")
    return tuple(statements)


# Each moved table's columns after its first three (dkey, container_id, name).
_REST = {
    "blobs": "version, committed, ticks, size, doc, staged, staged_id_length",
    "blob_extents": "version, seq, ref, length, block_id",
    "blob_blocks": "block_id, seq, ref, length",
    "blob_tags": "tag, value",
}


@cache
def _reinsert_statements(subtree: bool, rekey: str, colocated: bool = False) -> tuple[str, ...]:
    """The statements that move a name (and its range) where a row's distribution key cannot be
    updated (Citus): each deletes the rows and inserts what it returned under the new name and
    key, so the rows move between shards (chunks too, unless the container's blobs share one
    key: :func:`_copy_chunk_statements`) in the one distributed transaction. Deleting and
    inserting in one statement never lets the delete see an inserted row, even when a new name
    falls in the old range (``a/b`` renamed ``a``)."""
    where = _scoped(_TREE if subtree else _ONE, colocated)
    new_name = ":dst || substr(old.name, :n)"
    statements = []
    for table in () if colocated else ("blob_extents", "blob_blocks"):
        statements.append(
            f"WITH e AS (SELECT DISTINCT dkey, ref, {new_name.replace('old.', '')} AS new FROM {table}"
            f" WHERE {where}), old AS (DELETE FROM blob_chunks AS ch USING e"
            " WHERE ch.dkey = e.dkey AND ch.ref = e.ref RETURNING e.new, ch.ref, ch.seq, ch.data)"
            f" INSERT INTO blob_chunks (dkey, ref, seq, data) SELECT {rekey.format(name='old.new')},"
            " old.ref, old.seq, old.data FROM old"
        )
    for table, rest in _REST.items():
        statements.append(
            f"WITH old AS (DELETE FROM {table} WHERE {where} RETURNING *)"
            f" INSERT INTO {table} (dkey, container_id, name, {rest})"
            f" SELECT {rekey.format(name=new_name)}, :dc, {new_name}, {rest} FROM old"
        )
    return tuple(statements)


@cache
def _copy_chunk_statements(subtree: bool) -> tuple[str, str]:
    """A move between two file systems whose blobs are each kept on one key: the content the
    moved rows name is copied to the destination's key, and left behind as garbage (another
    path of the source may name the same extent: a copy shares it), which the collector frees
    once the grace period is over and nothing names it. A download of the old name that is
    under way reads on meanwhile."""
    where = _scoped(_TREE if subtree else _ONE, True)
    refs = f"SELECT ref FROM blob_extents WHERE {where} UNION SELECT ref FROM blob_blocks WHERE {where}"
    return (
        "INSERT INTO blob_chunks (dkey, ref, seq, data) SELECT :ddkey, ref, seq, data FROM blob_chunks"
        f" WHERE dkey = :dkey AND ref IN ({refs}) ON CONFLICT (dkey, ref, seq) DO NOTHING",
        f"INSERT INTO blob_garbage (dkey, ref, dropped) SELECT :dkey, ref, {{now}} FROM ({refs}) AS r"
        " ON CONFLICT (dkey, ref) DO UPDATE SET dropped = excluded.dropped",
    )


def rename(
    source: At,
    destination: At,
    parent: At | None,
    decide: RenameDecide,
    rekey: str | None,
    *,
    reinsert: bool = False,
    guards: tuple[Sql, ...] = (),
) -> Plan[Any]:
    """Load and lock the source, the destination and its parent, decide, and move. ``rekey`` is
    the engine's SQL for a row's distribution key from ``:account``, ``:dcontainer`` and a new
    name (``{name}``); None for an engine without one. With ``reinsert`` (and a key to change)
    rows are moved by delete and insert rather than updated in place; ``guards`` run first.
    Where the container's blobs share one key (``source.colocated``) a move within it changes
    names only, on that key's shard, and a move to another container copies the content its
    rows name rather than moving it (other paths may share an extent)."""
    for guard in guards:
        _locked = yield guard  # a statement's answer comes back here (not from a tuple's iterator)
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
        children = yield from has_children(dcid, destination)
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
              "dcontainer": destination.key.container, "dkey": source.dkey,
              "ddkey": destination.dkey}  # fmt: skip
    statements: tuple[str, ...]
    if source.colocated and source.dkey == destination.dkey:
        statements = _move_statements(write.subtree, None, True)  # names change in place, on one shard
    elif source.colocated:
        rows = _reinsert_statements if reinsert else _move_statements
        statements = (*_copy_chunk_statements(write.subtree), *rows(write.subtree, ":ddkey", True))
    elif reinsert and rekey is not None:
        statements = _reinsert_statements(write.subtree, rekey)
    else:
        statements = _move_statements(write.subtree, rekey)
    for statement in statements:
        yield Sql(statement, params)
    if write.record is not None:
        record = write.record
        yield Sql(_UPDATE_RECORD, {**destination.row(dcid), "ticks": record.ticks, "size": record.size,
                                   "doc": encode_blob(record)})  # fmt: skip
    return write.result


# What a hard delete removes: every row of the names but those soft deletes kept (``~d`` slots,
# after the base's ``~``), which stay for their own undelete or purge.
_NOT_KEPT = f" AND version <= '{STORED_BASE}'"
_TAG_PAGE = 1000  # kept records read at once for their index tags by an undelete
_UNVERSIONED = ("blob_blocks", "blob_tags")  # tables whose rows are all of the current version


def _drop_rows(tables: tuple[str, ...], where: str, params: dict[str, Any]) -> Plan[None]:
    """Delete the rows of ``tables`` that ``where`` selects, but for what soft deletes kept;
    the extents and blocks they named become garbage once nothing else names them."""
    refs: set[tuple[int, str]] = set()
    scoped = {table: where + ("" if table in _UNVERSIONED else _NOT_KEPT) for table in tables}
    for table in tables:
        if table in ("blobs", "blob_tags"):
            continue
        rows = yield Sql(f"SELECT {{key,}} ref FROM {table} WHERE {scoped[table]}", params, "all")
        refs.update((row[0] if len(row) > 1 else 0, str(row[-1])) for row in rows)
    for table in tables:
        yield Sql(f"DELETE FROM {table} WHERE {scoped[table]}", params)
    for dkey, ref in refs:
        yield from garbage.drop(dkey, ref)


_BELOW = "container_id = :sc AND name > :lo AND name < :hi"
_FROM_CUT = "container_id = :sc AND name >= :cut AND name < :hi"
_BASE = f"version = '{STORED_BASE}'"


class _TreeSql(NamedTuple):
    """The statements over a path's subtree, on every shard or on its container's one."""

    tree: str  # the path and its descendants
    cut: str  # the descendants from a name on
    last_names: str
    uncommitted: str
    soft_extents: str
    soft_rows: str
    back_extents: str
    back_rows: str
    live_below: str
    drop_tags: str  # the tree's index tags, which only current versions have
    kept_docs: str  # a page of the records a soft delete kept in a slot, whose tags an undelete restores


@cache
def _tree_sql(colocated: bool) -> _TreeSql:
    tree, below = _scoped(_TREE, colocated), _scoped(_BELOW, colocated)
    return _TreeSql(
        tree=tree,
        cut=_scoped(_FROM_CUT, colocated),
        last_names=f"SELECT name FROM blobs WHERE {below}{_NOT_KEPT} ORDER BY name DESC LIMIT :n",
        uncommitted=f"DELETE FROM blobs WHERE {tree} AND {_BASE} AND NOT committed",
        soft_extents=f"UPDATE blob_extents SET version = :dv WHERE {tree} AND {_BASE}",
        soft_rows="UPDATE blobs SET version = :dv, committed = :no, staged = 0, staged_id_length = NULL"
        f" WHERE {tree} AND {_BASE}",
        back_extents=f"UPDATE blob_extents SET version = '{STORED_BASE}' WHERE {tree} AND version = :dv",
        back_rows=f"UPDATE blobs SET version = '{STORED_BASE}', committed = :yes"
        f" WHERE {tree} AND version = :dv",
        live_below=f"SELECT 1 FROM blobs WHERE {below} AND {_BASE} AND committed LIMIT 1",
        drop_tags=f"DELETE FROM blob_tags WHERE {tree}",
        kept_docs=f"SELECT {{key,}} name, doc FROM blobs WHERE {tree} AND version = :dv AND name > :after"
        " ORDER BY name LIMIT :n",
    )


_REWRITE_ONE = (
    "UPDATE blobs SET committed = :committed, ticks = :ticks, size = :size, doc = :doc"
    " WHERE {key=} container_id = :c AND name = :name AND version = :version"
)


def _rewrite(at: At, cid: int, record: BlobRecord) -> Sql:
    version = record.snapshot or STORED_BASE
    return Sql(_REWRITE_ONE, {**at.row(cid, version), "committed": record.committed, "ticks": record.ticks,
                              "size": record.size, "doc": encode_blob(record)})  # fmt: skip


def delete_tree(at: At, decide: Callable[[TreeState], Any]) -> Plan[TreeDone]:
    """Delete a path with every descendant (``Path - Delete`` with ``recursive=true``) once
    ``decide`` allows it, soft-deleting the tree or deleting a piece of it when its
    :class:`TreeWrite` says so; the extents deleted rows named become garbage."""
    cid = yield from container_id(at.key.account, at.key.container)
    state: BlobState = yield from load_state(at, cid, NO_NEEDS)
    children = yield from has_children(cid, at)
    answer = decide(TreeState(state.base, children, state.ticks))
    write = answer if isinstance(answer, TreeWrite) else TreeWrite(result=answer)
    low, high = _range(at.key.name)
    params: dict[str, Any] = {"sc": cid, "src": at.key.name, "lo": low, "hi": high, "dkey": at.dkey}
    sql = _tree_sql(at.colocated)
    if write.kept is not None:
        # Staged blocks and blobs with nothing committed are not kept (Azure keeps committed data).
        yield from _drop_rows(("blob_blocks",), sql.tree, params)
        yield Sql(sql.uncommitted, params)
        moved = {**params, "dv": write.kept.snapshot, "no": False}
        yield Sql(sql.soft_extents, moved)
        yield Sql(sql.soft_rows, moved)
        yield Sql(sql.drop_tags, params)
        yield _rewrite(at, cid, write.kept)
        return TreeDone(write.result)
    if write.limit is not None and children:
        rows = yield Sql(sql.last_names, {**params, "n": write.limit + 1}, "all")
        if len(rows) > write.limit:
            yield from _drop_rows(_PATH_TABLES, sql.cut, {**params, "cut": str(rows[write.limit - 1][0])})
            return TreeDone(write.result, finished=False)
    yield from _drop_rows(_PATH_TABLES, sql.tree, params)
    return TreeDone(write.result)


def undelete_tree(at: At, slot: str, decide: Callable[[UndeleteState], BlobRecord]) -> Plan[BlobRecord]:
    """Bring a soft-deleted path back from ``slot`` with every descendant deleted with it, the
    path's record becoming what ``decide`` returns (it refuses when a live path is in the way)."""
    cid = yield from container_id(at.key.account, at.key.container)
    state: BlobState = yield from load_state(at, cid, NO_NEEDS)
    row = yield Sql(_VERSION_ROW, at.row(cid, slot), "one")
    deleted = blob_of(row) if row is not None and not row[4] else None
    low, high = _range(at.key.name)
    params: dict[str, Any] = {"sc": cid, "src": at.key.name, "lo": low, "hi": high, "dv": slot, "yes": True,
                              "dkey": at.dkey}  # fmt: skip
    sql = _tree_sql(at.colocated)
    below = yield Sql(sql.live_below, params, "one")
    live = state.base if state.base is not None and state.base.committed else None
    record = decide(UndeleteState(live, deleted, state.ticks, below is not None))
    yield from _drop_rows(("blob_blocks",), sql.tree, params)
    yield Sql(sql.uncommitted, params)
    after = ""  # the kept records' index tags come back a page at a time: a tree may be large
    while True:
        kept = yield Sql(sql.kept_docs, {**params, "after": after, "n": _TAG_PAGE}, "all")
        # each row's own key (an engine without one has none: 0), as in the rows it restores
        restored = [(row[0] if len(row) > 2 else 0, str(row[-2]), tags_of(bytes(row[-1]))) for row in kept]
        yield from tags.restore_tags(cid, [named for named in restored if named[1] != at.key.name])
        if len(kept) < _TAG_PAGE:
            break
        after = restored[-1][1]
    yield Sql(sql.back_extents, params)
    yield Sql(sql.back_rows, params)
    yield _rewrite(at, cid, record)
    yield from tags.restore_tags(cid, [(at.dkey, at.key.name, record.tags)])  # the path itself, as decided
    return record
