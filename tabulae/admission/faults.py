"""Transient failures on purpose: the errors Azure gives while it balances load.

The partitioning guide (the partitioning guide) says what clients must expect: when a partition server gets
busy, Azure moves partitions to other servers, and for a few seconds the moved partition answers
"server busy" or "timeout"; clients are to retry with exponential back-off. Code that has only
ever talked to a server that never fails has never run its retry path. ``tabulae serve
--faults P`` runs it:

* with probability ``P`` a request fails at once with 503 ``ServerBusy``, 500 ``InternalError``
  or 500 ``OperationTimedOut`` (the three transient answers of an overloaded service);
* with probability ``P / 10`` a request to a partition starts a *partition moved* window: that
  partition is offline for ``outage_seconds`` (1 to 3 s by default) and every request to it gets
  503 ``ServerBusy`` until the window ends.

A fault is always decided **before** the request does anything, so a failed request never
changed data and a retry can never duplicate it. With a seeded ``random.Random`` the sequence of
decisions is reproducible.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from tabulae.model.errors import ServiceError

__all__ = ["TRANSIENT_CODES", "FaultInjector"]

Clock = Callable[[], float]

TRANSIENT_CODES: tuple[tuple[str, float], ...] = (
    ("ServerBusy", 0.5),
    ("InternalError", 0.25),
    ("OperationTimedOut", 0.25),
)
"""The transient errors injected, with their share of the injected faults."""

_MOVE_SHARE = 0.1  # a partition moves with probability P / 10 per request


class FaultInjector:
    """Decides, request by request, whether to fail and how.

    ``check`` consumes random draws only for requests outside an outage window, in a fixed
    order (move, then fault, then kind), so two injectors with the same seed given the same
    requests at the same clock readings make the same decisions.
    """

    def __init__(
        self,
        probability: float,
        rng: random.Random | None = None,
        clock: Clock = time.monotonic,
        outage_seconds: tuple[float, float] = (1.0, 3.0),
    ) -> None:
        if not 0.0 <= probability <= 1.0:
            raise ValueError("the fault probability must be between 0 and 1")
        low, high = outage_seconds
        if not 0.0 <= low <= high:
            raise ValueError("outage_seconds must be (low, high) with 0 <= low <= high")
        self.probability = probability
        self.outage_seconds = (low, high)
        self._rng = rng if rng is not None else random.Random()
        self._clock = clock
        self._outages: dict[tuple[str, str, str], float] = {}  # partition → end of its window
        self.injected = 0  # transient faults raised (not counting outage refusals)
        self.moves = 0  # outage windows started

    @property
    def enabled(self) -> bool:
        return self.probability > 0.0

    @property
    def windows(self) -> int:
        """Outage windows held in memory (ended ones are dropped lazily)."""
        return len(self._outages)

    def offline(self, account: str, table: str, pk: str) -> bool:
        """Whether the partition is inside a "partition moved" window now."""
        key = (account, table.lower(), pk)
        end = self._outages.get(key)
        if end is None:
            return False
        if self._clock() < end:
            return True
        del self._outages[key]
        return False

    def _expire(self, now: float) -> None:
        self._outages = {key: end for key, end in self._outages.items() if end > now}

    def check(self, account: str, table: str | None, pk: str | None) -> None:
        """Raise the transient error this request gets, if any; return if it may proceed.

        ``pk`` is the one partition the request addresses, or ``None`` (queries across
        partitions, table operations): such requests can still get a transient fault but never
        start an outage window, which belongs to one partition.
        """
        if not self.enabled:
            return
        if table is not None and pk is not None:
            if self.offline(account, table, pk):
                raise ServiceError("ServerBusy")
            if self._rng.random() < self.probability * _MOVE_SHARE:
                now = self._clock()
                if len(self._outages) >= 1024:
                    self._expire(now)
                low, high = self.outage_seconds
                self._outages[(account, table.lower(), pk)] = now + self._rng.uniform(low, high)
                self.moves += 1
                raise ServiceError("ServerBusy")
        if self._rng.random() < self.probability:
            self.injected += 1
            raise ServiceError(self._pick_code())

    def _pick_code(self) -> str:
        draw = self._rng.random()
        for code, share in TRANSIENT_CODES:
            if draw < share:
                return code
            draw -= share
        return TRANSIENT_CODES[-1][0]
