"""Admission for the Blob service: the account's scalability target, injected faults, counters.

Azure's account target covers every service of the account, so a blob request takes one unit
from the same account bucket the Table service uses (one :class:`Throttle` per process, shared
by both): an account over its target gets 503 ServerBusy whichever service it calls. Faults are
injected per container. The front-end asks before a request runs (:meth:`BlobAdmission.admit`,
so a refused request does nothing) and reports when it is answered (:meth:`record`).
"""

from __future__ import annotations

from tabulae.admission.faults import FaultInjector
from tabulae.admission.throttle import Throttle
from tabulae.insight.containers import ContainerCounters


class BlobAdmission:
    def __init__(
        self,
        counters: ContainerCounters,
        throttle: Throttle | None = None,
        faults: FaultInjector | None = None,
    ) -> None:
        self.counters = counters
        self.throttle = throttle
        self.faults = faults

    def admit(self, account: str, container: str) -> None:
        """Refuse before any work: an injected fault first, then the account's target."""
        if self.faults is not None:
            self.faults.check(account, container or None, None)
        if self.throttle is not None:
            self.throttle.admit(account, container, None, 1)

    def record(
        self, account: str, container: str, status: int, *, throttled: bool, bytes_in: int, bytes_out: int
    ) -> None:
        self.counters.record(
            account, container, status=status, throttled=throttled, bytes_in=bytes_in, bytes_out=bytes_out
        )
