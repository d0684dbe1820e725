"""The data volume on the console's Insight page, in a real browser: its free space, a warning
when it is low, and the full state with what to do about it; while full, a write through the
console refused up front and a delete run (issue 36).

The server's data directory is on a small volume of its own (``tests/system/test_full_volume``
makes it, or skips saying why); a file filling it makes the next write run out of space.
"""

from __future__ import annotations

from pathlib import Path

from azure.core.exceptions import HttpResponseError
from azure.data.tables import TableServiceClient
from playwright.sync_api import Page, expect

from tests.console.browser.test_console import _shoot, _sign_in
from tests.serverproc import ServerProcess
from tests.system.test_full_volume import fill_with_file, small_volume


def test_insight_page_shows_free_space_low_and_full(page: Page, tmp_path: Path) -> None:
    with small_volume(tmp_path, 16) as volume:
        server = ServerProcess(
            volume / "data", extra_args=["--workers", "1", "--disk-reserve", "1", "--disk-warn", "64"]
        ).start()
        try:
            _sign_in(page, server)
            page.get_by_role("link", name="Insight").click()
            card = page.get_by_test_id("volume")
            expect(card.get_by_test_id("volume-free")).to_contain_text("MiB free of")
            expect(card.get_by_test_id("volume-free")).to_contain_text("held in reserve")
            expect(card.get_by_test_id("volume-low")).to_contain_text("Less than 64 MiB free")

            with TableServiceClient.from_connection_string(server.connection_string, retry_total=0) as client:
                # Made before the volume fills: a write on a volume without a block left is
                # refused unless the store's log has blocks of its own to reuse, and a server
                # that has written nothing yet has an empty log.
                table = client.create_table("notes")
                filler = fill_with_file(volume)
                refused = None
                for i in range(50):  # until one finds no room (perhaps the first)
                    try:
                        table.create_entity({"PartitionKey": "p", "RowKey": str(i), "pad": "x" * 30000})
                    except HttpResponseError as exc:
                        refused = exc
                        break
                assert refused is not None and refused.status_code == 503
            page.reload()
            expect(card.get_by_test_id("volume-full")).to_contain_text("Writes are refused (503 ServerBusy)")
            _shoot(page, "insight-volume-full")

            # The console refuses a write up front, as the API does (it would use up the room
            # deletes need), and says why; a delete through the console runs.
            console = f"http://127.0.0.1:{server.port}/-/console"
            page.goto(f"{console}/tables")
            page.get_by_label("Table name", exact=True).fill("refused")
            with page.expect_response(lambda response: response.request.method == "POST") as answer:
                page.get_by_role("button", name="Create table").click()
            assert answer.value.status == 503
            expect(page.get_by_role("heading", name="ServerBusy")).to_be_visible()
            expect(page.get_by_text("the data volume is full; delete data to make room")).to_be_visible()
            _shoot(page, "console-write-refused-volume-full")
            page.goto(f"{console}/tables/notes")
            page.get_by_text("Delete this table").click()
            page.get_by_label("to confirm").fill("notes")
            page.get_by_role("button", name="Delete table and all its entities").click()
            expect(page.get_by_role("status")).to_contain_text("Table notes deleted")
            with TableServiceClient.from_connection_string(server.connection_string, retry_total=0) as client:
                assert [table.name for table in client.list_tables()] == []
            page.get_by_role("link", name="Insight").click()

            filler.unlink()  # room again: the page says so within a look or two at the volume
            for _ in range(20):
                page.reload()
                if card.get_by_test_id("volume-full").count() == 0:
                    break
                page.wait_for_timeout(500)
            expect(card.get_by_test_id("volume-full")).to_have_count(0)
            expect(card.get_by_test_id("volume-low")).to_be_visible()
        finally:
            server.stop()
