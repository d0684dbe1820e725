"""The Queue store on PostgreSQL, in one SQL dialect that also runs on Citus.

At-least-once delivery across front-ends rests on the database alone:

* taking messages is one ``UPDATE`` of the rows a ``SELECT … FOR UPDATE SKIP LOCKED`` picked from
  the front of the queue: a row another transaction is taking is skipped rather than waited for,
  and a row taken and committed meanwhile no longer passes ``visible <= now`` when it is locked
  (PostgreSQL re-checks the condition on the newest version), so no two takers ever get the same
  message while it is invisible;
* Update and Delete Message are conditional on the receipt (``WHERE … AND receipt = %s``), and a
  zero row count is then explained by a second look;
* every statement is its own transaction (the pool's connections are in autocommit mode), except
  Delete Queue, and a commit is durable before the statement returns.

Citus: ``queue_messages`` is distributed by ``queue_id``, a random 63-bit id given to the queue
when it is created (so a queue's messages live on one shard and every message statement names
one ``queue_id``: a router query). ``queues``, ``queue_service_properties`` and
``queue_tombstones`` are small reference tables, so the check that a queue still exists, made in
the same statement as each message read or write, is a local read on any node. Ids are never
reused: messages written under the id of a deleted queue (a Put that raced with Delete Queue) are
seen by no statement, and the tombstone of the id lets :meth:`collect_garbage` find them.

Front-ends cache queue name -> id as a hint only: a statement using a stale id finds no live
queue and changes nothing, and the name is then looked up again.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from psycopg import errors as pg_errors

from tabulae.model.errors import TableError
from tabulae.model.queues import QueueMessage
from tabulae.storage.postgres.engine import MAX_ATTEMPTS, PostgresDatabase, Restart, Schema
from tabulae.storage.queues import QueueEntry, QueueStats, QueueStore

if TYPE_CHECKING:
    from tabulae.storage.postgres.engine import Connection

T = TypeVar("T")

_STATEMENTS = (
    """
    CREATE TABLE IF NOT EXISTS queues (
        account text COLLATE "C" NOT NULL,
        name text COLLATE "C" NOT NULL,
        id bigint NOT NULL,
        metadata bytea NOT NULL,
        acl bytea,
        deleting boolean NOT NULL DEFAULT false,
        CONSTRAINT queues_pkey PRIMARY KEY (account, name),
        CONSTRAINT queues_id_key UNIQUE (id)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS queue_service_properties (
        account text COLLATE "C" NOT NULL,
        properties bytea NOT NULL,
        CONSTRAINT queue_service_properties_pkey PRIMARY KEY (account)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS queue_tombstones (
        id bigint NOT NULL,
        deleted_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT queue_tombstones_pkey PRIMARY KEY (id)
    )
    """,
    "CREATE SEQUENCE IF NOT EXISTS queue_message_seq",
    """
    CREATE TABLE IF NOT EXISTS queue_messages (
        queue_id bigint NOT NULL,
        id uuid NOT NULL,
        seq bigint NOT NULL DEFAULT nextval('queue_message_seq'),
        inserted bigint NOT NULL,
        expires bigint NOT NULL,
        visible bigint NOT NULL,
        dequeues integer NOT NULL,
        receipt text COLLATE "C" NOT NULL,
        body text NOT NULL,
        CONSTRAINT queue_messages_pkey PRIMARY KEY (queue_id, id)
    )
    """,
    "CREATE INDEX IF NOT EXISTS queue_messages_order ON queue_messages (queue_id, visible, seq)",
    "CREATE INDEX IF NOT EXISTS queue_messages_expiry ON queue_messages (expires)",
)
SCHEMA = Schema(
    _STATEMENTS,
    reference=("queues", "queue_service_properties", "queue_tombstones"),
    distributed={"queue_messages": "queue_id"},
)

MAX_QUEUE_ID = 2**63 - 1
ID_CACHE_LIMIT = 10_000
TOMBSTONE_AGE = "1 minute"  # longer than any transaction that could still write under the id

_LOOKUP = "SELECT id FROM queues WHERE account = %s AND name = %s AND NOT deleting"
_ALIVE = "EXISTS (SELECT 1 FROM queues WHERE id = %(q)s AND NOT deleting)"
_COLUMNS = "id::text, inserted, expires, visible, dequeues, receipt, body"
_VISIBLE = "queue_id = %(q)s AND visible <= %(now)s AND expires > %(now)s"
_FRONT = f"{_VISIBLE} ORDER BY visible, seq LIMIT %(n)s"
_PUT = (
    "INSERT INTO queue_messages (queue_id, id, inserted, expires, visible, dequeues, receipt, body)"
    " SELECT %(q)s, %(id)s::uuid, %(inserted)s, %(expires)s, %(visible)s, %(dequeues)s, %(receipt)s, %(body)s"
    f" WHERE {_ALIVE}"
)
# The rows to take are picked once, in a materialized CTE: a plain ``id IN (SELECT … LIMIT n)``
# may be evaluated again for each row the UPDATE visits, and then takes more than ``n`` rows.
_TAKE = (
    "WITH picked AS MATERIALIZED ("
    f"SELECT id FROM queue_messages WHERE {_FRONT} FOR UPDATE SKIP LOCKED)"
    " UPDATE queue_messages m SET visible = %(visible)s, dequeues = m.dequeues + 1, receipt = %(receipt)s"
    f" FROM picked WHERE m.queue_id = %(q)s AND m.id = picked.id AND {_ALIVE}"
    " RETURNING m.seq, m.id::text, m.inserted, m.expires, m.visible, m.dequeues, m.receipt, m.body"
)
_PEEK = (
    f"SELECT {_COLUMNS} FROM queue_messages WHERE {_VISIBLE} AND {_ALIVE} ORDER BY visible, seq LIMIT %(n)s"
)
_UPDATE = (
    "UPDATE queue_messages SET visible = %(visible)s, receipt = %(new)s, body = coalesce(%(text)s, body)"
    " WHERE queue_id = %(q)s AND id = %(id)s::uuid AND receipt = %(receipt)s AND expires > %(now)s"
    f" AND {_ALIVE} RETURNING {_COLUMNS}"
)
_DELETE = (
    "DELETE FROM queue_messages WHERE queue_id = %(q)s AND id = %(id)s::uuid AND receipt = %(receipt)s"
    f" AND expires > %(now)s AND {_ALIVE}"
)
_EXISTS = "SELECT 1 FROM queue_messages WHERE queue_id = %s AND id = %s::uuid AND expires > %s"
_DELETE_SOME = (
    "WITH picked AS MATERIALIZED"
    " (SELECT id FROM queue_messages WHERE queue_id = %(q)s{condition} LIMIT %(n)s)"
    " DELETE FROM queue_messages m USING picked WHERE m.queue_id = %(q)s AND m.id = picked.id"
)


def _message(row: Any) -> QueueMessage:
    return QueueMessage(str(row[0]), int(row[1]), int(row[2]), int(row[3]), int(row[4]), row[5], row[6])


class PostgresQueues(QueueStore):
    """The :class:`QueueStore` contract over a :class:`PostgresDatabase`."""

    def __init__(self, database: PostgresDatabase) -> None:
        self._db = database
        self._run = database.run
        self._ids: dict[tuple[str, str], int] = {}  # (account, name) -> queue id, a hint

    # ----------------------------------------------------------------------------- ids

    def _remember(self, key: tuple[str, str], queue_id: int | None) -> None:
        if queue_id is None:
            self._ids.pop(key, None)
            return
        if len(self._ids) >= ID_CACHE_LIMIT:
            self._ids.clear()
        self._ids[key] = queue_id

    async def _lookup(self, conn: Connection, key: tuple[str, str]) -> int:
        """The queue's current id, read from the database (and remembered); raises QueueNotFound."""
        row = await (await conn.execute(_LOOKUP, key)).fetchone()
        queue_id = int(row[0]) if row else None
        self._remember(key, queue_id)
        if queue_id is None:
            raise TableError("QueueNotFound")
        return queue_id

    async def _on_queue(
        self,
        account: str,
        name: str,
        op: Callable[[Connection, int], Awaitable[T]],
        *,
        done: Callable[[T], bool],
        idempotent: bool = False,
    ) -> T:
        """Run ``op`` with the queue's (cached) id. Each of its statements checks the id is a live
        queue; when ``done`` says the result changed or found nothing, the id is looked up again:
        a missing queue raises QueueNotFound, a changed id runs ``op`` again."""
        key = (account, name)

        async def run(conn: Connection) -> T:
            queue_id = self._ids.get(key)
            if queue_id is None:
                queue_id = await self._lookup(conn, key)
            for _ in range(MAX_ATTEMPTS):
                result = await op(conn, queue_id)
                if done(result):
                    return result
                current = await self._lookup(conn, key)
                if current == queue_id:
                    return result
                queue_id = current
            raise Restart

        return await self._run(run, idempotent=idempotent)

    # ----------------------------------------------------------------------------- queues

    async def create_queue(self, account: str, name: str, metadata: bytes) -> bytes | None:
        async def run(conn: Connection) -> bytes | None:
            for _ in range(MAX_ATTEMPTS):
                queue_id = secrets.randbelow(MAX_QUEUE_ID) + 1
                try:
                    cursor = await conn.execute(
                        "INSERT INTO queues (account, name, id, metadata) VALUES (%s, %s, %s, %s)"
                        " ON CONFLICT (account, name) DO NOTHING RETURNING id",
                        (account, name, queue_id, metadata),
                    )
                except pg_errors.UniqueViolation:
                    continue  # a random id met an existing one (about never): draw again
                if await cursor.fetchone() is not None:
                    self._remember((account, name), queue_id)
                    return None
                cursor = await conn.execute(
                    "SELECT metadata, deleting FROM queues WHERE account = %s AND name = %s", (account, name)
                )
                row = await cursor.fetchone()
                if row is None:
                    continue  # deleted between the two statements: try to create it again
                if row[1]:
                    raise TableError("QueueBeingDeleted")
                return bytes(row[0])
            raise Restart

        return await self._run(run, retry=True)

    async def delete_queue(self, account: str, name: str, limit: int) -> None:
        key = (account, name)

        async def run(conn: Connection) -> None:
            async with conn.transaction():
                cursor = await conn.execute(
                    "SELECT id FROM queues WHERE account = %s AND name = %s AND NOT deleting FOR UPDATE", key
                )
                row = await cursor.fetchone()
                if row is None:
                    raise TableError("QueueNotFound")
                queue_id = int(row[0])
                cursor = await conn.execute(_DELETE_SOME.format(condition=""), {"q": queue_id, "n": limit})
                if cursor.rowcount < limit:
                    await _forget_queue(conn, queue_id)
                else:
                    await conn.execute(
                        "UPDATE queues SET deleting = true, acl = NULL WHERE id = %s", (queue_id,)
                    )
            self._remember(key, None)

        await self._run(run, retry=True)

    async def get_queue(self, account: str, name: str) -> tuple[bytes, int]:
        async def run(conn: Connection) -> tuple[bytes, int]:
            cursor = await conn.execute(
                "SELECT id, metadata FROM queues WHERE account = %s AND name = %s AND NOT deleting",
                (account, name),
            )
            row = await cursor.fetchone()
            if row is None:
                raise TableError("QueueNotFound")
            cursor = await conn.execute("SELECT count(*) FROM queue_messages WHERE queue_id = %s", (row[0],))
            count = await cursor.fetchone()
            return bytes(row[1]), int(count[0]) if count else 0

        return await self._run(run, idempotent=True)

    async def _update_queue(self, account: str, name: str, column: str, value: bytes) -> None:
        assert column in ("metadata", "acl")

        async def run(conn: Connection) -> None:
            cursor = await conn.execute(
                f"UPDATE queues SET {column} = %s WHERE account = %s AND name = %s AND NOT deleting",
                (value, account, name),
            )
            if cursor.rowcount == 0:
                raise TableError("QueueNotFound")

        await self._run(run, idempotent=True)

    async def set_queue_metadata(self, account: str, name: str, metadata: bytes) -> None:
        await self._update_queue(account, name, "metadata", metadata)

    async def list_queues(self, account: str, prefix: str, start: str | None, limit: int) -> list[QueueEntry]:
        sql = "SELECT name, metadata FROM queues WHERE account = %s AND NOT deleting AND name >= %s"
        args: list[Any] = [account, start or ""]
        if prefix:
            sql += " AND name >= %s AND name < %s"
            args += [prefix, prefix + "\U0010ffff"]
        sql += " ORDER BY name LIMIT %s"
        args.append(limit)

        async def run(conn: Connection) -> list[QueueEntry]:
            cursor = await conn.execute(sql, args)
            return [QueueEntry(str(name), bytes(metadata)) for name, metadata in await cursor.fetchall()]

        return await self._run(run, idempotent=True)

    async def get_acl(self, account: str, name: str) -> bytes | None:
        async def run(conn: Connection) -> bytes | None:
            cursor = await conn.execute(
                "SELECT acl FROM queues WHERE account = %s AND name = %s AND NOT deleting", (account, name)
            )
            row = await cursor.fetchone()
            if row is None:
                raise TableError("QueueNotFound")
            return None if row[0] is None else bytes(row[0])

        return await self._run(run, idempotent=True)

    async def set_acl(self, account: str, name: str, acl: bytes) -> None:
        await self._update_queue(account, name, "acl", acl)

    async def get_service_properties(self, account: str) -> bytes | None:
        return await self._db.account_document("queue_service_properties", account)

    async def set_service_properties(self, account: str, properties: bytes) -> None:
        await self._db.set_account_document("queue_service_properties", account, properties)

    # ----------------------------------------------------------------------------- messages

    async def put_message(self, account: str, name: str, message: QueueMessage) -> None:
        values = {
            "id": message.id,
            "inserted": message.inserted,
            "expires": message.expires,
            "visible": message.visible,
            "dequeues": message.dequeue_count,
            "receipt": message.receipt,
            "body": message.text,
        }

        async def op(conn: Connection, queue_id: int) -> int:
            return (await conn.execute(_PUT, {**values, "q": queue_id})).rowcount

        await self._on_queue(account, name, op, done=bool)

    async def take_messages(
        self, account: str, name: str, limit: int, now: int, visible: int, receipt: str
    ) -> list[QueueMessage]:
        async def op(conn: Connection, queue_id: int) -> list[QueueMessage]:
            cursor = await conn.execute(
                _TAKE, {"q": queue_id, "now": now, "n": limit, "visible": visible, "receipt": receipt}
            )
            rows = sorted(await cursor.fetchall())
            return [_message(row[1:]) for row in rows]

        return await self._on_queue(account, name, op, done=bool)

    async def peek_messages(self, account: str, name: str, limit: int, now: int) -> list[QueueMessage]:
        async def op(conn: Connection, queue_id: int) -> list[QueueMessage]:
            cursor = await conn.execute(_PEEK, {"q": queue_id, "now": now, "n": limit})
            return [_message(row) for row in await cursor.fetchall()]

        return await self._on_queue(account, name, op, done=bool, idempotent=True)

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
        values = {
            "id": message_id,
            "receipt": receipt,
            "now": now,
            "visible": visible,
            "new": new_receipt,
            "text": text,
        }

        async def op(conn: Connection, queue_id: int) -> QueueMessage | None:
            row = await (await conn.execute(_UPDATE, {**values, "q": queue_id})).fetchone()
            return None if row is None else _message(row)

        updated = await self._on_queue(account, name, op, done=lambda found: found is not None)
        if updated is None:
            raise await self._explain_miss(account, name, message_id, now)
        return updated

    async def delete_message(self, account: str, name: str, message_id: str, receipt: str, now: int) -> None:
        values = {"id": message_id, "receipt": receipt, "now": now}

        async def op(conn: Connection, queue_id: int) -> int:
            return (await conn.execute(_DELETE, {**values, "q": queue_id})).rowcount

        if not await self._on_queue(account, name, op, done=bool):
            raise await self._explain_miss(account, name, message_id, now)

    async def _explain_miss(self, account: str, name: str, message_id: str, now: int) -> TableError:
        """Why a conditional write to a live queue's message changed nothing."""

        async def run(conn: Connection) -> TableError:
            queue_id = await self._lookup(conn, (account, name))
            row = await (await conn.execute(_EXISTS, (queue_id, message_id, now))).fetchone()
            return TableError("PopReceiptMismatch" if row else "MessageNotFound")

        return await self._run(run, idempotent=True)

    async def clear_messages(self, account: str, name: str, limit: int) -> bool:
        async def op(conn: Connection, queue_id: int) -> int:
            sql = _DELETE_SOME.format(condition=f" AND {_ALIVE}")
            return (await conn.execute(sql, {"q": queue_id, "n": limit})).rowcount

        deleted = await self._on_queue(account, name, op, done=bool)
        return deleted < limit

    # ----------------------------------------------------------------------------- upkeep

    async def collect_garbage(self, now: int, limit: int) -> int:
        async def run(conn: Connection) -> int:
            deleted = 0
            cursor = await conn.execute(
                "SELECT DISTINCT queue_id FROM"
                " (SELECT queue_id FROM queue_messages WHERE expires <= %s LIMIT %s) expired",
                (now, limit),
            )
            for (queue_id,) in await cursor.fetchall():
                sql = _DELETE_SOME.format(condition=" AND expires <= %(now)s")
                deleted += (await conn.execute(sql, {"q": queue_id, "now": now, "n": limit})).rowcount
            cursor = await conn.execute("SELECT id FROM queues WHERE deleting")
            for (queue_id,) in await cursor.fetchall():
                budget = max(limit - deleted, 1)
                count = (
                    await conn.execute(_DELETE_SOME.format(condition=""), {"q": queue_id, "n": budget})
                ).rowcount
                deleted += count
                if count < budget:
                    async with conn.transaction():
                        await _forget_queue(conn, queue_id)
            cursor = await conn.execute(
                "SELECT id, deleted_at < now() - %s::interval FROM queue_tombstones", (TOMBSTONE_AGE,)
            )
            for queue_id, old in await cursor.fetchall():
                count = (
                    await conn.execute(_DELETE_SOME.format(condition=""), {"q": queue_id, "n": limit})
                ).rowcount
                deleted += count
                if old and count == 0:
                    await conn.execute("DELETE FROM queue_tombstones WHERE id = %s", (queue_id,))
            return deleted

        return await self._run(run, idempotent=True)

    async def queue_stats(self, now: int, poison_threshold: int, limit: int) -> list[QueueStats]:
        async def run(conn: Connection) -> list[QueueStats]:
            cursor = await conn.execute(
                "SELECT q.account, q.name, count(m.queue_id),"
                " count(*) FILTER (WHERE m.visible <= %(now)s AND m.expires > %(now)s),"
                " min(m.inserted) FILTER (WHERE m.visible <= %(now)s AND m.expires > %(now)s),"
                " count(*) FILTER (WHERE m.dequeues > %(poison)s)"
                " FROM (SELECT id, account, name FROM queues WHERE NOT deleting"
                "       ORDER BY account, name LIMIT %(n)s) q"
                " LEFT JOIN queue_messages m ON m.queue_id = q.id"
                " GROUP BY q.account, q.name ORDER BY q.account, q.name",
                {"now": now, "poison": poison_threshold, "n": limit},
            )
            return [
                QueueStats(str(a), str(n), int(c), int(v), None if o is None else int(o), int(p))
                for a, n, c, v, o, p in await cursor.fetchall()
            ]

        return await self._run(run, idempotent=True)


async def _forget_queue(conn: Connection, queue_id: int) -> None:
    """Remove a queue's row, leaving a tombstone of its id for stray messages to be found by."""
    await conn.execute("DELETE FROM queues WHERE id = %s", (queue_id,))
    await conn.execute(
        "INSERT INTO queue_tombstones (id) VALUES (%s) ON CONFLICT (id) DO NOTHING", (queue_id,)
    )
