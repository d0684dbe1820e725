"""Plans over containers: create, read, change and delete them, and list an account's."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from tabulae.model.blobs import ContainerRecord
from tabulae.model.errors import ServiceError
from tabulae.storage.blobs import (
    ContentsCheck,
    container_missing,
    decode_blob,
    decode_container,
    encode_container,
    next_ticks,
    prefix_end,
)
from tabulae.storage.plan import Plan, Sql

_BY_NAME = "account = :account AND name = :name"
#: Records that may carry a retention date or a legal hold (their JSON names the field; the
#: record decoded says for sure), a page at a time in key order.
_MARKED = (
    "SELECT name, version, ticks, size, committed, doc FROM blobs WHERE container_id = :c"
    " AND (name > :name OR (name = :name AND version > :version))"
    " AND {immutability marked} ORDER BY name, version LIMIT 200"
)


def _inspect(record: ContainerRecord, cid: Any, contents: ContentsCheck | None) -> Plan[None]:
    """Run ``contents`` over the container's records (see :class:`ContentsCheck`)."""
    if contents is None:
        return
    any_blob = (
        yield Sql("SELECT 1 FROM blobs WHERE container_id = :c LIMIT 1", {"c": cid}, "one")
    ) is not None
    protected = None
    after = ("", "")
    while any_blob and protected is None:
        rows = yield Sql(_MARKED, {"c": cid, "name": after[0], "version": after[1]}, "all")
        for name, version, ticks, size, committed, doc in rows:
            blob = decode_blob(name, version, ticks, size, committed, bytes(doc))
            if contents.protects(blob):
                protected = blob
                break
        if len(rows) < 200:
            break
        after = (rows[-1][0], rows[-1][1])
    contents.check(record, any_blob, protected)


def create(account: str, record: ContainerRecord, cid: int | None) -> Plan[None]:
    """Insert the container under id ``cid`` (None: the engine numbers it). Raises
    ``ContainerAlreadyExists``."""
    inserted = yield Sql(
        "INSERT INTO blob_containers (account, name, id, ticks, doc)"
        " VALUES (:account, :name, :id, :ticks, :doc) ON CONFLICT (account, name) DO NOTHING",
        {"account": account, "name": record.name, "id": cid, "ticks": record.ticks,
         "doc": encode_container(record)},
        "rowcount",
    )  # fmt: skip
    if not inserted:
        raise ServiceError("ContainerAlreadyExists")


def get(account: str, name: str) -> Plan[ContainerRecord | None]:
    row = yield Sql(
        f"SELECT ticks, doc FROM blob_containers WHERE {_BY_NAME}", {"account": account, "name": name}, "one"
    )
    return decode_container(name, row[0], bytes(row[1])) if row else None


def update(
    account: str, name: str, decide: Callable[[ContainerRecord, int], tuple[ContainerRecord, Any]]
) -> Plan[Any]:
    """Replace the record with what ``decide`` makes of it; its second item is the result."""
    where = {"account": account, "name": name}
    row = yield Sql(f"SELECT ticks, doc FROM blob_containers WHERE {_BY_NAME} {{lock}}", where, "one")
    if row is None:
        raise container_missing()
    record, result = decide(decode_container(name, row[0], bytes(row[1])), next_ticks(row[0]))
    yield Sql(
        f"UPDATE blob_containers SET ticks = :ticks, doc = :doc WHERE {_BY_NAME}",
        {**where, "ticks": record.ticks, "doc": encode_container(record)},
    )
    return result


def delete(
    account: str,
    name: str,
    check: Callable[[ContainerRecord], None],
    guard: Sql | None = None,
    contents: ContentsCheck | None = None,
    dkey: int | None = None,
) -> Plan[None]:
    """Delete the container and everything in it if ``check`` passes; every extent it named
    becomes garbage (the collector checks again that nothing else names one). ``guard`` runs
    first (an engine's container lock); ``dkey`` is the key every blob of the container shares,
    if they do (then each statement goes to that key's shard alone)."""
    if guard is not None:
        yield guard
    row = yield Sql(
        f"SELECT id, ticks, doc FROM blob_containers WHERE {_BY_NAME} {{lock}}",
        {"account": account, "name": name},
        "one",
    )
    if row is None:
        raise container_missing()
    record = decode_container(name, row[1], bytes(row[2]))
    check(record)
    yield from _inspect(record, row[0], contents)
    cid = {"c": row[0], "dkey": dkey}
    yield Sql(_drop_garbage(dkey is not None), cid)
    for table in ("blob_extents", "blob_blocks", "blob_pages", "blob_tags", "blobs"):
        yield Sql(f"DELETE FROM {table} WHERE {_in(dkey is not None)}", cid)
    yield Sql("DELETE FROM blob_containers WHERE id = :c", cid)


def _in(colocated: bool) -> str:
    """The container's rows: all of them, on the one key they share when ``colocated``."""
    return "{key=} container_id = :c" if colocated else "container_id = :c"


@cache
def _drop_garbage(colocated: bool) -> str:
    """Every extent the container's rows name, made garbage."""
    where = _in(colocated)
    return (
        "INSERT INTO blob_garbage ({key,} ref, dropped)"
        f" SELECT {{key,}} ref, {{now}} FROM blob_extents WHERE {where}"
        f" UNION SELECT {{key,}} ref, {{now}} FROM blob_blocks WHERE {where}"
        f" UNION SELECT {{key,}} ref, {{now}} FROM blob_pages WHERE {where} AND NOT cleared"
        " ON CONFLICT ({key,} ref) DO UPDATE SET dropped = excluded.dropped"
    )


def rename(
    account: str,
    name: str,
    new: str,
    check: Callable[[ContainerRecord], None],
    guard: Sql | None = None,
    contents: ContentsCheck | None = None,
) -> Plan[None]:
    """Give the container another name, with everything in it, if ``check`` passes (container
    soft delete sets it aside and restores it so). Raises ``ContainerNotFound``, or
    ``ContainerAlreadyExists`` when ``new`` is taken."""
    if guard is not None:
        yield guard
    where = {"account": account, "name": name}
    row = yield Sql(f"SELECT id, ticks, doc FROM blob_containers WHERE {_BY_NAME} {{lock}}", where, "one")
    if row is None:
        raise container_missing()
    record = decode_container(name, row[1], bytes(row[2]))
    check(record)
    yield from _inspect(record, row[0], contents)
    taken = yield Sql(
        f"SELECT 1 FROM blob_containers WHERE {_BY_NAME}", {"account": account, "name": new}, "one"
    )
    if taken is not None:
        raise ServiceError("ContainerAlreadyExists")
    yield Sql(f"UPDATE blob_containers SET name = :new WHERE {_BY_NAME}", {**where, "new": new})


def every_account(low: str) -> Plan[list[tuple[str, str]]]:
    """(account, name) of every container whose name is ``low`` or after, in every account."""
    rows = yield Sql("SELECT account, name FROM blob_containers WHERE name >= :low", {"low": low}, "all")
    return [(str(row[0]), str(row[1])) for row in rows]


def page(account: str, prefix: str, start: str | None, limit: int) -> Plan[list[ContainerRecord]]:
    """Up to ``limit`` containers from ``start`` on whose names start with ``prefix``."""
    sql = "SELECT name, ticks, doc FROM blob_containers WHERE account = :account AND name >= :low"
    if prefix:
        sql += " AND name < :high"
    high = prefix_end(prefix) if prefix else ""
    params = {"account": account, "low": max(prefix, start or ""), "high": high, "n": limit}
    rows = yield Sql(sql + " ORDER BY name LIMIT :n", params, "all")
    return [decode_container(row[0], row[1], bytes(row[2])) for row in rows]
