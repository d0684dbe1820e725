"""The counted series of the Table service's insight, their sums, and their plain-data form.

A *series* is what one account, table or partition has cost: totals since start plus per-second
sums over the last ``window_seconds``, from which rates and the warnings' loads are read. This
module holds those counters and nothing that decides or renders, so that the recorder
(``insight.partitions``), the detectors (``insight.warnings``) and the exporters
(``insight.exposition``) share one definition of what a count means; it also holds their plain
data form (:meth:`Series.state`), which each worker hands to the one that sums them.

Folding only moves counts between series, so sums over series stay exact and monotonic; the
labels of the series folded into are :data:`OTHER` (shared by the queue and container counters)
and :data:`TABLE_WIDE`.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator
from typing import Any

from tabulae.model.edm import utf16_sort_key

__all__ = ["OTHER", "QUERY_CLASSES", "TABLE_WIDE", "Series", "TableSeries", "Window"]

QUERY_CLASSES = ("point", "row-range", "partition-scan", "table-scan", "index-scan")
"""The query classes of the partitioning guide, best to worst (as the query planner names them)."""

OTHER = "(other)"
"""The label of the series that the least active ones are folded into, to bound cardinality."""

TABLE_WIDE = "(table)"
"""The partition label of requests addressed to no single partition of a table."""


class Window:
    """Per-second sums of (written, read, scanned, throttled) over the last ``size`` seconds.

    The sums of the newest second asked for are kept up to date as counts arrive, so the
    warning checks that run on every request add four integers instead of walking the window.
    """

    __slots__ = ("_buckets", "_size", "_sums", "_sums_second")

    def __init__(self, size: int) -> None:
        self._size = size
        self._buckets: list[list[int]] = [[-1, 0, 0, 0, 0] for _ in range(size)]
        self._sums_second = -1
        self._sums = [0, 0, 0, 0]

    def add(self, second: int, written: int, read: int, scanned: int, throttled: int) -> None:
        bucket = self._buckets[second % self._size]
        if bucket[0] != second:
            if bucket[0] > second:
                return  # older than the window this bucket now holds
            bucket[:] = [second, 0, 0, 0, 0]
        bucket[1] += written
        bucket[2] += read
        bucket[3] += scanned
        bucket[4] += throttled
        if second > self._sums_second:
            self._sums_second = -1  # a new second: the kept sums are stale
        elif second > self._sums_second - self._size:
            sums = self._sums
            sums[0] += written
            sums[1] += read
            sums[2] += scanned
            sums[3] += throttled

    def live(self, second: int) -> Iterator[list[int]]:
        oldest = second - self._size
        for bucket in self._buckets:
            if oldest < bucket[0] <= second:
                yield bucket

    def sums(self, second: int) -> tuple[int, int, int, int]:
        if second != self._sums_second:
            sums = [0, 0, 0, 0]
            for bucket in self.live(second):
                sums[0] += bucket[1]
                sums[1] += bucket[2]
                sums[2] += bucket[3]
                sums[3] += bucket[4]
            self._sums, self._sums_second = sums, second
        written, read, scanned, throttled = self._sums
        return written, read, scanned, throttled

    def absorb(self, other: Window, second: int) -> None:
        for bucket in other.live(second):
            self.add(bucket[0], bucket[1], bucket[2], bucket[3], bucket[4])


class Series:
    """Totals since start plus the recent window, for one series (account, table or partition)."""

    __slots__ = ("last_seen", "queries", "read", "requests", "scanned", "throttled", "window", "written")

    def __init__(self, window: int) -> None:
        self.requests = 0
        self.written = 0
        self.read = 0
        self.scanned = 0
        self.throttled = 0
        self.queries: dict[str, int] = {}
        self.window = Window(window)
        self.last_seen = -math.inf

    def add(
        self,
        now: float,
        second: int,
        written: int,
        read: int,
        scanned: int,
        throttled: int,
        query_class: str | None,
    ) -> None:
        self.requests += 1
        self.written += written
        self.read += read
        self.scanned += scanned
        self.throttled += throttled
        if query_class is not None:
            queries = self.queries
            queries[query_class] = queries.get(query_class, 0) + 1
        window = self.window
        bucket = window._buckets[second % window._size]
        if bucket[0] == second and second == window._sums_second:
            # The common case, inlined (this runs three times per request): the second's
            # bucket is current and so are the kept sums. Anything else takes Window.add.
            bucket[1] += written
            bucket[2] += read
            bucket[3] += scanned
            bucket[4] += throttled
            sums = window._sums
            sums[0] += written
            sums[1] += read
            sums[2] += scanned
            sums[3] += throttled
        else:
            window.add(second, written, read, scanned, throttled)
        self.last_seen = now

    def absorb(self, other: Series, second: int) -> None:
        self.requests += other.requests
        self.written += other.written
        self.read += other.read
        self.scanned += other.scanned
        self.throttled += other.throttled
        for name, count in other.queries.items():
            self.queries[name] = self.queries.get(name, 0) + count
        self.window.absorb(other.window, second)
        self.last_seen = max(self.last_seen, other.last_seen)

    def recent_load(self, second: int) -> int:
        written, _read, scanned, _throttled = self.window.sums(second)
        return written + scanned

    def state(self) -> tuple[Any, ...]:
        """Plain data (for another process to :meth:`absorb_state`)."""
        buckets = [list(b) for b in self.window._buckets if b[0] >= 0]
        return (self.requests, self.written, self.read, self.scanned, self.throttled, dict(self.queries),
                buckets, self.last_seen)  # fmt: skip

    def absorb_state(self, state: tuple[Any, ...]) -> None:
        """Add another process's counts (from :meth:`state`) to these."""
        requests, written, read, scanned, throttled, queries, buckets, last_seen = state
        self.requests += requests
        self.written += written
        self.read += read
        self.scanned += scanned
        self.throttled += throttled
        for name, count in queries.items():
            self.queries[name] = self.queries.get(name, 0) + count
        for bucket in buckets:
            self.window.add(bucket[0], bucket[1], bucket[2], bucket[3], bucket[4])
        self.last_seen = max(self.last_seen, last_seen)


class TableSeries:
    """One table's series: its own, its partitions', the folded and table-wide ones, and the state
    the insert-order and scan-density detectors keep about it (``insight.warnings``)."""

    __slots__ = ("account", "direction", "last_key", "last_pk", "name", "other", "partitions", "run",
                 "scans", "stats", "wide")  # fmt: skip

    def __init__(self, account: str, name: str, window: int, scan_history: int) -> None:
        self.account = account
        self.name = name
        self.stats = Series(window)
        self.partitions: dict[str, Series] = {}
        self.other: Series | None = None  # partitions folded away
        self.wide: Series | None = None  # requests addressed to no single partition
        self.last_key: bytes | None = None  # the append-only detector: last inserted PartitionKey
        self.last_pk = ""
        self.direction = 0
        self.run = 0
        # (returned, scanned, the property an index could have served: see index_hint)
        self.scans: deque[tuple[int, int, tuple[str, str] | None]] = deque(maxlen=scan_history)

    def series(self) -> Iterator[tuple[str, Series]]:
        """Each partition's series in key order, then the folded and the table-wide ones."""
        for pk in sorted(self.partitions, key=utf16_sort_key):
            yield pk, self.partitions[pk]
        if self.other is not None:
            yield OTHER, self.other
        if self.wide is not None:
            yield TABLE_WIDE, self.wide
