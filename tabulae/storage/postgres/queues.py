"""The Queue store on PostgreSQL, in one SQL dialect that also runs on Citus.

Every operation is a shared plan (:mod:`tabulae.storage.queueplan`); this module holds what
only PostgreSQL does: taking with ``SKIP LOCKED``, random queue ids, tombstones, the id cache.

At-least-once delivery across front-ends rests on the database alone:

* taking messages is one ``UPDATE`` of the rows a ``SELECT … FOR UPDATE SKIP LOCKED`` picked from
  the front of the queue: a row another transaction is taking is skipped rather than waited for,
  and a row taken and committed meanwhile no longer passes ``visible <= now`` when it is locked
  (PostgreSQL re-checks the condition on the newest version), so no two takers ever get the same
  message while it is invisible;
* Update and Delete Message are conditional on the receipt (``WHERE … AND receipt = :receipt``), and a
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

from collections.abc import Callable
from functools import partial
from typing import TypeVar

from tabulae.storage.plan import Plan, PostgresDialect, Sql
from tabulae.storage.postgres.engine import PostgresDatabase, Schema
from tabulae.storage.queueplan import ALIVE, QueueStatements, messages, queues
from tabulae.storage.queueplan.messages import Target
from tabulae.storage.queueplan.store import PlannedQueues

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

# The rows to take are picked once, in a materialized CTE: a plain ``id IN (SELECT … LIMIT n)``
# may be evaluated again for each row the UPDATE visits, and then takes more than ``n`` rows.
STATEMENTS = QueueStatements(
    put="INSERT INTO queue_messages (queue_id, id, inserted, expires, visible, dequeues, receipt, body)"
    " SELECT :q, :id::uuid, :inserted, :expires, :visible, :dequeues, :receipt, :body WHERE TRUE{alive}",
    take="WITH picked AS MATERIALIZED (SELECT id FROM queue_messages WHERE queue_id = :q"
    " AND visible <= :now AND expires > :now ORDER BY visible, seq LIMIT :n {skip locked})"
    " UPDATE queue_messages m SET visible = :visible, dequeues = m.dequeues + 1, receipt = :receipt"
    f" FROM picked WHERE m.queue_id = :q AND m.id = picked.id{ALIVE}"
    " RETURNING m.seq, m.id, m.inserted, m.expires, m.visible, m.dequeues, m.receipt, m.body",
    delete_some="WITH picked AS MATERIALIZED"
    " (SELECT id FROM queue_messages WHERE queue_id = :q{more} LIMIT :n)"
    " DELETE FROM queue_messages m USING picked WHERE m.queue_id = :q AND m.id = picked.id",
    # The tombstone first: garbage collection runs this outside a transaction, and a tombstone
    # of a queue still there (deleting) is harmless, a queue gone without one is not.
    forget=(
        "INSERT INTO queue_tombstones (id) VALUES (:q) ON CONFLICT (id) DO NOTHING",
        "DELETE FROM queues WHERE id = :q",
    ),
)
_DIALECT = PostgresDialect({"{alive}": ALIVE})


class PostgresQueues(PlannedQueues):
    """The :class:`QueueStore` contract over a :class:`PostgresDatabase`."""

    statements = STATEMENTS

    def __init__(self, database: PostgresDatabase) -> None:
        self._db = database
        self._ids: dict[tuple[str, str], int] = {}  # (account, name) -> queue id, a hint

    async def _read(self, make: Callable[[], Plan[T]]) -> T:
        return await self._db.run_plan(make, idempotent=True, dialect=_DIALECT)

    async def _write(
        self, make: Callable[[], Plan[T]], *, atomic: bool = False, idempotent: bool = False
    ) -> T:
        return await self._db.run_plan(
            make, retry=atomic, transaction=atomic, idempotent=idempotent, dialect=_DIALECT
        )

    def _target(self, account: str, name: str) -> Target:
        return Target(account, name, self._ids.get((account, name)), settled=False)

    def _remember(self, account: str, name: str, queue_id: int | None) -> None:
        key = (account, name)
        if queue_id is None:
            self._ids.pop(key, None)
            return
        if len(self._ids) >= ID_CACHE_LIMIT:
            self._ids.clear()
        self._ids[key] = queue_id

    async def create_queue(self, account: str, name: str, metadata: bytes) -> bytes | None:
        existing, queue_id = await self._db.run_with_new_id(
            partial(queues.create, account, name, metadata), limit=MAX_QUEUE_ID, retry=True, dialect=_DIALECT
        )
        if existing is None:
            self._remember(account, name, queue_id)
        return existing

    async def get_service_properties(self, account: str) -> bytes | None:
        return await self._db.account_document("queue_service_properties", account)

    async def set_service_properties(self, account: str, properties: bytes) -> None:
        await self._db.set_account_document("queue_service_properties", account, properties)

    async def collect_garbage(self, now: int, limit: int) -> int:
        """The shared collection, statement by statement, then the messages under tombstones."""
        return await self._db.run_plan(partial(_collect, now, limit), idempotent=True, dialect=_DIALECT)


def _collect(now: int, limit: int) -> Plan[int]:
    deleted = yield from messages.collect(STATEMENTS, now, limit)
    tombstones = yield Sql(
        "SELECT id, deleted_at < now() - :age::interval FROM queue_tombstones", {"age": TOMBSTONE_AGE}, "all"
    )
    for queue_id, old in tombstones:
        count = yield from queues.delete_some(STATEMENTS, queue_id, limit)
        deleted += count
        if old and count == 0:
            yield Sql("DELETE FROM queue_tombstones WHERE id = :q", {"q": queue_id})
    return deleted
