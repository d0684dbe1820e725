"""An HNS file system in the console, in a real browser: the blobs page shows its directories as
a tree with owner, group and permissions (set through the DFS SDK), and a node opens that
directory's listing. A flat account's container shows no tree."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.storage.blob import BlobServiceClient
from azure.storage.filedatalake import DataLakeServiceClient
from playwright.sync_api import Page, expect

from tests.console.browser.test_console import _shoot, _sign_in
from tests.serverproc import DEV_ACCOUNT, ServerProcess


@pytest.fixture
def lake(tmp_path: Path) -> Iterator[ServerProcess]:
    process = ServerProcess(tmp_path / "data", extra_args=["--hns", DEV_ACCOUNT]).start()
    yield process
    process.stop()


def test_file_system_tree(page: Page, lake: ServerProcess) -> None:
    name = "lake" + uuid.uuid4().hex[:8]
    fs = DataLakeServiceClient.from_connection_string(lake.connection_string).create_file_system(name)
    fs._get_root_directory_client().set_access_control(permissions="rwxr-x--x")
    fs.create_directory("raw/2026/01")
    fs.create_directory("raw/2026/02")
    curated = fs.create_directory("curated")
    curated.set_access_control(owner="alice", group="analysts", permissions="rwxrwx--T")
    fs.create_file("raw/2026/01/events.json").upload_data(b"{}", overwrite=True)
    curated.set_access_control(acl="user::rwx,group::rwx,other::---,user:bob:r-x")

    _sign_in(page, lake)
    page.goto(f"http://127.0.0.1:{lake.port}/-/console/blobs/{name}")
    tree = page.get_by_test_id("tree")
    expect(tree).to_contain_text("5 directories")
    nodes = tree.get_by_test_id("tree-node")
    expect(nodes).to_have_count(6)  # the root and five directories
    paths = [nodes.nth(i).get_attribute("data-path") for i in range(6)]
    assert paths == ["", "curated/", "raw/", "raw/2026/", "raw/2026/01/", "raw/2026/02/"]
    root = tree.locator('[data-path=""]')
    expect(root.get_by_test_id("tree-permissions").first).to_have_text("rwxr-x--x")
    node = tree.locator('[data-path="curated/"]')
    shown = curated.get_access_control()["permissions"]
    assert shown == "rwxrwx--T+"  # the sticky bit stays, the named entry makes it extended
    expect(node.get_by_test_id("tree-permissions")).to_have_text(shown)
    expect(node.get_by_test_id("tree-owner")).to_have_text("alice:analysts")
    nested = tree.locator('[data-path="raw/2026/"]')
    child = nested.locator('[data-path="raw/2026/01/"]')  # a child sits inside its parent
    expect(child).to_be_hidden()  # two levels below the root open; deeper ones on a click
    nested.get_by_test_id("tree-permissions").first.click()
    expect(child).to_be_visible()
    _shoot(page, "hns-tree")
    nested.get_by_test_id("tree-link").first.click()
    expect(page.get_by_test_id("path")).to_contain_text("raw / 2026")
    listing = page.get_by_test_id("blobs")
    expect(listing.get_by_test_id("folder")).to_have_text(["01/"])  # 02 is empty: its directory blob
    expect(listing.get_by_test_id("blob")).to_have_text(["01", "02"])


def test_flat_container_has_no_tree(page: Page, lake: ServerProcess) -> None:
    name = "flat" + uuid.uuid4().hex[:8]
    service = BlobServiceClient.from_connection_string(lake.connection_string)
    service.create_container(name).upload_blob("a/b.txt", b"x")
    _sign_in(page, lake)
    page.goto(f"http://127.0.0.1:{lake.port}/-/console/blobs/{name}")
    # the account has a namespace, so even a container made through the Blob API is a file system
    expect(page.get_by_test_id("tree").get_by_test_id("tree-node")).to_have_count(2)
