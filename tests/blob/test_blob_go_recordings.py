"""Blob answers compared with Azure's recordings of the Go SDK's azblob tests
(``go/sdk/storage/azblob/testdata/recordings/Test/`` in Azure/azure-sdk-assets, x-ms-version
2023-11-03 on an account that keeps versions), sent over raw HTTP as the Go client sent them, and
read back through the Python SDK (sync and aio) where it can express the request."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator

import pytest
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import BlobServiceClient
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

from tests.backends import backend_names
from tests.blobhttp import BlobHttp
from tests.conftest import fresh_store
from tests.serverproc import ServerProcess

GO_VERSION = "2023-11-03"
_names = itertools.count()


@pytest.fixture(scope="module", params=backend_names())
def go_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server whose account keeps versions, as the recording account did, one per backend."""
    extra = [*fresh_store(request.param), "--blob-versioning"]
    process = ServerProcess(tmp_path_factory.mktemp("gorec"), extra_args=extra, backend=request.param)
    process.start()
    yield process
    process.stop()


@pytest.fixture
def http(go_server: ServerProcess) -> BlobHttp:
    return BlobHttp(go_server.blob_port)


@pytest.fixture
def box(http: BlobHttp) -> str:
    """A new container's name."""
    name = f"goc{next(_names)}x"
    assert http.request("PUT", f"/{name}?restype=container").status == 201
    return name


def test_permanent_delete_while_the_account_does_not_allow_it(
    go_server: ServerProcess, http: BlobHttp, box: str
) -> None:
    """TestAppendBlockPermanentDeleteWithoutPermission: Delete Blob of a snapshot with
    ``deletetype=Permanent`` on an account that does not allow it is 409
    ``PermanentDeleteIsOff``, "Permanent delete is off on the storage account." (236 bytes)."""
    assert http.request("PUT", f"/{box}/ab", {"x-ms-blob-type": "AppendBlob"}).status == 201
    snapshot = http.request("PUT", f"/{box}/ab?comp=snapshot").headers["x-ms-snapshot"]
    refused = http.request("DELETE", f"/{box}/ab?deletetype=Permanent&snapshot={snapshot.replace(':', '%3A')}")
    assert (refused.status, refused.code, len(refused.body)) == (409, "PermanentDeleteIsOff", 236)
    assert refused.error_fields()["Message"].split("\n")[0] == "Permanent delete is off on the storage account."
    with BlobServiceClient.from_connection_string(go_server.connection_string) as service:
        blob = service.get_blob_client(box, "ab", snapshot=snapshot)
        with pytest.raises(HttpResponseError) as caught:
            blob.delete_blob(blob_delete_type="Permanent")
        assert caught.value.error_code == "PermanentDeleteIsOff"


def test_clear_pages_names_range_in_its_error(http: BlobHttp, box: str) -> None:
    """TestBlobClearPagesInvalidRange: a clear of ``x-ms-range: bytes=0-512`` (not a whole page)
    is 400 InvalidHeaderValue naming ``Range`` with the value sent (322 bytes)."""
    created = http.request("PUT", f"/{box}/pb", {"x-ms-blob-type": "PageBlob", "x-ms-blob-content-length": "5120"})
    assert created.status == 201
    cleared = http.request("PUT", f"/{box}/pb?comp=page", {"x-ms-page-write": "clear", "x-ms-range": "bytes=0-512"})
    assert (cleared.status, cleared.code, len(cleared.body)) == (400, "InvalidHeaderValue", 322)
    fields = cleared.error_fields()
    assert (fields["HeaderName"], fields["HeaderValue"]) == ("Range", "bytes=0-512")
