"""Version ids: their format, order, uniqueness under a fast or backward clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tabulae.blob.rules import versions
from tabulae.model.errors import ServiceError

T0 = datetime(2021, 1, 1, tzinfo=UTC)
moments = st.datetimes(
    min_value=datetime(1971, 1, 1), max_value=datetime(9998, 12, 31), timezones=st.just(UTC)
)


def test_format_is_azures() -> None:
    assert (
        versions.new_version_id(T0 + timedelta(microseconds=123456), None) == "2021-01-01T00:00:00.1234560Z"
    )
    assert versions.render(versions.parse("2021-01-01T00:00:00.1234567Z")) == "2021-01-01T00:00:00.1234567Z"


@given(moments)
def test_parse_render_round_trip(moment: datetime) -> None:
    vid = versions.new_version_id(moment, None)
    assert versions.render(versions.parse(vid)) == vid
    assert versions.parse(vid) == versions.ticks(moment)


@given(st.lists(st.timedeltas(min_value=timedelta(seconds=-5), max_value=timedelta(seconds=5)), max_size=30))
def test_ids_strictly_increase_whatever_the_clock_does(steps: list[timedelta]) -> None:
    """Two writes in one tick, or a clock that steps back, still give newer ids, in string order."""
    now, ids = T0, [versions.new_version_id(T0, None)]
    for step in steps:
        now += step
        ids.append(versions.new_version_id(now, ids[-1]))
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert [versions.parse(i) for i in ids] == sorted(versions.parse(i) for i in ids)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "2021-01-01",
        "2021-01-01T00:00:00Z",
        "2021-01-01T00:00:00.123456Z",
        "2021-02-30T00:00:00.0000000Z",
        "2021-01-01T00:00:00.1234567",
        " 2021-01-01T00:00:00.1234567Z",
        "2021-01-01T00:00:00.1234567Z\n",
    ],
)
def test_bad_version_ids_are_400(bad: str) -> None:
    with pytest.raises(ServiceError) as caught:
        versions.parse(bad)
    assert (caught.value.status, caught.value.code) == (400, "InvalidQueryParameterValue")


def test_current_version_and_header() -> None:
    ids = [versions.render(t) for t in (5, 9, 7)]
    assert versions.current_version(ids, deleted=False) == ids[1]
    assert versions.current_version(ids, deleted=True) is None
    assert versions.current_version([], deleted=False) is None
    assert versions.is_current_header(ids[1], ids[1]) == (b"x-ms-is-current-version", b"true")
    assert versions.is_current_header(ids[0], ids[1])[1] == b"false"
    assert versions.is_current_header(ids[0], None)[1] == b"false"


def test_naive_times_are_refused() -> None:
    with pytest.raises(ValueError):
        versions.ticks(datetime(2021, 1, 1))
