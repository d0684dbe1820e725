"""The console's blobs page: containers, virtual directories, upload, download, delete, paging.

What the page does is checked against the official SDK (what the service holds), and what it
shows against the exact bytes of the page: hostile names escaped, downloads byte-exact and never
served inline.
"""

from __future__ import annotations

import html
import os
import uuid
from concurrent.futures import ThreadPoolExecutor

from azure.storage.blob import BlobServiceClient, ContainerClient

from tests.consoleclient import ConsoleClient
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess

HOSTILE = "<img src=x onerror=alert(1)>/a?b#c&amp;\"' ü%2F.bin"
BINARY = bytes(range(256)) * 64 + b"\r\n--boundary--\r\n\x00" + os.urandom(3000)


def _signed_in(server: ServerProcess) -> ConsoleClient:
    console = ConsoleClient(server.port)
    assert console.sign_in(DEV_ACCOUNT, DEV_KEY).status == 303
    return console


def _next_path(page: str) -> str:
    """The href of the page's "next" link ("" on the last page)."""
    if 'rel="next"' not in page:
        return ""
    before = page.split('rel="next">', 1)[0]
    return html.unescape(before.rsplit('href="/-/console', 1)[1].split('"', 1)[0])


def test_container_lifecycle_upload_download_and_hostile_names(server: ServerProcess) -> None:
    name = f"c{uuid.uuid4().hex[:12]}"
    console = _signed_in(server)
    with BlobServiceClient.from_connection_string(server.connection_string) as service:
        assert console.post("/blobs", {"name": name}).status == 303
        container = service.get_container_client(name)
        assert container.exists()
        refused = console.post("/blobs", {"name": "Not_Valid"})
        assert refused.status == 400 and "InvalidResourceName" in refused.text
        listing = console.get(f"/blobs?prefix={name}")
        assert listing.status == 200 and f">{name}</a>" in listing.text

        # Upload a binary file under a hostile name; the SDK reads back exactly its bytes.
        answer = console.post_file(f"/blobs/{name}/upload", {"name": HOSTILE}, ("x.bin", "image/png", BINARY))
        assert answer.status == 303
        blob = container.get_blob_client(HOSTILE)
        assert blob.download_blob().readall() == BINARY
        assert blob.get_blob_properties().content_settings.content_type == "image/png"

        page = console.get(f"/blobs/{name}?flat=1")
        assert page.status == 200
        assert "<img src=x" not in page.text and "&lt;img src=x onerror=alert(1)&gt;" in page.text

        # Download through the console: exact bytes, an attachment, never sniffed or inlined.
        link = page.text.split('data-testid="blob"', 1)[0].rsplit('href="/-/console', 1)[1]
        download = console.get(html.unescape(link.split('"', 1)[0]))
        assert download.status == 200 and download.body == BINARY
        assert download.header("content-type") == "application/octet-stream"
        assert (download.header("content-disposition") or "").startswith("attachment;")
        assert download.header("x-content-type-options") == "nosniff"
        assert console.get(f"/blobs/{name}/download?name=missing").status == 404

        # Virtual directories: one level at a time, with the prefix as breadcrumbs.
        for blob_name in ("docs/a.txt", "docs/sub/b.txt", "top.txt"):
            container.upload_blob(blob_name, b"x")
        root = console.get(f"/blobs/{name}")
        assert 'data-testid="folder">docs/</a>' in root.text and ">top.txt</a>" in root.text
        assert "a.txt" not in root.text
        docs = console.get(f"/blobs/{name}?prefix=docs/")
        assert 'data-testid="folder">sub/</a>' in docs.text and ">a.txt</a>" in docs.text
        assert "top.txt" not in docs.text and "b.txt" not in docs.text
        into = console.post_file(f"/blobs/{name}/upload", {"prefix": "docs/"}, ("c.txt", "text/plain", b"c"))
        assert into.status == 303
        assert container.get_blob_client("docs/c.txt").download_blob().readall() == b"c"

        # Delete a blob (the hostile one), then the container (after typing its name).
        assert console.post(f"/blobs/{name}/remove", {"name": HOSTILE}).status == 303
        assert not blob.exists()
        assert console.post(f"/blobs/{name}/remove", {"name": HOSTILE}).status == 404
        assert console.post(f"/blobs/{name}/delete", {"confirm": "wrong"}).status == 400
        assert container.exists()
        assert console.post(f"/blobs/{name}/delete", {"confirm": name}).status == 303
        assert not container.exists()


def test_uploads_need_the_session_and_its_csrf_token(
    server: ServerProcess, container: ContainerClient
) -> None:
    console = _signed_in(server)
    path = f"/blobs/{container.container_name}/upload"
    forged = console.post_file(
        path, {"name": "forged"}, ("f.bin", "application/octet-stream", b"x"), csrf=False
    )
    assert forged.status == 403
    stranger = ConsoleClient(server.port)
    stranger.get("/signin")
    outside = stranger.post_file(path, {"name": "outside"}, ("f.bin", "application/octet-stream", b"x"))
    assert outside.status == 403
    # A file where only a plain form is expected is refused before anything is done.
    elsewhere = console.post_file("/blobs", {"name": "cfromfileform"}, ("f.bin", "text/plain", b"x"))
    assert elsewhere.status == 400
    assert [b.name for b in container.list_blobs()] == []
    assert not console.get("/blobs?prefix=cfromfileform").text.count(">cfromfileform</a>")


def test_blob_listing_pages_by_continuation(server: ServerProcess, container: ContainerClient) -> None:
    names = [f"logs/{number:05d}.txt" for number in range(1_203)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda blob: container.upload_blob(blob, b""), names))
    console = _signed_in(server)
    root = console.get(f"/blobs/{container.container_name}")
    assert root.text.count('data-testid="folder"') == 1 and 'rel="next"' not in root.text
    path, seen, pages = f"/blobs/{container.container_name}?prefix=logs/", [], 0
    while path:
        page = console.get(path)
        assert page.status == 200
        seen += [html.unescape(n.split("<", 1)[0]) for n in page.text.split('data-testid="blob">')[1:]]
        pages += 1
        path = _next_path(page.text)
    assert pages == 2 and seen == [name.removeprefix("logs/") for name in names]
