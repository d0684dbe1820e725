"""Plans that read blobs: records, their extents and staged blocks, listings, and the state a
write decides over."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from tabulae.model.blobs import BlobKey, BlobRecord, Extent
from tabulae.storage.blobs import (
    STORED_BASE,
    VERSION_PREFIX,
    BlobListing,
    BlobState,
    Needs,
    PendingChange,
    container_missing,
    decode_blob,
    listing_start,
    next_ticks,
    prefix_end,
)
from tabulae.storage.plan import Plan, Sql, batch

BLOB_COLUMNS = "name, version, ticks, size, committed, doc"
_COMMITTED = (
    "SELECT b.container_id, b.name, b.version, b.ticks, b.size, b.committed, b.doc FROM blobs b"
    " WHERE {key=} b.name = :name AND b.version = :version AND b.committed"
    " AND b.container_id = (SELECT id FROM blob_containers WHERE account = :account AND name = :container)"
)
_ROW = "{key=} container_id = :c AND name = :name AND version = :version"
# Statements are constants, not f-strings built per call: the runners look each text up by value.
_EXTENTS = "SELECT ref, length, block_id FROM blob_extents WHERE " + _ROW + " ORDER BY seq"
_VERSION = f"SELECT {BLOB_COLUMNS} FROM blobs WHERE " + _ROW
_OTHERS = (
    f"SELECT {BLOB_COLUMNS} FROM blobs WHERE {{key=}} container_id = :c AND name = :name"
    f" AND version <> '{STORED_BASE}' ORDER BY version"
)
_BASE_LOCKED = f"SELECT {BLOB_COLUMNS}, staged, staged_id_length FROM blobs WHERE " + _ROW + " {lock}"
# The same by the container's name: a write's first read, which finds the container's id with
# the record (the row carries it) instead of a statement before it.
_BASE_LOCKED_NAMED = (
    f"SELECT {BLOB_COLUMNS}, staged, staged_id_length, container_id FROM blobs WHERE {{key=}} container_id ="
    " (SELECT id FROM blob_containers WHERE account = :account AND name = :container)"
    " AND name = :name AND version = :version {lock}"
)


class At(NamedTuple):
    """A blob as the engine addresses it: its key and its distribution key (a named tuple: one
    is made per request)."""

    key: BlobKey
    dkey: int = 0
    # Every blob of the container shares ``dkey`` (a file system kept on one shard): statements
    # over a name range add the key condition, so they are routed to that shard alone.
    colocated: bool = False

    def row(self, cid: int, version: str = STORED_BASE) -> dict[str, Any]:
        """The parameters naming one of this blob's versions in container ``cid``."""
        return {"dkey": self.dkey, "c": cid, "name": self.key.name, "version": version}


def blob_of(row: Sequence[Any]) -> BlobRecord:
    name, version, ticks, size, committed, doc = row[:6]
    return decode_blob(name, version, ticks, size, committed, bytes(doc))


def container_id(account: str, name: str) -> Plan[int]:
    """The container's id. Raises ``ContainerNotFound``."""
    row = yield Sql(
        "SELECT id FROM blob_containers WHERE account = :account AND name = :name",
        {"account": account, "name": name},
        "one",
    )
    if row is None:
        raise container_missing()
    return int(row[0])


def extents(at: At, cid: int, version: str = STORED_BASE) -> Plan[list[Extent]]:
    rows = yield Sql(
        _EXTENTS,
        at.row(cid, version),
        "all",
    )
    return [Extent(str(ref), length, block_id) for ref, length, block_id in rows]


def staged(at: At, cid: int) -> Plan[dict[str, Extent]]:
    """The blob's staged blocks by id, in staging order."""
    rows = yield Sql(
        "SELECT block_id, ref, length FROM blob_blocks WHERE {key=} container_id = :c AND name = :name"
        " ORDER BY seq, block_id",
        at.row(cid),
        "all",
    )
    return {block_id: Extent(str(ref), length, block_id) for block_id, ref, length in rows}


def committed(at: At, version: str, content: bool) -> Plan[tuple[BlobRecord, list[Extent] | None] | None]:
    """A committed version and, with ``content``, its extents; None when it or its container is
    missing."""
    key = at.key
    params = {"dkey": at.dkey, "name": key.name, "version": version, "account": key.account,
              "container": key.container}  # fmt: skip
    row = yield Sql(_COMMITTED, params, "one")
    if row is None:
        return None
    return blob_of(row[1:]), ((yield from extents(at, row[0], version)) if content else None)


def list_blocks(at: At) -> Plan[tuple[BlobRecord | None, list[Extent], list[Extent]]]:
    cid = yield from container_id(at.key.account, at.key.container)
    row = yield Sql(_VERSION, at.row(cid), "one")
    if row is None:
        return None, [], []
    content = yield from extents(at, cid)
    blocks = yield from staged(at, cid)
    return blob_of(row), content, list(blocks.values())


def list_blobs(
    account: str,
    container: str,
    prefix: str,
    start: tuple[str, str] | None,
    limit: int,
    snapshots: bool,
    uncommitted: bool,
    versions: bool = False,
    deleted: bool = False,
    dkey: int | None = None,
) -> Plan[BlobListing]:
    """A page of a container's blobs: a range scan of every shard, in (name, version) order, or
    of the one shard of ``dkey`` when every blob of the container has that key.

    A row that is not committed is a blob with only staged blocks (at the base) or a
    soft-deleted record (anywhere else)."""
    cid = yield from container_id(account, container)
    low_name, low_version = listing_start(prefix, start)
    where = "container_id = :c AND (name, version) >= (:name, :version)"
    if dkey is not None:
        where = "{key=} " + where
    if prefix:
        where += " AND name < :end"
    if not snapshots and not versions:
        where += f" AND version >= '{STORED_BASE}'"  # the base, and deleted bases after it
    elif not snapshots:
        where += f" AND version >= '{VERSION_PREFIX}'"
    elif not versions:
        where += f" AND (version < '{VERSION_PREFIX}' OR version >= '{STORED_BASE}')"
    shown = ["committed"]
    if uncommitted:
        shown.append(f"version = '{STORED_BASE}'")
    if deleted:
        shown.append(f"version <> '{STORED_BASE}'")
    if len(shown) < 3:
        where += f" AND ({' OR '.join(shown)})"
    params = {"c": cid, "name": low_name, "version": low_version, "end": prefix_end(prefix) if prefix else "",
              "n": limit + 1, "dkey": dkey}  # fmt: skip
    rows = yield Sql(
        f"SELECT {BLOB_COLUMNS} FROM blobs WHERE {where} ORDER BY name, version LIMIT :n", params, "all"
    )
    return BlobListing([blob_of(row) for row in rows[:limit]], len(rows) > limit)


# A child is a live path (a base, committed or staged), not what a soft delete kept below it.
_CHILD = (
    "SELECT 1 FROM blobs WHERE container_id = :c AND name > :lo AND name < :hi"
    f" AND version = '{STORED_BASE}' LIMIT 1"
)
_CHILD_COLOCATED = _CHILD.replace("WHERE ", "WHERE {key=} ", 1)
_ANCESTOR = f"SELECT {BLOB_COLUMNS} FROM blobs WHERE " + _ROW


def has_children(cid: int, at: At) -> Plan[bool]:
    """Whether a base blob is named below ``at``'s name as a directory: after ``name/`` and
    before ``name0`` (on its shard alone when its container's blobs share its key)."""
    name = at.key.name
    params = {"c": cid, "lo": name + "/", "hi": name + "0", "dkey": at.dkey}
    row = yield Sql(_CHILD_COLOCATED if at.colocated else _CHILD, params, "one")
    return row is not None


def load_namespace(state: BlobState, at: At, cid: int, above: Sequence[At]) -> Plan[None]:
    """``state.ancestors`` (the base of each of ``above``) and ``state.has_children``."""
    found: list[BlobRecord | None] = []
    for ancestor in above:
        row = yield Sql(_ANCESTOR, ancestor.row(cid), "one")
        found.append(blob_of(row) if row is not None else None)
    state.ancestors = found
    state.has_children = yield from has_children(cid, at)


def load_state(at: At, cid: int, needs: Needs) -> Plan[BlobState]:
    """The base record, locked for the write, its counts, and what ``needs`` asks for."""
    row = yield Sql(
        _BASE_LOCKED,
        at.row(cid),
        "one",
    )
    return (yield from state_of(at, cid, needs, row))


def load_named(at: At, needs: Needs, beside: Sql | None = None) -> Plan[tuple[int, BlobState, Any]]:
    """As :func:`load_state`, finding the container's id in the same statement when the blob
    exists; returns that id, the state, and the reply of ``beside``, a read sent with the first
    (after it, so under its lock) in one batch. Raises ``ContainerNotFound``."""
    key = at.key
    params = {"dkey": at.dkey, "account": key.account, "container": key.container, "name": key.name,
              "version": STORED_BASE}  # fmt: skip
    first = Sql(_BASE_LOCKED_NAMED, params, "one")
    if beside is None:
        row, extra = (yield first), None
    else:
        row, extra = yield batch(first, beside)
    cid = int(row[8]) if row is not None else (yield from container_id(key.account, key.container))
    return cid, (yield from state_of(at, cid, needs, row)), extra


def state_of(at: At, cid: int, needs: Needs, row: Sequence[Any] | None) -> Plan[BlobState]:
    """The state a write decides over, from its base's row (locked) and what ``needs`` asks for."""
    base = blob_of(row) if row else None
    state = BlobState(base=base, ticks=next_ticks(base.ticks if base else None))
    if needs.snapshot is not None:  # a snapshot or version, live (a soft-deleted one is not there)
        target = yield Sql(_VERSION, at.row(cid, needs.snapshot), "one")
        state.target = blob_of(target) if target and target[4] else None
    if needs.others:
        rows = yield Sql(_OTHERS, at.row(cid), "all")
        state.others = [blob_of(other) for other in rows]
    if row is None:
        return state
    state.staged_count, state.staged_id_length = int(row[6]), row[7]
    if needs.snapshots:
        count = yield Sql(
            "SELECT count(*) FROM blobs WHERE {key=} container_id = :c AND name = :name"
            f" AND version < '{VERSION_PREFIX}' AND committed",
            at.row(cid),
            "one",
        )
        state.snapshots = int(count[0])
    if needs.content:
        state.content = yield from extents(at, cid)
    if needs.staged:
        state.staged = yield from staged(at, cid)
    return state


_PENDING = "SELECT {key,} seq, account, doc FROM blob_changes ORDER BY seq LIMIT :limit"


def pending_changes(limit: int) -> Plan[list[PendingChange]]:
    """Kept change feed events, oldest first (on PostgreSQL each row carries its ``dkey``)."""
    rows = yield Sql(_PENDING, {"limit": limit}, "all")
    changes = []
    for row in rows:
        dkey, rest = (row[0], row[1:]) if len(row) == 4 else (0, row)
        seq, account, doc = rest
        changes.append(PendingChange(int(dkey), int(seq), str(account), bytes(doc)))
    return changes
