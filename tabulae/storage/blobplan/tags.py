"""Plans over the blob index: one ``blob_tags`` row per tag of a blob's current committed
version, kept by the write that changes the tags (in its transaction), and the Find Blobs by
Tags lookup over it.

A lookup starts from the rows of one tag (an equality where there is one, so the engine's
``(tag, value)`` index narrows it most) and joins one row per further tag the filter names, on
the same blob: a blob without one of the tags drops out, as Azure's filter has it. Every join
is on the distribution key too, so on Citus each shard answers for its own blobs; rows come
back in (container, blob) name order, which is also the order the marker resumes in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tabulae.storage.blobplan.reads import At, container_id
from tabulae.storage.blobs import FoundBlob, TagQuery
from tabulae.storage.plan import Plan, Sql

_DELETE = "DELETE FROM blob_tags WHERE {key=} container_id = :c AND name = :name"
_INSERT = (
    "INSERT INTO blob_tags ({key,} container_id, name, tag, value) VALUES ({:key,} :c, :name, :tag, :value)"
)
_OPERATORS = frozenset({"=", ">", ">=", "<", "<="})
# Container soft delete renames a container aside under a name starting with this (no container
# name can): its blobs keep their index rows for a restore, but are found only once restored.
_HIDDEN = "~"


def replace_tags(at: At, cid: int, old: Mapping[str, str], new: Mapping[str, str]) -> Plan[None]:
    """The index rows of a blob whose tags go from ``old`` to ``new``."""
    params = at.row(cid)
    if old:
        yield Sql(_DELETE, params)
    if new:
        yield Sql(_INSERT, rows=[{**params, "tag": tag, "value": value} for tag, value in new.items()])


def restore_tags(cid: int, named: Sequence[tuple[int, str, Mapping[str, str]]]) -> Plan[None]:
    """The index rows of records that become current again (an undelete), by (distribution key,
    name): records kept aside have none, since the index holds current versions only."""
    rows = [{"dkey": dkey, "c": cid, "name": name, "tag": tag, "value": value}
            for dkey, name, tags in named for tag, value in tags.items()]  # fmt: skip
    if rows:
        yield Sql(_INSERT, rows=rows)


def find(
    account: str, container: str | None, query: TagQuery, after: tuple[str, str] | None, limit: int
) -> Plan[list[FoundBlob]]:
    """Up to ``limit`` blobs of the account (of ``container`` when given; ``query.container``
    limits an account-wide search the same way) whose tags satisfy every term, after ``after``
    (container, blob name), in that order, each with the values of the tags the query names."""
    by_tag: dict[str, list[tuple[str, str]]] = {}
    for tag, operator, value in query.terms:
        if operator not in _OPERATORS:
            raise ValueError(f"not a tag operator: {operator}")
        by_tag.setdefault(tag, []).append((operator, value))
    tags = sorted(by_tag, key=lambda tag: all(op != "=" for op, _ in by_tag[tag]))  # equality first
    params: dict[str, Any] = {"account": account, "n": limit}
    joins: list[str] = []
    where: list[str] = []
    for i, tag in enumerate(tags):
        params[f"k{i}"] = tag
        tests = [f"t{i}.tag = :k{i}"]
        for j, (operator, value) in enumerate(by_tag[tag]):
            params[f"v{i}_{j}"] = value
            tests.append(f"t{i}.value {operator} :v{i}_{j}")
        if i == 0:
            where.extend(tests)
        else:
            joins.append(
                f" JOIN blob_tags t{i} ON t{i}.dkey = t0.dkey AND t{i}.container_id = t0.container_id"
                f" AND t{i}.name = t0.name AND " + " AND ".join(tests)
            )
    where.append("c.account = :account")
    where.append(f"c.name < '{_HIDDEN}'")  # a soft-deleted container's blobs are not found
    if container is not None:
        params["c"] = yield from container_id(account, container)
        where.append("t0.container_id = :c")
    elif query.container is not None:
        params["container"] = query.container
        where.append("c.name = :container")
    if after is not None:
        params["after_c"], params["after_n"] = after
        where.append("(c.name, t0.name) > (:after_c, :after_n)")
    values = ", ".join(f"t{i}.value" for i in range(len(tags)))
    rows = yield Sql(
        f"SELECT c.name, t0.name, {values} FROM blob_tags t0 JOIN blob_containers c ON c.id = t0.container_id"
        + "".join(joins)
        + " WHERE "
        + " AND ".join(where)
        + " ORDER BY c.name, t0.name LIMIT :n",
        params,
        "all",
    )
    return [FoundBlob(row[0], row[1], dict(zip(tags, row[2:], strict=True))) for row in rows]
