"""Azure's scalability targets, enforced: token buckets per account, per partition and per queue.

Azure promises about 2,000 entities/s to one partition and 20,000 entities/s to one account
("Scalability and performance targets for Table storage"), 2,000 messages/s to one queue ("...for
Queue Storage"), the account's target being shared by its tables and queues; above that it answers 503
``ServerBusy`` or, for a long query, 500 ``OperationTimedOut``. Code that will run against Azure
must survive those answers, so
``tabulae serve --targets azure`` gives them at the same thresholds, counted the way the
checklist counts: every entity inserted, updated, deleted or scanned is one unit, so a batch of
100 costs 100 and a query that scans 1,000 entities to return 5 costs 1,000.

A token bucket is the model because it is what "entities per second, short bursts allowed"
means: a bucket holds up to ``rate × burst_seconds`` tokens and refills at ``rate``. Three rules
keep it faithful and safe:

* **A refused request takes nothing.** Both buckets are checked before either is charged, so a
  503 leaves the buckets, like the data, exactly as they were, and the client's retry competes
  on equal terms.
* **Costs known only afterwards are charged afterwards.** A query's cost is the number of
  entities it scanned, known once the page is built; :meth:`Throttle.charge` takes it even if
  the bucket goes negative, and the debt holds later requests back until it is repaid.
* **A request larger than the burst still passes on a full bucket** (and leaves a debt);
  otherwise a batch of 100 could never pass a partition target of 50/s.

The module is pure: no HTTP, no I/O, an injectable clock. The HTTP layer turns the
``ServiceError`` it raises into Azure's exact error body.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from tabulae.admission.ledger import Ledger
from tabulae.model.errors import ServiceError

__all__ = [
    "ACCOUNT_LIMIT_MESSAGE",
    "AZURE_TARGETS",
    "Clock",
    "SharedBucket",
    "Targets",
    "Throttle",
    "TokenBucket",
]

Clock = Callable[[], float]

ACCOUNT_LIMIT_MESSAGE = "Operations per second is over the account limit."
"""Azure's ServerBusy text when the whole account, not one partition, is over its target."""

_MIN_SWEEP = 1024  # partition buckets kept before the first sweep for idle ones
_MAX_RETRY_AFTER = 60  # seconds; a deep debt should not park a client for minutes


class TokenBucket:
    """``rate`` tokens per second, at most ``burst`` of them banked.

    The bucket starts full: a fresh partition has had all the time in the world to rest.
    """

    __slots__ = ("_clock", "_stamp", "_tokens", "capacity", "rate")

    def __init__(self, rate: float, burst: float, clock: Clock = time.monotonic) -> None:
        if not rate > 0 or not burst > 0:
            raise ValueError("a token bucket needs a positive rate and burst")
        self.rate = float(rate)
        self.capacity = float(burst)
        self._clock = clock
        self._tokens = self.capacity
        self._stamp = clock()

    def _refill(self) -> None:
        now = self._clock()
        elapsed = now - self._stamp
        if elapsed > 0:
            self._tokens = min(self.capacity, self._tokens + elapsed * self.rate)
        self._stamp = now  # a clock that steps back only loses the refill, never creates tokens

    def available(self) -> float:
        """Tokens in the bucket now; negative while a debt from :meth:`take` is being repaid."""
        self._refill()
        return self._tokens

    def needed(self, n: float) -> float:
        """Tokens that must be banked to admit a request of cost ``n``.

        At least one token, so that even a request whose cost is charged later (a query) is held
        back by an empty bucket; at most the capacity, so that any request can pass eventually.
        """
        return min(max(float(n), 1.0), self.capacity)

    def can_take(self, n: float) -> bool:
        """Whether :meth:`try_take` would succeed now (takes nothing)."""
        return self.available() >= self.needed(n)

    def try_take(self, n: float) -> bool:
        """Take ``n`` tokens if the bucket can admit the request; otherwise take nothing."""
        if not self.can_take(n):
            return False
        self._tokens -= n
        return True

    def take(self, n: float) -> None:
        """Take ``n`` tokens unconditionally: a cost learnt after the work was done.

        The balance may go negative; the debt then delays the next requests, so the long-run
        rate still respects the target.
        """
        self._refill()
        self._tokens -= n

    def seconds_until(self, n: float) -> float:
        """How long until a request of cost ``n`` would be admitted (0 if it would be now)."""
        missing = self.needed(n) - self.available()
        return max(0.0, missing / self.rate)

    def is_full(self) -> bool:
        """A full bucket is indistinguishable from a new one, so it may be forgotten."""
        return self.available() >= self.capacity


class SharedBucket(TokenBucket):
    """A token bucket that every worker of the server shares, in the ledger (see
    :mod:`tabulae.admission.ledger` for the representation: the time the bucket is busy until).

    The target is the server's (Azure's are per partition, not per process), so the bucket has
    the full rate and burst, and every worker's takes drain it.
    """

    __slots__ = ("_ledger", "_slot")

    def __init__(self, rate: float, burst: float, clock: Clock, ledger: Ledger, key: str) -> None:
        super().__init__(rate, burst, clock)
        self._ledger = ledger
        self._slot = ledger.slot(key)

    def available(self) -> float:
        tokens = self.rate * (self._clock() - self._ledger.busy_until(self._slot))
        return min(self.capacity, tokens)

    def try_take(self, n: float) -> bool:
        if not self.can_take(n):
            return False
        self.take(n)
        return True

    def take(self, n: float) -> None:
        now = self._clock()
        busy = max(self._ledger.busy_until(self._slot), now - self.capacity / self.rate)
        self._ledger.own[self._slot] = busy + n / self.rate


@dataclass(frozen=True, slots=True)
class Targets:
    """Entities per second allowed to one partition and to one account.

    ``None`` for a rate means that level is not limited. ``burst_seconds`` is how much unused
    allowance a quiet partition banks: with 1.0, a partition at rest may take 2,000 entities at
    once, then 2,000 per second.
    """

    partition_rate: float | None = 2000.0
    account_rate: float | None = 20000.0
    burst_seconds: float = 1.0
    queue_rate: float | None = 2000.0  # messages per second to one queue

    def __post_init__(self) -> None:
        for rate in (self.partition_rate, self.account_rate, self.queue_rate):
            if rate is not None and not rate > 0:
                raise ValueError("a target must be a positive number of entities per second")
        if not self.burst_seconds > 0:
            raise ValueError("burst_seconds must be positive")

    def divide(self, workers: int) -> Targets:
        """The share of each of ``workers`` processes that enforce the targets independently.

        Worker processes share no memory, so each enforces ``rate / workers``; with the load
        spread evenly over them (the kernel spreads connections) the sum is the target.
        """
        if workers < 1:
            raise ValueError("workers must be at least 1")
        if workers == 1:
            return self
        return replace(
            self,
            partition_rate=None if self.partition_rate is None else self.partition_rate / workers,
            account_rate=None if self.account_rate is None else self.account_rate / workers,
            queue_rate=None if self.queue_rate is None else self.queue_rate / workers,
        )


AZURE_TARGETS = Targets()
"""The Azure Standard storage account targets: 2,000/s per partition and per queue, 20,000/s per account."""


class Throttle:
    """Admission control against :class:`Targets`, per account, per (account, table, partition)
    and per (account, queue). One throttle serves every service of a worker, so tables and queues
    draw on the same account bucket.

    Table names are case-insensitive on Azure, so ``MyTable`` and ``mytable`` share buckets.
    With ``retry_after`` the refusals carry a ``Retry-After`` header (whole seconds until the
    request would pass); Azure sends none, so by default the clients' own back-off decides.
    """

    def __init__(
        self,
        targets: Targets = AZURE_TARGETS,
        *,
        clock: Clock = time.monotonic,
        workers: int = 1,
        retry_after: bool = False,
        ledger: Ledger | None = None,
    ) -> None:
        self.targets = targets if ledger is not None else targets.divide(workers)
        self._ledger = ledger
        self.retry_after = retry_after
        self._clock = clock
        self._accounts: dict[str, TokenBucket] = {}
        self._partitions: dict[tuple[str, str, str], TokenBucket] = {}
        self._sweep_at = _MIN_SWEEP
        self._queues: dict[tuple[str, str], TokenBucket] = {}
        self._queue_sweep_at = _MIN_SWEEP

    # --------------------------------------------------------------------------- buckets

    def _bucket(self, rate: float, key: str) -> TokenBucket:
        """A bucket for ``key`` (unique per scope): a shared one when the workers share a ledger."""
        burst = rate * self.targets.burst_seconds
        if self._ledger is not None:
            return SharedBucket(rate, burst, self._clock, self._ledger, key)
        return TokenBucket(rate, burst, self._clock)

    def _account_bucket(self, account: str) -> TokenBucket | None:
        rate = self.targets.account_rate
        if rate is None:
            return None
        bucket = self._accounts.get(account)
        if bucket is None:
            bucket = self._accounts[account] = self._bucket(rate, "a\0" + account)
        return bucket

    def _partition_bucket(self, account: str, table: str, pk: str | None) -> TokenBucket | None:
        rate = self.targets.partition_rate
        if rate is None or pk is None:
            return None
        key = (account, table.lower(), pk)
        bucket = self._partitions.get(key)
        if bucket is None:
            if len(self._partitions) >= self._sweep_at:
                self._sweep()
            bucket = self._partitions[key] = self._bucket(rate, "p\0" + "\0".join(key))
        return bucket

    def _queue_bucket(self, account: str, queue: str) -> TokenBucket | None:
        rate = self.targets.queue_rate
        if rate is None:
            return None
        key = (account, queue)
        bucket = self._queues.get(key)
        if bucket is None:
            if len(self._queues) >= self._queue_sweep_at:
                self._queues = {k: b for k, b in self._queues.items() if not b.is_full()}
                self._queue_sweep_at = max(_MIN_SWEEP, 2 * len(self._queues))
            bucket = self._queues[key] = self._bucket(rate, "q\0" + "\0".join(key))
        return bucket

    def _sweep(self) -> None:
        """Forget full buckets: they are exactly what a new bucket would be.

        What remains are partitions used within the last ``burst_seconds`` (or still in debt),
        so memory follows the recent request rate, not the number of partitions ever seen.
        The next sweep waits until the map has doubled, which keeps sweeping amortised O(1).
        """
        self._partitions = {k: b for k, b in self._partitions.items() if not b.is_full()}
        self._sweep_at = max(_MIN_SWEEP, 2 * len(self._partitions))

    @property
    def tracked_partitions(self) -> int:
        """Partition buckets held in memory (for tests and diagnostics)."""
        return len(self._partitions)

    # --------------------------------------------------------------------------- admission

    def _refusal(self, code: str, message: str | None, bucket: TokenBucket, cost: int) -> ServiceError:
        headers: list[tuple[bytes, bytes]] | None = None
        if self.retry_after:
            seconds = min(_MAX_RETRY_AFTER, max(1, math.ceil(bucket.seconds_until(cost))))
            headers = [(b"retry-after", str(seconds).encode())]
        return ServiceError(code, message, headers=headers)

    def admit(self, account: str, table: str, pk: str | None, cost: int, *, query: bool = False) -> None:
        """Admit a request of ``cost`` entities, or raise the error Azure would give.

        ``pk`` is the one partition the request touches, or ``None`` when it touches several or
        none (a query across partitions, a table operation): then only the account is checked.
        The account is checked first, so an account-wide overload says so in its message.
        A query across partitions refused for the account gets 500 ``OperationTimedOut``, as a
        long query does on Azure; every other refusal is 503 ``ServerBusy``. A refusal takes
        no tokens from either bucket.
        """
        timeout = query and pk is None
        self._admit(self._account_bucket(account), self._partition_bucket(account, table, pk), cost, timeout)

    def admit_queue(self, account: str, queue: str, cost: int) -> None:
        """Admit a request of ``cost`` messages to ``queue``, as :meth:`admit` does for a partition."""
        self._admit(self._account_bucket(account), self._queue_bucket(account, queue), cost, False)

    def _admit(
        self, account_bucket: TokenBucket | None, bucket: TokenBucket | None, cost: int, timeout: bool
    ) -> None:
        if account_bucket is not None and not account_bucket.can_take(cost):
            if timeout:
                raise self._refusal("OperationTimedOut", None, account_bucket, cost)
            raise self._refusal("ServerBusy", ACCOUNT_LIMIT_MESSAGE, account_bucket, cost)
        if bucket is not None and not bucket.can_take(cost):
            raise self._refusal("ServerBusy", None, bucket, cost)
        if account_bucket is not None:
            account_bucket.take(cost)
        if bucket is not None:
            bucket.take(cost)

    def charge(self, account: str, table: str, pk: str | None, cost: int) -> None:
        """Charge a cost learnt after the work was done (the entities a query page scanned).

        Never refuses: the work is done. The buckets may go into debt, which later requests
        then wait out.
        """
        if cost <= 0:
            return
        account_bucket = self._account_bucket(account)
        if account_bucket is not None:
            account_bucket.take(cost)
        partition_bucket = self._partition_bucket(account, table, pk)
        if partition_bucket is not None:
            partition_bucket.take(cost)

    def charge_queue(self, account: str, queue: str, cost: int) -> None:
        """Charge messages learnt after the work was done (those a Get Messages returned)."""
        if cost <= 0:
            return
        for bucket in (self._account_bucket(account), self._queue_bucket(account, queue)):
            if bucket is not None:
                bucket.take(cost)

    def available(self, account: str, table: str | None = None, pk: str | None = None) -> float:
        """Tokens left for the account, or for the partition when ``table`` and ``pk`` are given.

        ``inf`` when that level is not limited. Meant for tests and ``/metrics``.
        """
        if table is not None and pk is not None:
            bucket = self._partition_bucket(account, table, pk)
        else:
            bucket = self._account_bucket(account)
        return math.inf if bucket is None else bucket.available()
