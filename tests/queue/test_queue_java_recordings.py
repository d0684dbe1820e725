"""Queue requests of the Java SDK (``azure-storage-queue``) answered as its recordings of real Azure
show (``Azure/azure-sdk-assets``,
``java/sdk/storage/azure-storage-queue/src/test/resources/session-records/``). Raw HTTP with the
Java client's shapes, so the bytes are the ones compared, and the Python SDK where it can say the
same; the session server runs on every store.

* ``QueueSasAsyncClientTests.queueSasUpdateWithPerm.json`` (x-ms-version 2023-01-03): Delete Queue
  with a queue SAS (``sp=raup``, ``spr=https,http``) is 403 ``AuthorizationFailure``, "This
  request is not authorized to perform this operation." (246 bytes with Azure's request id and
  time, as ours), as Create Queue with one is (the .NET SDK's recording); it was
  ``AuthorizationPermissionMismatch``. The same recording's Update Message with ``sp=raup`` is
  204, and ``queueSasEnqueueWithPerm.json``'s Update Message with ``sp=rap`` stays 403
  ``AuthorizationPermissionMismatch`` (279 bytes).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import quote, urlencode

import pytest
from azure.core.exceptions import HttpResponseError
from azure.storage.queue import QueueClient

from tests.queuehttp import QueueHttp, assert_error, queue_sas
from tests.serverproc import ServerProcess

JAVA = {"x-ms-version": "2023-01-03", "Accept": "application/xml"}
JAVA_DECLARATION = "<?xml version='1.0' encoding='UTF-8'?>"


def _java_message(text: str) -> str:
    """A Put or Update Message body as the Java client writes it."""
    return f"{JAVA_DECLARATION}<QueueMessage><MessageText>{text}</MessageText></QueueMessage>"


@pytest.fixture
def made(queue_http: QueueHttp, queue_name: str) -> Iterator[str]:
    assert queue_http.request("PUT", f"/{queue_name}", headers=JAVA).status == 201
    yield queue_name
    queue_http.request("DELETE", f"/{queue_name}", headers=JAVA)


def _java_sas(queue: str, sp: str) -> str:
    return urlencode(queue_sas(queue, sp=sp, sv="2023-01-03", spr="https,http"))


def test_delete_queue_with_a_queue_sas_is_refused_outright(queue_http: QueueHttp, made: str) -> None:
    # QueueSasAsyncClientTests.queueSasUpdateWithPerm.json: the last request
    refused = queue_http.request("DELETE", f"/{made}?{_java_sas(made, 'raup')}", headers=JAVA, auth="none")
    assert_error(refused, 403, "AuthorizationFailure")
    assert (refused.xml().findtext("Message") or "").startswith(
        "This request is not authorized to perform this operation.\n"
    )
    assert refused.header("content-length") == "246"
    assert queue_http.request("GET", f"/{made}?comp=metadata", headers=JAVA).status == 200


def test_update_message_by_queue_sas_needs_u(queue_http: QueueHttp, made: str) -> None:
    # queueSasEnqueueWithPerm.json (sp=rap: 403) and queueSasUpdateWithPerm.json (sp=raup: 204)
    put = queue_http.request("POST", f"/{made}/messages", _java_message("test"), headers=JAVA)
    assert put.status == 201, put
    found = re.search(rb"<MessageId>(.*?)</MessageId>.*<PopReceipt>(.*?)</PopReceipt>", put.body)
    assert found is not None
    message_id, receipt = (part.decode() for part in found.groups())
    target = f"/{made}/messages/{message_id}?popreceipt={quote(receipt, safe='')}"
    without_u = queue_http.request(
        "PUT",
        f"{target}&visibilitytimeout=3600&{_java_sas(made, 'rap')}",
        _java_message("testing"),
        headers=JAVA,
        auth="none",
    )
    assert_error(without_u, 403, "AuthorizationPermissionMismatch")
    assert without_u.header("content-length") == "279"
    with_u = queue_http.request(
        "PUT",
        f"{target}&visibilitytimeout=0&{_java_sas(made, 'raup')}",
        _java_message("testing"),
        headers=JAVA,
        auth="none",
    )
    assert with_u.status == 204, with_u
    assert with_u.header("x-ms-popreceipt") and with_u.header("x-ms-time-next-visible")


def test_sdk_delete_queue_with_a_queue_sas(server: ServerProcess, made: str) -> None:
    token = urlencode(queue_sas(made, sp="raup"))
    client = QueueClient(server.queue_endpoint, made, credential=token)
    with pytest.raises(HttpResponseError) as raised:
        client.delete_queue()
    assert raised.value.status_code == 403
    assert raised.value.error_code == "AuthorizationFailure"
