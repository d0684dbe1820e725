"""Queue insight: what each queue carries, how fast it moves, and messages that keep failing.

Two sources meet here. Requests are counted in the process as they happen (:meth:`QueueInsight.record`):
messages put, taken by Get Messages, peeked, updated and deleted, and throttled requests, with
their rates over the last ``window_seconds``. What only the store knows is read at scrape time
(``storage.queues.QueueStats``): each queue's depth, its visible messages, the age of its oldest
visible message, and how many of its messages were dequeued more than ``poison_threshold`` times.

A message dequeued again and again is a *poison message*: every consumer that takes it fails
and lets it reappear. Azure Functions moves such a message to a ``-poison`` queue after 5
dequeues; code without that safeguard retries it forever. A queue holding any is warned about.
A queue near or over its target (2,000 messages/s) is warned about too.

Output: :meth:`QueueInsight.snapshot` (JSON-ready, ``GET /metrics?format=json``) and
:meth:`QueueInsight.prometheus` (text format 0.0.4, ``GET /metrics``). At most ``max_queues``
queues are tracked per process; the least recently used fold into ``queue="(other)"``.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Any

from tabulae.insight.exposition import escape_label_value, family
from tabulae.insight.series import OTHER
from tabulae.model.queues import QueueStats

Clock = Callable[[], float]

_QUIET = logging.getLogger("tabulae.insight.view")
_QUIET.disabled = True  # a summed view reports; the processes that counted have logged already


def _keep(name: str) -> str:
    return name


OPS = ("put", "get", "peek", "update", "delete")
_RATED = ("put", "get", "delete", "throttled")  # the windowed rates


class _Series:
    """One queue's totals since start, and per-second sums of the rated counts."""

    __slots__ = ("buckets", "checked", "counts", "last_seen", "requests", "throttled")

    def __init__(self, window: int) -> None:
        self.checked = -1  # the second the hot-queue warning was last looked at
        self.requests = 0
        self.throttled = 0
        self.counts = dict.fromkeys(OPS, 0)
        self.buckets: list[list[int]] = [[-1, 0, 0, 0, 0] for _ in range(window)]
        self.last_seen = -math.inf

    def add(self, second: int, op: str, messages: int, throttled: bool) -> None:
        self.requests += 1
        self.throttled += throttled
        if op in self.counts:
            self.counts[op] += messages
        bucket = self.buckets[second % len(self.buckets)]
        if bucket[0] != second:
            if bucket[0] > second:
                return
            bucket[:] = [second, 0, 0, 0, 0]
        if op in _RATED:
            bucket[1 + _RATED.index(op)] += messages
        bucket[4] += throttled

    def rates(self, second: int) -> dict[str, float]:
        window = len(self.buckets)
        sums = [0, 0, 0, 0]
        for bucket in self.buckets:
            if second - window < bucket[0] <= second:
                for index in range(4):
                    sums[index] += bucket[1 + index]
        return {name: sums[index] / window for index, name in enumerate(_RATED)}

    def absorb(self, other: _Series) -> None:
        self.requests += other.requests
        self.throttled += other.throttled
        for op, count in other.counts.items():
            self.counts[op] += count
        self.last_seen = max(self.last_seen, other.last_seen)

    def state(self) -> tuple[Any, ...]:
        buckets = [list(b) for b in self.buckets if b[0] >= 0]
        return self.requests, self.throttled, dict(self.counts), buckets, self.last_seen

    def absorb_state(self, state: tuple[Any, ...]) -> None:
        """Add another process's counts (from :meth:`state`), per-second sums included."""
        requests, throttled, counts, buckets, last_seen = state
        self.requests += requests
        self.throttled += throttled
        for op, count in counts.items():
            self.counts[op] = self.counts.get(op, 0) + count
        for second, *sums in buckets:
            bucket = self.buckets[second % len(self.buckets)]
            if bucket[0] != second:
                if bucket[0] > second:
                    continue
                bucket[:] = [second, 0, 0, 0, 0]
            for index, value in enumerate(sums):
                bucket[1 + index] += value
        self.last_seen = max(self.last_seen, last_seen)


class QueueInsight:
    """Counters, rates and warnings of the queues one process serves (not thread-safe: one per
    event loop, as the front-end uses it)."""

    def __init__(
        self,
        clock: Clock = time.monotonic,
        *,
        window_seconds: int = 10,
        queue_target: float = 2000.0,
        poison_threshold: int = 5,
        near_target: float = 0.8,
        max_queues: int = 1000,
        log_interval: float = 60.0,
        logger: logging.Logger | None = None,
    ) -> None:
        if window_seconds < 1 or max_queues < 1 or poison_threshold < 1:
            raise ValueError("window_seconds, max_queues and poison_threshold must be at least 1")
        self._clock = clock
        self.window_seconds = window_seconds
        self.queue_target = float(queue_target)
        self.poison_threshold = poison_threshold
        self.near_target = near_target
        self.max_queues = max_queues
        self.log_interval = log_interval
        self._log = logger if logger is not None else logging.getLogger("tabulae.insight")
        self._series: dict[tuple[str, str], _Series] = {}
        self._poison_seen: dict[tuple[str, str], int] = {}  # poison dequeues seen by this process
        self._logged: dict[tuple[str, str, str], float] = {}

    # ------------------------------------------------------------------------------ recording

    def record(
        self,
        account: str,
        queue: str,
        *,
        op: str,
        messages: int = 0,
        dequeue_counts: tuple[int, ...] = (),
        throttled: bool = False,
        status: int,
    ) -> None:
        """Count one request: ``op`` is one of :data:`OPS` (or another name, counted as a request
        only); ``messages`` how many it carried; ``dequeue_counts`` those of the messages a Get
        returned, for the poison detector. A failed request (status 400 or more) carries none."""
        now = self._clock()
        second = math.floor(now)
        if status >= 400:
            messages, dequeue_counts = 0, ()
        series = self._queue(account, queue, second)
        series.add(second, op, messages, throttled)
        series.last_seen = now
        poison = sum(1 for count in dequeue_counts if count > self.poison_threshold)
        if poison:
            key = (account, queue)
            self._poison_seen[key] = self._poison_seen.get(key, 0) + poison
            self._emit(
                "poison-messages",
                account,
                queue,
                now,
                f"queue {account}/{queue}: {poison} message(s) dequeued more than {self.poison_threshold} "
                "times were handed out again; a consumer keeps failing on them (move them to a poison "
                "queue after a few attempts)",
            )
        if op in _RATED and series.checked != second:  # once a second is enough for a log line
            series.checked = second
            warning = self._hot_warning(account, queue, series.rates(second))
            if warning is not None:
                self._emit("hot-queue", account, queue, now, warning["message"])

    def forget_queue(self, account: str, queue: str) -> None:
        """Drop a deleted queue's series."""
        self._series.pop((account, queue), None)
        self._poison_seen.pop((account, queue), None)

    def _queue(self, account: str, queue: str, second: int) -> _Series:
        key = (account, queue)
        series = self._series.get(key)
        if series is None:
            if len(self._series) >= self.max_queues:
                self._fold(account)
            series = self._series[key] = _Series(self.window_seconds)
        return series

    def _fold(self, account: str) -> None:
        """Fold the least recently used tenth of the queues into their account's ``(other)``."""
        real = sorted((s.last_seen, k) for k, s in self._series.items() if k[1] != OTHER)
        for _seen, key in real[: max(len(real) // 10, 1)]:
            folded = self._series.pop(key)
            sink = self._series.setdefault((key[0], OTHER), _Series(self.window_seconds))
            sink.absorb(folded)

    # ------------------------------------------------------------------------------ sharing

    def state(self) -> dict[str, Any]:
        """This process's counters as plain data, for :meth:`absorb` in another (``insight.peers``)."""
        return {
            "series": [(account, queue, s.state()) for (account, queue), s in self._series.items()],
            "poison": [(account, queue, n) for (account, queue), n in self._poison_seen.items()],
        }

    def view(self) -> QueueInsight:
        """An empty instance with the same settings, logging nothing, to sum states in."""
        return QueueInsight(
            self._clock,
            window_seconds=self.window_seconds,
            queue_target=self.queue_target,
            poison_threshold=self.poison_threshold,
            near_target=self.near_target,
            max_queues=self.max_queues,
            logger=_QUIET,
        )

    def absorb(self, state: dict[str, Any], rename: Callable[[str], str] = _keep) -> None:
        """Add another process's :meth:`state`; ``rename`` maps queue names (``--metrics-keys``)."""
        for account, queue, series in state["series"]:
            key = (account, queue if queue == OTHER else rename(queue))
            target = self._series.get(key)
            if target is None:
                target = self._series[key] = _Series(self.window_seconds)
            target.absorb_state(series)
        for account, queue, count in state["poison"]:
            key = (account, rename(queue))
            self._poison_seen[key] = self._poison_seen.get(key, 0) + count

    # ------------------------------------------------------------------------------ warnings

    def _hot_warning(self, account: str, queue: str, rates: dict[str, float]) -> dict[str, Any] | None:
        rate = rates["put"] + rates["get"] + rates["delete"]
        ratio = rate / self.queue_target
        if ratio < self.near_target and not rates["throttled"]:
            return None
        return {
            "kind": "hot-queue",
            "severity": "over target" if ratio >= 1.0 or rates["throttled"] else "near target",
            "account": account,
            "queue": queue,
            "rate": rate,
            "target": self.queue_target,
            "message": (
                f"hot queue {account}/{queue}: {rate:.0f} messages/s over the last {self.window_seconds} s, "
                f"{ratio:.0%} of its target of {self.queue_target:.0f}/s; spread the work over more queues"
            ),
        }

    def _poison_warning(self, stats: QueueStats) -> dict[str, Any] | None:
        if not stats.poison:
            return None
        return {
            "kind": "poison-messages",
            "severity": "warning",
            "account": stats.account,
            "queue": stats.queue,
            "poison": stats.poison,
            "threshold": self.poison_threshold,
            "message": (
                f"queue {stats.account}/{stats.queue} holds {stats.poison} message(s) dequeued more than "
                f"{self.poison_threshold} times: consumers keep failing on them"
            ),
        }

    def _emit(self, kind: str, account: str, queue: str, now: float, message: str) -> None:
        subject = (kind, account, queue)
        last = self._logged.get(subject)
        if last is not None and now - last < self.log_interval:
            return
        if len(self._logged) >= 4096:
            self._logged = {k: t for k, t in self._logged.items() if now - t < self.log_interval}
        self._logged[subject] = now
        self._log.warning("%s", message)

    def warnings(self, stats: list[QueueStats]) -> list[dict[str, Any]]:
        second = math.floor(self._clock())
        found = []
        for (account, queue), series in sorted(self._series.items()):
            warning = self._hot_warning(account, queue, series.rates(second))
            if warning is not None:
                found.append(warning)
        for entry in stats:
            warning = self._poison_warning(entry)
            if warning is not None:
                found.append(warning)
        return found

    # ------------------------------------------------------------------------------ reporting

    def snapshot(self, stats: list[QueueStats], now_us: int) -> dict[str, Any]:
        """Every queue (those the store reported and those this process served), JSON-ready."""
        second = math.floor(self._clock())
        by_key = {(s.account, s.queue): s for s in stats}
        queues = []
        for key in sorted(set(by_key) | set(self._series)):
            series = self._series.get(key)
            stored = by_key.get(key)
            queues.append(
                {
                    "account": key[0],
                    "queue": key[1],
                    "depth": stored.messages if stored else None,
                    "visible": stored.visible if stored else None,
                    "oldest_visible_age_seconds": _age(stored, now_us),
                    "poison": stored.poison if stored else None,
                    "requests": series.requests if series else 0,
                    "messages": dict(series.counts) if series else dict.fromkeys(OPS, 0),
                    "throttled": series.throttled if series else 0,
                    "rates": series.rates(second) if series else dict.fromkeys(_RATED, 0.0),
                    "poison_dequeues_seen": self._poison_seen.get(key, 0),
                }
            )
        return {
            "queue_target": self.queue_target,
            "poison_threshold": self.poison_threshold,
            "queues": queues,
            "warnings": self.warnings(stats),
        }

    def prometheus(self, stats: list[QueueStats], now_us: int) -> str:
        """The text exposition format 0.0.4."""
        second = math.floor(self._clock())
        lines: list[str] = []

        def labels(account: str, queue: str) -> str:
            return f'account="{escape_label_value(account)}",queue="{escape_label_value(queue)}"'

        served = sorted(self._series.items())
        name = family(lines, "tabulae_queue_requests_total", "counter", "Queue requests, by queue.")
        lines.extend(f"{name}{{{labels(*key)}}} {series.requests}" for key, series in served)
        name = family(
            lines, "tabulae_queue_messages_total", "counter", "Messages put, got, peeked, updated, deleted."
        )
        for key, series in served:
            lines.extend(f'{name}{{{labels(*key)},op="{op}"}} {series.counts[op]}' for op in OPS)
        name = family(
            lines, "tabulae_queue_throttled_total", "counter", "Queue requests refused for the targets."
        )
        lines.extend(f"{name}{{{labels(*key)}}} {series.throttled}" for key, series in served)
        name = family(
            lines,
            "tabulae_queue_messages_per_second",
            "gauge",
            "Messages put, got and deleted per second, recently.",
        )
        for key, series in served:
            rates = series.rates(second)
            lines.extend(
                f'{name}{{{labels(*key)},op="{op}"}} {rates[op]!r}' for op in ("put", "get", "delete")
            )
        name = family(
            lines, "tabulae_queue_depth", "gauge", "Messages in the queue (approximate, as Azure counts)."
        )
        lines.extend(f"{name}{{{labels(s.account, s.queue)}}} {s.messages}" for s in stats)
        name = family(lines, "tabulae_queue_visible_messages", "gauge", "Messages visible now.")
        lines.extend(f"{name}{{{labels(s.account, s.queue)}}} {s.visible}" for s in stats)
        name = family(
            lines, "tabulae_queue_oldest_visible_age_seconds", "gauge", "Age of the oldest visible message."
        )
        lines.extend(
            f"{name}{{{labels(s.account, s.queue)}}} {_age(s, now_us)!r}"
            for s in stats
            if s.oldest_visible is not None
        )
        name = family(
            lines,
            "tabulae_queue_poison_messages",
            "gauge",
            "Messages dequeued more than the poison threshold.",
        )
        lines.extend(f"{name}{{{labels(s.account, s.queue)}}} {s.poison}" for s in stats)
        name = family(
            lines, "tabulae_queue_target_messages_per_second", "gauge", "The scalability target of a queue."
        )
        lines.append(f"{name} {self.queue_target!r}")
        name = family(lines, "tabulae_queue_warnings", "gauge", "Active queue warnings, by kind.")
        kinds: dict[str, int] = {}
        for warning in self.warnings(stats):
            kinds[warning["kind"]] = kinds.get(warning["kind"], 0) + 1
        lines.extend(
            f'{name}{{kind="{kind}"}} {kinds.get(kind, 0)}' for kind in ("hot-queue", "poison-messages")
        )
        return "\n".join(lines) + "\n"


def _age(stats: QueueStats | None, now_us: int) -> float | None:
    if stats is None or stats.oldest_visible is None:
        return None
    return max(0.0, (now_us - stats.oldest_visible) / 1_000_000)
