"""The blobs page in a real browser: create a container, upload files (one binary, one under a
hostile name), walk the virtual directories, download byte-exact, delete a blob and the container."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from azure.storage.blob import BlobServiceClient
from playwright.sync_api import Page, expect

from tests.console.browser.test_console import HOSTILE, _shoot, _sign_in
from tests.serverproc import ServerProcess

BINARY = bytes(range(256)) * 16 + b"\r\n\x00\xff" + os.urandom(2048)


def test_blob_walkthrough(page: Page, server: ServerProcess, tmp_path: Path) -> None:
    name = f"photos{uuid.uuid4().hex[:8]}"
    _sign_in(page, server)
    page.get_by_role("link", name="Blobs").click()
    page.get_by_label("Container name").fill(name)
    page.get_by_role("button", name="Create container").click()
    expect(page.get_by_role("status")).to_contain_text(f"Container {name} created")
    page.get_by_role("link", name=name).click()

    uploads = [
        ("reports/2026/q3.bin", {"name": "q3.bin", "mimeType": "application/octet-stream", "buffer": BINARY}),
        ("", {"name": "readme.txt", "mimeType": "text/plain", "buffer": b"Shipped weekly.\n"}),
        (HOSTILE, {"name": "x.txt", "mimeType": "text/plain", "buffer": HOSTILE.encode()}),
        (
            "reports/2025/q4.bin",
            {"name": "q4.bin", "mimeType": "application/octet-stream", "buffer": b"\x00" * 700},
        ),
    ]
    for blob_name, file in uploads:
        page.get_by_label("File", exact=True).set_input_files(file)  # type: ignore[arg-type]
        page.get_by_label("Blob name").fill(blob_name)
        page.get_by_role("button", name="Upload").click()
        expect(page.get_by_role("status")).to_contain_text(f"Uploaded {blob_name or file['name']}")
    assert page.title() != "owned"  # the hostile name was shown as text, not run
    blobs = page.get_by_test_id("blobs")
    expect(blobs.get_by_test_id("folder")).to_have_count(2)  # reports/ and the hostile name's first segment
    expect(blobs).to_contain_text('<script>document.title="owned"<')
    expect(blobs.get_by_test_id("blob")).to_have_text(["readme.txt"])
    _shoot(page, "blobs")

    # Into the virtual directories, and a byte-exact download.
    blobs.get_by_role("link", name="reports/").click()
    page.get_by_role("link", name="2026/").click()
    expect(page.get_by_test_id("path")).to_contain_text("reports / 2026")
    with page.expect_download() as waiting:
        page.get_by_role("link", name="q3.bin").click()
    download = waiting.value
    assert download.suggested_filename == "q3.bin"
    target = tmp_path / "q3.bin"
    download.save_as(target)
    assert target.read_bytes() == BINARY

    # The hostile blob: listed as text, downloaded exactly, deleted after the confirmation.
    page.get_by_test_id("container-name").click()
    page.get_by_role("link", name='<script>document.title="owned"</').click()
    expect(page.get_by_test_id("blob")).to_have_text(["script><img src=x onerror=alert(1)>"])
    with page.expect_download() as waiting:
        page.get_by_test_id("blob").click()
    waiting.value.save_as(tmp_path / "hostile")
    assert (tmp_path / "hostile").read_bytes() == HOSTILE.encode()
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name=f"Delete {HOSTILE}").click()
    expect(page.get_by_role("status")).to_contain_text("Deleted")
    assert page.title() != "owned"

    with BlobServiceClient.from_connection_string(server.connection_string) as service:
        container = service.get_container_client(name)
        assert sorted(b.name for b in container.list_blobs()) == [
            "readme.txt",
            "reports/2025/q4.bin",
            "reports/2026/q3.bin",
        ]
        assert container.get_blob_client("reports/2026/q3.bin").download_blob().readall() == BINARY
        page.get_by_label("Type").fill(name)
        page.get_by_role("button", name="Delete container").click()
        expect(page.get_by_role("status")).to_contain_text(f"Container {name} deleted")
        assert not container.exists()
