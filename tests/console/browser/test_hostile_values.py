"""Hostile names and values stored through the storage APIs, then shown by the console in a real
browser: nothing of them may run or become markup. Each page is loaded with a listener for
dialogs (``alert``) and the Content-Security-Policy's reports, and then searched for the elements
the values would have made had they not been escaped.

The values go where the APIs let markup in: container and queue metadata, blob names, metadata
and content types, blob and queue listing prefixes, a Data Lake directory's name, owner and group
(the tree shows them), a queue message's text, an entity's keys and values."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from azure.data.tables import TableServiceClient
from azure.storage.blob import BlobServiceClient, ContentSettings
from azure.storage.filedatalake import DataLakeServiceClient
from azure.storage.queue import QueueServiceClient
from playwright.sync_api import Page

from tests.console.browser.test_console import _sign_in
from tests.serverproc import DEV_ACCOUNT, ServerProcess

MARKUP = '"><img src=x onerror=alert(1)><script>alert(2)</script><svg onload=alert(3)>'
QUOTED = '\'--><iframe srcdoc="<script>alert(4)</script>"></iframe>'
# A key cannot hold "/", and in a hierarchical namespace it makes directories: one segment each.
LEAF = MARKUP.replace("/", "|")
QUOTED_LEAF = QUOTED.replace("/", "|")
INJECTED = "img[src=x], script:not([src]), svg, iframe"


@pytest.fixture
def lake(tmp_path: Path) -> Iterator[ServerProcess]:
    process = ServerProcess(tmp_path / "data", extra_args=["--hns", DEV_ACCOUNT, "--workers", "1"]).start()
    yield process
    process.stop()


def _store_hostile_values(server: ServerProcess, suffix: str) -> list[str]:
    """Hostile values in every service; the console paths that show them."""
    connection = server.connection_string
    blobs = BlobServiceClient.from_connection_string(connection)
    container = blobs.create_container(f"hostile{suffix}", metadata={"note": MARKUP})
    for name in (LEAF, f"dir{QUOTED_LEAF}/inner", f"{LEAF}x/{QUOTED_LEAF}"):
        container.upload_blob(
            name,
            b"<html><script>alert(5)</script></html>",
            content_settings=ContentSettings(content_type="text/html" + MARKUP),
            metadata={"note": MARKUP},
        )
    lake = DataLakeServiceClient.from_connection_string(connection).get_file_system_client(
        container.container_name
    )
    directory = lake.create_directory(f"folder{QUOTED_LEAF}")
    directory.set_access_control(owner=MARKUP, group=QUOTED)
    queue = QueueServiceClient.from_connection_string(connection).create_queue(
        f"hostile{suffix}", metadata={"note": MARKUP}
    )
    queue.send_message(MARKUP)
    queue.send_message(QUOTED)
    table = TableServiceClient.from_connection_string(connection).create_table(f"hostile{suffix}")
    table.create_entity({"PartitionKey": LEAF, "RowKey": QUOTED_LEAF, "note": MARKUP})
    c, q, t = container.container_name, queue.queue_name, table.table_name
    return [
        "/blobs",
        f"/blobs?prefix={quote(MARKUP)}",
        f"/blobs/{c}",
        f"/blobs/{c}?flat=1",
        f"/blobs/{c}?prefix={quote(LEAF + 'x/')}",
        f"/blobs/{c}?prefix={quote('dir' + QUOTED_LEAF + '/')}",
        f"/blobs/{c}/history",
        f"/blobs/{c}?done=uploaded&name={quote(MARKUP)}",
        "/queues",
        f"/queues/{q}",
        f"/tables/{t}",
        f"/tables/{t}?filter={quote(MARKUP)}",
        f"/tables?prefix={quote(MARKUP)}",
        "/insight",
    ]


def test_nothing_hostile_runs_on_any_page(page: Page, lake: ServerProcess) -> None:
    paths = _store_hostile_values(lake, uuid.uuid4().hex[:8])
    ran: list[str] = []
    page.on("dialog", lambda dialog: (ran.append(dialog.message), dialog.dismiss()))
    page.on("console", lambda message: ran.append(message.text) if "Refused" in message.text else None)
    fetched: list[str] = []  # every request the pages made besides themselves and their two files
    page.on("request", lambda request: fetched.append(request.url))
    _sign_in(page, lake)
    base = f"http://127.0.0.1:{lake.port}/-/console"
    for path in paths:
        answer = page.goto(base + path)
        assert answer is not None and answer.status in (200, 400), (path, answer and answer.status)
        policy = answer.headers.get("content-security-policy", "")
        assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy, path
        assert page.locator(INJECTED).count() == 0, path
        assert page.title().endswith("Tabulae console"), path
    shown = page.goto(f"{base}/blobs/{paths[2].rsplit('/', 1)[1]}")
    assert shown is not None
    text = page.locator("main").inner_text()
    assert LEAF in text and "folder" + QUOTED_LEAF in text and MARKUP in text  # shown as text, exactly
    page.goto(base + paths[10])
    entity = page.locator("a[href*='/e/']").first.get_attribute("href")
    assert entity is not None
    page.goto(f"http://127.0.0.1:{lake.port}{entity}")
    assert page.locator(INJECTED).count() == 0
    assert ran == [], ran  # no alert, and no script or frame refused by the policy either
    extra = {url for url in fetched if "/static/console." not in url and not url.startswith(base + "/")}
    assert extra <= {f"http://127.0.0.1:{lake.port}/favicon.ico"}, extra
