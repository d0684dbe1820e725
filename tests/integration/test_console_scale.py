"""The console with 10,000 tables in an account: the list pages by 1,000 and filters by prefix."""

from __future__ import annotations

import html
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from azure.data.tables import TableServiceClient

from tests.integration.consoleclient import ConsoleClient
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess


def test_ten_thousand_tables_page_by_page(tmp_path: Path) -> None:
    local = ServerProcess(tmp_path / "data", extra_args=["--in-memory"]).start()  # no fsync per create
    try:
        with TableServiceClient.from_connection_string(local.connection_string) as service:

            def create(number: int) -> None:
                service.create_table(f"t{number:05d}")

            with ThreadPoolExecutor(8) as pool:
                list(pool.map(create, range(10_000)))
        console = ConsoleClient(local.port)
        assert console.sign_in(DEV_ACCOUNT, DEV_KEY).status == 303
        path, seen, pages = "/tables", 0, 0
        while path:
            started = time.monotonic()
            page = console.get(path)
            assert page.status == 200 and time.monotonic() - started < 5
            seen += page.text.count('<li><a href="/-/console/tables/t')
            pages += 1
            after = page.text.split('rel="next">', 1)[0]
            path = (
                html.unescape(after.rsplit('href="/-/console', 1)[1].split('"', 1)[0])
                if 'rel="next"' in page.text
                else ""
            )
        assert seen == 10_000 and pages in (10, 11)  # the last full page may end with a token
        prefixed = console.get("/tables?prefix=t0999")
        assert prefixed.text.count('<li><a href="/-/console/tables/t') == 10
    finally:
        local.stop()
