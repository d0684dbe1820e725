"""The blobs page in a real browser shows each blob's type (a sealed append blob says so), its
size, its access tier (inferred, explicit, or archived and rehydrating) and its index tags."""

from __future__ import annotations

import uuid

from azure.storage.blob import BlobServiceClient, StandardBlobTier
from playwright.sync_api import Page, expect

from tests.console.browser.test_console import _shoot, _sign_in
from tests.serverproc import ServerProcess


def test_blob_types_sizes_and_tiers(page: Page, server: ServerProcess) -> None:
    name = f"tiers{uuid.uuid4().hex[:8]}"
    with BlobServiceClient.from_connection_string(server.connection_string) as service:
        container = service.create_container(name)
        container.upload_blob("a-plain.txt", b"x" * 2048, tags={"rank": "1", "project": "alpha"})
        container.upload_blob("b-cool.txt", b"cool", standard_blob_tier=StandardBlobTier.COOL)
        archived = container.upload_blob(
            "c-archived.bin", b"old", standard_blob_tier=StandardBlobTier.ARCHIVE
        )
        archived.set_standard_blob_tier(StandardBlobTier.HOT)  # rehydrating for 10 s on this server
        log = container.get_blob_client("d-log")
        log.create_append_blob()
        log.append_block(b"line\n")
        log.seal_append_blob()
    _sign_in(page, server)
    page.goto(f"http://127.0.0.1:{server.port}/-/console/blobs/{name}")
    blobs = page.get_by_test_id("blobs")
    expect(blobs.get_by_test_id("blob")).to_have_text(
        ["a-plain.txt", "b-cool.txt", "c-archived.bin", "d-log"]
    )
    expect(blobs.get_by_test_id("blob-type")).to_have_text(
        ["BlockBlob", "BlockBlob", "BlockBlob", "AppendBlob (sealed)"]
    )
    expect(blobs.get_by_test_id("blob-tier")).to_have_text(
        ["Hot (inferred)", "Cool", "Archive (rehydrating to Hot)", ""]
    )
    expect(blobs.get_by_role("row").nth(1)).to_contain_text("2.0 KiB")
    expect(blobs.get_by_role("row").nth(4)).to_contain_text("5 B")
    expect(blobs.get_by_test_id("blob-tags")).to_have_text(["project=alpha rank=1", "", "", ""])
    expect(blobs.get_by_role("columnheader", name="tier")).to_be_visible()
    expect(blobs.get_by_role("columnheader", name="tags")).to_be_visible()
    _shoot(page, "blob-tiers")
