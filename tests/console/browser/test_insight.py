"""The insight page in a real browser: the heat map and the warnings the counters raise.

One worker, so the counters the page shows are the ones every request went through; a low
partition target so that a hot partition needs only a few hundred writes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.data.tables import TableServiceClient
from playwright.sync_api import Page, expect

from tests.console.browser.test_console import _shoot, _sign_in
from tests.serverproc import ServerProcess


@pytest.fixture
def quiet_server(tmp_path: Path) -> Iterator[ServerProcess]:
    process = ServerProcess(
        tmp_path / "data", extra_args=["--workers", "1", "--partition-target", "50"]
    ).start()
    yield process
    process.stop()


def test_heat_map_and_anti_pattern_warnings(page: Page, quiet_server: ServerProcess) -> None:
    with TableServiceClient.from_connection_string(quiet_server.connection_string) as service:
        logs = service.create_table("logs")
        # Append-only: every insert goes to a larger PartitionKey than the last (a timestamp).
        for minute in range(20):
            logs.create_entity({"PartitionKey": f"2024-05-01T10:{minute:02d}", "RowKey": "0", "n": minute})
        orders = service.create_table("orders")
        # A hot partition: hundreds of writes to one PartitionKey within the rate window.
        for start in range(0, 600, 100):
            orders.submit_transaction(
                [
                    ("upsert", {"PartitionKey": "today", "RowKey": f"{i:05d}", "total": i})
                    for i in range(start, start + 100)
                ]
            )
        for region in ("east", "north", "south", "west"):
            orders.upsert_entity({"PartitionKey": region, "RowKey": "1", "total": 1})
        # Low-density table scans: all of the table read, almost nothing returned.
        for _ in range(3):
            list(orders.query_entities("total eq 5"))

    _sign_in(page, quiet_server)
    page.get_by_role("link", name="Insight").click()
    warnings = page.get_by_test_id("warning")
    expect(warnings.filter(has_text="append-only")).to_contain_text("logs")
    expect(warnings.filter(has_text="hot-partition")).to_contain_text("'today'")
    expect(warnings.filter(has_text="low-density-scan")).to_contain_text("orders")
    maps = page.get_by_test_id("heatmap")
    expect(maps.filter(has_text="orders").locator(".cell")).to_have_count(5)
    expect(maps.filter(has_text="orders").locator(".cell.heat-9")).to_have_count(1)  # "today"
    expect(maps.filter(has_text="logs").locator(".cell")).to_have_count(20)
    _shoot(page, "insight")
    # The table page shows its own warnings beside the grid.
    page.get_by_role("link", name="orders").click()
    expect(page.get_by_test_id("warning").filter(has_text="hot-partition")).to_be_visible()
