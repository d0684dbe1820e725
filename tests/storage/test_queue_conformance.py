"""The storage contract of ``tabulae.storage.queues``, checked the same way on every backend.

Times are passed in explicitly (the store decides none), so visibility and expiry are tested
without sleeping: ``T`` is an arbitrary present, and a message is visible at ``now`` when its
TimeNextVisible is at or before it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable
from typing import Any

import pytest

from tabulae.model.errors import ServiceError
from tabulae.model.queues import NEVER_EXPIRES, QueueMessage
from tabulae.storage.queues import QueueStore as Store
from tests.storage.conftest import Backend

T = 1_800_000_000_000_000  # microseconds since the epoch (2027)
S = 1_000_000  # one second


async def raises(code: str, operation: Awaitable[Any]) -> None:
    with pytest.raises(ServiceError) as info:
        await operation
    assert info.value.code == code, info.value


def message(text: str, *, at: int = T, delay: int = 0, ttl: int = 3600 * S) -> QueueMessage:
    return QueueMessage(str(uuid.uuid4()), at, at + ttl, at + delay, 0, "put-" + text, text)


async def put(store: Store, account: str, queue: str, *texts: str, **options: Any) -> list[QueueMessage]:
    messages = [message(text, **options) for text in texts]
    for m in messages:
        await store.put_message(account, queue, m)
    return messages


def texts(messages: list[QueueMessage]) -> list[str]:
    return [m.text for m in messages]


# ----------------------------------------------------------------------------------------- queues


def test_create_list_and_metadata(backend: Backend) -> None:
    async def body(store: Store) -> None:
        a = backend.account
        assert await store.list_queues(a, "", None, 10) == []
        for name in ("gamma", "alpha", "beta-1", "beta"):
            assert await store.create_queue(a, name, b"[]") is None
        assert await store.create_queue(a, "alpha", b'[["x","1"]]') == b"[]"  # exists: its metadata
        listed = await store.list_queues(a, "", None, 10)
        assert [q.name for q in listed] == ["alpha", "beta", "beta-1", "gamma"]
        assert [q.name for q in await store.list_queues(a, "beta", None, 10)] == ["beta", "beta-1"]
        assert [q.name for q in await store.list_queues(a, "", "beta-1", 10)] == ["beta-1", "gamma"]
        assert [q.name for q in await store.list_queues(a, "", "beta-0", 10)] == ["beta-1", "gamma"]
        assert [q.name for q in await store.list_queues(a, "", None, 2)] == ["alpha", "beta"]
        assert await store.list_queues(a, "zzz", None, 10) == []
        assert await store.list_queues(a + "x", "", None, 10) == []  # accounts are separate
        await store.set_queue_metadata(a, "beta", b'[["k","v"]]')
        assert await store.get_queue(a, "beta") == (b'[["k","v"]]', 0)
        assert [q.metadata for q in await store.list_queues(a, "beta", None, 1)] == [b'[["k","v"]]']
        assert await store.get_acl(a, "beta") is None
        await store.set_acl(a, "beta", b"acl")
        assert await store.get_acl(a, "beta") == b"acl"
        assert await store.get_service_properties(a) is None
        await store.set_service_properties(a, b"one")
        await store.set_service_properties(a, b"two")
        assert await store.get_service_properties(a) == b"two"

    backend.run_queues(body)


def test_queue_not_found_everywhere(backend: Backend) -> None:
    async def body(store: Store) -> None:
        a, q, mid = backend.account, "missing", str(uuid.uuid4())
        await raises("QueueNotFound", store.delete_queue(a, q, 100))
        await raises("QueueNotFound", store.get_queue(a, q))
        await raises("QueueNotFound", store.set_queue_metadata(a, q, b"[]"))
        await raises("QueueNotFound", store.get_acl(a, q))
        await raises("QueueNotFound", store.set_acl(a, q, b""))
        await raises("QueueNotFound", store.put_message(a, q, message("x")))
        await raises("QueueNotFound", store.take_messages(a, q, 1, T, T + S, "r"))
        await raises("QueueNotFound", store.peek_messages(a, q, 1, T))
        await raises("QueueNotFound", store.update_message(a, q, mid, "r", T, T, "r2", None))
        await raises("QueueNotFound", store.delete_message(a, q, mid, "r", T))
        await raises("QueueNotFound", store.clear_messages(a, q, 100))

    backend.run_queues(body)


def test_messages_come_in_order_and_taking_hides_them(backend: Backend) -> None:
    async def body(store: Store) -> None:
        a, q = backend.account, "orders"
        await store.create_queue(a, q, b"[]")
        put_messages = await put(store, a, q, "m1", "m2", "m3", "m4")
        await put(store, a, q, "later", delay=60 * S)  # not visible for a minute
        assert texts(await store.peek_messages(a, q, 32, T)) == ["m1", "m2", "m3", "m4"]
        assert (await store.get_queue(a, q))[1] == 5
        taken = await store.take_messages(a, q, 2, T, T + 30 * S, "rcpt-1")
        assert texts(taken) == ["m1", "m2"]
        assert [m.id for m in taken] == [m.id for m in put_messages[:2]]
        assert all(m.dequeue_count == 1 and m.receipt == "rcpt-1" and m.visible == T + 30 * S for m in taken)
        assert all(m.inserted == T and m.expires == T + 3600 * S for m in taken)
        # Taken messages are invisible to peeks and takes until their time comes.
        assert texts(await store.peek_messages(a, q, 32, T)) == ["m3", "m4"]
        assert texts(await store.take_messages(a, q, 32, T + S, T + 31 * S, "rcpt-2")) == ["m3", "m4"]
        assert await store.take_messages(a, q, 32, T + 2 * S, T + 40 * S, "rcpt-3") == []
        # 30 s on, m1 and m2 are back, ahead of m3 and m4 (which became visible again later).
        again = await store.take_messages(a, q, 32, T + 30 * S, T + 90 * S, "rcpt-4")
        assert texts(again) == ["m1", "m2"] and all(m.dequeue_count == 2 for m in again)
        at_minute = await store.peek_messages(a, q, 32, T + 60 * S)
        assert texts(at_minute) == ["m3", "m4", "later"]
        assert all(m.dequeue_count == c for m, c in zip(at_minute, (1, 1, 0), strict=True))

    backend.run_queues(body)


def test_update_and_delete_need_the_current_receipt(backend: Backend) -> None:
    async def body(store: Store) -> None:
        a, q = backend.account, "receipts"
        await store.create_queue(a, q, b"[]")
        [put_one] = await put(store, a, q, "hello")
        [taken] = await store.take_messages(a, q, 1, T, T + 30 * S, "first")
        # The receipt Put gave is stale now; so is an unknown id.
        await raises("PopReceiptMismatch", store.delete_message(a, q, taken.id, put_one.receipt, T))
        await raises("MessageNotFound", store.delete_message(a, q, str(uuid.uuid4()), "first", T))
        updated = await store.update_message(a, q, taken.id, "first", T + S, T + 5 * S, "second", "hi")
        assert (updated.text, updated.receipt, updated.visible, updated.dequeue_count) == (
            "hi",
            "second",
            T + 5 * S,
            1,
        )
        await raises("PopReceiptMismatch", store.update_message(a, q, taken.id, "first", T + S, T, "x", None))
        await raises("PopReceiptMismatch", store.delete_message(a, q, taken.id, "first", T + S))
        kept = await store.update_message(a, q, taken.id, "second", T + 2 * S, T + 2 * S, "third", None)
        assert kept.text == "hi" and kept.receipt == "third"  # no new text: the text stays
        [retaken] = await store.take_messages(a, q, 1, T + 2 * S, T + 32 * S, "fourth")
        assert retaken.dequeue_count == 2 and retaken.text == "hi"
        await raises("PopReceiptMismatch", store.delete_message(a, q, taken.id, "third", T + 3 * S))
        await store.delete_message(a, q, taken.id, "fourth", T + 3 * S)
        await raises("MessageNotFound", store.delete_message(a, q, taken.id, "fourth", T + 3 * S))
        await raises("MessageNotFound", store.update_message(a, q, taken.id, "fourth", T, T, "x", None))
        assert (await store.get_queue(a, q))[1] == 0

    backend.run_queues(body)


def test_a_put_receipt_works_until_the_message_is_taken(backend: Backend) -> None:
    async def body(store: Store) -> None:
        a, q = backend.account, "putreceipt"
        await store.create_queue(a, q, b"[]")
        [first, second] = await put(store, a, q, "one", "two")
        await store.delete_message(a, q, first.id, first.receipt, T)
        updated = await store.update_message(a, q, second.id, second.receipt, T, T + 10 * S, "r2", None)
        assert updated.visible == T + 10 * S and updated.dequeue_count == 0
        assert await store.peek_messages(a, q, 32, T) == []

    backend.run_queues(body)


def test_expired_messages_are_never_returned_and_are_collected(backend: Backend) -> None:
    async def body(store: Store) -> None:
        a, q = backend.account, "expiry"
        await store.create_queue(a, q, b"[]")
        [short] = await put(store, a, q, "short", ttl=10 * S)
        await put(store, a, q, "forever", ttl=NEVER_EXPIRES - T)
        [taken, _] = await store.take_messages(a, q, 32, T, T + S, "r")
        assert taken.id == short.id
        later = T + 10 * S
        assert texts(await store.peek_messages(a, q, 32, later)) == ["forever"]
        assert texts(await store.take_messages(a, q, 32, later, later + S, "r2")) == ["forever"]
        await raises("MessageNotFound", store.delete_message(a, q, short.id, "r", later))
        await raises("MessageNotFound", store.update_message(a, q, short.id, "r", later, later, "x", None))
        assert (await store.get_queue(a, q))[1] == 2  # approximate: not yet collected
        assert await store.collect_garbage(later, 1000) >= 1
        assert (await store.get_queue(a, q))[1] == 1
        [forever] = await store.peek_messages(a, q, 1, later + 2 * S)
        assert forever.expires == NEVER_EXPIRES

    backend.run_queues(body)


def test_clear_in_chunks(backend: Backend) -> None:
    async def body(store: Store) -> None:
        a, q = backend.account, "clearing"
        await store.create_queue(a, q, b"[]")
        await put(store, a, q, *[f"m{i}" for i in range(7)])
        assert await store.clear_messages(a, q, 5) is False
        assert (await store.get_queue(a, q))[1] == 2
        assert await store.clear_messages(a, q, 5) is True
        assert await store.peek_messages(a, q, 32, T) == []

    backend.run_queues(body)


def test_delete_queue_small_and_large(backend: Backend) -> None:
    async def body(store: Store) -> None:
        a = backend.account
        await store.create_queue(a, "small", b"[]")
        await put(store, a, "small", "a", "b")
        await store.delete_queue(a, "small", 100)
        await raises("QueueNotFound", store.get_queue(a, "small"))
        # A new queue of the same name comes up empty at once.
        assert await store.create_queue(a, "small", b'[["n","2"]]') is None
        assert await store.peek_messages(a, "small", 32, T) == []
        # A queue with more messages than one transaction deletes stays "being deleted".
        await store.create_queue(a, "large", b"[]")
        await put(store, a, "large", *[str(i) for i in range(6)])
        await store.delete_queue(a, "large", 3)
        await raises("QueueNotFound", store.peek_messages(a, "large", 1, T))
        await raises("QueueNotFound", store.delete_queue(a, "large", 3))
        await raises("QueueBeingDeleted", store.create_queue(a, "large", b"[]"))
        assert [q.name for q in await store.list_queues(a, "", None, 10)] == ["small"]
        for _ in range(5):
            await store.collect_garbage(T, 2)
        assert await store.create_queue(a, "large", b"[]") is None
        assert await store.peek_messages(a, "large", 32, T) == []

    backend.run_queues(body)


def test_stats(backend: Backend) -> None:
    async def body(store: Store) -> None:
        a = backend.account
        await store.create_queue(a, "busy", b"[]")
        await store.create_queue(a, "idle", b"[]")
        await put(store, a, "busy", "a", at=T - 50 * S)
        await put(store, a, "busy", "b", "c")
        await put(store, a, "busy", "d", delay=60 * S)
        # Only "a" is visible before T: it is taken three times, the last time for long.
        for now, until in ((T - 40 * S, T - 40 * S), (T - 30 * S, T - 30 * S), (T - 20 * S, T + 100 * S)):
            assert texts(await store.take_messages(a, "busy", 1, now, until, str(now))) == ["a"]
        stats = {(s.account, s.queue): s for s in await store.queue_stats(T, 2, 1000) if s.account == a}
        busy, idle = stats[(a, "busy")], stats[(a, "idle")]
        assert (busy.messages, busy.poison) == (4, 1)  # "a" was dequeued three times
        assert (idle.messages, idle.visible, idle.oldest_visible, idle.poison) == (0, 0, None, 0)
        assert busy.visible == 2 and busy.oldest_visible == T  # "b" and "c"; "a" is invisible

    backend.run_queues(body)


def test_concurrent_takers_never_share_a_message(backend: Backend) -> None:
    """Two store instances (two front-ends, or two worker processes) take from one queue at once."""

    async def main() -> None:
        engines = [await backend.open(), await backend.open()]
        try:
            a, q = backend.account, "contended"
            first = engines[0].queues
            await first.create_queue(a, q, b"[]")
            for index in range(120):
                await first.put_message(a, q, message(f"m{index}"))

            async def taker(store: Store, index: int) -> list[str]:
                got: list[str] = []
                while True:
                    taken = await store.take_messages(a, q, 4, T, T + 60 * S, f"r{index}")
                    if not taken:
                        return got
                    got.extend(m.id for m in taken)

            results = await asyncio.gather(*(taker(engines[i % 2].queues, i) for i in range(8)))
            every = [mid for got in results for mid in got]
            assert len(every) == 120 and len(set(every)) == 120
        finally:
            for engine in engines:
                await engine.close()

    asyncio.run(main())


def test_concurrent_put_take_and_delete_on_one_queue(backend: Backend) -> None:
    """Producers and consumers on two store instances work one queue at once (on Citus its
    messages share one shard and the queue row is a reference table): nothing fails, and every
    message put is taken and deleted exactly once."""

    async def main() -> None:
        engines = [await backend.open(), await backend.open()]
        try:
            a, q = backend.account, "busy"
            await engines[0].queues.create_queue(a, q, b"[]")
            producing = 4

            async def producer(store: Store, index: int) -> None:
                nonlocal producing
                for n in range(20):
                    await store.put_message(a, q, message(f"p{index}-{n}"))
                producing -= 1

            async def consumer(store: Store, index: int) -> list[str]:
                done: list[str] = []
                while True:
                    taken = await store.take_messages(a, q, 3, T, T + 60 * S, f"c{index}-{len(done)}")
                    for got in taken:
                        await store.delete_message(a, q, got.id, got.receipt, T)
                        done.append(got.id)
                    if not taken:
                        if producing == 0:
                            return done
                        await asyncio.sleep(0.001)

            jobs = [producer(engines[i % 2].queues, i) for i in range(4)]
            results = await asyncio.gather(*jobs, *(consumer(engines[i % 2].queues, i) for i in range(4)))
            every = [mid for got in results[4:] if got for mid in got]
            assert len(every) == 80 and len(set(every)) == 80
            assert (await engines[1].queues.get_queue(a, q))[1] == 0
        finally:
            for engine in engines:
                await engine.close()

    asyncio.run(main())
