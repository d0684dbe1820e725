"""Partition insight: exact counters, rates on a fake clock, anti-pattern warnings, Prometheus text."""

from __future__ import annotations

import json
import logging
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from tabulae.insight.exposition import escape_label_value, json_safe
from tabulae.insight.partitions import Insight
from tabulae.insight.series import OTHER, QUERY_CLASSES, TABLE_WIDE
from tabulae.tools.stress import partition_keys


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition, keyed by (sample name, sorted labels)."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            assert key not in found, key
            found[key] = sample.value
    return found


def value(text: str, name: str, **labels: str) -> float:
    return samples(text)[(name, tuple(sorted(labels.items())))]


def total(text: str, name: str, **labels: str) -> float:
    """Sum of a metric over every series whose labels include ``labels``."""
    return sum(
        v
        for (sample, keys), v in samples(text).items()
        if sample == name and all((k, x) in keys for k, x in labels.items())
    )


def known_workload(insight: Insight) -> None:
    """10 inserts into p, 3 point reads, 1 partition query scanning 10 and returning 2."""
    for _ in range(10):
        insight.record("acct", "orders", "p", op="insert", written=1, status=201)
    for _ in range(3):
        insight.record("acct", "orders", "p", op="get", read=1, query_class="point", status=200)
    insight.record(
        "acct", "orders", "p", op="query", scanned=10, returned=2, query_class="row-range", status=200
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


# ------------------------------------------------------------------------------------ counters


def test_known_workload_counts_exactly(clock: FakeClock) -> None:
    insight = Insight(clock)
    known_workload(insight)
    snap = insight.snapshot()
    (partition,) = snap["partitions"]
    assert partition["partition"] == "p"
    assert {k: partition[k] for k in ("requests", "written", "read", "scanned", "load", "throttled")} == {
        "requests": 14,
        "written": 10,
        "read": 5,  # 3 by key + 2 returned by the query
        "scanned": 13,  # 3 by key + 10 scanned by the query
        "load": 23,
        "throttled": 0,
    }
    assert partition["queries"] == {
        "point": 3,
        "row-range": 1,
        "partition-scan": 0,
        "table-scan": 0,
        "index-scan": 0,
    }
    assert partition["density"] == pytest.approx(5 / 13)
    (table,) = snap["tables"]
    (account,) = snap["accounts"]
    for figures in (table, account):
        assert (figures["written"], figures["read"], figures["scanned"]) == (10, 5, 13)
    assert table["table_wide"] is None and table["other"] is None
    text = insight.prometheus()
    labels = {"account": "acct", "table": "orders", "partition": "p"}
    assert value(text, "tabulae_entities_written_total", **labels) == 10
    assert value(text, "tabulae_entities_read_total", **labels) == 5
    assert value(text, "tabulae_entities_scanned_total", **labels) == 13
    assert value(text, "tabulae_requests_total", **labels) == 14
    assert value(text, "tabulae_throttled_total", **labels) == 0
    assert value(text, "tabulae_queries_total", **labels, **{"class": "point"}) == 3
    assert value(text, "tabulae_queries_total", **labels, **{"class": "row-range"}) == 1
    assert value(text, "tabulae_query_density", **labels) == pytest.approx(5 / 13)
    assert value(text, "tabulae_load_entities_per_second", **labels) == pytest.approx(2.3)


def test_queries_across_partitions_are_kept_table_wide(clock: FakeClock) -> None:
    insight = Insight(clock)
    insight.record(
        "acct", "t", None, op="query", scanned=500, returned=3, query_class="table-scan", status=200
    )
    insight.record(
        "acct", "t", None, op="query", scanned=40, returned=40, query_class="partition-scan", status=200
    )
    snap = insight.snapshot()
    assert snap["partitions"] == []
    wide = snap["tables"][0]["table_wide"]
    assert wide["queries"] == {
        "point": 0,
        "row-range": 0,
        "partition-scan": 1,
        "table-scan": 1,
        "index-scan": 0,
    }
    assert (wide["scanned"], wide["read"]) == (540, 43)
    text = insight.prometheus()
    assert (
        value(text, "tabulae_entities_scanned_total", account="acct", table="t", partition=TABLE_WIDE) == 540
    )


def test_every_query_class_is_counted(clock: FakeClock) -> None:
    insight = Insight(clock)
    for count, name in enumerate(QUERY_CLASSES, start=1):
        for _ in range(count):
            insight.record("a", "t", None, op="query", scanned=1, returned=1, query_class=name, status=200)
    assert insight.snapshot()["tables"][0]["queries"] == {
        "point": 1,
        "row-range": 2,
        "partition-scan": 3,
        "table-scan": 4,
        "index-scan": 5,
    }
    with pytest.raises(ValueError):
        insight.record("a", "t", None, op="query", query_class="index-seek", status=200)


def test_low_density_scans_on_one_property_suggest_an_index(clock: FakeClock) -> None:
    insight = Insight(clock)
    for _ in range(3):
        insight.record(
            "a", "people", None, op="query", scanned=1000, returned=1, query_class="table-scan",
            index_hint=("Email", "Edm.String"), status=200,
        )  # fmt: skip
    insight.record(
        "a", "people", None, op="query", scanned=1000, returned=1, query_class="table-scan", status=200
    )
    (warning,) = [w for w in insight.warnings() if w["kind"] == "low-density-scan"]
    assert warning["suggested_index"] == {"property": "Email", "type": "Edm.String"}
    assert "tabulae index add people Email --type Edm.String" in warning["message"]
    for _ in range(4):  # now most scans filter on nothing an index serves: no suggestion
        insight.record(
            "a", "people", None, op="query", scanned=1000, returned=1, query_class="table-scan", status=200
        )
    (warning,) = [w for w in insight.warnings() if w["kind"] == "low-density-scan"]
    assert warning["suggested_index"] is None and "index add" not in warning["message"]


def test_indexable_property_of_a_filter() -> None:
    from tabulae.table.query.index_plan import indexable_property
    from tabulae.table.query.parser import parse_filter

    cases = {
        "Email eq 'x'": ("Email", "Edm.String"),
        "PartitionKey eq 'p' and (Age eq 5 or Age eq 6)": ("Age", "Edm.Int32"),
        "Age ge 5L and Name lt 'x'": ("Age", "Edm.Int64"),
        "Email ne 'x'": None,
        "Age eq 5 or Name eq 'x'": None,
        "PartitionKey eq 'p'": None,
        "Data eq X'00'": None,
    }
    for text, expected in cases.items():
        assert indexable_property(parse_filter(text)) == expected, text


def test_failed_and_throttled_requests_count_no_entities(clock: FakeClock) -> None:
    insight = Insight(clock)
    insight.record("a", "t", "p", op="batch", written=100, status=503, throttled=True)
    insight.record("a", "t", "p", op="insert", written=1, status=409)
    insight.record("a", "t", "p", op="query", scanned=5, returned=1, query_class="row-range", status=500)
    (partition,) = insight.snapshot()["partitions"]
    assert (partition["requests"], partition["throttled"]) == (3, 1)
    assert (partition["written"], partition["read"], partition["scanned"]) == (0, 0, 0)
    assert sum(partition["queries"].values()) == 0
    assert partition["density"] is None
    assert partition["rates"]["throttled"] == pytest.approx(0.1)


def test_table_names_are_case_insensitive(clock: FakeClock) -> None:
    insight = Insight(clock)
    insight.record("a", "Orders", "p", op="insert", written=1, status=201)
    insight.record("a", "orders", "p", op="insert", written=1, status=201)
    (table,) = insight.snapshot()["tables"]
    assert (table["table"], table["written"]) == ("Orders", 2)


# ------------------------------------------------------------------------------------ rates


def test_rates_cover_the_last_window_seconds(clock: FakeClock) -> None:
    insight = Insight(clock, window_seconds=10)
    clock.now = 1000.5
    insight.record("a", "t", "p", op="batch", written=100, status=202)
    clock.now = 1003.2
    insight.record("a", "t", "p", op="query", scanned=50, returned=5, query_class="row-range", status=200)

    def rates() -> dict[str, float]:
        return dict(insight.snapshot()["partitions"][0]["rates"])

    assert rates() == {"written": 10.0, "read": 0.5, "scanned": 5.0, "load": 15.0, "throttled": 0.0}
    clock.now = 1009.99
    assert rates()["load"] == 15.0
    clock.now = 1010.0  # second 1000 leaves the window
    assert rates() == {"written": 0.0, "read": 0.5, "scanned": 5.0, "load": 5.0, "throttled": 0.0}
    clock.now = 1013.0
    assert rates()["load"] == 0.0
    assert insight.snapshot()["partitions"][0]["written"] == 100  # totals stay


def test_partitions_are_listed_hottest_first(clock: FakeClock) -> None:
    insight = Insight(clock, partition_target=100)
    for pk, load in (("cool", 5), ("hot", 500), ("warm", 50)):
        insight.record("a", "t", pk, op="batch", written=load, status=202)
    snap = insight.snapshot()
    assert [p["partition"] for p in snap["partitions"]] == ["hot", "warm", "cool"]
    assert snap["partitions"][0]["target_ratio"] == pytest.approx(0.5)
    assert snap["targets"] == {"partition": 100.0, "account": 20000.0}
    assert snap["window_seconds"] == 10


# ------------------------------------------------------------------------------------ warnings


def kinds(insight: Insight) -> list[tuple[str, str]]:
    return [(w["kind"], w["severity"]) for w in insight.snapshot()["warnings"]]


def test_hot_partition_near_and_over_target(clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    insight = Insight(clock, partition_target=100, window_seconds=10)
    caplog.set_level(logging.WARNING, logger="tabulae.insight")
    insight.record("a", "t", "p", op="batch", written=790, status=202)
    assert kinds(insight) == []
    assert caplog.records == []
    insight.record("a", "t", "p", op="insert", written=10, status=201)  # 80 entities/s: 80%
    assert kinds(insight) == [("hot-partition", "near target")]
    insight.record("a", "t", "p", op="batch", written=200, status=202)  # 100/s
    (warning,) = insight.snapshot()["warnings"]
    assert (warning["severity"], warning["partition"], warning["rate"]) == ("over target", "p", 100.0)
    assert "hot partition 'p' in a/t" in warning["message"]
    # logged once, not again within the minute
    assert [r.getMessage() for r in caplog.records] == [
        "hot partition 'p' in a/t: 80 entities/s, 80% of its target of 100/s over the last 10 s; "
        "spread the load over more PartitionKeys"
    ]
    assert all(r.name == "tabulae.insight" and r.levelno == logging.WARNING for r in caplog.records)


def test_warnings_are_logged_at_most_once_a_minute(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    insight = Insight(clock, partition_target=10, window_seconds=1)
    caplog.set_level(logging.WARNING, logger="tabulae.insight")
    for step in range(121):
        clock.now = 1000.0 + step
        insight.record("a", "t", "p", op="batch", written=20, status=202)
    assert len(caplog.records) == 3  # at 0, 60 and 120 s
    insight.record("a", "t", "q", op="batch", written=20, status=202)
    assert len(caplog.records) == 4  # another subject has its own minute


@pytest.mark.parametrize("pk", ["p", "p\ud800"])  # the second is rewritten by json_safe
def test_a_muted_warning_still_counts_and_is_still_listed(
    clock: FakeClock, caplog: pytest.LogCaptureFixture, pk: str
) -> None:
    """Recording skips building a warning logged within the minute; the counts, the warning
    listed in the snapshot and the next minute's log line are as when it was built."""
    insight = Insight(clock, partition_target=10, account_target=10, window_seconds=1)
    caplog.set_level(logging.WARNING, logger="tabulae.insight")
    for step in range(61):
        clock.now = 1000.0 + step
        for table in ("t", "T"):  # one table, either case
            insight.record("a", table, pk, op="get", read=1, query_class="point", status=200)
            insight.record("a", table, pk, op="batch", written=20, status=202)
    # per minute one line about the partition and one about the account: at 0 and 60 s
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [
        f"hot partition {pk!r} in a/t",
        "account a",
        f"hot partition {pk!r} in a/t",
        "account a",
    ]
    assert kinds(insight) == [("busy-account", "over target"), ("hot-partition", "over target")]
    (account,) = insight.snapshot()["accounts"]
    assert (account["written"], account["read"]) == (61 * 2 * 20, 61 * 2)


def test_throttled_partition_is_over_target(clock: FakeClock) -> None:
    insight = Insight(clock, partition_target=1000)
    insight.record("a", "t", "p", op="insert", throttled=True, status=503)
    (warning,) = insight.snapshot()["warnings"]
    assert (warning["kind"], warning["severity"], warning["throttled"]) == ("hot-partition", "over target", 1)
    assert "1 request(s) throttled" in warning["message"]


def test_busy_account(clock: FakeClock) -> None:
    insight = Insight(clock, account_target=100, partition_target=10**6)
    for n in range(9):
        insight.record("a", "t", f"p{n}", op="batch", written=90, status=202)
    assert kinds(insight) == [("busy-account", "near target")]  # 81 entities/s
    insight.record("a", "t", "p9", op="batch", written=190, status=202)
    assert kinds(insight) == [("busy-account", "over target")]  # 100 entities/s


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        ([f"{n:04d}" for n in range(16)], [("append-only", "warning")]),
        ([f"{n:04d}" for n in range(15)], []),
        ([f"{n:04d}" for n in reversed(range(20))], [("prepend-only", "warning")]),
        (
            [f"{n:04d}" for n in range(16) for _ in range(3)],
            [("append-only", "warning")],
        ),  # repeats are one step
        ([f"{n:04d}" for n in range(10)] + ["0000"] + [f"{n:04d}" for n in range(20, 34)], []),
        (partition_keys("hashed", 200), []),
        (partition_keys("sequential", 200), [("append-only", "warning")]),
        # ordinal UTF-16 order: U+10000 (a surrogate pair, D800 DC00) sorts *before* U+FFFF
        (
            [f"\U00010000{n:02d}" for n in range(8)] + [f"\uffff{n:02d}" for n in range(8)],
            [("append-only", "warning")],
        ),
    ],
    ids=[
        "16-increasing",
        "15-increasing",
        "decreasing",
        "repeats",
        "broken",
        "hashed",
        "sequential",
        "utf16",
    ],
)
def test_monotonic_inserts(clock: FakeClock, keys: list[str], expected: list[tuple[str, str]]) -> None:
    insight = Insight(clock, monotonic_run=16)
    for pk in keys:
        insight.record("a", "logs", pk, op="insert", written=1, status=201)
    assert kinds(insight) == expected


@pytest.mark.parametrize(
    ("store", "local"),
    [
        ("sqlite", "here SQLite puts them on the {side}most leaf of one B-tree, which does not slow it"),
        ("postgres", "here PostgreSQL puts them on the {side}most leaf of the key index, a lesser hot spot"),
        ("citus", "here Citus spreads them over its shards by a hash of the PartitionKey, so none is hot"),
    ],
)
@pytest.mark.parametrize(("direction", "end", "side"), [(1, "last", "right"), (-1, "first", "left")])
def test_ordered_inserts_warning_says_what_azure_and_the_store_in_use_do(
    clock: FakeClock, store: str, local: str, direction: int, end: str, side: str
) -> None:
    """Azure's range partitions are why the pattern matters; the store in use does something
    else with it locally (Citus hashes, so nothing there is hot), and the warning says both."""
    insight = Insight(clock, monotonic_run=4, store=store)
    for n in range(4)[::direction]:
        insight.record("a", "logs", f"{n:02d}", op="insert", written=1, status=201)
    (warning,) = insight.snapshot()["warnings"]
    message = warning["message"]
    assert (
        f"on Azure, which range-partitions by PartitionKey, every insert lands on the {end} range partition"
        in message
    )
    assert local.format(side=side) in message
    assert message.endswith("; spread the keys (e.g. prefix a hash)")
    # The view a multi-worker /metrics sums into keeps the store's wording.
    view = insight.view()
    view.absorb(insight.state())
    assert [w["message"] for w in view.snapshot()["warnings"]] == [message]


def test_only_successful_inserts_feed_the_monotonic_detector(clock: FakeClock) -> None:
    insight = Insight(clock, monotonic_run=4)
    for n in range(10):
        insight.record("a", "t", f"{n:02d}", op="delete", written=1, status=204)
        insight.record("a", "t", f"{n:02d}", op="get", read=1, query_class="point", status=200)
        insight.record("a", "t", f"{n:02d}", op="insert", written=1, status=409)
    assert kinds(insight) == []
    for n in range(4):
        insight.record("a", "t", f"{n:02d}", op="upsert", written=1, status=204)
    (warning,) = insight.snapshot()["warnings"]
    assert (warning["kind"], warning["partition"], warning["run"]) == ("append-only", "03", 4)


def test_table_scans_of_low_density(clock: FakeClock) -> None:
    insight = Insight(clock, low_density_min_scanned=1000, scan_history=5)

    def scan(scanned: int, returned: int) -> None:
        insight.record(
            "a",
            "t",
            None,
            op="query",
            scanned=scanned,
            returned=returned,
            query_class="table-scan",
            status=200,
        )

    scan(900, 0)
    assert kinds(insight) == []  # too little scanned to judge
    scan(900, 17)  # 17 of 1,800: 0.94%
    (warning,) = insight.snapshot()["warnings"]
    assert (warning["kind"], warning["scanned"], warning["returned"]) == ("low-density-scan", 1800, 17)
    assert warning["density"] == pytest.approx(17 / 1800)
    for _ in range(5):  # the recent scans are dense: the warning goes
        scan(1000, 500)
    assert kinds(insight) == []


def test_row_range_queries_never_count_as_table_scans(clock: FakeClock) -> None:
    insight = Insight(clock, low_density_min_scanned=10)
    for _ in range(5):
        insight.record(
            "a", "t", "p", op="query", scanned=1000, returned=0, query_class="row-range", status=200
        )
    assert kinds(insight) == []


# ------------------------------------------------------------------------------------ bounds


def test_partition_cardinality_is_bounded_and_sums_stay_exact(clock: FakeClock) -> None:
    insight = Insight(clock, max_partitions=20)
    written = 0
    for n in range(300):
        clock.now = 1000.0 + n * 0.1
        insight.record("a", "t", f"p{n:03d}", op="batch", written=n + 1, status=202)
        written += n + 1
        insight.record("a", "t", "hot", op="insert", written=5, status=201)
        written += 5
    text = insight.prometheus()
    series = [k for k in samples(text) if k[0] == "tabulae_entities_written_total"]
    assert len(series) <= 21  # 20 partitions + (other)
    assert ("partition", OTHER) in {label for _name, labels in series for label in labels}
    assert total(text, "tabulae_entities_written_total") == written
    assert total(text, "tabulae_requests_total") == 600
    snap = insight.snapshot()
    assert len(snap["partitions"]) <= 20
    assert snap["partitions"][0]["partition"] == "hot"  # the busiest is never folded away
    assert snap["tables"][0]["written"] == written


def test_folded_counts_never_go_down(clock: FakeClock) -> None:
    insight = Insight(clock, max_partitions=10)
    previous = 0.0
    for n in range(100):
        insight.record("a", "t", f"p{n}", op="insert", written=1, status=201)
        other = samples(insight.prometheus()).get(
            ("tabulae_entities_written_total", (("account", "a"), ("partition", OTHER), ("table", "t"))), 0.0
        )
        assert other >= previous
        previous = other
    assert previous > 0


def test_table_cardinality_is_bounded(clock: FakeClock) -> None:
    insight = Insight(clock, max_tables=5)
    for n in range(40):
        clock.now = 1000.0 + n
        insight.record("a", f"t{n}", "p", op="insert", written=1, status=201)
    snap = insight.snapshot()
    names = [t["table"] for t in snap["tables"]]
    assert len(names) <= 6 and OTHER in names
    assert sum(t["written"] for t in snap["tables"]) == 40
    text = insight.prometheus()
    assert total(text, "tabulae_entities_written_total") == 40
    assert total(text, "tabulae_entities_written_total", table=OTHER, partition=OTHER) > 0


def test_forget_table_drops_its_series_but_not_the_account_totals(clock: FakeClock) -> None:
    insight = Insight(clock)
    insight.record("a", "Gone", "p", op="insert", written=3, status=201)
    insight.record("a", "kept", "p", op="insert", written=1, status=201)
    insight.forget_table("a", "gone")
    snap = insight.snapshot()
    assert [t["table"] for t in snap["tables"]] == ["kept"]
    assert snap["accounts"][0]["written"] == 4
    insight.forget_table("a", "never-there")


# ------------------------------------------------------------------------------------ output


def test_snapshot_is_json_even_with_lone_surrogates(clock: FakeClock) -> None:
    insight = Insight(clock, monotonic_run=2)
    for pk in ("a\ud800", "b\udfff"):
        insight.record("a", "t", pk, op="insert", written=1, status=201)
    snap = insight.snapshot()
    decoded = json.loads(orjson.dumps(snap))
    assert decoded == snap
    assert {p["partition"] for p in snap["partitions"]} == {"a\ufffd", "b\ufffd"}


def test_prometheus_exposition_shape(clock: FakeClock) -> None:
    insight = Insight(clock)
    known_workload(insight)
    text = insight.prometheus()
    assert text.endswith("\n")
    families = {family.name: family for family in text_string_to_metric_families(text)}
    assert {name: families[name].type for name in families} == {
        "tabulae_requests": "counter",
        "tabulae_entities_written": "counter",
        "tabulae_entities_read": "counter",
        "tabulae_entities_scanned": "counter",
        "tabulae_throttled": "counter",
        "tabulae_queries": "counter",
        "tabulae_query_density": "gauge",
        "tabulae_load_entities_per_second": "gauge",
        "tabulae_target_entities_per_second": "gauge",
        "tabulae_warnings": "gauge",
    }
    for line in text.splitlines():
        if line.startswith("# TYPE"):
            assert text.count(line) == 1
    assert value(text, "tabulae_target_entities_per_second", scope="partition") == 2000
    assert value(text, "tabulae_warnings", kind="append-only") == 0


def test_empty_insight_still_exposes_targets(clock: FakeClock) -> None:
    text = Insight(clock).prometheus()
    assert value(text, "tabulae_target_entities_per_second", scope="account") == 20000
    assert Insight(clock).snapshot()["partitions"] == []


def test_label_escaping() -> None:
    assert escape_label_value('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
    assert escape_label_value("\ud83d") == "\ufffd"
    assert escape_label_value("é\t\r") == "é\t\r"
    assert json_safe("x\udc00y") == "x\ufffdy"


@settings(max_examples=300, deadline=None)
@given(pk=st.text(max_size=40), table=st.sampled_from(["t", "Orders"]))
def test_any_partition_key_round_trips_through_the_parser(pk: str, table: str) -> None:
    insight = Insight(FakeClock())
    insight.record("acct", table, pk, op="insert", written=7, status=201)
    text = insight.prometheus()
    text.encode("utf-8")  # always encodable
    found: dict[str, Any] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "tabulae_entities_written_total":
                found[sample.labels["partition"]] = sample.value
    assert found == {json_safe(pk): 7}


@given(
    st.lists(
        st.tuples(st.integers(0, 40), st.integers(0, 5), st.booleans()),
        max_size=60,
    )
)
def test_window_sums_kept_as_counts_arrive_match_a_full_recount(steps: list[tuple[int, int, bool]]) -> None:
    """The window's kept sums equal summing its live buckets, whatever order seconds arrive in."""
    from tabulae.insight.series import Window

    window = Window(10)
    for second, count, query in steps:
        if query:
            expected = [0, 0, 0, 0]
            for bucket in window.live(second):
                for index in range(4):
                    expected[index] += bucket[index + 1]
            assert window.sums(second) == tuple(expected)
        else:
            window.add(second, count, 2 * count, 3 * count, count % 2)
