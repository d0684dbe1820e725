"""The examples' catalogue and report, without a server: every example explains itself, and the
Markdown page keeps the sections of examples a later run skipped."""

from __future__ import annotations

from pathlib import Path

from tabulae.examples import catalogue, report
from tabulae.examples.report import Result


def test_every_example_states_problem_design_and_trade_off() -> None:
    assert len(catalogue.EXAMPLES) >= 18
    for name, entry in catalogue.EXAMPLES.items():
        starts = [paragraph.split(":")[0].split(" (")[0] for paragraph in entry.explanation]
        for part in ("The problem", "The design", "The trade-off"):
            assert part in starts, (name, starts)
        assert entry.title and entry.module.endswith(name.replace("-", "_"))


def result(name: str, status: str, claim: str) -> Result:
    operation = {"name": "read", "requests": 2, "classes": {"point": 2}, "scanned": 2, "returned": 2,
                 "failures": 1, "statuses": {"200": 2}}  # fmt: skip
    return Result(name, "t", status, "" if status == "passed" else "why", 0.1, [operation], [claim], [], [])


def test_a_skipped_example_keeps_its_earlier_section(tmp_path: Path) -> None:
    page = tmp_path / "patterns.md"
    report.write_markdown(
        page, [result("log-tail", "passed", "first --> run"), result("retry", "skipped", "x")]
    )
    report.write_markdown(page, [result("log-tail", "skipped", "y"), result("retry", "passed", "second run")])
    text = page.read_text()
    assert "- shown: first --> run" in text and "- shown: second run" in text
    summary = [line for line in text.splitlines() if line.startswith("| [")]
    assert [line.split("]")[0][3:] for line in summary] == ["log-tail", "retry"]
    assert all("| passed | 1 | 2 | 1 | point ×2 | 2 / 2 | none |" in line for line in summary), summary


def test_the_terminal_report_lines_up_the_cost_table() -> None:
    text = report.text(result("log-tail", "failed", "c"))
    lines = text.splitlines()
    assert lines[0].startswith("== log-tail")
    assert lines[1].split() == ["operation", "requests", "query", "classes", "scanned", "returned", "5xx"]
    assert lines[2].split() == ["read", "2", "point", "×2", "2", "2", "1"]
    assert lines[-1].startswith("  FAILED: why")
