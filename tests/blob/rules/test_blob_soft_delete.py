"""Soft delete rules: the policy's range, remaining days, purge order, container restore."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tabulae.blob.rules import softdelete as sd
from tabulae.model.errors import ServiceError

T0 = datetime(2026, 1, 1, 12, tzinfo=UTC)
DAY = timedelta(days=1)


@pytest.mark.parametrize(("text", "days"), [("1", 1), ("7", 7), ("365", 365), ("0007", 7)])
def test_policy_days_in_range(text: str, days: int) -> None:
    assert sd.retention_days(True, text) == days


@pytest.mark.parametrize("text", [None, "", "0", "366", "-1", "1.5", "seven", "٣", "99999999999"])
def test_policy_days_out_of_range_are_invalid_xml_node_value(text: str | None) -> None:
    with pytest.raises(ServiceError) as caught:
        sd.retention_days(True, text)
    assert (caught.value.status, caught.value.code) == (400, "InvalidXmlNodeValue")


def test_disabled_policy_ignores_days() -> None:
    assert sd.retention_days(False, "900") is None


def test_remaining_days_count_whole_days_after_the_current_one() -> None:
    """As recorded: deleted seconds before the listing under a 7-day policy, 6."""
    d = sd.Deletion(T0, 7)
    assert d.remaining_days(T0) == 6
    assert d.remaining_days(T0 + timedelta(seconds=2)) == 6
    assert d.remaining_days(T0 + DAY + timedelta(hours=1)) == 5
    assert d.remaining_days(T0 + 6 * DAY + timedelta(hours=1)) == 0  # the last day, still kept
    assert not d.purged(T0 + 7 * DAY - timedelta(microseconds=1))
    assert d.remaining_days(T0 + 7 * DAY) == 0 and d.purged(T0 + 7 * DAY)
    assert d.remaining_days(T0 - DAY) == 6  # a clock behind the deletion never shows more
    assert sd.Deletion(T0, 1).remaining_days(T0 + timedelta(seconds=1)) == 0


@given(st.integers(1, 365), st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=400)))
def test_remaining_days_are_monotonic_and_bounded(days: int, elapsed: timedelta) -> None:
    d = sd.Deletion(T0, days)
    now = T0 + elapsed
    left = d.remaining_days(now)
    assert 0 <= left < days
    assert d.remaining_days(now + timedelta(hours=5)) <= left
    assert not d.purged(now) or left == 0


def test_purge_due_lists_what_ran_out_oldest_first() -> None:
    deletions = {
        "a": sd.Deletion(T0, 3),
        "b": sd.Deletion(T0 + DAY, 1),
        "c": sd.Deletion(T0, 30),
        "d": sd.Deletion(T0 - DAY, 2),
    }
    assert sd.purge_due(deletions, T0) == []
    assert sd.purge_due(deletions, T0 + 2 * DAY) == ["d", "b"]
    assert sd.purge_due(deletions, T0 + 3 * DAY) == ["d", "b", "a"]


def test_container_version_is_the_recorded_filetime_form() -> None:
    recorded = datetime(2025, 10, 6, 19, 8, 38, 411998, tzinfo=UTC)
    assert sd.container_version(recorded) == "01DC36F49F23DCAC"  # the recording's is ...B2: 0.6 µs later
    assert len(sd.container_version(T0)) == 16
    assert sd.container_version(T0) < sd.container_version(T0 + timedelta(microseconds=1))


def _deleted(name: str, version: str, when: datetime = T0, days: int = 7) -> sd.DeletedContainer:
    return sd.DeletedContainer(name, version, sd.Deletion(when, days))


def test_restore_container_picks_the_named_version() -> None:
    gone = [_deleted("c", "01"), _deleted("c", "02"), _deleted("d", "01")]
    assert sd.restore_container("c", "c", "02", gone, live=False, now=T0 + DAY) is gone[1]


@pytest.mark.parametrize(
    ("destination", "name", "version", "live", "later", "status", "code"),
    [
        ("c", None, "01", False, 0, 400, "MissingRequiredHeader"),
        ("c", "c", None, False, 0, 400, "MissingRequiredHeader"),
        ("e", "c", "01", False, 0, 400, "InvalidHeaderValue"),
        ("c", "c", "01", True, 0, 409, "ContainerAlreadyExists"),
        ("c", "c", "09", False, 0, 404, "ContainerNotFound"),
        ("c", "c", "01", False, 7, 404, "ContainerNotFound"),
    ],
)
def test_restore_container_errors(
    destination: str, name: str | None, version: str | None, live: bool, later: int, status: int, code: str
) -> None:
    with pytest.raises(ServiceError) as caught:
        sd.restore_container(
            destination, name, version, [_deleted("c", "01")], live=live, now=T0 + later * DAY
        )
    assert (caught.value.status, caught.value.code) == (status, code)
