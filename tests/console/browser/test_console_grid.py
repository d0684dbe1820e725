"""The entity grid in a real browser: paging forward and back with the row numbers each page
knows, and the key columns staying in view when a wide grid scrolls sideways."""

from __future__ import annotations

from azure.data.tables import TableServiceClient
from playwright.sync_api import Locator, Page, expect

from tests.console.browser.conftest import screenshot_dir
from tests.serverproc import ServerProcess

COLUMNS = 24


def _first_rk(page: Page) -> str:
    return page.get_by_test_id("grid").locator("tbody tr").first.locator("td.rk").inner_text()


def test_paging_forward_and_back_with_row_numbers(page: Page, server: ServerProcess, table_name: str) -> None:
    console = f"http://127.0.0.1:{server.port}/-/console"
    with TableServiceClient.from_connection_string(server.connection_string) as service:
        table = service.create_table(table_name)
        try:
            for number in range(13):
                table.create_entity({"PartitionKey": "p", "RowKey": f"r{number:02d}", "n": number})
            page.goto(f"{console}/signin")
            page.get_by_role("button", name="Sign in").click()
            page.goto(f"{console}/tables/{table_name}")
            page.get_by_label("$top").fill("5")
            page.get_by_role("button", name="Query").click()

            count = page.get_by_test_id("row-count")
            expect(count).to_have_text("Page 1: rows 1–5, more may follow")
            expect(page.get_by_test_id("previous-page")).to_have_count(0)
            assert _first_rk(page) == "r00"
            page.get_by_test_id("next-page").click()
            expect(count).to_have_text("Page 2: rows 6–10, more may follow")
            assert _first_rk(page) == "r05"
            page.get_by_test_id("next-page").click()
            expect(count).to_have_text("Page 3: rows 11–13 of 13")
            assert _first_rk(page) == "r10"
            expect(page.get_by_test_id("next-page")).to_have_count(0)

            page.get_by_test_id("previous-page").click()
            expect(count).to_have_text("Page 2: rows 6–10, more may follow")
            assert _first_rk(page) == "r05"
            page.get_by_test_id("previous-page").click()
            expect(count).to_have_text("Page 1: rows 1–5, more may follow")
            assert _first_rk(page) == "r00"
            expect(page.get_by_test_id("previous-page")).to_have_count(0)
            expect(page.get_by_label("$top")).to_have_value("5")  # the query is kept throughout

            # Forward again from the way back, then straight to the first page.
            page.get_by_test_id("next-page").click()
            page.get_by_test_id("next-page").click()
            expect(count).to_have_text("Page 3: rows 11–13 of 13")
            page.get_by_test_id("first-page").click()
            expect(count).to_have_text("Page 1: rows 1–5, more may follow")
        finally:
            service.delete_table(table_name)


def test_key_columns_stay_in_view_when_the_grid_scrolls_sideways(
    page: Page, server: ServerProcess, table_name: str
) -> None:
    console = f"http://127.0.0.1:{server.port}/-/console"
    with TableServiceClient.from_connection_string(server.connection_string) as service:
        table = service.create_table(table_name)
        try:
            for number in range(6):
                wide = {f"column{index:02d}": f"value {index} " + "x" * 30 for index in range(COLUMNS)}
                table.create_entity(
                    {"PartitionKey": f"customers-{number % 2}", "RowKey": f"r{number}", **wide}
                )
            page.goto(f"{console}/signin")
            page.get_by_role("button", name="Sign in").click()
            page.goto(f"{console}/tables/{table_name}")
            wrap = page.locator(".grid-wrap")
            first = page.get_by_test_id("grid").locator("tbody tr").first
            pk, rk, stamp = first.locator("td.pk"), first.locator("td.rk"), first.locator("td.time")
            before = [box(cell) for cell in (pk, rk, stamp)]
            assert before[1]["x"] >= before[0]["x"] + before[0]["width"] - 1  # side by side

            scrolled = wrap.evaluate("wrap => { wrap.scrollLeft = 3000; return wrap.scrollLeft; }")
            assert scrolled > 1000  # the grid is far wider than the page
            frame, after = box(wrap), [box(cell) for cell in (pk, rk, stamp)]
            assert abs(after[0]["x"] - frame["x"]) <= 2  # PartitionKey at the left edge
            assert abs(after[1]["x"] - (after[0]["x"] + after[0]["width"])) <= 2  # RowKey beside it
            assert after[2]["x"] < frame["x"] - 500  # the Timestamp went by under them
            expect(first.locator("td.rk a")).to_be_in_viewport()
            header = page.get_by_test_id("grid").locator("thead th.rk")
            assert abs(box(header)["x"] - after[1]["x"]) <= 2  # the headings stay above their columns
            # The sticky cells hide what scrolls under them: the topmost element there is the key.
            covered = page.evaluate(
                "([x, y]) => document.elementFromPoint(x, y).closest('td')?.className",
                [after[1]["x"] + 5, after[1]["y"] + after[1]["height"] / 2],
            )
            assert covered == "key rk"
            target = screenshot_dir()
            if target is not None:
                target.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(target / "grid-scrolled.png"))
        finally:
            service.delete_table(table_name)


def box(locator: Locator) -> dict[str, float]:
    found = locator.bounding_box()
    assert found is not None
    return dict(found)
