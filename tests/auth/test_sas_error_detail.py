"""How Azure refuses a SAS: the detail it gives when an account SAS lacks the resource type an
operation needs, and the code for a client outside the token's IP range; compared
with the C++ SDK's recordings (``cpp/sdk/storage/azure-storage-{blobs,queues}/test/ut/recordings/``
in Azure/azure-sdk-assets), sent over raw HTTP as the C++ client sent them."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

from tests.queuehttp import DECLARATION, QueueHttp, QueueResponse, account_sas, assert_error, queue_sas, sign
from tests.serverproc import DEV_ACCOUNT, ServerProcess

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


def _service_sas_blob(container: str, blob: str, **extra: str) -> dict[str, str]:
    """A blob service SAS (``sr=b``) signed here from "Create a service SAS" (2020-12-06 on)."""
    fields = {"sv": "2022-11-02", "sr": "b", "sp": "racwdxyti", "spr": "https,http", **extra}
    fields["se"] = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    names = ("sp", "st", "se", None, "si", "sip", "spr", "sv", "sr", "snapshot", "ses")
    values = [f"/blob/{DEV_ACCOUNT}/{container}/{blob}" if n is None else fields.get(n, "") for n in names]
    return {**fields, "sig": sign("\n".join([*values, "", "", "", "", ""]))}


def test_blob_sas_outside_its_ip_range_is_an_authorization_failure(server: ServerProcess) -> None:
    """Get Blob Properties with an account SAS and with a blob SAS whose ``sip`` is
    0.0.0.0-0.0.0.1 (BlobSasTest.AccountSasWithIP and BlobSasTest.ServiceSasWithIP, x-ms-version
    2022-11-02): 403 with x-ms-error-code AuthorizationFailure, not the documented
    AuthorizationSourceIPMismatch; Get Blob gets the plain message in the body."""
    http = QueueHttp(server.blob_port)
    container = f"cppip{uuid.uuid4().hex[:12]}"
    assert http.request("PUT", f"/{container}?restype=container").status == 201
    assert (
        http.request("PUT", f"/{container}/Kh8JfCN0o6", b"x" * 1024, {"x-ms-blob-type": "BlockBlob"}).status
        == 201
    )
    blob = f"/{container}/Kh8JfCN0o6"
    outside = {"sip": "0.0.0.0-0.0.0.1"}
    for token in (
        account_sas(ss="b", sp="rwdxylacupitf", **outside),
        _service_sas_blob(container, "Kh8JfCN0o6", **outside),
    ):
        head = _with_sas(http, "HEAD", blob, token, "2022-11-02")
        assert (head.status, head.header("x-ms-error-code"), head.body) == (403, "AuthorizationFailure", b"")
        got = _with_sas(http, "GET", blob, token, "2022-11-02")
        assert_error(got, 403, "AuthorizationFailure")
        assert (got.xml().findtext("Message") or "").startswith(
            "This request is not authorized to perform this operation.\n"
        )
    inside = {"sip": "127.0.0.0-127.255.255.255"}
    for token in (
        account_sas(ss="b", sp="rwdxylacupitf", **inside),
        _service_sas_blob(container, "Kh8JfCN0o6", **inside),
    ):
        assert _with_sas(http, "HEAD", blob, token, "2022-11-02").status == 200


def test_queue_sas_outside_its_ip_range_is_an_authorization_failure(server: ServerProcess) -> None:
    """Get Queue Metadata with a queue SAS whose ``sip`` is 0.0.0.0-0.0.0.1
    (QueueSasTest.QueueSasWithIP, x-ms-version and sv 2018-03-28): 403 AuthorizationFailure,
    ``This request is not authorized to perform this operation.``, a 246-byte body; an account SAS
    is refused the same way."""
    http = QueueHttp(server.queue_port)
    queue = f"cppip{uuid.uuid4().hex[:12]}"
    assert http.create(queue).status == 201
    try:
        token = queue_sas(queue, sp="raup", sv="2018-03-28", spr="https,http", sip="0.0.0.0-0.0.0.1")
        refused = _with_sas(http, "GET", f"/{queue}?comp=metadata", token, "2018-03-28")
        assert_error(refused, 403, "AuthorizationFailure")
        assert refused.body.startswith(
            DECLARATION + b"<Error><Code>AuthorizationFailure</Code><Message>This request is not "
            b"authorized to perform this operation.\nRequestId:"
        )
        assert len(refused.body) == 246
        account = account_sas(sip="0.0.0.0-0.0.0.1")
        assert_error(
            _with_sas(http, "GET", f"/{queue}?comp=metadata", account, "2018-03-28"),
            403,
            "AuthorizationFailure",
        )
        allowed = queue_sas(queue, sp="raup", sv="2018-03-28", sip="127.0.0.1")
        assert _with_sas(http, "GET", f"/{queue}?comp=metadata", allowed, "2018-03-28").status == 200
    finally:
        http.delete(queue)
