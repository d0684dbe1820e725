"""Plans over queues themselves: create, delete, read and change them, list and measure them."""

from __future__ import annotations

from typing import Any

from tabulae.model.errors import ServiceError
from tabulae.model.queues import QueueEntry, QueueStats
from tabulae.storage.plan import Plan, Restart, Sql
from tabulae.storage.queueplan import QueueStatements

_LIVE_WHERE = "account = :account AND name = :name AND NOT deleting"
LIVE = f"SELECT id FROM queues WHERE {_LIVE_WHERE}"
CREATE_ATTEMPTS = 8


def _named(account: str, name: str) -> dict[str, Any]:
    return {"account": account, "name": name}


def not_found() -> ServiceError:
    return ServiceError("QueueNotFound")


def create(account: str, name: str, metadata: bytes, queue_id: int | None) -> Plan[bytes | None]:
    """Create the queue under ``queue_id`` (None: the engine numbers it); None when created,
    else the existing queue's metadata. Raises ``QueueBeingDeleted``."""
    values = {**_named(account, name), "id": queue_id, "metadata": metadata}
    for _ in range(CREATE_ATTEMPTS):
        inserted = yield Sql(
            "INSERT INTO queues (account, name, id, metadata) VALUES (:account, :name, :id, :metadata)"
            " ON CONFLICT (account, name) DO NOTHING",
            values,
            "rowcount",
        )
        if inserted:
            return None
        row = yield Sql(
            "SELECT metadata, deleting FROM queues WHERE account = :account AND name = :name", values, "one"
        )
        if row is None:
            continue  # deleted between the two statements: create it again
        if row[1]:
            raise ServiceError("QueueBeingDeleted")
        return bytes(row[0])
    raise Restart


def delete_some(sql: QueueStatements, queue_id: int, limit: int, more: str = "", **extra: Any) -> Plan[int]:
    """Delete up to ``limit`` of the queue's messages that pass ``more``; how many went."""
    text = sql.delete_some.replace("{more}", more)
    deleted: int = yield Sql(text, {"q": queue_id, "n": limit, **extra}, "rowcount")
    return deleted


def forget(sql: QueueStatements, queue_id: int) -> Plan[None]:
    for text in sql.forget:
        yield Sql(text, {"q": queue_id})


def delete(sql: QueueStatements, account: str, name: str, limit: int) -> Plan[None]:
    """Up to ``limit`` messages go now with the queue; if it had more, it is marked deleting and
    its name stays taken until garbage collection took the rest."""
    row = yield Sql(LIVE + " {lock}", _named(account, name), "one")
    if row is None:
        raise not_found()
    queue_id = int(row[0])
    if (yield from delete_some(sql, queue_id, limit)) < limit:
        yield from forget(sql, queue_id)
    else:
        yield Sql("UPDATE queues SET deleting = TRUE, acl = NULL WHERE id = :q", {"q": queue_id})


def _live(columns: str, account: str, name: str) -> Plan[Any]:
    """The live queue's ``columns``. Raises ``QueueNotFound``."""
    row = yield Sql(f"SELECT {columns} FROM queues WHERE {_LIVE_WHERE}", _named(account, name), "one")
    if row is None:
        raise not_found()
    return row


def get(account: str, name: str) -> Plan[tuple[bytes, int]]:
    """The queue's metadata and its message count."""
    row = yield from _live("id, metadata", account, name)
    count = yield Sql("SELECT count(*) FROM queue_messages WHERE queue_id = :q", {"q": row[0]}, "one")
    return bytes(row[1]), int(count[0])


def get_acl(account: str, name: str) -> Plan[bytes | None]:
    row = yield from _live("acl", account, name)
    return None if row[0] is None else bytes(row[0])


def set_column(account: str, name: str, column: str, value: bytes) -> Plan[None]:
    """Replace the queue's ``metadata`` or ``acl``."""
    assert column in ("metadata", "acl")
    params = {**_named(account, name), "value": value}
    if not (yield Sql(f"UPDATE queues SET {column} = :value WHERE {_LIVE_WHERE}", params, "rowcount")):
        raise not_found()


def page(account: str, prefix: str, start: str | None, limit: int) -> Plan[list[QueueEntry]]:
    """Up to ``limit`` live queues from ``start`` on whose names start with ``prefix``."""
    sql = "SELECT name, metadata FROM queues WHERE account = :account AND NOT deleting AND name >= :start"
    if prefix:
        sql += " AND name >= :prefix AND name < :end"
    params = {"account": account, "start": start or "", "prefix": prefix, "end": prefix + "\U0010ffff",
              "n": limit}  # fmt: skip
    rows = yield Sql(sql + " ORDER BY name LIMIT :n", params, "all")
    return [QueueEntry(str(name), bytes(metadata)) for name, metadata in rows]


def stats(now: int, poison: int, limit: int) -> Plan[list[QueueStats]]:
    """Figures of up to ``limit`` live queues, by account and name, in one pass over their messages."""
    visible = "m.visible <= :now AND m.expires > :now"
    rows = yield Sql(
        "SELECT q.account, q.name, count(m.queue_id),"
        f" count(*) FILTER (WHERE {visible}), min(m.inserted) FILTER (WHERE {visible}),"
        " count(*) FILTER (WHERE m.dequeues > :poison)"
        " FROM (SELECT id, account, name FROM queues WHERE NOT deleting ORDER BY account, name LIMIT :n) q"
        " LEFT JOIN queue_messages m ON m.queue_id = q.id"
        " GROUP BY q.account, q.name ORDER BY q.account, q.name",
        {"now": now, "poison": poison, "n": limit},
        "all",
    )
    return [
        QueueStats(str(a), str(n), int(c), int(v), None if o is None else int(o), int(p))
        for a, n, c, v, o, p in rows
    ]
