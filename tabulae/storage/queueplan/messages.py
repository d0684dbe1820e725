"""Plans over a queue's messages: put, take, peek, update, delete and clear them, and collect
expired ones. Every rule of at-least-once delivery is a condition of the statement that writes:
a message is taken only while visible, changed or deleted only with its current receipt."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, TypeVar

from tabulae.model.errors import ServiceError
from tabulae.model.queues import QueueMessage
from tabulae.storage.plan import Plan, Restart, Sql
from tabulae.storage.queueplan import COLUMNS, QueueStatements
from tabulae.storage.queueplan.queues import LIVE, delete_some, forget, not_found

T = TypeVar("T")

ATTEMPTS = 8  # times a message operation follows a queue's changing id before giving up
_VISIBLE = "queue_id = :q AND visible <= :now AND expires > :now{alive}"
_MESSAGE = "queue_id = :q AND id = :id{::uuid}"
# Statements are constants, not f-strings built per call: the runners look each text up by value.
_PEEK = f"SELECT {COLUMNS} FROM queue_messages WHERE {_VISIBLE} ORDER BY visible, seq LIMIT :n"
_EXISTS = f"SELECT 1 FROM queue_messages WHERE {_MESSAGE} AND expires > :now"
_UPDATE = (
    "UPDATE queue_messages SET visible = :visible, receipt = :new, body = coalesce(:text, body)"
    f" WHERE {_MESSAGE} AND receipt = :receipt AND expires > :now{{alive}} RETURNING {COLUMNS}"
)
_DELETE = f"DELETE FROM queue_messages WHERE {_MESSAGE} AND receipt = :receipt AND expires > :now{{alive}}"


class Target(NamedTuple):
    """The queue a message operation is for (a named tuple: one is made per request). ``hint``
    is an id the engine remembers for it; ``settled`` says an id the plan looked up stays right
    to its end (the plan runs in one transaction), so a result that found nothing needs no
    second look."""

    account: str
    name: str
    hint: int | None = None
    settled: bool = True


def message_of(row: Sequence[Any]) -> QueueMessage:
    return QueueMessage(str(row[0]), int(row[1]), int(row[2]), int(row[3]), int(row[4]), row[5], row[6])


def lookup(target: Target) -> Plan[int]:
    """The queue's current id. Raises ``QueueNotFound``."""
    row = yield Sql(LIVE, {"account": target.account, "name": target.name}, "one")
    if row is None:
        raise not_found()
    return int(row[0])


def on_queue(target: Target, op: Callable[[int], Plan[T]], done: Callable[[T], bool]) -> Plan[tuple[T, int]]:
    """Run ``op`` with the queue's id; returns its result and the id. When ``done`` says the
    result changed or found nothing and the id may be stale (a hint, or one looked up outside
    this transaction), the id is looked up again: a missing queue raises ``QueueNotFound``, a
    changed id runs ``op`` again."""
    queue_id = target.hint
    settled = False
    if queue_id is None:
        queue_id = yield from lookup(target)
        settled = target.settled
    for _ in range(ATTEMPTS):
        result = yield from op(queue_id)
        if settled or done(result):
            return result, queue_id
        current = yield from lookup(target)
        if current == queue_id:
            return result, queue_id
        queue_id = current
        settled = target.settled
    raise Restart


def put(target: Target, sql: QueueStatements, m: QueueMessage) -> Plan[tuple[int, int]]:
    values = {"id": m.id, "inserted": m.inserted, "expires": m.expires, "visible": m.visible,
              "dequeues": m.dequeue_count, "receipt": m.receipt, "body": m.text}  # fmt: skip

    def op(queue_id: int) -> Plan[int]:
        inserted: int = yield Sql(sql.put, {**values, "q": queue_id}, "rowcount")
        return inserted

    return (yield from on_queue(target, op, bool))


def take(
    target: Target, sql: QueueStatements, limit: int, now: int, visible: int, receipt: str
) -> Plan[tuple[list[QueueMessage], int]]:
    """Take up to ``limit`` messages from the front, front first."""
    values = {"now": now, "n": limit, "visible": visible, "receipt": receipt}

    def op(queue_id: int) -> Plan[list[QueueMessage]]:
        rows = yield Sql(sql.take, {**values, "q": queue_id}, "all")
        return [message_of(row[1:]) for row in sorted(rows)]

    return (yield from on_queue(target, op, bool))


def peek(target: Target, limit: int, now: int) -> Plan[tuple[list[QueueMessage], int]]:
    def op(queue_id: int) -> Plan[list[QueueMessage]]:
        rows = yield Sql(
            _PEEK,
            {"q": queue_id, "now": now, "n": limit},
            "all",
        )
        return [message_of(row) for row in rows]

    return (yield from on_queue(target, op, bool))


def _miss(queue_id: int, message_id: str, now: int) -> Plan[ServiceError]:
    """Why a conditional write to a live queue's message changed nothing."""
    row = yield Sql(
        _EXISTS,
        {"q": queue_id, "id": message_id, "now": now},
        "one",
    )
    return ServiceError("PopReceiptMismatch" if row else "MessageNotFound")


def update(
    target: Target,
    message_id: str,
    receipt: str,
    now: int,
    visible: int,
    new_receipt: str,
    text: str | None,
) -> Plan[tuple[QueueMessage, int]]:
    values = {"id": message_id, "receipt": receipt, "now": now, "visible": visible, "new": new_receipt,
              "text": text}  # fmt: skip

    def op(queue_id: int) -> Plan[QueueMessage | None]:
        row = yield Sql(
            _UPDATE,
            {**values, "q": queue_id},
            "one",
        )
        return None if row is None else message_of(row)

    updated, queue_id = yield from on_queue(target, op, lambda found: found is not None)
    if updated is None:
        raise (yield from _miss(queue_id, message_id, now))
    return updated, queue_id


def delete(target: Target, message_id: str, receipt: str, now: int) -> Plan[tuple[None, int]]:
    values = {"id": message_id, "receipt": receipt, "now": now}

    def op(queue_id: int) -> Plan[int]:
        deleted: int = yield Sql(
            _DELETE,
            {**values, "q": queue_id},
            "rowcount",
        )
        return deleted

    deleted, queue_id = yield from on_queue(target, op, bool)
    if not deleted:
        raise (yield from _miss(queue_id, message_id, now))
    return None, queue_id


def clear(target: Target, sql: QueueStatements, limit: int) -> Plan[tuple[bool, int]]:
    """Delete up to ``limit`` messages; True when none are left."""

    def op(queue_id: int) -> Plan[int]:
        return (yield from delete_some(sql, queue_id, limit, "{alive}"))

    deleted, queue_id = yield from on_queue(target, op, bool)
    return deleted < limit, queue_id


def collect(sql: QueueStatements, now: int, limit: int) -> Plan[int]:
    """Delete up to ``limit`` expired messages, queue by queue (each statement names one queue),
    then the messages of queues being deleted, forgetting each queue once it is empty."""
    deleted = 0
    expired = yield Sql(
        "SELECT DISTINCT queue_id FROM"
        " (SELECT queue_id FROM queue_messages WHERE expires <= :now LIMIT :n) expired",
        {"now": now, "n": limit},
        "all",
    )
    for (queue_id,) in expired:
        if deleted >= limit:
            break
        deleted += yield from delete_some(sql, queue_id, limit - deleted, " AND expires <= :now", now=now)
    for (queue_id,) in (yield Sql("SELECT id FROM queues WHERE deleting", {}, "all")):
        if deleted >= limit:
            break
        budget = limit - deleted
        count = yield from delete_some(sql, queue_id, budget)
        deleted += count
        if count < budget:
            yield from forget(sql, queue_id)
    return deleted
