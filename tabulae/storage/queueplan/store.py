"""The part of a queue store that is nothing but its plans: an engine subclasses
:class:`PlannedQueues`, gives its statements and dialect, says how it runs a read and a write,
and adds what only it does."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from typing import TypeVar

from tabulae.model.errors import ServiceError
from tabulae.model.queues import QueueEntry, QueueMessage, QueueStats
from tabulae.storage.plan import Plan
from tabulae.storage.queueplan import QueueStatements, messages, queues
from tabulae.storage.queueplan.messages import Target
from tabulae.storage.queues import QueueStore

T = TypeVar("T")


class PlannedQueues(QueueStore):
    """The :class:`QueueStore` operations that an engine only runs."""

    statements: QueueStatements

    @abstractmethod
    async def _read(self, make: Callable[[], Plan[T]]) -> T:
        """Run a read."""

    @abstractmethod
    async def _write(
        self, make: Callable[[], Plan[T]], *, atomic: bool = False, idempotent: bool = False
    ) -> T:
        """Run a write durably. ``atomic``: it makes several changes, all or none (one
        transaction, retried on conflicts); else it makes at most one. ``idempotent``: running it
        twice does no harm."""

    def _target(self, account: str, name: str) -> Target:
        """The queue a message operation is for, with what the engine knows of its id."""
        return Target(account, name)

    def _remember(self, account: str, name: str, queue_id: int | None) -> None:
        """What a plan learnt of the queue's id (None: it has none now)."""

    async def _on_queue(
        self, account: str, name: str, make: Callable[[Target], Plan[tuple[T, int]]], *, read: bool = False
    ) -> T:
        target = self._target(account, name)
        try:
            if read:
                result, queue_id = await self._read(lambda: make(target))
            else:
                result, queue_id = await self._write(lambda: make(target))
        except ServiceError as exc:
            if exc.code == "QueueNotFound":
                self._remember(account, name, None)
            raise
        self._remember(account, name, queue_id)
        return result

    # ----------------------------------------------------------------------------- queues

    async def create_queue(self, account: str, name: str, metadata: bytes) -> bytes | None:
        return await self._write(lambda: queues.create(account, name, metadata, None))

    async def delete_queue(self, account: str, name: str, limit: int) -> None:
        await self._write(lambda: queues.delete(self.statements, account, name, limit), atomic=True)
        self._remember(account, name, None)

    async def get_queue(self, account: str, name: str) -> tuple[bytes, int]:
        return await self._read(lambda: queues.get(account, name))

    async def set_queue_metadata(self, account: str, name: str, metadata: bytes) -> None:
        await self._write(lambda: queues.set_column(account, name, "metadata", metadata), idempotent=True)

    async def list_queues(self, account: str, prefix: str, start: str | None, limit: int) -> list[QueueEntry]:
        return await self._read(lambda: queues.page(account, prefix, start, limit))

    async def get_acl(self, account: str, name: str) -> bytes | None:
        return await self._read(lambda: queues.get_acl(account, name))

    async def set_acl(self, account: str, name: str, acl: bytes) -> None:
        await self._write(lambda: queues.set_column(account, name, "acl", acl), idempotent=True)

    async def queue_stats(self, now: int, poison_threshold: int, limit: int) -> list[QueueStats]:
        return await self._read(lambda: queues.stats(now, poison_threshold, limit))

    # ----------------------------------------------------------------------------- messages

    async def put_message(self, account: str, name: str, message: QueueMessage) -> None:
        await self._on_queue(account, name, lambda q: messages.put(q, self.statements, message))

    async def take_messages(
        self, account: str, name: str, limit: int, now: int, visible: int, receipt: str
    ) -> list[QueueMessage]:
        sql = self.statements
        return await self._on_queue(
            account, name, lambda q: messages.take(q, sql, limit, now, visible, receipt)
        )

    async def peek_messages(self, account: str, name: str, limit: int, now: int) -> list[QueueMessage]:
        return await self._on_queue(account, name, lambda q: messages.peek(q, limit, now), read=True)

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
        return await self._on_queue(
            account, name, lambda q: messages.update(q, message_id, receipt, now, visible, new_receipt, text)
        )

    async def delete_message(self, account: str, name: str, message_id: str, receipt: str, now: int) -> None:
        await self._on_queue(account, name, lambda q: messages.delete(q, message_id, receipt, now))

    async def clear_messages(self, account: str, name: str, limit: int) -> bool:
        return await self._on_queue(account, name, lambda q: messages.clear(q, self.statements, limit))

    async def collect_garbage(self, now: int, limit: int) -> int:
        return await self._write(lambda: messages.collect(self.statements, now, limit), atomic=True)
