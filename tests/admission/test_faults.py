"""Fault injection: transient 503/500 answers and "partition moved" windows, deterministic."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from tabulae.admission.faults import TRANSIENT_CODES, FaultInjector
from tabulae.model.errors import ServiceError


class FakeClock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class ScriptedRandom(random.Random):
    """Returns the draws a test scripts: ``random()`` from a list, ``uniform()`` its midpoint."""

    def __init__(self, draws: list[float]) -> None:
        super().__init__(0)
        self.draws = list(draws)
        self.calls = 0

    def random(self) -> float:
        self.calls += 1
        return self.draws.pop(0) if self.draws else 0.999

    def uniform(self, a: float, b: float) -> float:
        return (a + b) / 2


def outcome(injector: FaultInjector, pk: str | None = "p", table: str = "t") -> str | None:
    try:
        injector.check("acct", table, pk)
    except ServiceError as error:
        return error.code
    return None


def test_off_by_default_and_draws_nothing() -> None:
    rng = ScriptedRandom([])
    injector = FaultInjector(0.0, rng)
    assert not injector.enabled
    assert all(outcome(injector) is None for _ in range(1000))
    assert rng.calls == 0


@pytest.mark.parametrize("probability", [-0.1, 1.5, float("nan")])
def test_probability_must_be_a_probability(probability: float) -> None:
    with pytest.raises(ValueError):
        FaultInjector(probability)


def test_outage_bounds_are_checked() -> None:
    with pytest.raises(ValueError):
        FaultInjector(0.1, outage_seconds=(3.0, 1.0))
    with pytest.raises(ValueError):
        FaultInjector(0.1, outage_seconds=(-1.0, 1.0))


def test_every_request_fails_transiently_at_probability_one() -> None:
    injector = FaultInjector(1.0, random.Random(1))
    codes = Counter(outcome(injector, pk=None) for _ in range(2000))
    assert set(codes) == {"ServerBusy", "InternalError", "OperationTimedOut"}
    assert sum(codes.values()) == 2000


def test_injected_errors_carry_azure_statuses() -> None:
    statuses = {}
    injector = FaultInjector(1.0, random.Random(2))
    for _ in range(200):
        try:
            injector.check("acct", None, None)
        except ServiceError as error:
            statuses[error.code] = error.status
    assert statuses == {"ServerBusy": 503, "InternalError": 500, "OperationTimedOut": 500}
    assert [code for code, _share in TRANSIENT_CODES] == ["ServerBusy", "InternalError", "OperationTimedOut"]


def test_fault_rate_and_mix_follow_the_probability() -> None:
    injector = FaultInjector(0.3, random.Random(12345))
    codes = Counter(outcome(injector, pk=None) for _ in range(20_000))
    faults = 20_000 - codes[None]
    assert 0.28 < faults / 20_000 < 0.32
    assert 0.46 < codes["ServerBusy"] / faults < 0.54
    assert 0.21 < codes["InternalError"] / faults < 0.29
    assert injector.injected == faults
    assert injector.moves == 0  # no partition named, no partition moved


def test_same_seed_same_decisions() -> None:
    clock = FakeClock()
    first = FaultInjector(0.3, random.Random(7), clock)
    second = FaultInjector(0.3, random.Random(7), clock)
    keys = [f"p{n % 13}" for n in range(3000)]
    run_one = []
    run_two = []
    for n, pk in enumerate(keys):
        clock.now = n * 0.01
        run_one.append(outcome(first, pk))
        run_two.append(outcome(second, pk))
    assert run_one == run_two
    assert first.moves > 0 and first.injected > 0


def test_partition_moved_window_refuses_that_partition_only() -> None:
    clock = FakeClock(10.0)
    # first draw 0.001 < P/10: the partition moves for uniform(1, 3) = 2 s
    injector = FaultInjector(0.2, ScriptedRandom([0.001]), clock, outage_seconds=(1.0, 3.0))
    assert outcome(injector, "p") == "ServerBusy"
    assert injector.moves == 1 and injector.injected == 0
    clock.now = 11.9
    assert injector.offline("acct", "t", "p")
    assert [outcome(injector, "p") for _ in range(50)] == ["ServerBusy"] * 50
    assert outcome(injector, "p", table="T") == "ServerBusy"  # table names are case-insensitive
    assert outcome(injector, "q") is None
    assert outcome(injector, None) is None
    clock.now = 12.0
    assert outcome(injector, "p") is None
    assert not injector.offline("acct", "t", "p")


def test_no_draws_while_offline() -> None:
    clock = FakeClock()
    rng = ScriptedRandom([0.0])
    injector = FaultInjector(0.5, rng, clock)
    outcome(injector, "p")
    calls = rng.calls
    for _ in range(10):
        outcome(injector, "p")
    assert rng.calls == calls


def test_draw_order_is_move_then_fault_then_kind() -> None:
    # not moved (0.5 ≥ 0.05), faulted (0.1 < 0.5), kind draw 0.6 → second code (0.5 ≤ 0.6 < 0.75)
    injector = FaultInjector(0.5, ScriptedRandom([0.5, 0.1, 0.6]), FakeClock())
    assert outcome(injector, "p") == "InternalError"
    # not moved, faulted, kind 0.9 → third code
    injector = FaultInjector(0.5, ScriptedRandom([0.5, 0.1, 0.9]), FakeClock())
    assert outcome(injector, "p") == "OperationTimedOut"
    # no partition: no move draw; fault draw 0.1, kind 0.2 → first code
    injector = FaultInjector(0.5, ScriptedRandom([0.1, 0.2]), FakeClock())
    assert outcome(injector, None) == "ServerBusy"


def test_many_windows_stay_bounded() -> None:
    clock = FakeClock()
    injector = FaultInjector(1.0, random.Random(3), clock, outage_seconds=(0.5, 0.5))
    for n in range(20_000):
        clock.now = n * 0.01
        outcome(injector, f"p{n}")
    assert injector.windows <= 1024 + 1
