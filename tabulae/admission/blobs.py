"""Admission for the Blob service: a Blob request's ticket for the :class:`~tabulae.admission.gate.Gate`.

Azure's account target covers every service of the account, so a blob request takes one unit
from the same account bucket the Table service uses (one :class:`Throttle` per process, shared
by every service): an account over its target gets 503 ServerBusy whichever service it calls.
Faults are injected per container. Blob traffic is counted in requests and bytes; the bytes are
known once the content has streamed, so the Blob front-end and the console admit a request
before it runs and record it when it is answered (:meth:`BlobTicket.answered`).
"""

from __future__ import annotations

from dataclasses import dataclass

from tabulae.admission.throttle import Throttle
from tabulae.insight.containers import ContainerCounters


@dataclass(slots=True)
class BlobTicket:
    """A Blob request to one container (``""``: the account itself)."""

    counters: ContainerCounters
    account: str
    container: str

    def fault_scope(self) -> tuple[str, str | None, str | None]:
        return self.account, self.container or None, None

    def take(self, throttle: Throttle) -> None:
        throttle.admit(self.account, self.container, None, 1)

    def refused(self, status: int, *, throttled: bool) -> None:
        self.answered(status, throttled=throttled)

    def answered(
        self, status: int, *, throttled: bool = False, bytes_in: int = 0, bytes_out: int = 0
    ) -> None:
        """Count the request with the status it got and the bytes it carried."""
        self.counters.record(
            self.account,
            self.container,
            status=status,
            throttled=throttled,
            bytes_in=bytes_in,
            bytes_out=bytes_out,
        )
