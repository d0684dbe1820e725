"""The loader's batching and watermark, against an in-process table that can fail on cue.

The integration tests load through a real server; this one checks what is hard to see there:
that batches are whole (one partition, at most 100, no key twice in flight), that the last record
of a key always wins, and that resuming from any saved watermark after a crash ends with exactly
the table an uninterrupted load gives.
"""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest

from tabulae.tools.loader import Item, Loader, LoadFailed
from tabulae.tools.progress import Meter
from tabulae.tools.wire import RefusedRequest


class Crash(Exception):
    pass


class FakeTable:
    """Applies batches like the service: all or nothing; may fail transiently or crash."""

    def __init__(self, crash_after: int | None = None, busy_every: int = 0) -> None:
        self.rows: dict[tuple[str, str], bytes] = {}
        self.batches: list[list[tuple[str, str, bytes]]] = []
        self.flying: set[tuple[str, str]] = set()
        self.lock = threading.Lock()
        self.crash_after = crash_after
        self.busy_every = busy_every
        self.calls = 0

    def upsert_batch(self, bodies: list[tuple[str, str, bytes]]) -> None:
        with self.lock:
            self.calls += 1
            if self.busy_every and self.calls % self.busy_every == 0:
                raise RefusedRequest(503, "ServerBusy", "busy")
            if self.crash_after is not None and len(self.batches) >= self.crash_after:
                raise Crash()
            keys = {(pk, rk) for pk, rk, _ in bodies}
            assert len(keys) == len(bodies) <= 100 and len({pk for pk, _, _ in bodies}) == 1
            assert not keys & self.flying, "two batches in flight share a key"
            self.flying |= keys
        for pk, rk, body in bodies:
            self.rows[(pk, rk)] = body
        with self.lock:
            self.flying -= keys
            self.batches.append(bodies)


def records(count: int, partitions: int, keys: int, seed: int) -> list[tuple[str, str, bytes]]:
    rng = random.Random(seed)
    return [
        (f"p{rng.randrange(partitions)}", f"r{rng.randrange(keys)}", f"v{number}".encode())
        for number in range(count)
    ]


def items(source: list[tuple[str, str, bytes]], start: int = 0) -> Any:
    for seq in range(start, len(source)):
        pk, rk, body = source[seq]
        yield Item(seq, {"records": seq}, pk, rk, body, f"line {seq + 1}")


def expected(source: list[tuple[str, str, bytes]]) -> dict[tuple[str, str], bytes]:
    last: dict[tuple[str, str], bytes] = {}
    for pk, rk, body in source:
        last[(pk, rk)] = body
    return last


def test_interleaved_partitions_fill_whole_batches() -> None:
    source = [(f"p{n % 50}", f"r{n:06d}", b"x") for n in range(20_000)]
    table = FakeTable()
    Loader(table, Meter(), None, concurrency=4).run(items(source), lambda: {})  # type: ignore[arg-type]
    assert table.rows == expected(source)
    assert [len(batch) for batch in table.batches] == [100] * 200


def test_the_buffer_cap_sends_partial_batches() -> None:
    source = [(f"p{n % 1000}", f"r{n:06d}", b"x" * 100) for n in range(5_000)]
    table = FakeTable()
    Loader(table, Meter(), None, concurrency=2, max_buffered=100_000).run(items(source), lambda: {})  # type: ignore[arg-type]
    assert table.rows == expected(source)
    assert max(len(batch) for batch in table.batches) < 100


@pytest.mark.parametrize("seed", range(6))
def test_a_crash_then_a_resume_from_the_watermark_gives_the_uninterrupted_table(seed: int) -> None:
    source = records(6_000, partitions=7, keys=900, seed=seed)  # many repeated keys
    saved: list[dict[str, Any]] = []
    table = FakeTable(crash_after=random.Random(seed).randrange(5, 40), busy_every=7)
    loader = Loader(table, Meter(), saved.append, concurrency=3, save_every=50, sleep=lambda s: None)  # type: ignore[arg-type]
    with pytest.raises(Crash):
        loader.run(items(source), lambda: {"records": len(source)})
    start = saved[-1]["records"] if saved else 0
    table.crash_after = None
    again = Loader(table, Meter(), saved.append, concurrency=3, save_every=50, sleep=lambda s: None)  # type: ignore[arg-type]
    again.run(items(source, start), lambda: {"records": len(source)})
    assert table.rows == expected(source)
    assert saved[-1] == {"records": len(source)}


def test_a_refused_record_is_named() -> None:
    class Refusing(FakeTable):
        def upsert_batch(self, bodies: list[tuple[str, str, bytes]]) -> None:
            raise RefusedRequest(400, "PropertyNameInvalid", "bad", index=1)

    source = [("p", "a", b"1"), ("p", "b", b"2")]
    with pytest.raises(LoadFailed, match="PropertyNameInvalid: line 2: bad"):
        Loader(Refusing(), Meter(), None).run(items(source), lambda: {})  # type: ignore[arg-type]
