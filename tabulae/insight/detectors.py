"""The Table service's design warnings: which anti-patterns a recorder's series show, and when to say so.

A design that misses Azure's targets usually shows it early, in numbers a client cannot see:
one partition near or over its target (hot partition), the whole account near its own
(busy account), inserts whose PartitionKeys only ever increase or decrease (append-only,
prepend-only: Azure range-partitions a table by PartitionKey, so every insert lands on the last
or first range partition, one partition server; the warning also says what the store in use does
with them, which is why this server may not show the cost), and table scans that
examine many entities to return few (low query density). The checks run as requests are
recorded and again for every snapshot; a warning is logged on the ``tabulae.insight`` logger at
most once per ``log_interval`` for the same kind and subject, and while it is muted it is not
even built, since a subject worth warning about is usually busy.

:class:`Detectors` is a base class of ``insight.partitions.Insight`` rather than an object it
holds: the checks read the recorder's settings and series, and two of them run on every
request, where a method of the recorder itself costs no extra lookup.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable
from typing import Any

from tabulae.insight.exposition import json_safe
from tabulae.insight.series import Series, TableSeries
from tabulae.model.edm import utf16_sort_key

__all__ = ["INSERT_OPS", "Detectors"]

INSERT_OPS = frozenset({"insert", "upsert", "batch"})
"""Operations whose PartitionKeys feed the append-only / prepend-only detector."""

_MESSAGE_KEY_CHARS = 64

_LOCAL_ORDERED_INSERTS: dict[str, str] = {
    "sqlite": "here SQLite puts them on the {side}most leaf of one B-tree, which does not slow it",
    "postgres": (
        "here PostgreSQL puts them on the {side}most leaf of the key index, a lesser hot spot"
        " (concurrent inserts wait for that one page)"
    ),
    "citus": "here Citus spreads them over its shards by a hash of the PartitionKey, so none is hot",
}
"""What each store does locally with inserts in key order, for the append-only / prepend-only
warning (``{side}`` is "right" or "left"): the user's production is Azure, where the pattern
matters, but the numbers they see here are this store's."""


def _short(key: str) -> str:
    """A key safe to print in a log line: repr-escaped (no control characters) and truncated."""
    if len(key) > _MESSAGE_KEY_CHARS:
        key = key[:_MESSAGE_KEY_CHARS] + "…"
    return repr(key)


class Detectors:
    """The anti-pattern checks and the muted log of a recorder (see the module docstring).

    The recorder sets these attributes; the checks only read them, except ``_logged``.
    """

    store: str
    window_seconds: int
    partition_target: float
    account_target: float
    near_target: float
    monotonic_run: int
    low_density: float
    low_density_min_scanned: int
    log_interval: float
    _clock: Callable[[], float]
    _log: logging.Logger
    _logged: dict[tuple[str, str, str, str], float]
    _accounts: dict[str, Series]
    _tables: dict[tuple[str, str], TableSeries]

    def _track_insert(self, tbl: TableSeries, pk: str, now: float) -> None:
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

    def _monotonic_warning(self, tbl: TableSeries) -> dict[str, Any] | None:
        if tbl.run < self.monotonic_run or tbl.direction == 0:
            return None
        kind = "append-only" if tbl.direction > 0 else "prepend-only"
        trend = "increasing" if tbl.direction > 0 else "decreasing"
        end = "last" if tbl.direction > 0 else "first"
        local = _LOCAL_ORDERED_INSERTS.get(self.store)
        here = "" if local is None else "; " + local.format(side="right" if tbl.direction > 0 else "left")
        return {
            "kind": kind,
            "severity": "warning",
            "account": tbl.account,
            "table": tbl.name,
            "partition": json_safe(tbl.last_pk),
            "run": tbl.run,
            "message": (
                f"{kind} inserts into {tbl.account}/{tbl.name}: the last {tbl.run} PartitionKeys "
                f"inserted were strictly {trend} (latest {_short(tbl.last_pk)}), so on Azure, which "
                f"range-partitions by PartitionKey, every insert lands on the {end} range partition "
                f"(one partition server){here}; spread the keys (e.g. prefix a hash)"
            ),
        }

    def _density_warning(self, tbl: TableSeries) -> dict[str, Any] | None:
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
        self, tbl: TableSeries, pk: str, stats: Series, second: int, muted_at: float | None = None
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
        self, account: str, stats: Series, second: int, muted_at: float | None = None
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

    def _muted_partition(self, tbl: TableSeries, pk: str, now: float) -> bool:
        """Whether the hot-partition warning about ``pk`` was logged within ``log_interval``: a
        partition busy enough to warn about is read thousands of times a second, and building its
        message on each request only for :meth:`_emit` to drop it would cost far more than this
        lookup. Looked up with the key as given; a key that ``json_safe`` rewrites misses here and
        is then muted by :meth:`_emit` as before."""
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
        for tbl in [self._tables[key] for key in sorted(self._tables)]:
            for pk, stats in tbl.partitions.items():
                warning = self._hot_warning(tbl, pk, stats, second)
                if warning is not None:
                    found.append(warning)
            for warning in (self._monotonic_warning(tbl), self._density_warning(tbl)):
                if warning is not None:
                    found.append(warning)
        return found
