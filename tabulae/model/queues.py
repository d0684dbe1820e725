"""Queue messages, queues as listed and measured, and the limits of the Queue service ("Put
Message", "Get Messages", "Scalability and performance targets for Queue Storage").

Times are integers: microseconds since the Unix epoch, UTC. Azure shows them to the second.
"""

from __future__ import annotations

from dataclasses import dataclass

MICROSECONDS = 1_000_000
NEVER_EXPIRES = 253_402_300_799 * MICROSECONDS  # 9999-12-31T23:59:59Z, the ExpirationTime of TTL -1
MAX_MESSAGE_BYTES = 64 * 1024  # the UTF-8 text of one message, from version 2011-08-18 on
LEGACY_MAX_MESSAGE_BYTES = 8 * 1024  # before 2011-08-18
LARGE_MESSAGE_VERSION = "2011-08-18"
INFINITE_TTL_VERSION = "2017-07-29"  # messagettl -1 and TTLs longer than 7 days are accepted from here
MAX_VISIBILITY_SECONDS = 7 * 24 * 3600
DEFAULT_TTL_SECONDS = 7 * 24 * 3600
DEFAULT_GET_VISIBILITY_SECONDS = 30
MAX_MESSAGES_PER_GET = 32
MAX_LIST_RESULTS = 5000


@dataclass(frozen=True, slots=True)
class QueueMessage:
    """One message as stored: ``visible`` is TimeNextVisible, ``receipt`` the latest pop receipt
    (only it is accepted by Update and Delete Message)."""

    id: str  # a lower-case GUID
    inserted: int
    expires: int
    visible: int
    dequeue_count: int
    receipt: str
    text: str


@dataclass(frozen=True, slots=True)
class QueueEntry:
    """A queue as listed: its name and stored metadata (``model.metadata`` encodes it)."""

    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class QueueStats:
    """What ``/metrics`` shows of one queue, read in one pass over its messages."""

    account: str
    queue: str
    messages: int  # stored, expired ones not yet collected included
    visible: int  # visible and unexpired now
    oldest_visible: int | None  # insertion time of the message at the front of the queue
    poison: int  # messages dequeued more than the threshold
