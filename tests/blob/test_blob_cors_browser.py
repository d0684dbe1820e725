"""A real browser (Playwright, chromium) reads a structured-body download across origins: the
page's script asks for the CRC64-framed body (``x-ms-structured-body``) under a CORS rule and
reads ``x-ms-structured-body`` and ``x-ms-structured-content-length`` back, which it sees only
when the response exposes them (``Access-Control-Expose-Headers``), as Azure exposes its other
response headers."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from azure.storage.blob import BlobSasPermissions, BlobServiceClient, CorsRule, generate_blob_sas
from playwright.sync_api import Page

from tests.backends import backend_names
from tests.conftest import fresh_store
from tests.console.browser import conftest as chromium
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess

# The console's browser fixtures: chromium headless, a fresh profile per test.
playwright, browser, browser_page = chromium.playwright, chromium.browser, chromium.page


@pytest.fixture(scope="module", params=backend_names())
def cors_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    extra = ["--workers", "1", *fresh_store(request.param)]  # one worker: the rules apply at once
    process = ServerProcess(tmp_path_factory.mktemp("cors"), extra_args=extra, backend=request.param).start()
    yield process
    process.stop()


class _App(BaseHTTPRequestHandler):
    """The page of another origin (a real loopback server: a browser lets a page reach loopback
    addresses only from a loopback address itself)."""

    def do_GET(self) -> None:
        body = b"<!doctype html><title>app</title>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def app_origin() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _App)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


_READ = """async ([url]) => {
    const response = await fetch(url, {headers: {
        "x-ms-version": "2025-01-05", "x-ms-structured-body": "XSM/1.0; properties=crc64"}});
    await response.arrayBuffer();
    return [response.status, response.headers.get("x-ms-structured-body"),
            response.headers.get("x-ms-structured-content-length")];
}"""


def test_a_browser_reads_the_structured_body_headers(
    cors_server: ServerProcess, browser_page: Page, app_origin: str
) -> None:
    page = browser_page
    origin = app_origin
    with BlobServiceClient.from_connection_string(cors_server.connection_string) as service:
        service.set_service_properties(cors=[CorsRule([origin], ["GET"], allowed_headers=["x-ms-*"])])
        container = service.create_container("cors" + uuid.uuid4().hex[:10])
        container.upload_blob("framed.bin", b"structured bytes")
    sas = generate_blob_sas(
        DEV_ACCOUNT, container.container_name, "framed.bin", account_key=DEV_KEY,
        permission=BlobSasPermissions(read=True), expiry=datetime.now(UTC) + timedelta(hours=1),
    )  # fmt: skip
    url = (
        f"http://127.0.0.1:{cors_server.blob_port}/{DEV_ACCOUNT}/{container.container_name}/framed.bin?{sas}"
    )
    page.goto(f"{origin}/app.html")
    status, body, length = page.evaluate(_READ, [url])
    assert (status, body, length) == (200, "XSM/1.0; properties=crc64", str(len(b"structured bytes")))


_READ_METADATA = """async ([url]) => {
    const response = await fetch(url, {headers: {"x-ms-version": "2025-01-05"}});
    await response.arrayBuffer();
    return [response.status, response.headers.get("x-ms-meta-color"), response.headers.get("x-ms-meta-*")];
}"""


def test_a_browser_reads_metadata_a_prefix_rule_exposes(
    cors_server: ServerProcess, browser_page: Page, app_origin: str
) -> None:
    """A rule exposing ``x-ms-meta-*``: the page's script reads the blob's metadata header, which a
    browser shows it only when ``Access-Control-Expose-Headers`` names it (a pattern it does not
    understand)."""
    page = browser_page
    origin = app_origin
    with BlobServiceClient.from_connection_string(cors_server.connection_string) as service:
        rule = CorsRule([origin], ["GET"], allowed_headers=["x-ms-*"], exposed_headers=["x-ms-meta-*"])
        service.set_service_properties(cors=[rule])
        container = service.create_container("cors" + uuid.uuid4().hex[:10])
        container.upload_blob("painted.txt", b"paint", metadata={"color": "red"})
    sas = generate_blob_sas(
        DEV_ACCOUNT, container.container_name, "painted.txt", account_key=DEV_KEY,
        permission=BlobSasPermissions(read=True), expiry=datetime.now(UTC) + timedelta(hours=1),
    )  # fmt: skip
    url = (
        f"http://127.0.0.1:{cors_server.blob_port}/{DEV_ACCOUNT}/{container.container_name}/painted.txt?{sas}"
    )
    page.goto(f"{origin}/app.html")
    assert page.evaluate(_READ_METADATA, [url]) == [200, "red", None]
