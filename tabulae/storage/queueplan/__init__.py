"""The Queue store's operations written once, as plans (:mod:`tabulae.storage.plan`) that both
engines run. Where the engines' SQL genuinely differs (taking messages: SQLite's one writer vs
PostgreSQL's ``SKIP LOCKED``; deleting a bounded batch; what forgetting a queue leaves behind)
an engine passes its own statements (:class:`QueueStatements`); the plan around them is shared.

A store's dialect spells one marker of this package's own: ``{alive}`` ends a condition on a
queue's messages with a check that the queue ``:q`` is still live, for an engine whose statements
do not run in the transaction that looked the queue's id up (empty where they do)."""

from __future__ import annotations

from dataclasses import dataclass

COLUMNS = "id, inserted, expires, visible, dequeues, receipt, body"
ALIVE = " AND EXISTS (SELECT 1 FROM queues WHERE id = :q AND NOT deleting)"


@dataclass(frozen=True, slots=True)
class QueueStatements:
    """The statements an engine writes its own way, in the plan notation."""

    put: str
    """Insert a message (``:id``, ``:inserted``, ``:expires``, ``:visible``, ``:dequeues``,
    ``:receipt``, ``:body``) into queue ``:q``; PostgreSQL's only while the queue is live."""

    take: str
    """Up to ``:n`` visible, unexpired messages of queue ``:q`` from its front (``:now``) get
    TimeNextVisible ``:visible``, one more dequeue and receipt ``:receipt``; returns ``seq``
    and :data:`COLUMNS` of each."""

    delete_some: str
    """Delete up to ``:n`` messages of queue ``:q`` that also pass ``{more}`` (a condition that
    begins with ``AND``, or nothing)."""

    forget: tuple[str, ...]
    """Remove queue ``:q`` whose messages are gone (and keep whatever the engine needs of it)."""
