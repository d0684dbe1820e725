"""The Queue service as the front-end sees it: targets, injected faults and queue insight.

:class:`GuardedQueueService` passes each message operation of :class:`QueueService` through the
:class:`~tabulae.admission.gate.Gate` every service shares, as ``admission.guard`` does the Table
service's: refused up front when a fault is injected or the queue or account is over its target
(a refused request changes nothing), run, and what it carried counted. Messages are the unit, as
in Azure's target of 2,000 messages/s per queue; the account's target is shared with its tables
(one :class:`Throttle` per worker serves both).
"""

from __future__ import annotations

from dataclasses import dataclass

from tabulae.admission.gate import Gate
from tabulae.admission.throttle import Throttle
from tabulae.insight.queues import QueueInsight
from tabulae.model.queues import QueueMessage
from tabulae.queue.service import LATEST_VERSION, Clock, QueueService, now_us
from tabulae.storage.queues import QueueStore

# Fault windows are per (account, table, partition); a queue takes the place of a table under a
# name no table can have (table names have no '/'), and of its one partition.
_FAULT_PREFIX = "queue/"


@dataclass(slots=True)
class QueueTicket:
    """A Queue request: ``cost`` messages of one queue."""

    insight: QueueInsight
    account: str
    queue: str
    op: str
    cost: int = 1

    def fault_scope(self) -> tuple[str, str | None, str | None]:
        return self.account, _FAULT_PREFIX + self.queue, ""

    def take(self, throttle: Throttle) -> None:
        throttle.admit_queue(self.account, self.queue, self.cost)

    def refused(self, status: int, *, throttled: bool) -> None:
        self.insight.record(self.account, self.queue, op=self.op, throttled=throttled, status=status)


class GuardedQueueService(QueueService):
    """:class:`QueueService` with admission control and accounting around each message operation."""

    def __init__(
        self,
        store: QueueStore,
        *,
        insight: QueueInsight,
        gate: Gate,
        clock: Clock = now_us,
    ) -> None:
        super().__init__(store, clock=clock)
        self.insight = insight
        self.gate = gate

    def _ticket(self, account: str, queue: str, op: str) -> QueueTicket:
        return QueueTicket(self.insight, account, queue, op)

    async def put_message(
        self,
        account: str,
        name: str,
        text: str,
        visibility_timeout: int | None,
        ttl: int | None,
        version: str = LATEST_VERSION,
    ) -> QueueMessage:
        work = super().put_message(account, name, text, visibility_timeout, ttl, version)
        message = await self.gate.run(self._ticket(account, name, "put"), work)
        self.insight.record(account, name, op="put", messages=1, status=201)
        return message

    async def get_messages(
        self, account: str, name: str, count: int | None, visibility_timeout: int | None
    ) -> list[QueueMessage]:
        work = super().get_messages(account, name, count, visibility_timeout)
        messages = await self.gate.run(self._ticket(account, name, "get"), work)
        self._charge(account, name, len(messages))
        counts = tuple(m.dequeue_count for m in messages)
        self.insight.record(
            account, name, op="get", messages=len(messages), dequeue_counts=counts, status=200
        )
        return messages

    async def peek_messages(self, account: str, name: str, count: int | None) -> list[QueueMessage]:
        work = super().peek_messages(account, name, count)
        messages = await self.gate.run(self._ticket(account, name, "peek"), work)
        self._charge(account, name, len(messages))
        self.insight.record(account, name, op="peek", messages=len(messages), status=200)
        return messages

    def _charge(self, account: str, name: str, taken: int) -> None:
        """Messages past the one admitted, known only once they are read."""
        if self.gate.throttle is not None:
            self.gate.throttle.charge_queue(account, name, taken - 1)

    async def update_message(
        self,
        account: str,
        name: str,
        message_id: str,
        receipt: str,
        visibility_timeout: int,
        text: str | None,
        version: str = LATEST_VERSION,
    ) -> QueueMessage:
        work = super().update_message(account, name, message_id, receipt, visibility_timeout, text, version)
        message = await self.gate.run(self._ticket(account, name, "update"), work)
        self.insight.record(account, name, op="update", messages=1, status=204)
        return message

    async def delete_message(self, account: str, name: str, message_id: str, receipt: str) -> None:
        work = super().delete_message(account, name, message_id, receipt)
        await self.gate.run(self._ticket(account, name, "delete"), work)
        self.insight.record(account, name, op="delete", messages=1, status=204)

    async def clear_messages(self, account: str, name: str) -> None:
        self.gate.check_faults(account, _FAULT_PREFIX + name, "")
        await super().clear_messages(account, name)

    async def create_queue(self, account: str, name: str, metadata: dict[str, str]) -> bool:
        self.gate.check_faults(account, _FAULT_PREFIX + name, "")
        return await super().create_queue(account, name, metadata)

    async def delete_queue(self, account: str, name: str) -> None:
        self.gate.check_faults(account, _FAULT_PREFIX + name, "")
        await super().delete_queue(account, name)
        self.insight.forget_queue(account, name)
