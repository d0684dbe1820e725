"""The Queue store on SQLite: queues and messages in the engine's database.

Every change is a job for the engine's group-commit writer, so it runs inside the writer's
transaction while this process holds the database's write lock: a job that takes messages reads
and updates them with no other writer, of any worker process, in between. That lock, not any lock
of ours, is what keeps two consumers from taking the same message; the acknowledgement waits for
the group's fsync, like every table write. Reads (peek, metadata, listings) run on the reader
connection.

Messages are a rowid table: ``seq`` (the rowid) is the insertion order, and the index
``(queue_id, visible, seq)`` is the order of the queue, so taking the front of a queue is an index
range scan. Queue ids are never reused (AUTOINCREMENT), so messages of a deleted queue can never
show up in a queue created later under the same name.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from tabulae.model.errors import TableError
from tabulae.model.queues import QueueMessage
from tabulae.storage.queues import QueueEntry, QueueStats, QueueStore
from tabulae.storage.sqlite.engine import SqliteDatabase

SCHEMA = """
CREATE TABLE IF NOT EXISTS queues (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    account TEXT NOT NULL,
    name TEXT NOT NULL,
    metadata BLOB NOT NULL,
    acl BLOB,
    deleting INTEGER NOT NULL DEFAULT 0,
    UNIQUE (account, name)
);
CREATE TABLE IF NOT EXISTS queue_service_properties (
    account TEXT PRIMARY KEY,
    properties BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS queue_messages (
    seq INTEGER PRIMARY KEY,
    queue_id INTEGER NOT NULL,
    id TEXT NOT NULL,
    inserted INTEGER NOT NULL,
    expires INTEGER NOT NULL,
    visible INTEGER NOT NULL,
    dequeues INTEGER NOT NULL,
    receipt TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS queue_messages_order ON queue_messages (queue_id, visible, seq);
CREATE UNIQUE INDEX IF NOT EXISTS queue_messages_id ON queue_messages (queue_id, id);
CREATE INDEX IF NOT EXISTS queue_messages_expiry ON queue_messages (expires);
"""

_LIVE_QUEUE = "SELECT id FROM queues WHERE account = ? AND name = ? AND deleting = 0"
_COLUMNS = "id, inserted, expires, visible, dequeues, receipt, body"
_FRONT = "queue_id = ? AND visible <= ? AND expires > ? ORDER BY visible, seq LIMIT ?"
UPPER = "\U0010ffff"  # sorts after every character of a queue name: the end of a prefix range


def _message(row: Any) -> QueueMessage:
    return QueueMessage(row[0], row[1], row[2], row[3], row[4], row[5], row[6])


def _queue_id(conn: sqlite3.Connection, account: str, name: str) -> int:
    row = conn.execute(_LIVE_QUEUE, (account, name)).fetchone()
    if row is None:
        raise TableError("QueueNotFound")
    return int(row[0])


class SqliteQueues(QueueStore):
    """The :class:`QueueStore` contract over a :class:`SqliteDatabase`."""

    def __init__(self, database: SqliteDatabase) -> None:
        self._db = database

    # ----------------------------------------------------------------------------- queues

    async def create_queue(self, account: str, name: str, metadata: bytes) -> bytes | None:
        result: bytes | None = await self._db.write(_create_queue, account, name, metadata, savepoint=False)
        return result

    async def delete_queue(self, account: str, name: str, limit: int) -> None:
        await self._db.write(_delete_queue, account, name, limit)

    async def get_queue(self, account: str, name: str) -> tuple[bytes, int]:
        reader = self._db.reader
        row = reader.execute(
            "SELECT id, metadata FROM queues WHERE account = ? AND name = ? AND deleting = 0", (account, name)
        ).fetchone()
        if row is None:
            raise TableError("QueueNotFound")
        count = reader.execute("SELECT count(*) FROM queue_messages WHERE queue_id = ?", (row[0],)).fetchone()
        return row[1], int(count[0])

    async def set_queue_metadata(self, account: str, name: str, metadata: bytes) -> None:
        await self._db.write(_update_queue, account, name, "metadata", metadata, savepoint=False)

    async def list_queues(self, account: str, prefix: str, start: str | None, limit: int) -> list[QueueEntry]:
        sql = "SELECT name, metadata FROM queues WHERE account = ? AND deleting = 0 AND name >= ?"
        args: list[Any] = [account, start or ""]
        if prefix:
            sql += " AND name >= ? AND name < ?"
            args += [prefix, prefix + UPPER]
        sql += " ORDER BY name LIMIT ?"
        args.append(limit)
        return [QueueEntry(name, metadata) for name, metadata in self._db.reader.execute(sql, args)]

    async def get_acl(self, account: str, name: str) -> bytes | None:
        row = self._db.reader.execute(
            "SELECT acl FROM queues WHERE account = ? AND name = ? AND deleting = 0", (account, name)
        ).fetchone()
        if row is None:
            raise TableError("QueueNotFound")
        return row[0]

    async def set_acl(self, account: str, name: str, acl: bytes) -> None:
        await self._db.write(_update_queue, account, name, "acl", acl, savepoint=False)

    async def get_service_properties(self, account: str) -> bytes | None:
        return self._db.account_document("queue_service_properties", account)

    async def set_service_properties(self, account: str, properties: bytes) -> None:
        await self._db.set_account_document("queue_service_properties", account, properties)

    # ----------------------------------------------------------------------------- messages

    async def put_message(self, account: str, name: str, message: QueueMessage) -> None:
        await self._db.write(_put_message, account, name, message, savepoint=False)

    async def take_messages(
        self, account: str, name: str, limit: int, now: int, visible: int, receipt: str
    ) -> list[QueueMessage]:
        taken: list[QueueMessage] = await self._db.write(
            _take_messages, account, name, limit, now, visible, receipt, savepoint=False
        )
        return taken

    async def peek_messages(self, account: str, name: str, limit: int, now: int) -> list[QueueMessage]:
        reader = self._db.reader
        queue_id = _queue_id(reader, account, name)
        rows = reader.execute(
            f"SELECT {_COLUMNS} FROM queue_messages WHERE {_FRONT}", (queue_id, now, now, limit)
        )
        return [_message(row) for row in rows]

    async def update_message(
        self,
        account: str,
        name: str,
        message_id: str,
        receipt: str,
        now: int,
        visible: int,
        new_receipt: str,
        text: str | None,
    ) -> QueueMessage:
        updated: QueueMessage = await self._db.write(
            _update_message,
            account,
            name,
            message_id,
            receipt,
            now,
            visible,
            new_receipt,
            text,
            savepoint=False,
        )
        return updated

    async def delete_message(self, account: str, name: str, message_id: str, receipt: str, now: int) -> None:
        await self._db.write(_delete_message, account, name, message_id, receipt, now, savepoint=False)

    async def clear_messages(self, account: str, name: str, limit: int) -> bool:
        done: bool = await self._db.write(_clear_messages, account, name, limit, savepoint=False)
        return done

    # ----------------------------------------------------------------------------- upkeep

    async def collect_garbage(self, now: int, limit: int) -> int:
        deleted: int = await self._db.write(_collect_garbage, now, limit)
        return deleted

    async def queue_stats(self, now: int, poison_threshold: int, limit: int) -> list[QueueStats]:
        rows = self._db.reader.execute(
            "SELECT q.account, q.name, count(m.seq),"
            " coalesce(sum(m.visible <= ?1 AND m.expires > ?1), 0),"
            " min(CASE WHEN m.visible <= ?1 AND m.expires > ?1 THEN m.inserted END),"
            " coalesce(sum(m.dequeues > ?2), 0)"
            " FROM (SELECT id, account, name FROM queues WHERE deleting = 0"
            "       ORDER BY account, name LIMIT ?3) q"
            " LEFT JOIN queue_messages m ON m.queue_id = q.id"
            " GROUP BY q.id ORDER BY q.account, q.name",
            (now, poison_threshold, limit),
        )
        return [QueueStats(*row) for row in rows]


# --------------------------------------------------------------------------------- write jobs
# They run on the event loop's thread inside the group's transaction. Jobs queued with
# ``savepoint=False`` make at most one change, so a failure leaves nothing to undo.


def _create_queue(conn: sqlite3.Connection, account: str, name: str, metadata: bytes) -> bytes | None:
    row = conn.execute(
        "SELECT metadata, deleting FROM queues WHERE account = ? AND name = ?", (account, name)
    ).fetchone()
    if row is not None:
        if row[1]:
            raise TableError("QueueBeingDeleted")
        return bytes(row[0])
    conn.execute("INSERT INTO queues (account, name, metadata) VALUES (?, ?, ?)", (account, name, metadata))
    return None


def _delete_some(conn: sqlite3.Connection, queue_id: int, limit: int) -> int:
    return conn.execute(
        "DELETE FROM queue_messages WHERE seq IN (SELECT seq FROM queue_messages WHERE queue_id = ? LIMIT ?)",
        (queue_id, limit),
    ).rowcount


def _delete_queue(conn: sqlite3.Connection, account: str, name: str, limit: int) -> None:
    queue_id = _queue_id(conn, account, name)
    if _delete_some(conn, queue_id, limit) < limit:
        conn.execute("DELETE FROM queues WHERE id = ?", (queue_id,))
    else:
        conn.execute("UPDATE queues SET deleting = 1, acl = NULL WHERE id = ?", (queue_id,))


def _update_queue(conn: sqlite3.Connection, account: str, name: str, column: str, value: bytes) -> None:
    assert column in ("metadata", "acl")
    cursor = conn.execute(
        f"UPDATE queues SET {column} = ? WHERE account = ? AND name = ? AND deleting = 0",
        (value, account, name),
    )
    if cursor.rowcount == 0:
        raise TableError("QueueNotFound")


def _put_message(conn: sqlite3.Connection, account: str, name: str, m: QueueMessage) -> None:
    queue_id = _queue_id(conn, account, name)
    conn.execute(
        "INSERT INTO queue_messages (queue_id, id, inserted, expires, visible, dequeues, receipt, body)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (queue_id, m.id, m.inserted, m.expires, m.visible, m.dequeue_count, m.receipt, m.text),
    )


def _take_messages(
    conn: sqlite3.Connection, account: str, name: str, limit: int, now: int, visible: int, receipt: str
) -> list[QueueMessage]:
    queue_id = _queue_id(conn, account, name)
    rows = conn.execute(
        "UPDATE queue_messages SET visible = ?, dequeues = dequeues + 1, receipt = ?"
        f" WHERE seq IN (SELECT seq FROM queue_messages WHERE {_FRONT})"
        f" RETURNING seq, {_COLUMNS}",
        (visible, receipt, queue_id, now, now, limit),
    ).fetchall()
    rows.sort()
    return [_message(row[1:]) for row in rows]


def _explain_miss(conn: sqlite3.Connection, queue_id: int, message_id: str, now: int) -> TableError:
    """Why a conditional write to a message changed nothing: another receipt, or no message."""
    row = conn.execute(
        "SELECT 1 FROM queue_messages WHERE queue_id = ? AND id = ? AND expires > ?",
        (queue_id, message_id, now),
    ).fetchone()
    return TableError("PopReceiptMismatch" if row else "MessageNotFound")


def _update_message(
    conn: sqlite3.Connection,
    account: str,
    name: str,
    message_id: str,
    receipt: str,
    now: int,
    visible: int,
    new_receipt: str,
    text: str | None,
) -> QueueMessage:
    queue_id = _queue_id(conn, account, name)
    row = conn.execute(
        "UPDATE queue_messages SET visible = ?, receipt = ?, body = coalesce(?, body)"
        f" WHERE queue_id = ? AND id = ? AND receipt = ? AND expires > ? RETURNING {_COLUMNS}",
        (visible, new_receipt, text, queue_id, message_id, receipt, now),
    ).fetchone()
    if row is None:
        raise _explain_miss(conn, queue_id, message_id, now)
    return _message(row)


def _delete_message(
    conn: sqlite3.Connection, account: str, name: str, message_id: str, receipt: str, now: int
) -> None:
    queue_id = _queue_id(conn, account, name)
    cursor = conn.execute(
        "DELETE FROM queue_messages WHERE queue_id = ? AND id = ? AND receipt = ? AND expires > ?",
        (queue_id, message_id, receipt, now),
    )
    if cursor.rowcount == 0:
        raise _explain_miss(conn, queue_id, message_id, now)


def _clear_messages(conn: sqlite3.Connection, account: str, name: str, limit: int) -> bool:
    return _delete_some(conn, _queue_id(conn, account, name), limit) < limit


def _collect_garbage(conn: sqlite3.Connection, now: int, limit: int) -> int:
    deleted = conn.execute(
        "DELETE FROM queue_messages WHERE seq IN (SELECT seq FROM queue_messages WHERE expires <= ? LIMIT ?)",
        (now, limit),
    ).rowcount
    for (queue_id,) in conn.execute("SELECT id FROM queues WHERE deleting = 1").fetchall():
        if deleted >= limit:
            break
        budget = limit - deleted
        count = _delete_some(conn, queue_id, budget)
        deleted += count
        if count < budget:
            conn.execute("DELETE FROM queues WHERE id = ?", (queue_id,))
    return deleted
