"""The Queue service as the front-end sees it: targets, injected faults and queue insight.

:class:`GuardedQueueService` wraps each message operation of :class:`QueueService` as
``admission.guard`` wraps the Table service's: refuse it up front when a fault is injected or the
queue or account is over its target (a refused request changes nothing), run it, and count what
it carried. Messages are the unit, as in Azure's target of 2,000 messages/s per queue; the
account's target is shared with its tables (one :class:`Throttle` per worker serves both).
"""

from __future__ import annotations

from tabulae.admission.faults import FaultInjector
from tabulae.admission.throttle import Throttle
from tabulae.insight.queues import QueueInsight
from tabulae.model.errors import TableError
from tabulae.model.queues import QueueMessage
from tabulae.queue.service import LATEST_VERSION, Clock, QueueService, now_us
from tabulae.storage.queues import QueueStore

# Fault windows are per (account, table, partition); a queue takes the place of a table under a
# name no table can have (table names have no '/'), and of its one partition.
_FAULT_PREFIX = "queue/"


class GuardedQueueService(QueueService):
    """:class:`QueueService` with admission control and accounting around each message operation."""

    def __init__(
        self,
        store: QueueStore,
        *,
        insight: QueueInsight,
        throttle: Throttle | None = None,
        faults: FaultInjector | None = None,
        clock: Clock = now_us,
    ) -> None:
        super().__init__(store, clock=clock)
        self.insight = insight
        self.throttle = throttle
        self.faults = faults

    def _admit(self, account: str, queue: str, cost: int, op: str) -> None:
        """Refuse before any work: an injected fault first, then the targets."""
        if self.faults is not None:
            try:
                self.faults.check(account, _FAULT_PREFIX + queue, "")
            except TableError as error:
                self.insight.record(account, queue, op=op, status=error.status)
                raise
        if self.throttle is not None:
            try:
                self.throttle.admit_queue(account, queue, cost)
            except TableError as error:
                self.insight.record(account, queue, op=op, throttled=True, status=error.status)
                raise

    async def put_message(
        self,
        account: str,
        name: str,
        text: str,
        visibility_timeout: int | None,
        ttl: int | None,
        version: str = LATEST_VERSION,
    ) -> QueueMessage:
        self._admit(account, name, 1, "put")
        try:
            message = await super().put_message(account, name, text, visibility_timeout, ttl, version)
        except TableError as error:
            self.insight.record(account, name, op="put", status=error.status)
            raise
        self.insight.record(account, name, op="put", messages=1, status=201)
        return message

    async def get_messages(
        self, account: str, name: str, count: int | None, visibility_timeout: int | None
    ) -> list[QueueMessage]:
        self._admit(account, name, 1, "get")
        try:
            messages = await super().get_messages(account, name, count, visibility_timeout)
        except TableError as error:
            self.insight.record(account, name, op="get", status=error.status)
            raise
        if self.throttle is not None:
            self.throttle.charge_queue(account, name, len(messages) - 1)  # known only now
        counts = tuple(m.dequeue_count for m in messages)
        self.insight.record(
            account, name, op="get", messages=len(messages), dequeue_counts=counts, status=200
        )
        return messages

    async def peek_messages(self, account: str, name: str, count: int | None) -> list[QueueMessage]:
        self._admit(account, name, 1, "peek")
        try:
            messages = await super().peek_messages(account, name, count)
        except TableError as error:
            self.insight.record(account, name, op="peek", status=error.status)
            raise
        if self.throttle is not None:
            self.throttle.charge_queue(account, name, len(messages) - 1)
        self.insight.record(account, name, op="peek", messages=len(messages), status=200)
        return messages

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
        self._admit(account, name, 1, "update")
        try:
            message = await super().update_message(
                account, name, message_id, receipt, visibility_timeout, text, version
            )
        except TableError as error:
            self.insight.record(account, name, op="update", status=error.status)
            raise
        self.insight.record(account, name, op="update", messages=1, status=204)
        return message

    async def delete_message(self, account: str, name: str, message_id: str, receipt: str) -> None:
        self._admit(account, name, 1, "delete")
        try:
            await super().delete_message(account, name, message_id, receipt)
        except TableError as error:
            self.insight.record(account, name, op="delete", status=error.status)
            raise
        self.insight.record(account, name, op="delete", messages=1, status=204)

    async def clear_messages(self, account: str, name: str) -> None:
        if self.faults is not None:
            self.faults.check(account, _FAULT_PREFIX + name, "")
        await super().clear_messages(account, name)

    async def create_queue(self, account: str, name: str, metadata: dict[str, str]) -> bool:
        if self.faults is not None:
            self.faults.check(account, _FAULT_PREFIX + name, "")
        return await super().create_queue(account, name, metadata)

    async def delete_queue(self, account: str, name: str) -> None:
        if self.faults is not None:
            self.faults.check(account, _FAULT_PREFIX + name, "")
        await super().delete_queue(account, name)
        self.insight.forget_queue(account, name)
