"""The blobs page's history in a real browser, on each store, on a server that keeps versions and
soft-deleted blobs: from a container, open its versions and deleted blobs, promote a previous
version of a deleted blob (it becomes the current version again), undelete a soft-deleted version,
and see a post without the session's CSRF token refused."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from azure.storage.blob import BlobServiceClient, RetentionPolicy
from playwright.sync_api import Page, expect

from tests.backends import backend_names
from tests.conftest import fresh_store
from tests.console.browser.test_console import _shoot, _sign_in
from tests.serverproc import ServerProcess


@pytest.fixture(scope="module", params=backend_names())
def keeping(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server whose account keeps versions and, for a week, deleted blobs."""
    process = ServerProcess(
        tmp_path_factory.mktemp("history"),
        extra_args=[*fresh_store(request.param), "--blob-versioning"],
        backend=request.param,
    )
    process.start()
    with BlobServiceClient.from_connection_string(process.connection_string) as service:
        service.set_service_properties(delete_retention_policy=RetentionPolicy(enabled=True, days=7))
    yield process
    process.stop()


def test_promote_a_version_and_undelete_a_deleted_one(page: Page, keeping: ServerProcess) -> None:
    name = f"history{uuid.uuid4().hex[:8]}"
    with BlobServiceClient.from_connection_string(keeping.connection_string) as service:
        container = service.create_container(name)
        doc = container.get_blob_client("doc.txt")
        first = doc.upload_blob(b"first draft")["version_id"]
        doc.upload_blob(b"second draft", overwrite=True)
        doc.delete_blob()  # no current version: two previous ones
        old = container.get_blob_client("old.txt")
        gone = old.upload_blob(b"a")["version_id"]
        old.upload_blob(b"b", overwrite=True)
        old.delete_blob(version_id=gone)  # soft-deleted: kept for a week
    _sign_in(page, keeping)
    page.goto(f"http://127.0.0.1:{keeping.port}/-/console/blobs/{name}")
    expect(page.get_by_test_id("blobs").get_by_test_id("blob")).to_have_text(["old.txt"])
    page.get_by_role("link", name="Versions and deleted blobs").click()
    history = page.get_by_test_id("history")
    expect(history.get_by_test_id("history-name")).to_have_text(["doc.txt", "doc.txt", "old.txt", "old.txt"])
    expect(history.get_by_test_id("history-state")).to_have_text(["version", "version", "deleted", "current"])
    _shoot(page, "blob-history")

    page.get_by_role("button", name=f"Promote doc.txt version {first}").click()
    expect(page.get_by_role("status")).to_contain_text("Promoted a version of doc.txt")
    expect(history.get_by_test_id("history-state")).to_have_text(
        ["version", "version", "current", "deleted", "current"]
    )
    page.get_by_role("button", name="Undelete old.txt").click()
    expect(page.get_by_role("status")).to_contain_text("Undeleted old.txt")
    expect(history.get_by_test_id("history-state")).to_have_text(
        ["version", "version", "current", "version", "current"]
    )
    with BlobServiceClient.from_connection_string(keeping.connection_string) as service:
        container = service.get_container_client(name)
        assert container.get_blob_client("doc.txt").download_blob().readall() == b"first draft"
        assert container.get_blob_client("old.txt").download_blob(version_id=gone).readall() == b"a"

    # The console's door: a write without the session's CSRF token is refused, and changes nothing.
    answer = page.request.post(
        f"http://127.0.0.1:{keeping.port}/-/console/blobs/{name}/promote",
        form={"name": "doc.txt", "version": first},
        max_redirects=0,
    )
    assert answer.status == 403
    page.reload()
    expect(history.get_by_test_id("history-row")).to_have_count(5)


def test_promoting_a_version_that_is_not_there_shows_the_services_error(
    page: Page, keeping: ServerProcess
) -> None:
    name = f"historybad{uuid.uuid4().hex[:6]}"
    with BlobServiceClient.from_connection_string(keeping.connection_string) as service:
        service.create_container(name).upload_blob("a.txt", b"x")
    _sign_in(page, keeping)
    page.goto(f"http://127.0.0.1:{keeping.port}/-/console/blobs/{name}/history")
    expect(page.get_by_test_id("history-state")).to_have_text(["current"])
    expect(page.get_by_role("button", name="Promote a.txt", exact=False)).to_have_count(0)
    token = page.locator("input[name=csrf]").first.get_attribute("value")  # the sign-out form's
    assert token
    url = f"http://127.0.0.1:{keeping.port}/-/console/blobs/{name}/promote"
    for version, status, code in (
        ("yesterday", 400, "InvalidQueryParameterValue"),
        ("2020-01-01T00:00:00.0000000Z", 404, "CannotVerifyCopySource"),
    ):
        answer = page.request.post(
            url, form={"csrf": token, "name": "a.txt", "version": version}, max_redirects=0
        )
        assert answer.status == status and code in answer.text(), (version, answer.status)
    with BlobServiceClient.from_connection_string(keeping.connection_string) as service:
        assert service.get_blob_client(name, "a.txt").download_blob().readall() == b"x"
