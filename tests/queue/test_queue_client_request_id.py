"""The client's request id (``x-ms-client-request-id``) is echoed only for x-ms-version 2019-02-02
and later: Microsoft Learn's "Version 2019-02-02" says that version made every Blob, Table and
Queue answer return it, and Azure's recordings of older versions carry none though the request
did (the Rust Queue SDK's ``queue_client/test_update_message.json`` in ``Azure/azure-sdk-assets``,
x-ms-version 2018-03-28: Put Message, Update Message, Delete Queue; the JS SDKs' recordings at
2018-03-28 and 2018-11-09). The Queue SDK (which sends a newer version) still gets it echoed.

Raw HTTP against ``tabulae serve`` (Queue and Blob), and the SDK.
"""

from __future__ import annotations

from typing import Any

from azure.storage.queue import QueueClient

from tests.blobhttp import BlobHttp
from tests.queuehttp import QueueHttp
from tests.serverproc import ServerProcess

CLIENT_ID = "0f5d185d-770b-425a-922c-a070b00c66d6"


def test_queue_answers_before_2019_02_02_do_not_echo_it(queue_http: QueueHttp, queue_name: str) -> None:
    old = {"x-ms-version": "2018-03-28", "x-ms-client-request-id": CLIENT_ID}
    created = queue_http.request("PUT", f"/{queue_name}", headers=old)
    try:
        assert created.status == 201, created
        assert created.header("x-ms-client-request-id") is None
        assert created.header("x-ms-version") == "2018-03-28"
        put = queue_http.request(
            "POST",
            f"/{queue_name}/messages",
            "<QueueMessage><MessageText>m</MessageText></QueueMessage>",
            old,
        )
        assert put.status == 201 and put.header("x-ms-client-request-id") is None, put
        new = {"x-ms-version": "2019-02-02", "x-ms-client-request-id": CLIENT_ID}
        peeked = queue_http.request("GET", f"/{queue_name}/messages?peekonly=true", headers=new)
        assert peeked.status == 200 and peeked.header("x-ms-client-request-id") == CLIENT_ID, peeked
    finally:
        assert queue_http.delete(queue_name).status == 204


def test_blob_answers_before_2019_02_02_do_not_echo_it(server: ServerProcess) -> None:
    http = BlobHttp(server.blob_port)
    for version, echoed in (("2018-11-09", None), ("2019-02-02", CLIENT_ID), ("2024-08-04", CLIENT_ID)):
        answer = http.request(
            "GET", "/?comp=list&maxresults=1", {"x-ms-version": version, "x-ms-client-request-id": CLIENT_ID}
        )
        assert answer.status == 200, answer
        assert answer.headers.get("x-ms-client-request-id") == echoed, (version, answer.headers)


def test_the_sdk_still_gets_its_id_back(server: ServerProcess, queue_name: str) -> None:
    queue = QueueClient.from_connection_string(server.connection_string, queue_name)
    queue.create_queue()
    seen: list[tuple[str, str | None]] = []

    def hook(response: Any) -> None:
        http = response.http_response
        seen.append(
            (
                response.http_request.headers["x-ms-client-request-id"],
                http.headers.get("x-ms-client-request-id"),
            )
        )

    try:
        assert queue.get_queue_properties(raw_response_hook=hook).approximate_message_count == 0
        [(sent, echoed)] = seen
        assert echoed == sent
    finally:
        queue.delete_queue()
