"""Partition insight: what each partition and table costs, and the anti-patterns behind the cost.

Azure's targets are counted in entities per second per partition and per account, and every
scanned entity counts. Whether a design will meet them depends on numbers that are
invisible from the client: how many entities a query *scanned* to return the few it did, which
partition takes most of the traffic, whether inserts walk along increasing PartitionKeys. This
module counts them, request by request, and answers three ways:

* :meth:`Insight.snapshot`, a JSON-ready dict (``GET /metrics?format=json``, ``tabulae top``);
* :meth:`Insight.prometheus`, the Prometheus text exposition format 0.0.4 (``GET /metrics``);
* warnings for the seeds' anti-patterns, in the snapshot and, at most once a minute per
  subject, on the ``tabulae.insight`` logger: a hot partition near or over its target,
  append-only or prepend-only inserts, and table scans of low query density.

What the counters mean (the caller reports what actually happened; a failed request, status
400 or more, counts as a request, and as throttled when it was, but never with entities):

===============  ==========================================================================
``written``      entities inserted, updated, merged or deleted (a batch of 100: 100)
``read``         entities read by key (Get Entity): each is delivered *and* examined
``scanned``      entities a query page examined (``EntityPage.scanned``)
``returned``     entities a query page delivered
===============  ==========================================================================

From these the exposed figures are: *read* = ``read + returned`` (delivered to clients),
*scanned* = ``read + scanned`` (examined), *load* = *written* + *scanned* (what counts against
the targets), and *query density* = *read* ÷ *scanned*. Rates are the entities of the last
``window_seconds`` whole seconds divided by ``window_seconds``: a steady 2,000/s shows as
2,000/s after one window, and a short burst is spread over it, as a target is meant.

Memory and label cardinality are bounded: at most ``max_partitions`` partitions are tracked (the
least active, by recent load and then by last use, are folded into ``partition="(other)"`` of
their table), and at most ``max_tables`` tables (the least active fold into ``table="(other)"``).
Requests not addressed to one partition (queries across partitions, table operations) are kept
under ``partition="(table)"``. Folding only moves counts between series, so sums over series
stay exact and monotonic. A real PartitionKey spelled ``(other)`` or ``(table)`` shares that
series; no other key can collide.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from tabulae.model.edm import utf16_sort_key

__all__ = [
    "INSERT_OPS",
    "OTHER",
    "QUERY_CLASSES",
    "TABLE_WIDE",
    "Insight",
    "escape_label_value",
    "json_safe",
]

Clock = Callable[[], float]

QUERY_CLASSES = ("point", "row-range", "partition-scan", "table-scan", "index-scan")
"""The query classes of the partitioning guide, best to worst (as the query planner names them)."""

INSERT_OPS = frozenset({"insert", "upsert", "batch"})
"""Operations whose PartitionKeys feed the append-only / prepend-only detector."""

OTHER = "(other)"
TABLE_WIDE = "(table)"

_QUIET = logging.getLogger("tabulae.insight.view")
_QUIET.disabled = True  # a summed view reports; the processes that counted have logged already

_SURROGATE = re.compile("[\ud800-\udfff]")
_MESSAGE_KEY_CHARS = 64


def escape_label_value(value: str) -> str:
    r"""Escape a label value for the text format 0.0.4: ``\`` → ``\\``, ``"`` → ``\"``, newline → ``\n``.

    Lone surrogates (legal in a PartitionKey, not in UTF-8) become U+FFFD so the exposition
    always encodes; every other character is passed through, as the format allows.
    """
    return json_safe(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def json_safe(value: str) -> str:
    """``value`` with lone surrogates (legal in a PartitionKey, not in UTF-8 JSON) as U+FFFD."""
    return _SURROGATE.sub("\ufffd", value)


def _number(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _short(key: str) -> str:
    """A key safe to print in a log line: repr-escaped (no control characters) and truncated."""
    if len(key) > _MESSAGE_KEY_CHARS:
        key = key[:_MESSAGE_KEY_CHARS] + "…"
    return repr(key)


# ------------------------------------------------------------------------------------ counters


class _Window:
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

    def absorb(self, other: _Window, second: int) -> None:
        for bucket in other.live(second):
            self.add(bucket[0], bucket[1], bucket[2], bucket[3], bucket[4])


class _Stats:
    """Totals since start plus the recent window, for one series (account, table or partition)."""

    __slots__ = ("last_seen", "queries", "read", "requests", "scanned", "throttled", "window", "written")

    def __init__(self, window: int) -> None:
        self.requests = 0
        self.written = 0
        self.read = 0
        self.scanned = 0
        self.throttled = 0
        self.queries: dict[str, int] = {}
        self.window = _Window(window)
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
            # bucket is current and so are the kept sums. Anything else takes _Window.add.
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

    def absorb(self, other: _Stats, second: int) -> None:
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


def _keep(name: str) -> str:
    return name


class _Table:
    """One table's series and detectors."""

    __slots__ = ("account", "direction", "last_key", "last_pk", "name", "other", "partitions", "run",
                 "scans", "stats", "wide")  # fmt: skip

    def __init__(self, account: str, name: str, window: int, scan_history: int) -> None:
        self.account = account
        self.name = name
        self.stats = _Stats(window)
        self.partitions: dict[str, _Stats] = {}
        self.other: _Stats | None = None  # partitions folded away
        self.wide: _Stats | None = None  # requests addressed to no single partition
        self.last_key: bytes | None = None  # the append-only detector: last inserted PartitionKey
        self.last_pk = ""
        self.direction = 0
        self.run = 0
        # (returned, scanned, the property an index could have served: see index_hint)
        self.scans: deque[tuple[int, int, tuple[str, str] | None]] = deque(maxlen=scan_history)

    def series(self) -> Iterator[tuple[str, _Stats]]:
        for pk in sorted(self.partitions, key=utf16_sort_key):
            yield pk, self.partitions[pk]
        if self.other is not None:
            yield OTHER, self.other
        if self.wide is not None:
            yield TABLE_WIDE, self.wide


@dataclass(frozen=True, slots=True)
class _Family:
    name: str
    kind: str
    help: str


_FAMILIES = {
    "requests": _Family("tabulae_requests_total", "counter", "Requests, by the partition they addressed."),
    "written": _Family(
        "tabulae_entities_written_total", "counter", "Entities inserted, updated, merged or deleted."
    ),
    "read": _Family(
        "tabulae_entities_read_total", "counter", "Entities delivered to clients (by key or by query)."
    ),
    "scanned": _Family(
        "tabulae_entities_scanned_total",
        "counter",
        "Entities examined to answer reads; with writes, what counts against the targets.",
    ),
    "queries": _Family(
        "tabulae_queries_total", "counter", "Reads by query class (a read by key is a point query)."
    ),
    "throttled": _Family(
        "tabulae_throttled_total", "counter", "Requests refused for being over a scalability target."
    ),
    "density": _Family(
        "tabulae_query_density", "gauge", "Entities delivered divided by entities scanned, since start."
    ),
    "load": _Family(
        "tabulae_load_entities_per_second",
        "gauge",
        "Entities written or scanned per second over the recent window.",
    ),
    "target": _Family("tabulae_target_entities_per_second", "gauge", "The scalability target, by scope."),
    "warnings": _Family("tabulae_warnings", "gauge", "Active anti-pattern warnings, by kind."),
}


class Insight:
    """Counters, rates and anti-pattern detection for one server process.

    ``partition_target`` and ``account_target`` are the entities/s the hot-partition and
    busy-account warnings compare against (Azure's by default, whether or not they are enforced).
    Not thread-safe: one instance per event loop, which is how the ASGI app uses it.
    """

    def __init__(
        self,
        clock: Clock = time.monotonic,
        *,
        window_seconds: int = 10,
        partition_target: float = 2000.0,
        account_target: float = 20000.0,
        near_target: float = 0.8,
        max_partitions: int = 1000,
        max_tables: int = 1000,
        monotonic_run: int = 16,
        scan_history: int = 20,
        low_density: float = 0.01,
        low_density_min_scanned: int = 1000,
        log_interval: float = 60.0,
        logger: logging.Logger | None = None,
    ) -> None:
        if window_seconds < 1 or max_partitions < 1 or max_tables < 1 or monotonic_run < 2:
            raise ValueError("window_seconds, max_partitions, max_tables must be ≥ 1; monotonic_run ≥ 2")
        self._clock = clock
        self.window_seconds = int(window_seconds)
        self.partition_target = float(partition_target)
        self.account_target = float(account_target)
        self.near_target = near_target
        self.max_partitions = max_partitions
        self.max_tables = max_tables
        self.monotonic_run = monotonic_run
        self.scan_history = scan_history
        self.low_density = low_density
        self.low_density_min_scanned = low_density_min_scanned
        self.log_interval = log_interval
        self._log = logger if logger is not None else logging.getLogger("tabulae.insight")
        self._accounts: dict[str, _Stats] = {}
        self._tables: dict[tuple[str, str], _Table] = {}
        self._partition_count = 0
        self._logged: dict[tuple[str, str, str, str], float] = {}

    # ------------------------------------------------------------------------------ recording

    def record(
        self,
        account: str,
        table: str,
        pk: str | None,
        *,
        op: str,
        written: int = 0,
        read: int = 0,
        scanned: int = 0,
        returned: int = 0,
        query_class: str | None = None,
        index_hint: tuple[str, str] | None = None,
        throttled: bool = False,
        status: int,
    ) -> None:
        """Count one request (see the module docstring for what each number means).

        ``pk`` is the one partition the request addressed, or ``None``. ``op`` names the
        operation (``insert``, ``update``, ``merge``, ``upsert``, ``delete``, ``get``,
        ``query``, ``batch``, ``create-table``, …); inserts, upserts and batches feed the
        append-only detector. ``query_class`` is given for reads: ``point`` for Get Entity, the
        planner's class for a query page. ``index_hint`` is ``(property, Edm type)`` of a
        table scan's filter condition that a property index could serve: when most low-density
        scans of a table have the same one, the warning suggests indexing it.
        """
        if query_class is not None and query_class not in QUERY_CLASSES:
            raise ValueError(f"unknown query class {query_class!r}")
        now = self._clock()
        second = math.floor(now)
        ok = status < 400
        if not ok:
            written = read = scanned = returned = 0
            query_class = None
        delivered = read + returned
        examined = read + scanned
        refused = 1 if throttled else 0
        # The lookups of a known table, partition and account are inlined: this runs per request.
        tbl = self._tables.get((account, table.lower()))
        if tbl is None:
            tbl = self._table(account, table, now, second)
        series = tbl.partitions.get(pk) if pk is not None else None
        if series is None:
            series = self._series(tbl, pk, second)
        account_stats = self._accounts.get(account)
        if account_stats is None:
            account_stats = self._account(account)
        for stats in (account_stats, tbl.stats, series):
            stats.add(now, second, written, delivered, examined, refused, query_class)
        if ok and written and pk is not None and op in INSERT_OPS:
            self._track_insert(tbl, pk, now)
        if query_class == "table-scan":
            tbl.scans.append((returned, scanned, index_hint))
            warning = self._density_warning(tbl)
            if warning is not None:
                self._emit(warning, now)
        if pk is not None and series is tbl.partitions.get(pk):
            warning = self._hot_warning(tbl, pk, series, second, now)
            if warning is not None:
                self._emit(warning, now)
        warning = self._account_warning(account, account_stats, second, now)
        if warning is not None:
            self._emit(warning, now)

    def forget_table(self, account: str, table: str) -> None:
        """Drop a deleted table's series (its counts stay in the account's totals)."""
        tbl = self._tables.pop((account, table.lower()), None)
        if tbl is not None:
            self._partition_count -= len(tbl.partitions)

    def _account(self, account: str) -> _Stats:
        stats = self._accounts.get(account)
        if stats is None:
            stats = self._accounts[account] = _Stats(self.window_seconds)
        return stats

    def _table(self, account: str, table: str, now: float, second: int) -> _Table:
        key = (account, table.lower())
        tbl = self._tables.get(key)
        if tbl is None:
            tbl = self._tables[key] = _Table(account, table, self.window_seconds, self.scan_history)
            tbl.stats.last_seen = now
            if sum(1 for k in self._tables if k[1] != OTHER) > self.max_tables:
                self._fold_tables(tbl, second)
        return tbl

    def _series(self, tbl: _Table, pk: str | None, second: int) -> _Stats:
        if pk is None:
            if tbl.wide is None:
                tbl.wide = _Stats(self.window_seconds)
            return tbl.wide
        stats = tbl.partitions.get(pk)
        if stats is None:
            stats = tbl.partitions[pk] = _Stats(self.window_seconds)
            self._partition_count += 1
            if self._partition_count > self.max_partitions:
                self._fold_partitions(stats, second)
        return stats

    # ------------------------------------------------------------------------------ bounding

    def _fold_partitions(self, keep: _Stats, second: int) -> None:
        """Fold the least active half of the partitions (never ``keep``) into ``(other)``.

        Half at a time keeps the sort amortised: reads spread over a table of ten thousand
        partitions create a new series on most requests, and folding a tenth made every tenth of
        a hundred requests sort a thousand series (a third of a point read's CPU at 10M
        entities). The partition just created is spared so a partition warming up is not folded
        before it has had a chance to show its load.
        """
        candidates = [
            (stats.recent_load(second), stats.last_seen, index, tbl, pk)
            for index, tbl in enumerate(self._tables.values())
            for pk, stats in tbl.partitions.items()
            if stats is not keep
        ]
        candidates.sort(key=lambda c: (c[0], c[1], c[2]))
        count = max(self.max_partitions // 2, self._partition_count - self.max_partitions, 1)
        for _load, _seen, _index, tbl, pk in candidates[:count]:
            stats = tbl.partitions.pop(pk)
            if tbl.other is None:
                tbl.other = _Stats(self.window_seconds)
            tbl.other.absorb(stats, second)
            self._partition_count -= 1

    def _fold_tables(self, keep: _Table, second: int) -> None:
        """Fold the least active tables (never ``keep``) into their account's ``table="(other)"``."""
        real = [t for k, t in self._tables.items() if k[1] != OTHER and t is not keep]
        real.sort(key=lambda t: (t.stats.recent_load(second), t.stats.last_seen))
        excess = len(real) + 1 - self.max_tables
        for tbl in real[: max(excess, self.max_tables // 10, 1)]:
            del self._tables[(tbl.account, tbl.name.lower())]
            self._partition_count -= len(tbl.partitions)
            sink = self._tables.get((tbl.account, OTHER))
            if sink is None:
                sink = self._tables[(tbl.account, OTHER)] = _Table(
                    tbl.account, OTHER, self.window_seconds, self.scan_history
                )
            if sink.other is None:
                sink.other = _Stats(self.window_seconds)
            sink.stats.absorb(tbl.stats, second)
            sink.other.absorb(tbl.stats, second)

    # ------------------------------------------------------------------------------ detectors

    def _track_insert(self, tbl: _Table, pk: str, now: float) -> None:
        """Follow the run of strictly increasing (or decreasing) inserted PartitionKeys.

        Keys compare in the store's ordinal UTF-16 order. Consecutive inserts into the same
        partition are one step: they neither extend nor break the run.
        """
        key = utf16_sort_key(pk)
        last = tbl.last_key
        if last is None:
            tbl.run, tbl.direction = 1, 0
        elif key != last:
            direction = 1 if key > last else -1
            if direction == tbl.direction:
                tbl.run += 1
            else:
                tbl.direction, tbl.run = direction, 2
        tbl.last_key, tbl.last_pk = key, pk
        kind = "append-only" if tbl.direction > 0 else "prepend-only"
        if self._muted(kind, tbl.account, tbl.name, now):
            return
        warning = self._monotonic_warning(tbl)
        if warning is not None:
            self._emit(warning, now)

    def _monotonic_warning(self, tbl: _Table) -> dict[str, Any] | None:
        if tbl.run < self.monotonic_run or tbl.direction == 0:
            return None
        kind = "append-only" if tbl.direction > 0 else "prepend-only"
        trend = "increasing" if tbl.direction > 0 else "decreasing"
        end = "last" if tbl.direction > 0 else "first"
        return {
            "kind": kind,
            "severity": "warning",
            "account": tbl.account,
            "table": tbl.name,
            "partition": json_safe(tbl.last_pk),
            "run": tbl.run,
            "message": (
                f"{kind} inserts into {tbl.account}/{tbl.name}: the last {tbl.run} PartitionKeys "
                f"inserted were strictly {trend} (latest {_short(tbl.last_pk)}), so every insert "
                f"lands on the {end} range partition; spread the keys (e.g. prefix a hash)"
            ),
        }

    def _density_warning(self, tbl: _Table) -> dict[str, Any] | None:
        returned = sum(r for r, _s, _h in tbl.scans)
        scanned = sum(s for _r, s, _h in tbl.scans)
        if scanned < self.low_density_min_scanned or returned >= self.low_density * scanned:
            return None
        density = returned / scanned
        hints = Counter(h for _r, _s, h in tbl.scans if h is not None).most_common(1)
        suggestion = hints[0][0] if hints and 2 * hints[0][1] >= len(tbl.scans) else None
        advice = "query by PartitionKey or denormalise"
        if suggestion is not None:
            advice += (
                f", or index {suggestion[0]}, which most of these scans filter on"
                f" (tabulae index add {tbl.name} {suggestion[0]} --type {suggestion[1]})"
            )
        return {
            "kind": "low-density-scan",
            "severity": "warning",
            "account": tbl.account,
            "table": tbl.name,
            "partition": None,
            "density": density,
            "returned": returned,
            "scanned": scanned,
            "scans": len(tbl.scans),
            "suggested_index": None
            if suggestion is None
            else {"property": suggestion[0], "type": suggestion[1]},
            "message": (
                f"table scans of {tbl.account}/{tbl.name} return {density:.2%} of the entities they "
                f"scan ({returned} of {scanned} over the last {len(tbl.scans)} scans); every scanned "
                f"entity counts against the targets: {advice}"
            ),
        }

    def _hot_warning(
        self, tbl: _Table, pk: str, stats: _Stats, second: int, muted_at: float | None = None
    ) -> dict[str, Any] | None:
        """The partition's warning when it is near or over its target. With ``muted_at`` (the
        time of a request being recorded) None also when the warning was logged within
        ``log_interval``, so that a busy partition's message is not built on every request."""
        written, _read, scanned, throttled = stats.window.sums(second)
        rate = (written + scanned) / self.window_seconds
        ratio = rate / self.partition_target
        if ratio < self.near_target and not throttled:
            return None
        if muted_at is not None and self._muted_partition(tbl, pk, muted_at):
            return None
        over = ratio >= 1.0 or throttled > 0
        where = f"hot partition {_short(pk)} in {tbl.account}/{tbl.name}"
        load = f"{rate:.0f} entities/s, {ratio:.0%} of its target of {self.partition_target:.0f}/s"
        if throttled:
            message = (
                f"{where}: {throttled} request(s) throttled in the last {self.window_seconds} s "
                f"({load} admitted)"
            )
        else:
            message = f"{where}: {load} over the last {self.window_seconds} s"
        message += "; spread the load over more PartitionKeys"
        return {
            "kind": "hot-partition",
            "severity": "over target" if over else "near target",
            "account": tbl.account,
            "table": tbl.name,
            "partition": json_safe(pk),
            "rate": rate,
            "target": self.partition_target,
            "throttled": throttled,
            "message": message,
        }

    def _account_warning(
        self, account: str, stats: _Stats, second: int, muted_at: float | None = None
    ) -> dict[str, Any] | None:
        """The account's warning when it is near or over its target; with ``muted_at``, None
        also while it is muted (as :meth:`_hot_warning`)."""
        written, _read, scanned, _throttled = stats.window.sums(second)
        rate = (written + scanned) / self.window_seconds
        ratio = rate / self.account_target
        if ratio < self.near_target:
            return None
        if muted_at is not None and self._muted("busy-account", account, "", muted_at):
            return None
        return {
            "kind": "busy-account",
            "severity": "over target" if ratio >= 1.0 else "near target",
            "account": account,
            "table": None,
            "partition": None,
            "rate": rate,
            "target": self.account_target,
            "message": (
                f"account {account}: {rate:.0f} entities/s over the last {self.window_seconds} s, "
                f"{ratio:.0%} of its target of {self.account_target:.0f}/s"
            ),
        }

    def _muted(self, kind: str, account: str, table: str, now: float) -> bool:
        """Whether a warning of ``kind`` about this account or table (no partition) was logged
        within ``log_interval``: then it is not even built, which busy load would do per request."""
        last = self._logged.get((kind, account, table.lower(), ""))
        return last is not None and now - last < self.log_interval

    def _muted_partition(self, tbl: _Table, pk: str, now: float) -> bool:
        """Whether the hot-partition warning about ``pk`` was logged within ``log_interval``: a
        partition busy enough to warn about is read thousands of times a second, and building its
        message on each request only for :meth:`_emit` to drop it cost a point read ~10% of its
        CPU. Looked up with the key as given; a key that ``json_safe`` rewrites misses here and is
        then muted by :meth:`_emit` as before."""
        last = self._logged.get(("hot-partition", tbl.account, tbl.name.lower(), pk))
        return last is not None and now - last < self.log_interval

    def _emit(self, warning: dict[str, Any], now: float) -> None:
        """Log a warning, at most once per ``log_interval`` for the same kind and subject."""
        table = warning["table"] or ""
        subject = (warning["kind"], warning["account"], table.lower(), warning["partition"] or "")
        if warning["kind"] in ("append-only", "prepend-only"):
            subject = (warning["kind"], warning["account"], table.lower(), "")
        last = self._logged.get(subject)
        if last is not None and now - last < self.log_interval:
            return
        if len(self._logged) >= 4096:
            self._logged = {k: t for k, t in self._logged.items() if now - t < self.log_interval}
        self._logged[subject] = now
        self._log.warning("%s", warning["message"])

    def warnings(self) -> list[dict[str, Any]]:
        """The warnings that hold now: hot partitions and accounts, monotonic inserts, low density."""
        second = math.floor(self._clock())
        found: list[dict[str, Any]] = []
        for account in sorted(self._accounts):
            warning = self._account_warning(account, self._accounts[account], second)
            if warning is not None:
                found.append(warning)
        for tbl in self._sorted_tables():
            for pk, stats in tbl.partitions.items():
                warning = self._hot_warning(tbl, pk, stats, second)
                if warning is not None:
                    found.append(warning)
            for warning in (self._monotonic_warning(tbl), self._density_warning(tbl)):
                if warning is not None:
                    found.append(warning)
        return found

    # ------------------------------------------------------------------------------ sharing

    def state(self) -> dict[str, Any]:
        """This process's counters and detectors as plain data (lists, dicts, strings, numbers),
        for :meth:`absorb` in the process that answers ``/metrics`` (see ``insight.peers``)."""
        tables = []
        for tbl in self._tables.values():
            tables.append(
                {
                    "account": tbl.account,
                    "name": tbl.name,
                    "stats": tbl.stats.state(),
                    "partitions": {pk: stats.state() for pk, stats in tbl.partitions.items()},
                    "other": None if tbl.other is None else tbl.other.state(),
                    "wide": None if tbl.wide is None else tbl.wide.state(),
                    "last_pk": tbl.last_pk if tbl.last_key is not None else None,
                    "direction": tbl.direction,
                    "run": tbl.run,
                    "scans": list(tbl.scans),
                }
            )
        return {"accounts": {name: stats.state() for name, stats in self._accounts.items()}, "tables": tables}

    def view(self) -> Insight:
        """An empty instance with the same targets and limits, which logs nothing: the sum of
        several processes' :meth:`state` is built in one, then reported as usual."""
        return Insight(
            self._clock,
            window_seconds=self.window_seconds,
            partition_target=self.partition_target,
            account_target=self.account_target,
            near_target=self.near_target,
            max_partitions=self.max_partitions,
            max_tables=self.max_tables,
            monotonic_run=self.monotonic_run,
            scan_history=self.scan_history,
            low_density=self.low_density,
            low_density_min_scanned=self.low_density_min_scanned,
            logger=_QUIET,
        )

    def absorb(
        self,
        state: dict[str, Any],
        rename: Callable[[str], str] = _keep,
        rename_table: Callable[[str], str] | None = None,
    ) -> None:
        """Add another process's :meth:`state`. ``rename`` maps PartitionKeys and, unless
        ``rename_table`` is given, table names (``--metrics-keys hashed``); folded series keep their
        labels. Nothing is folded here: the sum of a few bounded processes is bounded."""
        rename_table = rename_table or rename
        for name, stats in state["accounts"].items():
            self._account(name).absorb_state(stats)
        for entry in state["tables"]:
            name = entry["name"]
            if name != OTHER:
                name = rename_table(name)
            key = (entry["account"], name.lower())
            tbl = self._tables.get(key)
            if tbl is None:
                tbl = self._tables[key] = _Table(
                    entry["account"], name, self.window_seconds, self.scan_history
                )
            tbl.stats.absorb_state(entry["stats"])
            for pk, stats in entry["partitions"].items():
                series = tbl.partitions.setdefault(rename(pk), _Stats(self.window_seconds))
                series.absorb_state(stats)
            if entry["other"] is not None:
                tbl.other = tbl.other or _Stats(self.window_seconds)
                tbl.other.absorb_state(entry["other"])
            if entry["wide"] is not None:
                tbl.wide = tbl.wide or _Stats(self.window_seconds)
                tbl.wide.absorb_state(entry["wide"])
            if entry["last_pk"] is not None and entry["run"] > tbl.run:
                tbl.last_pk = rename(entry["last_pk"])
                tbl.last_key = utf16_sort_key(tbl.last_pk)
                tbl.direction, tbl.run = entry["direction"], entry["run"]
            tbl.scans.extend(tuple(scan) for scan in entry["scans"])
        self._partition_count = sum(len(tbl.partitions) for tbl in self._tables.values())

    # ------------------------------------------------------------------------------ reporting

    def _sorted_tables(self) -> list[_Table]:
        return [self._tables[key] for key in sorted(self._tables)]

    def _figures(self, stats: _Stats, second: int) -> dict[str, Any]:
        written, read, scanned, throttled = stats.window.sums(second)
        seconds = self.window_seconds
        return {
            "requests": stats.requests,
            "written": stats.written,
            "read": stats.read,
            "scanned": stats.scanned,
            "load": stats.written + stats.scanned,
            "throttled": stats.throttled,
            "queries": {name: stats.queries.get(name, 0) for name in QUERY_CLASSES},
            "density": stats.read / stats.scanned if stats.scanned else None,
            "rates": {
                "written": written / seconds,
                "read": read / seconds,
                "scanned": scanned / seconds,
                "load": (written + scanned) / seconds,
                "throttled": throttled / seconds,
            },
        }

    def snapshot(self) -> dict[str, Any]:
        """Everything, JSON-ready: accounts, tables, partitions hottest first, warnings.

        ``partitions`` lists only real partitions, sorted by recent load (then total load);
        each table carries its folded ``other`` and not-one-partition ``table_wide`` figures.
        """
        second = math.floor(self._clock())
        accounts = []
        for name in sorted(self._accounts):
            figures = self._figures(self._accounts[name], second)
            figures["target_ratio"] = figures["rates"]["load"] / self.account_target
            accounts.append({"account": name, **figures})
        tables = []
        partitions = []
        for tbl in self._sorted_tables():
            entry: dict[str, Any] = {
                "account": tbl.account,
                "table": tbl.name,
                **self._figures(tbl.stats, second),
                "partitions": len(tbl.partitions),
                "other": self._figures(tbl.other, second) if tbl.other is not None else None,
                "table_wide": self._figures(tbl.wide, second) if tbl.wide is not None else None,
            }
            tables.append(entry)
            for pk, stats in tbl.partitions.items():
                figures = self._figures(stats, second)
                figures["target_ratio"] = figures["rates"]["load"] / self.partition_target
                partitions.append(
                    {"account": tbl.account, "table": tbl.name, "partition": json_safe(pk), **figures}
                )
        partitions.sort(
            key=lambda p: (-p["rates"]["load"], -p["load"], p["account"], p["table"].lower(),
                           utf16_sort_key(p["partition"]))
        )  # fmt: skip
        return {
            "window_seconds": self.window_seconds,
            "targets": {"partition": self.partition_target, "account": self.account_target},
            "accounts": accounts,
            "tables": tables,
            "partitions": partitions,
            "warnings": self.warnings(),
        }

    def prometheus(self) -> str:
        """The text exposition format 0.0.4 (``Content-Type: text/plain; version=0.0.4``)."""
        second = math.floor(self._clock())
        rows: list[tuple[str, _Stats]] = []
        for tbl in self._sorted_tables():
            prefix = f'account="{escape_label_value(tbl.account)}",table="{escape_label_value(tbl.name)}"'
            for pk, stats in tbl.series():
                rows.append((f'{prefix},partition="{escape_label_value(pk)}"', stats))
        lines: list[str] = []

        def family(key: str) -> _Family:
            fam = _FAMILIES[key]
            lines.append(f"# HELP {fam.name} {fam.help}")
            lines.append(f"# TYPE {fam.name} {fam.kind}")
            return fam

        for key in ("requests", "written", "read", "scanned", "throttled"):
            fam = family(key)
            for labels, stats in rows:
                lines.append(f"{fam.name}{{{labels}}} {getattr(stats, key)}")
        fam = family("queries")
        for labels, stats in rows:
            for name in QUERY_CLASSES:
                count = stats.queries.get(name, 0)
                if count:
                    lines.append(f'{fam.name}{{{labels},class="{name}"}} {count}')
        fam = family("density")
        for labels, stats in rows:
            if stats.scanned:
                lines.append(f"{fam.name}{{{labels}}} {_number(stats.read / stats.scanned)}")
        fam = family("load")
        for labels, stats in rows:
            lines.append(f"{fam.name}{{{labels}}} {_number(stats.recent_load(second) / self.window_seconds)}")
        fam = family("target")
        lines.append(f'{fam.name}{{scope="partition"}} {_number(self.partition_target)}')
        lines.append(f'{fam.name}{{scope="account"}} {_number(self.account_target)}')
        fam = family("warnings")
        kinds: dict[str, int] = {}
        for warning in self.warnings():
            kinds[warning["kind"]] = kinds.get(warning["kind"], 0) + 1
        for kind in ("hot-partition", "busy-account", "append-only", "prepend-only", "low-density-scan"):
            lines.append(f'{fam.name}{{kind="{kind}"}} {kinds.get(kind, 0)}')
        return "\n".join(lines) + "\n"
