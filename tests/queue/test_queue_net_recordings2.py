"""Queue requests of the .NET SDK (``Azure.Storage.Queues``) answered as its recordings of real
Azure show (``Azure/azure-sdk-assets``, ``net/sdk/storage/Azure.Storage.Queues/tests/
SessionRecords/``, x-ms-version 2024-08-04), the second pass over them. Raw HTTP, so the bytes are
the ones compared; the session server runs on every store.

* ``QueueClientTests/DeleteMessagAsync_Error.json`` and ``UpdateMessageAsync_Error.json``: Delete
  Message and Update Message of an id that is no message (``test-message-<guid>``) with a pop
  receipt that is Base64 but no receipt (``mwhojmtartdffgntginp``, ``jhuklpwsxbhhvsntkbdm``) are
  404 ``MessageNotFound``, "The specified message does not exist." A receipt that is not even
  Base64 stays 400 ``InvalidQueryParameterValue`` ('Invalid pop receipt format') whatever the id
  (the Java SDK's deleteMessageInvalidArgs[3], 2023-11-03; the JS SDK's 'delete message negative').
* ``ServiceClientTests/GetQueuesAsync_ErrorAsync.json``: List Queues with ``marker=garbage`` is 400
  ``OutOfRangeInput``, "One of the request inputs is out of range." (as List Containers answers
  the same marker), not ``InvalidMarker``.
"""

from __future__ import annotations

from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.storage.queue import QueueServiceClient

from tests.queuehttp import QueueHttp, assert_error
from tests.serverproc import ServerProcess

NET = {"x-ms-version": "2024-08-04"}


@pytest.fixture
def made(queue_http: QueueHttp, queue_name: str) -> Any:
    assert queue_http.request("PUT", f"/{queue_name}", headers=NET).status == 201
    yield queue_name
    assert queue_http.request("DELETE", f"/{queue_name}", headers=NET).status == 204


def test_delete_message_of_no_message_with_a_base64_receipt(queue_http: QueueHttp, made: str) -> None:
    target = (
        f"/{made}/messages/test-message-9a9499fb-b750-6325-0e95-af09fe6b1c5c?popreceipt=mwhojmtartdffgntginp"
    )
    response = queue_http.request("DELETE", target, headers=NET)
    assert_error(response, 404, "MessageNotFound")
    assert b"<Message>The specified message does not exist.\n" in response.body


def test_update_message_of_no_message_with_a_base64_receipt(queue_http: QueueHttp, made: str) -> None:
    target = (
        f"/{made}/messages/test-message-fe083ce9-7616-0126-953b-5e292c334ebc"
        "?popreceipt=jhuklpwsxbhhvsntkbdm&visibilitytimeout=0"
    )
    body = "\ufeff<QueueMessage><MessageText /></QueueMessage>"  # what the .NET client sent
    assert_error(queue_http.request("PUT", target, body, headers=NET), 404, "MessageNotFound")


def test_a_guid_that_names_no_message_is_not_found_too(queue_http: QueueHttp, made: str) -> None:
    target = f"/{made}/messages/00000000-0000-0000-0000-000000000001?popreceipt=mwhojmtartdffgntginp"
    assert_error(queue_http.request("DELETE", target, headers=NET), 404, "MessageNotFound")


def test_a_receipt_that_is_not_base64_is_still_refused_first(queue_http: QueueHttp, made: str) -> None:
    target = f"/{made}/messages/test-message-9a9499fb?popreceipt=not-a-receipt"
    assert_error(
        queue_http.request("DELETE", target, headers=NET),
        400,
        "InvalidQueryParameterValue",
        QueryParameterName="popreceipt",
        QueryParameterValue="not-a-receipt",
        Reason="Invalid pop receipt format",
    )


def test_sdk_delete_message_of_no_message(queue: Any) -> None:
    with pytest.raises(ResourceNotFoundError) as raised:
        queue.delete_message("test-message-9a9499fb-b750-6325-0e95-af09fe6b1c5c", "mwhojmtartdffgntginp")
    assert raised.value.error_code == "MessageNotFound"


def test_list_queues_with_a_marker_that_is_no_marker(queue_http: QueueHttp) -> None:
    response = queue_http.request("GET", "/?comp=list&marker=garbage", headers=NET)
    assert_error(response, 400, "OutOfRangeInput")
    assert b"<Message>One of the request inputs is out of range.\n" in response.body
    assert b"<QueryParameterName>" not in response.body


def test_sdk_list_queues_with_a_marker_that_is_no_marker(server: ServerProcess) -> None:
    service = QueueServiceClient.from_connection_string(server.connection_string)
    pages = service.list_queues().by_page(continuation_token="garbage")
    with pytest.raises(HttpResponseError) as raised:
        next(pages)
    assert raised.value.error_code == "OutOfRangeInput"
