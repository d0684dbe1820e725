"""The Queue storage contract: everything the Queue service needs from an engine.

A backend keeps queues per account (name, metadata, access policies), the account's queue
service properties, and the queues' messages. It knows nothing of HTTP or XML, and decides no
times itself: the service passes ``now`` and the new TimeNextVisible, and the backend applies
them atomically, so that every rule of at-least-once delivery holds across worker processes and
front-ends whatever their interleaving:

* a message is taken (:meth:`QueueStore.take_messages`) only while it is visible and unexpired,
  and taking it makes it invisible and gives it a new pop receipt in one conditional write: two
  concurrent takes never return the same message while it is invisible;
* Update and Delete Message succeed only with the message's current receipt (a conditional
  write), so a receipt goes stale the moment the message is updated or taken again;
* a write is durable when the method returns.

Messages are ordered by TimeNextVisible, then by insertion: FIFO for messages never taken, and a
message that reappears takes its place by the time it became visible again. Expired messages are
never returned and are removed by :meth:`QueueStore.collect_garbage`.

Every engine implements it over its one database and passes the same conformance suite
(``tests/storage/test_queue_conformance.py``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from tabulae.model.queues import QueueEntry as QueueEntry  # shared with the service and insight
from tabulae.model.queues import QueueMessage
from tabulae.model.queues import QueueStats as QueueStats


class QueueStore(ABC):
    """A durable store of queues and messages for many accounts. All methods are coroutines.

    Queue names are already validated (lower-case), so they match exactly. A queue being deleted
    (its messages still being collected) is invisible to every method but :meth:`create_queue`.
    """

    # ----------------------------------------------------------------------------- queues

    @abstractmethod
    async def create_queue(self, account: str, name: str, metadata: bytes) -> bytes | None:
        """Create a queue; None when created, else the existing queue's stored metadata (the
        caller decides whether that is the same queue). Raises ``QueueBeingDeleted``."""

    @abstractmethod
    async def delete_queue(self, account: str, name: str, limit: int) -> None:
        """Delete a queue at once for its users. Up to ``limit`` of its messages go in the same
        transaction; if it had more, the rest are left to :meth:`collect_garbage` and the name stays
        taken (``QueueBeingDeleted``) until they are gone. Raises ``QueueNotFound``."""

    @abstractmethod
    async def get_queue(self, account: str, name: str) -> tuple[bytes, int]:
        """The queue's metadata and its approximate message count (expired messages not yet
        collected included, as Azure's count is). Raises ``QueueNotFound``."""

    @abstractmethod
    async def set_queue_metadata(self, account: str, name: str, metadata: bytes) -> None:
        """Replace the queue's metadata. Raises ``QueueNotFound``."""

    @abstractmethod
    async def list_queues(self, account: str, prefix: str, start: str | None, limit: int) -> list[QueueEntry]:
        """Up to ``limit`` queues whose names start with ``prefix``, in name order (byte order of
        the lower-case names), from ``start`` on (inclusive) when given."""

    @abstractmethod
    async def get_acl(self, account: str, name: str) -> bytes | None:
        """The queue's stored access policies, or None if never set. Raises ``QueueNotFound``."""

    @abstractmethod
    async def set_acl(self, account: str, name: str, acl: bytes) -> None:
        """Replace the queue's stored access policies. Raises ``QueueNotFound``."""

    @abstractmethod
    async def get_service_properties(self, account: str) -> bytes | None:
        """The account's Queue service properties, or None if never set."""

    @abstractmethod
    async def set_service_properties(self, account: str, properties: bytes) -> None:
        """Replace the account's Queue service properties."""

    # ----------------------------------------------------------------------------- messages

    @abstractmethod
    async def put_message(self, account: str, name: str, message: QueueMessage) -> None:
        """Add a message (its id, times, receipt and text decided by the caller). Durable on
        return. Raises ``QueueNotFound``."""

    @abstractmethod
    async def take_messages(
        self, account: str, name: str, limit: int, now: int, visible: int, receipt: str
    ) -> list[QueueMessage]:
        """Atomically take up to ``limit`` messages that are visible (TimeNextVisible <= ``now``)
        and unexpired, from the front of the queue: each gets TimeNextVisible ``visible``, one more
        dequeue, and ``receipt``. Returns them as they now are, front first; no message is ever
        returned to two concurrent callers. Durable on return. Raises ``QueueNotFound``."""

    @abstractmethod
    async def peek_messages(self, account: str, name: str, limit: int, now: int) -> list[QueueMessage]:
        """Up to ``limit`` visible, unexpired messages from the front of the queue, unchanged.
        Raises ``QueueNotFound``."""

    @abstractmethod
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
        """If the unexpired message ``message_id`` holds ``receipt``, give it TimeNextVisible
        ``visible``, ``new_receipt`` and (unless None) ``text``, and return it. Durable on return.

        Raises ``QueueNotFound``; ``MessageNotFound`` when there is no such unexpired message;
        ``PopReceiptMismatch`` when there is one but it holds another receipt."""

    @abstractmethod
    async def delete_message(self, account: str, name: str, message_id: str, receipt: str, now: int) -> None:
        """Delete the unexpired message ``message_id`` if it holds ``receipt``. Durable on return.
        Raises as :meth:`update_message` does."""

    @abstractmethod
    async def clear_messages(self, account: str, name: str, limit: int) -> bool:
        """Delete up to ``limit`` messages of the queue in one transaction; True when none are left.
        Raises ``QueueNotFound``."""

    # ----------------------------------------------------------------------------- upkeep

    @abstractmethod
    async def collect_garbage(self, now: int, limit: int) -> int:
        """Delete up to ``limit`` messages that expired by ``now`` or belong to deleted queues, and
        forget deleted queues that have no messages left; returns the messages deleted. Safe to
        run from several processes at once."""

    @abstractmethod
    async def queue_stats(self, now: int, poison_threshold: int, limit: int) -> list[QueueStats]:
        """Figures of up to ``limit`` queues, by account and name. It reads every message of
        those queues: meant for an occasional scrape, not for a request path."""
