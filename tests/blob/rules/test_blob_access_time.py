"""Last access time: set on reads and writes, at most once a day, only when tracking is on."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from tabulae.blob.rules.access_time import INTERVAL, touched

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_first_access_sets_it_then_once_a_day() -> None:
    assert touched("GetBlob", None, T0, tracking=True) == T0
    assert touched("GetBlob", T0, T0 + timedelta(hours=23, minutes=59), tracking=True) is None
    assert touched("PutBlob", T0, T0 + INTERVAL, tracking=True) == T0 + INTERVAL


def test_property_reads_and_untracked_accounts_leave_it() -> None:
    assert touched("GetBlobProperties", None, T0, tracking=True) is None
    assert touched("GetBlobTags", None, T0, tracking=True) is None
    assert touched("GetBlob", None, T0, tracking=False) is None


@given(st.lists(st.timedeltas(min_value=timedelta(0), max_value=timedelta(hours=30)), max_size=50))
def test_updates_are_at_least_a_day_apart_and_never_lag_a_day(gaps: list[timedelta]) -> None:
    now, last, updates = T0, None, []
    for gap in gaps:
        now += gap
        new = touched("GetBlob", last, now, tracking=True)
        if new is not None:
            last = new
            updates.append(new)
        assert last is not None and now - last < INTERVAL
    assert all(b - a >= INTERVAL for a, b in itertools.pairwise(updates))
