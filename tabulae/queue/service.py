"""The Queue service's operations and their rules, above storage and below HTTP.

This layer decides what the store then applies atomically: the times (TimeNextVisible, expiry),
the limits of each parameter (with Azure's error and its details), the pop receipts, and what a
failed conditional write means to the client. It receives plain values and returns stored
messages; it never sees HTTP and never writes SQL.

Pop receipts. A receipt the client sees is Base64 of 20 bytes, as Azure's are: a version byte,
11 random bytes that the store keeps as the message's current receipt (one value shared by every
message of one Get Messages, as Azure does), and the first 8 bytes of the message's id. So a
receipt given for another message is told apart before anything is written (400
``PopReceiptMismatch``), and a receipt of this message that is no longer its current one (the
message was updated, or taken again after reappearing) is 404 ``MessageNotFound``, the answer
Azure gives then.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import os
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from tabulae.model.errors import ServiceError
from tabulae.model.metadata import Metadata, decode_metadata, encode_metadata, same_metadata
from tabulae.model.names import check_lower_dns_name
from tabulae.model.policies import (
    ServiceProperties,
    SignedIdentifier,
    decode_acl,
    decode_service_properties,
    encode_acl,
    encode_service_properties,
)
from tabulae.model.queues import (
    DEFAULT_GET_VISIBILITY_SECONDS,
    DEFAULT_TTL_SECONDS,
    INFINITE_TTL_VERSION,
    LARGE_MESSAGE_VERSION,
    LEGACY_MAX_MESSAGE_BYTES,
    MAX_LIST_RESULTS,
    MAX_MESSAGE_BYTES,
    MAX_MESSAGES_PER_GET,
    MAX_VISIBILITY_SECONDS,
    MICROSECONDS,
    NEVER_EXPIRES,
    QueueMessage,
)
from tabulae.storage.queues import QueueStats, QueueStore

log = logging.getLogger("tabulae")

LATEST_VERSION = "9999-12-31"  # the rules of the newest version, for requests that name none
DELETE_CHUNK = 10_000  # messages deleted in one transaction by Delete Queue and Clear Messages
CLEAR_BUDGET = 10.0  # seconds Clear Messages may take before it answers 500 OperationTimedOut
COLLECT_INTERVAL = 30.0  # seconds between garbage collections when there is nothing to collect
COLLECT_CHUNK = 5_000
_RECEIPT_VERSION = 2
_RECEIPT_BYTES = 20
_NONCE_BYTES = 11
_MESSAGE_TOO_LARGE_FIELDS = (("MaxLimit", str(MAX_MESSAGE_BYTES)),)

Clock = Callable[[], int]  # microseconds since the epoch


def now_us() -> int:
    return time.time_ns() // 1000


@dataclass(slots=True)
class QueuePage:
    """One page of List Queues: the queues (name, metadata) and the marker of the next page."""

    queues: list[tuple[str, Metadata]]
    next_marker: str | None


# ------------------------------------------------------------------------------ parameters


def out_of_range(name: str, value: int | str, low: int, high: int) -> ServiceError:
    return ServiceError(
        "OutOfRangeQueryParameterValue",
        fields=(
            ("QueryParameterName", name),
            ("QueryParameterValue", str(value)),
            ("MinimumAllowed", str(low)),
            ("MaximumAllowed", str(high)),
        ),
    )


def invalid_parameter(name: str, value: str, reason: str) -> ServiceError:
    return ServiceError(
        "InvalidQueryParameterValue",
        fields=(("QueryParameterName", name), ("QueryParameterValue", value), ("Reason", reason)),
    )


def check_range(name: str, value: int, low: int, high: int) -> int:
    if not low <= value <= high:
        raise out_of_range(name, value, low, high)
    return value


# ------------------------------------------------------------------------------ receipts


def _message_tag(message_id: str) -> bytes:
    return uuid.UUID(message_id).bytes[:8]


def new_nonce() -> str:
    """A fresh stored receipt: 11 random bytes, Base64 (16 characters)."""
    return base64.b64encode(os.urandom(_NONCE_BYTES)).decode("ascii")


def client_receipt(nonce: str, message_id: str) -> str:
    """The receipt a client sees for a message whose stored receipt is ``nonce``."""
    raw = bytes((_RECEIPT_VERSION,)) + base64.b64decode(nonce) + _message_tag(message_id)
    return base64.b64encode(raw).decode("ascii")


def read_receipt(receipt: str) -> tuple[str, bytes]:
    """A client's receipt as (stored receipt, tag of the message it was given for); 400
    ``InvalidQueryParameterValue`` for a value that is not even Base64 (Azure refuses it before it
    looks at the message id: the Java SDK's deleteMessageInvalidArgs[3], 2023-11-03). Base64 that
    is no receipt of ours comes back with an empty tag, which names no message, so the message
    is looked up first: Azure answered such a receipt ('mwhojmtartdffgntginp') for an id that is
    no message with 404 MessageNotFound (the .NET SDK's QueueClientTests/DeleteMessagAsync_Error
    and UpdateMessageAsync_Error, 2024-08-04)."""
    try:
        raw = base64.b64decode(receipt.replace(" ", "+"), validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if not raw:  # Azure's Reason, as its recordings of a malformed receipt show (JS, Python)
        raise _malformed_receipt(receipt)
    if len(raw) != _RECEIPT_BYTES or raw[0] != _RECEIPT_VERSION:
        return "", b""
    return base64.b64encode(raw[1 : 1 + _NONCE_BYTES]).decode("ascii"), raw[1 + _NONCE_BYTES :]


def _malformed_receipt(receipt: str) -> ServiceError:
    return invalid_parameter("popreceipt", receipt, "Invalid pop receipt format")


def canonical_message_id(text: str) -> str:
    """A message id as stored (a lower-case GUID); anything else names no message."""
    try:
        return str(uuid.UUID(text))
    except ValueError:
        raise ServiceError("MessageNotFound") from None


def with_receipt(message: QueueMessage) -> QueueMessage:
    """The message as the client sees it: the receipt in the client's form."""
    return QueueMessage(
        message.id,
        message.inserted,
        message.expires,
        message.visible,
        message.dequeue_count,
        client_receipt(message.receipt, message.id),
        message.text,
    )


# ------------------------------------------------------------------------------ the service


class QueueService:
    """The Queue service's operations, over any :class:`QueueStore`."""

    def __init__(self, store: QueueStore, *, clock: Clock = now_us) -> None:
        self.store = store
        self.clock = clock

    # ------------------------------------------------------------------------------- queues

    async def list_queues(
        self, account: str, prefix: str, marker: str | None, max_results: int | None
    ) -> QueuePage:
        limit = MAX_LIST_RESULTS if max_results is None else min(max_results, MAX_LIST_RESULTS)
        start = None
        if marker:
            head = f"/{account}/"
            if not marker.startswith(head) or len(marker) == len(head):
                # Azure's answer to the .NET SDK's marker=garbage (QueueServiceClient
                # GetQueuesAsync_ErrorAsync, 2024-08-04), as List Containers answers it.
                raise ServiceError("OutOfRangeInput")
            start = marker[len(head) :]
        entries = await self.store.list_queues(account, prefix, start, limit + 1)
        next_marker = f"/{account}/{entries[limit].name}" if len(entries) > limit else None
        return QueuePage([(e.name, decode_metadata(e.metadata)) for e in entries[:limit]], next_marker)

    async def create_queue(self, account: str, name: str, metadata: Metadata) -> bool:
        """True when created; False when it exists with the same metadata (Azure's 204)."""
        check_lower_dns_name(name)
        existing = await self.store.create_queue(account, name, encode_metadata(metadata))
        if existing is None:
            return True
        if same_metadata(decode_metadata(existing), metadata):
            return False
        raise ServiceError("QueueAlreadyExists")

    async def delete_queue(self, account: str, name: str) -> None:
        check_lower_dns_name(name)
        await self.store.delete_queue(account, name, DELETE_CHUNK)

    async def get_queue_properties(self, account: str, name: str) -> tuple[Metadata, int]:
        """The metadata and the approximate message count."""
        check_lower_dns_name(name)
        metadata, count = await self.store.get_queue(account, name)
        return decode_metadata(metadata), count

    async def set_queue_metadata(self, account: str, name: str, metadata: Metadata) -> None:
        check_lower_dns_name(name)
        await self.store.set_queue_metadata(account, name, encode_metadata(metadata))

    async def get_acl(self, account: str, name: str) -> list[SignedIdentifier]:
        check_lower_dns_name(name)
        return decode_acl(await self.store.get_acl(account, name))

    async def set_acl(self, account: str, name: str, identifiers: list[SignedIdentifier]) -> None:
        check_lower_dns_name(name)
        await self.store.set_acl(account, name, encode_acl(identifiers))

    async def get_service_properties(self, account: str) -> ServiceProperties:
        return decode_service_properties(await self.store.get_service_properties(account))

    async def set_service_properties(self, account: str, properties: ServiceProperties) -> None:
        await self.store.set_service_properties(account, encode_service_properties(properties))

    # ------------------------------------------------------------------------------- messages

    async def put_message(
        self,
        account: str,
        name: str,
        text: str,
        visibility_timeout: int | None,
        ttl: int | None,
        version: str = LATEST_VERSION,
    ) -> QueueMessage:
        """Add a message; ``ttl`` -1 never expires. Returns it with its client receipt."""
        check_lower_dns_name(name)
        visibility = check_range("visibilitytimeout", visibility_timeout or 0, 0, MAX_VISIBILITY_SECONDS)
        seconds = check_ttl(ttl, version)
        if seconds is not None and visibility >= seconds:
            raise invalid_parameter(
                "visibilitytimeout", str(visibility), "messagettl must be greater than visibilitytimeout"
            )
        check_text(text, version)
        now = self.clock()
        expires = NEVER_EXPIRES if seconds is None else min(now + seconds * MICROSECONDS, NEVER_EXPIRES)
        message = QueueMessage(
            str(uuid.uuid4()), now, expires, now + visibility * MICROSECONDS, 0, new_nonce(), text
        )
        await self.store.put_message(account, name, message)
        return with_receipt(message)

    async def get_messages(
        self, account: str, name: str, count: int | None, visibility_timeout: int | None
    ) -> list[QueueMessage]:
        """Take up to ``count`` visible messages for ``visibility_timeout`` seconds (default 30)."""
        check_lower_dns_name(name)
        limit = check_range("numofmessages", 1 if count is None else count, 1, MAX_MESSAGES_PER_GET)
        seconds = DEFAULT_GET_VISIBILITY_SECONDS if visibility_timeout is None else visibility_timeout
        check_range("visibilitytimeout", seconds, 1, MAX_VISIBILITY_SECONDS)
        now = self.clock()
        taken = await self.store.take_messages(
            account, name, limit, now, now + seconds * MICROSECONDS, new_nonce()
        )
        return [with_receipt(message) for message in taken]

    async def peek_messages(self, account: str, name: str, count: int | None) -> list[QueueMessage]:
        check_lower_dns_name(name)
        limit = check_range("numofmessages", 1 if count is None else count, 1, MAX_MESSAGES_PER_GET)
        return await self.store.peek_messages(account, name, limit, self.clock())

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
        """Make the message visible again in ``visibility_timeout`` seconds (0: now), with new
        text if given; returns it with its new client receipt."""
        check_lower_dns_name(name)
        check_range("visibilitytimeout", visibility_timeout, 0, MAX_VISIBILITY_SECONDS)
        if text is not None:
            check_text(text, version)
        given = read_receipt(receipt)  # a malformed receipt is refused before the id is looked at
        message_id = canonical_message_id(message_id)
        nonce = await self._receipt_for(account, name, message_id, given, receipt)
        now = self.clock()
        try:
            updated = await self.store.update_message(
                account,
                name,
                message_id,
                nonce,
                now,
                now + visibility_timeout * MICROSECONDS,
                new_nonce(),
                text,
            )
        except ServiceError as error:
            raise _stale(error) from None
        return with_receipt(updated)

    async def delete_message(self, account: str, name: str, message_id: str, receipt: str) -> None:
        check_lower_dns_name(name)
        given = read_receipt(receipt)  # Azure: 400 for it even when the id names no message
        message_id = canonical_message_id(message_id)
        nonce = await self._receipt_for(account, name, message_id, given, receipt)
        try:
            await self.store.delete_message(account, name, message_id, nonce, self.clock())
        except ServiceError as error:
            raise _stale(error) from None

    async def _receipt_for(
        self, account: str, name: str, message_id: str, receipt: tuple[str, bytes], receipt_text: str
    ) -> str:
        """The stored receipt a client's receipt for ``message_id`` stands for. A receipt given for
        another message is refused before anything is written (the messages of one Get share a
        stored receipt), with the error of the first thing wrong: no queue, no such message, or
        ``PopReceiptMismatch``. The store is asked with a receipt it never holds, which changes
        nothing and says which it is."""
        nonce, tag = receipt  # as read_receipt gives it
        if tag != _message_tag(message_id):
            try:
                await self.store.delete_message(account, name, message_id, "", self.clock())
            except ServiceError as error:
                if tag or error.code != "PopReceiptMismatch":
                    raise
            if not tag:  # Base64 that is no receipt, for a message that exists: unrecorded;
                raise _malformed_receipt(receipt_text)  # refused as malformed, as before
            raise ServiceError("PopReceiptMismatch")  # not reached: the store raised already
        return nonce

    async def clear_messages(self, account: str, name: str) -> None:
        """Delete every message, a transaction at a time; a queue too large to clear within
        ``CLEAR_BUDGET`` gets 500 OperationTimedOut, and the client clears the rest on retry."""
        check_lower_dns_name(name)
        deadline = time.monotonic() + CLEAR_BUDGET
        while not await self.store.clear_messages(account, name, DELETE_CHUNK):
            if time.monotonic() > deadline:
                raise ServiceError("OperationTimedOut")

    # ------------------------------------------------------------------------------- upkeep

    async def collect_garbage(self) -> int:
        """Delete expired messages and those of deleted queues, in chunks, until none are left."""
        total = 0
        while True:
            deleted = await self.store.collect_garbage(self.clock(), COLLECT_CHUNK)
            total += deleted
            if deleted < COLLECT_CHUNK:
                return total

    async def keep_collecting(self, interval: float = COLLECT_INTERVAL) -> None:
        """Collect garbage now and then, forever (a task of each worker; any worker's collection
        is as good as another's, and they may overlap safely)."""
        while True:
            await asyncio.sleep(interval * random.uniform(0.5, 1.5))
            try:
                await self.collect_garbage()
            except ServiceError as error:
                log.warning("queue garbage collection failed (retried later): %s", error)

    async def stats(self, poison_threshold: int, limit: int = 1000) -> list[QueueStats]:
        return await self.store.queue_stats(self.clock(), poison_threshold, limit)


def _stale(error: ServiceError) -> ServiceError:
    """A receipt of this message that is no longer its current one: 404, as Azure answers."""
    return ServiceError("MessageNotFound") if error.code == "PopReceiptMismatch" else error


def check_ttl(ttl: int | None, version: str) -> int | None:
    """The time to live in seconds, or None for a message that never expires (-1)."""
    if ttl is None:
        return DEFAULT_TTL_SECONDS
    if version < INFINITE_TTL_VERSION:
        return check_range("messagettl", ttl, 1, DEFAULT_TTL_SECONDS)
    if ttl == -1:
        return None
    if ttl < 1:
        raise invalid_parameter(
            "messagettl",
            str(ttl),
            "messagettl must be -1 (never expires) or a number of seconds of at least 1",
        )
    return ttl


def check_text(text: str, version: str) -> None:
    """A message's text is at most 64 KiB of UTF-8 (8 KiB before version 2011-08-18)."""
    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    if version < LARGE_MESSAGE_VERSION:
        if size > LEGACY_MAX_MESSAGE_BYTES:
            raise ServiceError("MessageTooLarge")
    elif size > MAX_MESSAGE_BYTES:
        raise ServiceError("RequestBodyTooLarge", fields=_MESSAGE_TOO_LARGE_FIELDS)
