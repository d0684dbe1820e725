"""Partition insight: what each partition and table costs, and the anti-patterns behind the cost.

Azure's targets are counted in entities per second per partition and per account, and every
scanned entity counts. Whether a design will meet them depends on numbers that are
invisible from the client: how many entities a query *scanned* to return the few it did, which
partition takes most of the traffic, whether inserts walk along increasing PartitionKeys. This
module holds :class:`Insight`, the recorder: it counts them, request by request, keeps the
number of series bounded, and sums the counts of a server's workers. It answers three ways:

* :meth:`Insight.snapshot`, a JSON-ready dict (``GET /metrics?format=json``, ``tabulae top``);
* :meth:`Insight.prometheus`, the Prometheus text exposition format 0.0.4 (``GET /metrics``);
* warnings for the seeds' anti-patterns, in the snapshot and, at most once a minute per
  subject, on the ``tabulae.insight`` logger: a hot partition near or over its target,
  append-only or prepend-only inserts, and table scans of low query density.

The counters themselves live in ``insight.series``, the warnings in ``insight.warnings`` and the
two documents' rendering in ``insight.exposition``.

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
import time
from collections.abc import Callable
from typing import Any

from tabulae.insight.detectors import INSERT_OPS, Detectors
from tabulae.insight.exposition import table_prometheus, table_snapshot
from tabulae.insight.series import OTHER, QUERY_CLASSES, Series, TableSeries
from tabulae.model.edm import utf16_sort_key

__all__ = ["Insight"]

Clock = Callable[[], float]

_QUIET = logging.getLogger("tabulae.insight.view")
_QUIET.disabled = True  # a summed view reports; the processes that counted have logged already


def _keep(name: str) -> str:
    return name


class Insight(Detectors):
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
        store: str = "sqlite",
    ) -> None:
        if window_seconds < 1 or max_partitions < 1 or max_tables < 1 or monotonic_run < 2:
            raise ValueError("window_seconds, max_partitions, max_tables must be ≥ 1; monotonic_run ≥ 2")
        self._clock = clock
        self.store = store
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
        self._accounts: dict[str, Series] = {}
        self._tables: dict[tuple[str, str], TableSeries] = {}
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

    def _account(self, account: str) -> Series:
        stats = self._accounts.get(account)
        if stats is None:
            stats = self._accounts[account] = Series(self.window_seconds)
        return stats

    def _table(self, account: str, table: str, now: float, second: int) -> TableSeries:
        key = (account, table.lower())
        tbl = self._tables.get(key)
        if tbl is None:
            tbl = self._tables[key] = TableSeries(account, table, self.window_seconds, self.scan_history)
            tbl.stats.last_seen = now
            if sum(1 for k in self._tables if k[1] != OTHER) > self.max_tables:
                self._fold_tables(tbl, second)
        return tbl

    def _series(self, tbl: TableSeries, pk: str | None, second: int) -> Series:
        if pk is None:
            if tbl.wide is None:
                tbl.wide = Series(self.window_seconds)
            return tbl.wide
        stats = tbl.partitions.get(pk)
        if stats is None:
            stats = tbl.partitions[pk] = Series(self.window_seconds)
            self._partition_count += 1
            if self._partition_count > self.max_partitions:
                self._fold_partitions(stats, second)
        return stats

    # ------------------------------------------------------------------------------ bounding

    def _fold_partitions(self, keep: Series, second: int) -> None:
        """Fold the least active half of the partitions (never ``keep``) into ``(other)``.

        Half at a time keeps the sort amortised: reads spread over a table of ten thousand
        partitions create a new series on most requests, and folding a small share would sort
        every tracked series again after a few new ones. The partition just created is spared so
        a partition warming up is not folded before it has had a chance to show its load.
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
                tbl.other = Series(self.window_seconds)
            tbl.other.absorb(stats, second)
            self._partition_count -= 1

    def _fold_tables(self, keep: TableSeries, second: int) -> None:
        """Fold the least active tables (never ``keep``) into their account's ``table="(other)"``."""
        real = [t for k, t in self._tables.items() if k[1] != OTHER and t is not keep]
        real.sort(key=lambda t: (t.stats.recent_load(second), t.stats.last_seen))
        excess = len(real) + 1 - self.max_tables
        for tbl in real[: max(excess, self.max_tables // 10, 1)]:
            del self._tables[(tbl.account, tbl.name.lower())]
            self._partition_count -= len(tbl.partitions)
            sink = self._tables.get((tbl.account, OTHER))
            if sink is None:
                sink = self._tables[(tbl.account, OTHER)] = TableSeries(
                    tbl.account, OTHER, self.window_seconds, self.scan_history
                )
            if sink.other is None:
                sink.other = Series(self.window_seconds)
            sink.stats.absorb(tbl.stats, second)
            sink.other.absorb(tbl.stats, second)

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
            store=self.store,
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
                tbl = self._tables[key] = TableSeries(
                    entry["account"], name, self.window_seconds, self.scan_history
                )
            tbl.stats.absorb_state(entry["stats"])
            for pk, stats in entry["partitions"].items():
                series = tbl.partitions.setdefault(rename(pk), Series(self.window_seconds))
                series.absorb_state(stats)
            if entry["other"] is not None:
                tbl.other = tbl.other or Series(self.window_seconds)
                tbl.other.absorb_state(entry["other"])
            if entry["wide"] is not None:
                tbl.wide = tbl.wide or Series(self.window_seconds)
                tbl.wide.absorb_state(entry["wide"])
            if entry["last_pk"] is not None and entry["run"] > tbl.run:
                tbl.last_pk = rename(entry["last_pk"])
                tbl.last_key = utf16_sort_key(tbl.last_pk)
                tbl.direction, tbl.run = entry["direction"], entry["run"]
            tbl.scans.extend(tuple(scan) for scan in entry["scans"])
        self._partition_count = sum(len(tbl.partitions) for tbl in self._tables.values())

    # ------------------------------------------------------------------------------ reporting

    def accounts(self) -> list[tuple[str, Series]]:
        """Each account's series, by name."""
        return [(name, self._accounts[name]) for name in sorted(self._accounts)]

    def tables(self) -> list[TableSeries]:
        """Each table's series, by account and then lower-cased name."""
        return [self._tables[key] for key in sorted(self._tables)]

    def snapshot(self) -> dict[str, Any]:
        """Everything, JSON-ready (``insight.exposition.table_snapshot``)."""
        return table_snapshot(self, math.floor(self._clock()))

    def prometheus(self) -> str:
        """The text exposition format 0.0.4 (``Content-Type: text/plain; version=0.0.4``)."""
        return table_prometheus(self, math.floor(self._clock()))
