"""The console with 10,000 tables or containers: the lists page by 1,000 and filter by prefix."""

from __future__ import annotations

import html
from pathlib import Path

from tests.bulkhttp import create_containers, create_tables
from tests.consoleclient import ConsoleClient
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess


def test_ten_thousand_tables_page_by_page(tmp_path: Path) -> None:
    local = ServerProcess(tmp_path / "data", extra_args=["--in-memory"]).start()  # no fsync per create
    try:
        create_tables(local, (f"t{number:05d}" for number in range(10_000)))  # through the server
        console = ConsoleClient(local.port)
        assert console.sign_in(DEV_ACCOUNT, DEV_KEY).status == 303
        path, seen, pages = "/tables", 0, 0
        while path:
            page = console.get(path)
            assert page.status == 200
            on_page = page.text.count('<li><a href="/-/console/tables/t')
            assert on_page <= 1000  # a page never holds more than one listing page of the service
            seen += on_page
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


def test_ten_thousand_containers_page_by_page(tmp_path: Path) -> None:
    local = ServerProcess(tmp_path / "data", extra_args=["--in-memory"]).start()
    try:
        create_containers(local, (f"c{number:05d}" for number in range(10_000)))
        console = ConsoleClient(local.port)
        assert console.sign_in(DEV_ACCOUNT, DEV_KEY).status == 303
        path, seen = "/blobs", []
        while path:
            page = console.get(path)
            assert page.status == 200
            seen += [part.split('"', 1)[0] for part in page.text.split('<a href="/-/console/blobs/')[1:]]
            after = page.text.split('rel="next">', 1)[0]
            path = (
                html.unescape(after.rsplit('href="/-/console', 1)[1].split('"', 1)[0])
                if 'rel="next"' in page.text
                else ""
            )
        assert seen == [f"c{number:05d}" for number in range(10_000)]
        prefixed = console.get("/blobs?prefix=c0999")
        assert prefixed.text.count('<a href="/-/console/blobs/c0999') == 10
    finally:
        local.stop()
