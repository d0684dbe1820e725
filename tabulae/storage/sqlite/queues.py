"""The Queue store on SQLite: queues and messages in the engine's database.

Every operation is a shared plan (:mod:`tabulae.storage.queueplan`). Every change is a job for
the engine's group-commit writer, so it runs inside the writer's transaction while this process
holds the database's write lock: a job that takes messages reads and updates them with no other
writer, of any worker process, in between. That lock, not any lock of ours, is what keeps two
consumers from taking the same message; the acknowledgement waits for the group's fsync, like
every table write. Reads (peek, metadata, listings) run on the reader connection.

Messages are a rowid table: ``seq`` (the rowid) is the insertion order, and the index
``(queue_id, visible, seq)`` is the order of the queue, so taking the front of a queue is an index
range scan. Queue ids are never reused (AUTOINCREMENT), so messages of a deleted queue can never
show up in a queue created later under the same name.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from tabulae.storage.plan import Plan, SqliteDialect
from tabulae.storage.queueplan import COLUMNS, QueueStatements
from tabulae.storage.queueplan.store import PlannedQueues
from tabulae.storage.sqlite.engine import SqliteDatabase

T = TypeVar("T")

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

# The front of the queue by rowid, and the one writer needs no row locks.
STATEMENTS = QueueStatements(
    # VALUES: SQLite runs an INSERT … SELECT far slower, and its writer needs no condition here.
    put=f"INSERT INTO queue_messages (queue_id, {COLUMNS}) VALUES"
    " (:q, :id, :inserted, :expires, :visible, :dequeues, :receipt, :body)",
    take="UPDATE queue_messages SET visible = :visible, dequeues = dequeues + 1, receipt = :receipt"
    " WHERE seq IN (SELECT seq FROM queue_messages WHERE queue_id = :q AND visible <= :now AND expires > :now"
    f" ORDER BY visible, seq LIMIT :n) RETURNING seq, {COLUMNS}",
    delete_some="DELETE FROM queue_messages WHERE seq IN"
    " (SELECT seq FROM queue_messages WHERE queue_id = :q{more} LIMIT :n)",
    forget=("DELETE FROM queues WHERE id = :q",),
)
_DIALECT = SqliteDialect({"{alive}": ""})  # a plan's lookup and statements share the writer's transaction


class SqliteQueues(PlannedQueues):
    """The :class:`QueueStore` contract over a :class:`SqliteDatabase`."""

    statements = STATEMENTS

    def __init__(self, database: SqliteDatabase) -> None:
        self._db = database

    async def _read(self, make: Callable[[], Plan[T]]) -> T:
        return self._db.read_plan(make(), dialect=_DIALECT)

    def _write(  # the writer's coroutine itself: one layer less per write
        self, make: Callable[[], Plan[T]], *, atomic: bool = False, idempotent: bool = False
    ) -> Coroutine[Any, Any, T]:
        return self._db.write_plan(make(), savepoint=atomic, dialect=_DIALECT)

    async def get_service_properties(self, account: str) -> bytes | None:
        return self._db.account_document("queue_service_properties", account)

    async def set_service_properties(self, account: str, properties: bytes) -> None:
        await self._db.set_account_document("queue_service_properties", account, properties)
