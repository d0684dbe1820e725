"""Per-container counters of the Blob service: requests, failures, refusals and bytes each way.

Blob traffic is measured in requests and bytes rather than entities, so it gets counters of its
own beside the Table service's partition insight, in the same two exports: Prometheus text
(``GET /metrics``) and a JSON list (``GET /metrics?format=json``, key ``containers``). A request
not addressed to a container (List Containers, service properties) counts under
``container=""``. At most ``max_containers`` series are kept per process; the least recently
used fold into ``container="(other)"``, so sums stay exact and label cardinality bounded.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tabulae.insight.exposition import escape_label_value, family
from tabulae.insight.series import OTHER

_FIELDS = ("requests", "errors", "throttled", "bytes_in", "bytes_out")
_HELP = {
    "requests": ("tabulae_blob_requests_total", "Blob service requests, by container."),
    "errors": ("tabulae_blob_errors_total", "Blob service requests answered with status 400 or more."),
    "throttled": ("tabulae_blob_throttled_total", "Blob service requests refused by a scalability target."),
    "bytes_in": ("tabulae_blob_received_bytes_total", "Request body bytes received by successful writes."),
    "bytes_out": ("tabulae_blob_sent_bytes_total", "Blob content bytes sent (downloads)."),
}


@dataclass(slots=True)
class _Series:
    requests: int = 0
    errors: int = 0
    throttled: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    last_used: float = 0.0

    def absorb(self, other: _Series) -> None:
        for name in _FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))


class ContainerCounters:
    """Counters per (account, container) for one server process (not thread-safe)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, *, max_containers: int = 1000) -> None:
        self._clock = clock
        self.max_containers = max_containers
        self._series: dict[tuple[str, str], _Series] = {}

    def record(
        self,
        account: str,
        container: str,
        *,
        status: int,
        throttled: bool = False,
        bytes_in: int = 0,
        bytes_out: int = 0,
    ) -> None:
        series = self._series.get((account, container))
        if series is None:
            series = self._series[(account, container)] = _Series()
            if len(self._series) > self.max_containers:
                self._fold()
        series.requests += 1
        series.errors += status >= 400
        series.throttled += throttled
        series.bytes_in += bytes_in
        series.bytes_out += bytes_out
        series.last_used = self._clock()

    def _fold(self) -> None:
        """Fold the least recently used half into ``(other)`` of their account."""
        real = sorted((s.last_used, key) for key, s in self._series.items() if key[1] != OTHER)
        for _, key in real[: len(real) // 2]:
            series = self._series.pop(key)
            other = self._series.setdefault((key[0], OTHER), _Series())
            other.absorb(series)

    def state(self) -> list[tuple[str, str, list[int]]]:
        """This process's counters as plain data, for :meth:`absorb` in another (``insight.peers``)."""
        return [(a, c, [getattr(s, name) for name in _FIELDS]) for (a, c), s in self._series.items()]

    def absorb(self, state: list[tuple[str, str, list[int]]], rename: Callable[[str], str] = str) -> None:
        """Add another process's :meth:`state`; ``rename`` maps container names (``--metrics-keys``)."""
        for account, container, values in state:
            key = (account, container if container in ("", OTHER) else rename(container))
            series = self._series.setdefault(key, _Series())
            for name, value in zip(_FIELDS, values, strict=True):
                setattr(series, name, getattr(series, name) + value)

    def snapshot(self) -> list[dict[str, Any]]:
        return [
            {"account": account, "container": container, **{name: getattr(s, name) for name in _FIELDS}}
            for (account, container), s in sorted(self._series.items())
        ]

    def prometheus(self) -> str:
        lines: list[str] = []
        for field_name in _FIELDS:
            name, help_text = _HELP[field_name]
            family(lines, name, "counter", help_text)
            for (account, container), series in sorted(self._series.items()):
                labels = (
                    f'account="{escape_label_value(account)}",container="{escape_label_value(container)}"'
                )
                lines.append(f"{name}{{{labels}}} {getattr(series, field_name)}")
        return "\n".join(lines) + "\n"
