"""Terminal reports: ``tabulae top`` drawing and polling, and the ``tabulae stress`` report and verdict."""

from __future__ import annotations

import io
import json
import socket
import threading
import unicodedata
import urllib.error
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tabulae.insight.partitions import Insight
from tabulae.tools import top
from tabulae.tools.failures import Failure
from tabulae.tools.stress import (
    VERDICT_AT,
    VERDICT_CLIENT_BOUND,
    VERDICT_OVER,
    VERDICT_WITHIN,
    StressReport,
    _layout,
    judge,
    partition_keys,
    render_report,
)
from tabulae.tools.top import CLEAR, metrics_url, render_top, run_top


class FakeClock:
    def __init__(self, now: float = 500.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def columns(line: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in ("W", "F") else 1 for c in line)


def busy_snapshot() -> dict[str, Any]:
    insight = Insight(FakeClock(), partition_target=100)
    insight.record("devstoreaccount1", "orders", "hot", op="batch", written=900, status=202)
    insight.record("devstoreaccount1", "orders", "warm", op="batch", written=300, status=202)
    insight.record("devstoreaccount1", "orders", "hot", op="insert", throttled=True, status=503)
    insight.record(
        "devstoreaccount1", "events", None, op="query", scanned=5000, returned=4, query_class="table-scan",
        status=200,
    )  # fmt: skip
    insight.record("devstoreaccount1", "events", "賽跑登記" * 12, op="insert", written=1, status=201)
    return insight.snapshot()


# ------------------------------------------------------------------------------------ render


def test_render_lists_the_hottest_partitions_first() -> None:
    text = render_top(busy_snapshot(), 120)
    lines = text.splitlines()
    assert lines[0].startswith("tabulae top: rates over the last 10 s; targets 100/s per partition")
    assert lines[1].startswith("account devstoreaccount1: load 620/s")
    header = next(line for line in lines if line.startswith("TABLE / PARTITION"))
    assert "LOAD/s" in header and "%TGT" in header and "DENS" in header
    body = lines[lines.index(header) + 1 :]
    assert body[0].startswith("events / (across partitions)")
    assert body[1].startswith("orders / 'hot'")
    assert body[2].startswith("orders / 'warm'")
    hot = body[1].split()
    assert hot[3:] == ["90.0", "90%", "90.0", "0", "0", "-", "1"]
    assert "hot partition 'hot' in devstoreaccount1/orders" in text
    assert "table scans of devstoreaccount1/events return 0.08%" in text
    assert "warnings (2):" in text
    warnings = lines[lines.index("warnings (2):") + 1 :]
    assert not any("…" in line for line in warnings)  # warnings wrap, never cut
    assert " ".join(line.strip() for line in warnings).endswith("spread the load over more PartitionKeys")


@pytest.mark.parametrize("width", [60, 80, 120, 200])
def test_render_fits_the_width(width: int) -> None:
    for line in render_top(busy_snapshot(), width).splitlines():
        assert columns(line) <= max(width, 62), line


def test_render_escapes_control_characters_in_keys() -> None:
    insight = Insight(FakeClock())
    insight.record("a", "t", "\x1b[31mred\x07\nline", op="insert", written=1, status=201)
    text = render_top(insight.snapshot(), 100)
    assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b[31mred" in text


def test_render_without_traffic() -> None:
    text = render_top(Insight(FakeClock()).snapshot(), 80)
    assert "(no partition traffic yet)" in text
    assert render_top({}, 80).count("\n") >= 3  # a malformed document still draws


def test_render_limits_rows() -> None:
    insight = Insight(FakeClock())
    for n in range(30):
        insight.record("a", "t", f"p{n:02d}", op="batch", written=n + 1, status=202)
    text = render_top(insight.snapshot(), 100, limit=5)
    assert "t / 'p29'" in text and "t / 'p24'" not in text
    assert "… 25 more" in text


@pytest.mark.parametrize(
    ("endpoint", "url"),
    [
        ("http://127.0.0.1:10002", "http://127.0.0.1:10002/metrics?format=json"),
        ("http://127.0.0.1:10002/devstoreaccount1", "http://127.0.0.1:10002/metrics?format=json"),
        ("localhost:9000", "http://localhost:9000/metrics?format=json"),
        ("https://tables.example:443/acct/", "https://tables.example:443/metrics?format=json"),
    ],
)
def test_metrics_url(endpoint: str, url: str) -> None:
    assert metrics_url(endpoint) == url


# ------------------------------------------------------------------------------------ polling


@pytest.fixture
def metrics_server() -> Iterator[tuple[str, list[str]]]:
    """A stand-in for the server's JSON metrics, recording the paths asked for."""
    paths: list[str] = []
    document = json.dumps(busy_snapshot()).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            paths.append(self.path)
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(document)))
            self.end_headers()
            self.wfile.write(document)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/devstoreaccount1", paths
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_run_top_polls_and_redraws(metrics_server: tuple[str, list[str]]) -> None:
    endpoint, paths = metrics_server
    out = io.StringIO()
    assert run_top(endpoint, interval=0, iterations=3, out=out, clear=True, limit=10) == 0
    text = out.getvalue()
    assert paths == ["/metrics?format=json"] * 3
    assert text.count(CLEAR) == 3
    assert text.count("orders / 'hot'") == 3


def test_run_top_without_a_terminal_does_not_clear(metrics_server: tuple[str, list[str]]) -> None:
    endpoint, _paths = metrics_server
    out = io.StringIO()
    run_top(endpoint, interval=0, iterations=1, out=out)
    assert CLEAR not in out.getvalue()


def test_run_top_fails_at_once_on_an_unreachable_server() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: connections are refused
        out = io.StringIO()
        with pytest.raises(Failure) as refused:
            run_top(f"127.0.0.1:{port}", interval=0, iterations=5, out=out)
    assert out.getvalue() == ""
    assert refused.value.code == "ConnectionRefused"
    assert refused.value.message.startswith(f"cannot read http://127.0.0.1:{port}/metrics?format=json")


def test_run_top_keeps_polling_a_server_that_goes_away(metrics_server: tuple[str, list[str]]) -> None:
    """Once drawn, a server that stops answering is reported in place; the status says so."""
    endpoint, _paths = metrics_server
    answers = iter([True, False, False])
    real_fetch = top.fetch_snapshot

    def flaky(url: str, timeout: float = 5.0, headers: Any = None) -> dict[str, Any]:
        if next(answers):
            return real_fetch(url, timeout, headers)
        raise urllib.error.URLError("connection refused")

    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(top, "fetch_snapshot", flaky)
        assert run_top(endpoint, interval=0, iterations=3, out=out) == 1
    assert out.getvalue().count("orders / 'hot'") == 1
    assert out.getvalue().count("tabulae top: cannot read") == 2


# ------------------------------------------------------------------------------------ stress


def test_partition_key_schemes() -> None:
    hashed = partition_keys("hashed", 50)
    assert len(set(hashed)) == 50 and hashed != sorted(hashed)
    sequential = partition_keys("sequential", 50)
    assert sequential == sorted(sequential) and sequential[0] == "00000000"
    assert partition_keys("single", 50) == ["stress"]
    with pytest.raises(ValueError):
        partition_keys("random", 5)


def test_layouts_place_every_entity_once() -> None:
    for scheme in ("hashed", "sequential", "single"):
        layout = _layout(scheme, 7, 100)
        rows = [rk for _pk, rks in layout for rk in rks]
        assert sorted(rows) == [f"{i:010d}" for i in range(100)]
    assert [len(rks) for _pk, rks in _layout("sequential", 4, 10)] == [3, 3, 3, 1]
    assert [len(rks) for _pk, rks in _layout("hashed", 4, 10)] == [3, 3, 2, 2]
    assert len(_layout("sequential", 10, 3)) == 3  # partitions without entities are dropped


@pytest.mark.parametrize(
    ("achieved", "throttled", "peak", "verdict"),
    [
        (1990.0, 12, None, VERDICT_AT),
        (900.0, 3, 5000.0, VERDICT_AT),
        (2600.0, 0, None, VERDICT_OVER),
        (1700.0, 0, None, VERDICT_WITHIN),
        (500.0, 0, 520.0, VERDICT_WITHIN),
        (300.0, 0, None, VERDICT_CLIENT_BOUND),
        (300.0, 0, 1500.0, VERDICT_CLIENT_BOUND),
    ],
)
def test_verdicts(achieved: float, throttled: int, peak: float | None, verdict: str) -> None:
    assert judge(achieved, 2000.0, throttled, peak)[0] == verdict


def test_verdict_advice_mentions_failures() -> None:
    assert "4 operations failed" in judge(1900.0, 2000.0, 10, None, failed=4)[1]
    assert "--concurrency" in judge(10.0, 2000.0, 0)[1]
    assert "--targets azure" in judge(5000.0, 2000.0, 0)[1]


def test_render_report() -> None:
    report = StressReport(
        table="stress1",
        scheme="single",
        partitions=1,
        loaded=1000,
        hot_partition="stress",
        hot_entities=1000,
        load_seconds=1.25,
        duration=10.0,
        concurrency=8,
        target=50.0,
        operations={"point": 200, "range": 20, "write": 100},
        failed=0,
        written=100,
        read=200,
        scanned=200,
        scanned_exact=True,
        throttled=37,
        timeouts=2,
    )
    assert (report.counted, report.achieved) == (500, 50.0)
    report.verdict, report.advice = judge(report.achieved, report.target, report.throttled, None)
    text = render_report(report)
    assert "Partition stress test: table stress1, scheme single" in text
    assert "200 point, 20 row-range, 100 write, 0 failed" in text
    assert "100 written + 200 read + 200 scanned (reported by the server) = 500" in text
    assert "37 × 503 ServerBusy, 2 × 500 OperationTimedOut" in text
    assert "achieved     50 entities/s against a target of 50/s (100%)" in text
    assert "Verdict: at target (throttled)" in text
