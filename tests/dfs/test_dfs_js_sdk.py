"""The JavaScript Data Lake SDK, ``@azure/storage-file-datalake`` unchanged, on the path-style
endpoint ``UseDevelopmentStorage=true`` gives: files written by append and flush, read back,
and moved (a directory within its file system, a file to another one).

Its move sets the destination URL's whole path, so on a path-style endpoint the request names
no account (``/{filesystem}/{path}``) while ``x-ms-rename-source`` names it first; Azure's
endpoints are host-style and never see that shape, and the server takes such a move as the
account's (``tabulae/blob/api/routing.py``). The test installs the package with npm once, as
the JavaScript Blob test does, and runs ``js/datalake_sdk.js`` with Node.
"""

from __future__ import annotations

import http.client
from pathlib import Path

import pytest

from tests.blobhttp import BlobHttp, Reply, sign
from tests.npm_cache import installed, run_node
from tests.rawhttp import DEV_ACCOUNT
from tests.serverproc import ServerProcess

VERSION = "12.31.0"
SCRIPT = Path(__file__).parents[1] / "js" / "datalake_sdk.js"


@pytest.fixture(scope="session")
def datalake_node_modules() -> Path:
    package = f"@azure/storage-file-datalake@{VERSION}"
    return installed("js-datalake", package, "@azure/storage-file-datalake/package.json")


def test_files_and_moves_through_the_javascript_sdk(lake: ServerProcess, datalake_node_modules: Path) -> None:
    assert run_node(SCRIPT, datalake_node_modules, str(lake.blob_port)).startswith("ok ")


def _send(lake: ServerProcess, path: str, source: str, *, signed: bool = True) -> Reply:
    """A rename in the JavaScript SDK's path-style shape: ``path`` without the account."""
    url = f"http://127.0.0.1:{lake.blob_port}{path}"
    headers = {"x-ms-rename-source": source, "Content-Length": "0"}
    if signed:
        headers = sign("PUT", url, headers)
    else:
        headers["Authorization"] = f"SharedKey {DEV_ACCOUNT}:{'A' * 44}"
    connection = http.client.HTTPConnection("127.0.0.1", lake.blob_port, timeout=30)
    try:
        connection.request("PUT", path, headers=headers)
        response = connection.getresponse()
        return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
    finally:
        connection.close()


def test_a_move_naming_the_account_in_its_source_only_is_the_accounts(lake: ServerProcess) -> None:
    blobs = BlobHttp(lake.blob_port)
    fs = blobs.new_container("jsmove")
    assert blobs.request("PUT", f"/{fs}/old.txt?resource=file").status == 201
    moved = _send(lake, f"/{fs}/new.txt?mode=legacy", f"/{DEV_ACCOUNT}/{fs}/old.txt")
    assert moved.status == 201, moved
    assert blobs.request("HEAD", f"/{fs}/new.txt").status == 200
    assert blobs.request("HEAD", f"/{fs}/old.txt").status == 404


def test_a_move_without_an_account_anywhere_or_with_a_bad_signature_is_refused(lake: ServerProcess) -> None:
    blobs = BlobHttp(lake.blob_port)
    fs = blobs.new_container("jsmove")
    assert blobs.request("PUT", f"/{fs}/old.txt?resource=file").status == 201
    unknown = _send(lake, f"/{fs}/new.txt", f"/nosuchaccount/{fs}/old.txt")
    assert (unknown.status, unknown.code) == (403, "AuthenticationFailed")
    assert f"for the account {fs}." in unknown.error_fields()["AuthenticationErrorDetail"]
    forged = _send(lake, f"/{fs}/new.txt", f"/{DEV_ACCOUNT}/{fs}/old.txt", signed=False)
    assert (forged.status, forged.code) == (403, "AuthenticationFailed")
    assert blobs.request("HEAD", f"/{fs}/old.txt").status == 200
