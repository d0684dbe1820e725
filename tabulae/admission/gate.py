"""One admission path for every service and the console: refuse up front, run, record.

Every request that reaches an account's data passes a :class:`Gate`, whichever service or page
it came from: an injected fault first, then Azure's scalability targets, so a refused request
does nothing; then the work; then what it cost goes to the service's insight, for a failure as
for a success. What differs between services is only what a request addresses and in which unit
it is counted (entities of a partition, messages of a queue, bytes of a container): that is the
service's :class:`Ticket`. The Table and Queue services are wrapped (``guard``, ``queue_guard``);
the Blob front-end and the console's blob page call the gate around their own work, because a
blob's bytes are counted as they stream.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

from tabulae.admission.faults import FaultInjector
from tabulae.admission.throttle import Throttle
from tabulae.model.errors import ServiceError

T = TypeVar("T")


class Ticket(Protocol):
    """What one request addresses, in its service's terms, and where its cost is recorded."""

    def fault_scope(self) -> tuple[str, str | None, str | None]:
        """(account, the table-like name faults are drawn for, the one partition or None)."""

    def take(self, throttle: Throttle) -> None:
        """Take the request's cost from the targets' buckets, or raise ``ServerBusy``."""

    def refused(self, status: int, *, throttled: bool) -> None:
        """Record a request that was refused or failed, with the status it got."""


class Gate:
    """The faults and targets of one server, applied the same way to every request."""

    def __init__(self, throttle: Throttle | None = None, faults: FaultInjector | None = None) -> None:
        self.throttle = throttle
        self.faults = faults

    def admit(self, ticket: Ticket) -> None:
        """Refuse before any work: an injected fault first, then the targets. A refusal is
        recorded (a throttled one as such) before it is raised."""
        if self.faults is not None:
            try:
                self.faults.check(*ticket.fault_scope())
            except ServiceError as error:
                ticket.refused(error.status, throttled=False)
                raise
        if self.throttle is not None:
            try:
                ticket.take(self.throttle)
            except ServiceError as error:
                ticket.refused(error.status, throttled=True)
                raise

    def check_faults(self, account: str, scope: str, partition: str | None = None) -> None:
        """Only the injected faults, for operations the targets do not count (creating or
        deleting a table or queue)."""
        if self.faults is not None:
            self.faults.check(account, scope, partition)

    async def run(self, ticket: Ticket, work: Coroutine[Any, Any, T]) -> T:
        """``work`` admitted first; a failure recorded and raised. The caller records a success,
        whose counts only it knows."""
        try:
            self.admit(ticket)
        except ServiceError:
            work.close()  # refused: it never runs, and is not reported as never awaited
            raise
        try:
            return await work
        except ServiceError as error:
            ticket.refused(error.status, throttled=False)
            raise
