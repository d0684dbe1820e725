"""Loading entities into a table: full entity group transactions, sent concurrently, resumable.

**Batching.** Records are read in order and kept in one buffer per PartitionKey (a later record
of a key replaces the buffered one, as writing them one by one would). A buffer that reaches 100
entities or 4 MiB is sent as one entity group transaction of Insert Or Replace operations; when
the buffers together pass ``max_buffered`` bytes, the largest are sent as they are, and at the
end of the input every buffer is. Up to ``concurrency`` batches are in flight at once; batches of
one partition may overlap only when they share no RowKey, so two writes of one key always
arrive in input order. Since a source's records are rarely sorted by partition (and a copy's
pages are), this fills batches of 100 from files of many interleaved partitions, where cutting
the input into fixed slices would send batches of a few entities.

**Retries.** A batch answered 500 or 503 (``ServerBusy``, ``OperationTimedOut``,
``InternalError``), 408, 429, or not answered at all, is sent again after an exponential back-off
with jitter (``wire.with_retries``: 0.25 s doubling to 20 s, 10 tries). Any other refusal stops
the load, naming the record the service refused.

**Resuming.** Every record carries the source position that reads it again (a file's byte offset
and record number; for a copy, the continuation of the page it came on). The *watermark* is the
position of the oldest record not yet acknowledged, buffered or in flight: every record before it
is in the table. It is written to the resume file (a temporary file, fsynced, renamed over the
old one) every ``save_every`` acknowledged records and at the end. Interrupted however (Ctrl-C,
a kill, a crash, a lost connection), the load resumes from the last watermark written. Nothing is
lost: every record from there on is read and sent again. Nothing is duplicated: every operation
is an upsert keyed by PartitionKey and RowKey, so a record sent twice writes the same entity
twice, and since each key's records are sent in input order on every run, the last record of a
key is the one that stays, as in an uninterrupted load.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from functools import partial
from typing import Any

from azure.core.exceptions import ServiceRequestError, ServiceResponseError

from tabulae.tools.failures import Failure, connection_code
from tabulae.tools.progress import Meter
from tabulae.tools.wire import BATCH_BYTES, BATCH_OPERATIONS, RefusedRequest, TableWire, with_retries

MAX_BUFFERED = 128 * 1024 * 1024  # bytes of entity bodies held back to fill batches
SAVE_EVERY = 5_000  # acknowledged records between two writes of the resume file
FRAMING = 300  # bytes of multipart framing per operation, counted against the 4 MiB of a batch


class LoadFailed(Failure):
    """A record the service refused for good (Azure's code; the message names the record), or a
    batch that got no answer however often it was sent."""


@dataclass(slots=True)
class Item:
    """One record on its way: its place in the input, where to read it again, and its body."""

    seq: int
    position: dict[str, Any]  # the source position from which this record is read again
    pk: str
    rk: str
    body: bytes
    where: str  # "line 12", "row 3", "source entity ('p', 'r')"


class Loader:
    """Loads a stream of :class:`Item` into ``wire``'s table (see the module docstring)."""

    def __init__(
        self,
        wire: TableWire,
        meter: Meter,
        save: Callable[[dict[str, Any]], None] | None,
        *,
        concurrency: int = 4,
        max_buffered: int = MAX_BUFFERED,
        save_every: int = SAVE_EVERY,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.wire = wire
        self.meter = meter
        self.save = save
        self.concurrency = max(1, concurrency)
        self.max_buffered = max_buffered
        self.save_every = save_every
        self.sleep = sleep
        self.buffers: dict[str, dict[str, Item]] = {}
        self.buffer_bytes: dict[str, int] = {}
        self.buffered = 0
        self.ready: dict[str, None] = {}  # partitions with a batch to send, in the order they filled
        self.in_flight: dict[Future[None], list[Item]] = {}
        self.flying_keys: dict[str, set[str]] = {}
        self.pending: dict[int, Item] = {}  # every record read and not yet acknowledged
        self.order: list[int] = []  # a heap of their seqs (stale ones skipped lazily)
        self.unsaved = 0

    # ------------------------------------------------------------------------------- running

    def run(self, items: Iterable[Item], end: Callable[[], dict[str, Any]]) -> None:
        """Load every item, then save ``end()`` (the position after the last record)."""
        with ThreadPoolExecutor(self.concurrency, thread_name_prefix="load") as pool:
            try:
                for item in items:
                    self._add(item)
                    if self.ready or (self.in_flight and any(f.done() for f in self.in_flight)):
                        self._dispatch(pool, final=False)
                while self.buffers or self.in_flight:
                    self._dispatch(pool, final=True)
                    if self.in_flight:
                        self._collect(block=True)
            except BaseException:
                for future in self.in_flight:
                    future.cancel()
                raise
        if self.save is not None:
            self.save(end())

    def _add(self, item: Item) -> None:
        buffer = self.buffers.setdefault(item.pk, {})
        older = buffer.pop(item.rk, None)
        if older is not None:  # the later record of a key replaces the buffered one
            self._forget(older)
            self.buffer_bytes[item.pk] -= len(older.body) + FRAMING
            self.buffered -= len(older.body) + FRAMING
        buffer[item.rk] = item
        size = len(item.body) + FRAMING
        self.buffer_bytes[item.pk] = self.buffer_bytes.get(item.pk, 0) + size
        self.buffered += size
        self.pending[item.seq] = item
        heapq.heappush(self.order, item.seq)
        if len(buffer) >= BATCH_OPERATIONS or self.buffer_bytes[item.pk] >= BATCH_BYTES:
            self.ready[item.pk] = None
        if self.buffered > self.max_buffered:
            self._force()

    def _force(self) -> None:
        """Too much held back: mark the largest buffers for sending as they are, down to 3/4."""
        goal = self.buffered - self.max_buffered * 3 // 4
        for pk in sorted(self.buffer_bytes, key=self.buffer_bytes.__getitem__, reverse=True):
            if goal <= 0:
                break
            self.ready[pk] = None
            goal -= self.buffer_bytes[pk]

    def _forget(self, item: Item) -> None:
        del self.pending[item.seq]
        self.unsaved += 1

    # ----------------------------------------------------------------------------- batching

    def _take(self, pk: str) -> list[Item] | None:
        """Up to one batch of ``pk``'s buffer that overlaps no batch in flight, else ``None``."""
        buffer = self.buffers[pk]
        flying = self.flying_keys.get(pk, ())
        batch: list[Item] = []
        size = 0
        for rk, item in buffer.items():
            if rk in flying:
                break  # this key waits: its earlier record is in flight
            if len(batch) == BATCH_OPERATIONS or size + len(item.body) + FRAMING > BATCH_BYTES:
                break
            batch.append(item)
            size += len(item.body) + FRAMING
        return batch or None

    def _dispatch(self, pool: ThreadPoolExecutor, final: bool) -> None:
        """Send ready batches while there is room in flight, collecting finished ones; wait
        for room only when holding back more is not allowed (over the cap, or at the end)."""
        if final:
            for pk in self.buffers:
                self.ready[pk] = None
        self._collect(block=False)
        blocked: list[str] = []
        while self.ready:
            if len(self.in_flight) >= self.concurrency:
                if not (final or self.buffered > self.max_buffered):
                    break
                self._collect(block=True)
                continue
            pk = next(iter(self.ready))
            del self.ready[pk]
            if pk not in self.buffers:
                continue
            batch = self._take(pk)
            if batch is None:
                blocked.append(pk)
                continue
            self._send(pool, pk, batch)
            buffer = self.buffers.get(pk)
            if buffer and (final or len(buffer) >= BATCH_OPERATIONS or self.buffer_bytes[pk] >= BATCH_BYTES):
                self.ready[pk] = None
        for pk in blocked:
            self.ready[pk] = None
        if blocked and self.in_flight and (final or self.buffered > self.max_buffered):
            self._collect(block=True)  # what they wait for is in flight

    def _send(self, pool: ThreadPoolExecutor, pk: str, batch: list[Item]) -> None:
        buffer = self.buffers[pk]
        for item in batch:
            del buffer[item.rk]
            size = len(item.body) + FRAMING
            self.buffer_bytes[pk] -= size
            self.buffered -= size
        if not buffer:
            del self.buffers[pk]
            del self.buffer_bytes[pk]
        self.flying_keys.setdefault(pk, set()).update(item.rk for item in batch)
        self.in_flight[pool.submit(self._transact, batch)] = batch

    def _transact(self, batch: list[Item]) -> None:
        """One batch, until acknowledged (retrying transient failures), in a worker thread."""
        bodies = [(item.pk, item.rk, item.body) for item in batch]
        try:
            upsert = partial(self.wire.upsert_batch, bodies)
            with_retries(upsert, self.meter.retried, self.sleep, reached=lambda: self.wire.reached)
        except RefusedRequest as error:
            index = error.index
            where = batch[index].where if index is not None and index < len(batch) else None
            named = f"{where}: " if where else f"{batch[0].where} (a batch of {len(batch)}): "
            raise LoadFailed(error.code, f"{named}{error.message}") from None
        except (ServiceRequestError, ServiceResponseError) as error:
            raise LoadFailed(
                connection_code(error), f"{batch[0].where}: no answer from the service"
            ) from None

    # ---------------------------------------------------------------------- acknowledgements

    def _collect(self, block: bool) -> None:
        if not self.in_flight:
            return
        done, _ = wait(list(self.in_flight), timeout=None if block else 0, return_when=FIRST_COMPLETED)
        for future in done:
            batch = self.in_flight.pop(future)
            future.result()  # raises LoadFailed
            pk = batch[0].pk
            flying = self.flying_keys[pk]
            flying.difference_update(item.rk for item in batch)
            if not flying:
                del self.flying_keys[pk]
            for item in batch:
                self._forget(item)
            self.meter.advance(len(batch), batch[-1].position.get("offset"))
        if self.save is not None and self.unsaved >= self.save_every:
            watermark = self._watermark()
            if watermark is not None:
                self.save(watermark)
                self.unsaved = 0

    def _watermark(self) -> dict[str, Any] | None:
        """The position of the oldest record not yet acknowledged (``None``: all are, so the
        position after the last one, which only the end knows)."""
        while self.order and self.order[0] not in self.pending:
            heapq.heappop(self.order)
        if not self.order:
            return None
        return self.pending[self.order[0]].position
