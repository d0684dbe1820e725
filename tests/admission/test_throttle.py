"""Token buckets and Azure's scalability targets for Table storage, on a fake clock."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tabulae.admission.throttle import (
    ACCOUNT_LIMIT_MESSAGE,
    AZURE_TARGETS,
    Targets,
    Throttle,
    TokenBucket,
)
from tabulae.model.errors import CATALOGUE, ServiceError


class FakeClock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


# ------------------------------------------------------------------------------- TokenBucket


def test_bucket_starts_full_and_admits_a_burst(clock: FakeClock) -> None:
    bucket = TokenBucket(10, 20, clock)
    assert bucket.available() == 20
    assert all(bucket.try_take(1) for _ in range(20))
    assert not bucket.try_take(1)


def test_refused_take_takes_nothing(clock: FakeClock) -> None:
    bucket = TokenBucket(10, 5, clock)
    assert bucket.try_take(3)
    assert not bucket.try_take(3)
    assert bucket.available() == 2


def test_bucket_refills_at_rate_up_to_capacity(clock: FakeClock) -> None:
    bucket = TokenBucket(10, 5, clock)
    bucket.take(5)
    clock.advance(0.2)
    assert bucket.available() == pytest.approx(2)
    clock.advance(100)
    assert bucket.available() == 5
    assert bucket.is_full()


def test_take_charges_after_the_fact_into_debt(clock: FakeClock) -> None:
    bucket = TokenBucket(100, 100, clock)
    bucket.take(1000)
    assert bucket.available() == -900
    assert not bucket.try_take(1)
    assert bucket.seconds_until(1) == pytest.approx(9.01)
    clock.advance(9.0)
    assert not bucket.try_take(1)
    clock.advance(0.02)
    assert bucket.try_take(1)


def test_request_larger_than_the_burst_passes_on_a_full_bucket_only(clock: FakeClock) -> None:
    bucket = TokenBucket(50, 50, clock)  # a batch of 100 against a partition target of 50/s
    assert bucket.try_take(100)
    assert bucket.available() == -50
    clock.advance(1.9)
    assert not bucket.try_take(100)
    clock.advance(0.1)
    assert bucket.try_take(100)


def test_even_a_zero_cost_request_needs_one_token(clock: FakeClock) -> None:
    bucket = TokenBucket(10, 10, clock)
    bucket.take(10)
    assert not bucket.try_take(0)
    clock.advance(0.11)
    assert bucket.try_take(0)
    assert bucket.available() == pytest.approx(1.1)


def test_clock_stepping_back_creates_no_tokens(clock: FakeClock) -> None:
    bucket = TokenBucket(10, 10, clock)
    bucket.take(10)
    clock.advance(-5)
    assert bucket.available() == 0
    clock.advance(0.5)
    assert bucket.available() == pytest.approx(5)


@pytest.mark.parametrize(("rate", "burst"), [(0, 1), (1, 0), (-1, 5), (math.nan, 1)])
def test_bucket_rejects_nonsense(rate: float, burst: float) -> None:
    with pytest.raises(ValueError):
        TokenBucket(rate, burst)


@settings(max_examples=200, deadline=None)
@given(
    requests=st.lists(
        st.tuples(st.floats(0, 0.5), st.integers(0, 20)),
        max_size=200,
    )
)
def test_admitted_cost_never_exceeds_burst_plus_rate_times_time(requests: list[tuple[float, int]]) -> None:
    clock = FakeClock(0.0)
    bucket = TokenBucket(rate=40, burst=20, clock=clock)
    admitted = 0
    for gap, cost in requests:
        clock.advance(gap)
        if bucket.try_take(cost):
            admitted += cost
        assert admitted <= 20 + 40 * clock.now + 1e-6


@settings(max_examples=200, deadline=None)
@given(debt=st.integers(0, 5000), cost=st.integers(0, 300))
def test_waiting_seconds_until_always_admits(debt: int, cost: int) -> None:
    clock = FakeClock(0.0)
    bucket = TokenBucket(rate=100, burst=200, clock=clock)
    bucket.take(debt)
    clock.advance(bucket.seconds_until(cost) + 1e-9)
    assert bucket.try_take(cost)


# ----------------------------------------------------------------------------------- Targets


def test_azure_targets_are_the_documented_numbers() -> None:
    assert Targets(2000, 20000, 1.0) == AZURE_TARGETS
    assert AZURE_TARGETS.partition_rate == 2000
    assert AZURE_TARGETS.account_rate == 20000


def test_targets_divide_among_workers() -> None:
    assert AZURE_TARGETS.divide(1) is AZURE_TARGETS
    assert AZURE_TARGETS.divide(4) == Targets(500, 5000, 1.0, 500)
    assert Targets(None, 100, queue_rate=None).divide(4) == Targets(None, 25, queue_rate=None)
    with pytest.raises(ValueError):
        AZURE_TARGETS.divide(0)


def test_targets_reject_nonpositive_rates() -> None:
    with pytest.raises(ValueError):
        Targets(partition_rate=0)
    with pytest.raises(ValueError):
        Targets(account_rate=-1)
    with pytest.raises(ValueError):
        Targets(burst_seconds=0)


# ---------------------------------------------------------------------------------- Throttle


def _refusal(throttle: Throttle, *args: object, **kwargs: object) -> ServiceError:
    with pytest.raises(ServiceError) as caught:
        throttle.admit(*args, **kwargs)  # type: ignore[arg-type]
    return caught.value


def test_partition_over_target_gets_server_busy_with_the_default_message(clock: FakeClock) -> None:
    throttle = Throttle(Targets(partition_rate=10, account_rate=1000), clock=clock)
    for _ in range(10):
        throttle.admit("acct", "t", "p", 1)
    error = _refusal(throttle, "acct", "t", "p", 1)
    assert (error.code, error.status) == ("ServerBusy", 503)
    assert error.message == CATALOGUE["ServerBusy"][1]
    assert error.headers is None  # Azure sends no Retry-After: the SDK's back-off decides


def test_account_over_target_says_so(clock: FakeClock) -> None:
    throttle = Throttle(Targets(partition_rate=10, account_rate=25), clock=clock)
    for pk in ("a", "b"):
        for _ in range(10):
            throttle.admit("acct", "t", pk, 1)
    for _ in range(5):
        throttle.admit("acct", "t", "c", 1)
    error = _refusal(throttle, "acct", "t", "c", 1)
    assert (error.code, error.status, error.message) == ("ServerBusy", 503, ACCOUNT_LIMIT_MESSAGE)


def test_accounts_are_independent(clock: FakeClock) -> None:
    throttle = Throttle(Targets(partition_rate=None, account_rate=5), clock=clock)
    throttle.admit("one", "t", "p", 5)
    throttle.admit("two", "t", "p", 5)
    assert _refusal(throttle, "one", "t", "p", 1).message == ACCOUNT_LIMIT_MESSAGE


def test_a_batch_of_100_counts_100(clock: FakeClock) -> None:
    throttle = Throttle(AZURE_TARGETS, clock=clock)
    for _ in range(20):
        throttle.admit("acct", "t", "p", 100)
    assert _refusal(throttle, "acct", "t", "p", 100).code == "ServerBusy"
    clock.advance(0.051)  # 100 entities at 2,000/s take 0.05 s to come back
    throttle.admit("acct", "t", "p", 100)


def test_refusal_consumes_no_tokens_anywhere(clock: FakeClock) -> None:
    throttle = Throttle(Targets(partition_rate=10, account_rate=100), clock=clock)
    throttle.admit("acct", "t", "p", 10)
    before = throttle.available("acct")
    for _ in range(50):
        _refusal(throttle, "acct", "t", "p", 5)
    assert throttle.available("acct") == before == 90
    assert throttle.available("acct", "t", "p") == 0
    throttle.admit("acct", "t", "q", 10)  # another partition still has its whole burst


def test_refused_by_the_account_takes_nothing_from_the_partition(clock: FakeClock) -> None:
    throttle = Throttle(Targets(partition_rate=100, account_rate=10), clock=clock)
    throttle.admit("acct", "t", "other", 10)
    _refusal(throttle, "acct", "t", "p", 5)
    assert throttle.available("acct", "t", "p") == 100


def test_partitions_are_independent_and_table_names_case_insensitive(clock: FakeClock) -> None:
    throttle = Throttle(Targets(partition_rate=3, account_rate=1000), clock=clock)
    throttle.admit("acct", "Orders", "p", 3)
    assert _refusal(throttle, "acct", "orders", "p", 1).code == "ServerBusy"
    throttle.admit("acct", "orders", "q", 3)
    throttle.admit("acct", "other", "p", 3)
    throttle.admit("acct", "orders", "P", 3)  # keys are case-sensitive


def test_query_across_partitions_times_out_when_the_account_is_empty(clock: FakeClock) -> None:
    throttle = Throttle(Targets(partition_rate=1000, account_rate=10), clock=clock)
    throttle.admit("acct", "t", None, 0, query=True)
    throttle.charge("acct", "t", None, 1000)  # the page scanned 1,000 entities
    error = _refusal(throttle, "acct", "t", None, 0, query=True)
    assert (error.code, error.status) == ("OperationTimedOut", 500)
    assert error.message == "Operation could not be completed within the specified time."
    # A write, or a query of one partition, gets the account's ServerBusy instead.
    assert _refusal(throttle, "acct", "t", "p", 1).message == ACCOUNT_LIMIT_MESSAGE
    assert _refusal(throttle, "acct", "t", "p", 0, query=True).code == "ServerBusy"


def test_scanned_entities_are_charged_to_the_partition(clock: FakeClock) -> None:
    throttle = Throttle(Targets(partition_rate=100, account_rate=10_000), clock=clock)
    throttle.admit("acct", "t", "p", 0, query=True)
    throttle.charge("acct", "t", "p", 1000)  # a query that scanned 1,000 and returned 5
    assert throttle.available("acct", "t", "p") == -900
    assert throttle.available("acct") == 9000
    assert _refusal(throttle, "acct", "t", "p", 1).code == "ServerBusy"
    clock.advance(9.01)
    throttle.admit("acct", "t", "p", 1)


def test_charge_of_nothing_is_free(clock: FakeClock) -> None:
    throttle = Throttle(Targets(partition_rate=1, account_rate=1), clock=clock)
    throttle.charge("acct", "t", "p", 0)
    throttle.charge("acct", "t", "p", -5)
    throttle.admit("acct", "t", "p", 1)


def test_unlimited_levels_are_not_checked(clock: FakeClock) -> None:
    throttle = Throttle(Targets(partition_rate=None, account_rate=None), clock=clock)
    for _ in range(1000):
        throttle.admit("acct", "t", "p", 100)
    assert throttle.available("acct") == math.inf
    assert throttle.available("acct", "t", "p") == math.inf
    assert throttle.tracked_partitions == 0


def test_workers_each_enforce_their_share(clock: FakeClock) -> None:
    throttle = Throttle(AZURE_TARGETS, clock=clock, workers=4)
    assert throttle.targets == Targets(500, 5000, queue_rate=500)
    throttle.admit("acct", "t", "p", 500)
    assert _refusal(throttle, "acct", "t", "p", 1).code == "ServerBusy"


def test_retry_after_is_optional_and_counts_whole_seconds(clock: FakeClock) -> None:
    throttle = Throttle(Targets(partition_rate=10, account_rate=10**6), clock=clock, retry_after=True)
    throttle.admit("acct", "t", "p", 10)
    assert _refusal(throttle, "acct", "t", "p", 1).headers == [(b"retry-after", b"1")]
    throttle.charge("acct", "t", "p", 245)  # 24.6 s to get one token back
    assert _refusal(throttle, "acct", "t", "p", 1).headers == [(b"retry-after", b"25")]
    throttle.charge("acct", "t", "p", 10_000)
    assert _refusal(throttle, "acct", "t", "p", 1).headers == [(b"retry-after", b"60")]


def test_idle_partitions_are_forgotten(clock: FakeClock) -> None:
    throttle = Throttle(AZURE_TARGETS, clock=clock)
    for n in range(5000):
        throttle.admit("acct", "t", f"p{n}", 1)
    assert throttle.tracked_partitions == 5000  # all used within the last second: all kept
    clock.advance(2.0)  # every bucket has refilled: each is as good as new
    for n in range(4000):
        throttle.admit("acct", "t", f"q{n}", 1)
    assert throttle.tracked_partitions <= 4000  # of 9,000 seen: only the recently used remain


def test_forgetting_a_bucket_changes_nothing(clock: FakeClock) -> None:
    throttle = Throttle(Targets(partition_rate=10, account_rate=10**9), clock=clock)
    throttle.admit("acct", "t", "hot", 10)
    for n in range(3000):  # enough new partitions to force sweeps
        throttle.admit("acct", "t", f"p{n}", 1)
    assert _refusal(throttle, "acct", "t", "hot", 1).code == "ServerBusy"  # still in the map, still empty
