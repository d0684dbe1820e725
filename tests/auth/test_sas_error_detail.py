"""The detail Azure gives when an account SAS lacks the resource type an operation needs, compared
with the C++ SDK's recordings (``cpp/sdk/storage/azure-storage-{blobs,queues}/test/ut/recordings/``
in Azure/azure-sdk-assets), sent over raw HTTP as the C++ client sent them."""

from __future__ import annotations

import uuid
from urllib.parse import urlencode

from tests.queuehttp import DECLARATION, QueueHttp, QueueResponse, account_sas, assert_error
from tests.serverproc import ServerProcess

RECORDED_VERSION = "2024-08-04"


def _with_sas(http: QueueHttp, method: str, path: str, token: dict[str, str], version: str) -> QueueResponse:
    separator = "&" if "?" in path else "?"
    return http.request(
        method, f"{path}{separator}{urlencode(token)}", headers={"x-ms-version": version}, auth="none"
    )


def test_blob_download_names_the_object_resource_type(server: ServerProcess) -> None:
    """Get Blob with an account SAS of ``srt=s`` (BlobSasTest.AccountSasAuthorizationErrorDetail,
    x-ms-version 2024-08-04): 403 AuthorizationResourceTypeMismatch, Content-Length 389, whose
    ``ExtendedErrorDetail`` says ``SignedResourceTypes 'o' is required to perform this
    operation.``; at 2019-02-02 (the JS SDK's recordings of that year) no such element."""
    http = QueueHttp(server.blob_port)
    container = f"cppsas{uuid.uuid4().hex[:12]}"
    assert http.request("PUT", f"/{container}?restype=container").status == 201
    put = http.request("PUT", f"/{container}/NQI9TvStph", b"x" * 1024, {"x-ms-blob-type": "BlockBlob"})
    assert put.status == 201
    token = account_sas(ss="b", srt="s", sp="rwdxylacupitf")
    refused = _with_sas(http, "GET", f"/{container}/NQI9TvStph", token, RECORDED_VERSION)
    assert_error(refused, 403, "AuthorizationResourceTypeMismatch")
    assert refused.error_fields()["ExtendedErrorDetail"] == (
        "SignedResourceTypes 'o' is required to perform this operation."
    )
    assert refused.body.startswith(DECLARATION + b"<Error><Code>AuthorizationResourceTypeMismatch</Code>")
    assert refused.body.endswith(
        b"</Message><ExtendedErrorDetail>SignedResourceTypes 'o' is required to "
        b"perform this operation.</ExtendedErrorDetail></Error>"
    )
    # The recorded body with its 36-character request id and 28-character time: 389 bytes.
    assert len(refused.body) == 389
    older = _with_sas(http, "GET", f"/{container}/NQI9TvStph", token, "2019-02-02")
    assert_error(older, 403, "AuthorizationResourceTypeMismatch")
    assert "ExtendedErrorDetail" not in older.error_fields()
    allowed = account_sas(ss="b", srt="o", sp="r")
    assert _with_sas(http, "GET", f"/{container}/NQI9TvStph", allowed, RECORDED_VERSION).status == 200


def test_list_queues_names_the_service_resource_type(server: ServerProcess) -> None:
    """List Queues with an account SAS lacking ``s`` (QueueSasTest.AccountSasAuthorizationErrorDetail,
    x-ms-version 2024-08-04): 403 AuthorizationResourceTypeMismatch, Content-Length 389, with
    ``SignedResourceTypes 's' is required to perform this operation.``. Clear Messages, which a
    container or an object SAS may do, names no letter: which one Azure names is not recorded."""
    http = QueueHttp(server.queue_port)
    token = account_sas(ss="q", srt="co", sp="rwdxylacupitf")
    refused = _with_sas(http, "GET", "/?comp=list", token, RECORDED_VERSION)
    assert_error(refused, 403, "AuthorizationResourceTypeMismatch")
    assert refused.error_fields()["ExtendedErrorDetail"] == (
        "SignedResourceTypes 's' is required to perform this operation."
    )
    assert len(refused.body) == 389
    older = _with_sas(http, "GET", "/?comp=list", token, "2019-02-02")
    assert_error(older, 403, "AuthorizationResourceTypeMismatch")
    assert "ExtendedErrorDetail" not in older.error_fields()
    queue = f"cppsas{uuid.uuid4().hex[:12]}"
    assert http.create(queue).status == 201
    try:
        cleared = _with_sas(http, "DELETE", f"/{queue}/messages", account_sas(srt="s"), RECORDED_VERSION)
        assert_error(cleared, 403, "AuthorizationResourceTypeMismatch")
        assert "ExtendedErrorDetail" not in cleared.error_fields()
    finally:
        http.delete(queue)
