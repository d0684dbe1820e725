"""The Queue service through the official SDK, ``azure-storage-queue`` sync and aio, on every store.

Every test runs four times: sync and aio clients (``queue_service``) against the session server
of each storage backend. Raw wire shapes are in ``test_queue_wire.py``; delivery semantics under
time and concurrency in ``test_queue_delivery.py``.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError
from azure.storage.queue import (
    AccessPolicy,
    AccountSasPermissions,
    BinaryBase64DecodePolicy,
    BinaryBase64EncodePolicy,
    CorsRule,
    Metrics,
    QueueAnalyticsLogging,
    QueueClient,
    QueueSasPermissions,
    ResourceTypes,
    RetentionPolicy,
    TextBase64DecodePolicy,
    TextBase64EncodePolicy,
    generate_account_sas,
    generate_queue_sas,
)
from azure.storage.queue.aio import QueueClient as AioQueueClient

from tests.queue_clients import Synced
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess


def code_of(error: HttpResponseError) -> str | None:
    code = getattr(error, "error_code", None)
    return None if code is None else str(getattr(code, "value", code))


def queue_client_at(kind: str, url: str, name: str, credential: Any = None, **options: Any) -> Any:
    """A QueueClient made from a URL (for SAS tokens), sync or behind ``Synced``."""
    if kind == "sync":
        return QueueClient(url, name, credential=credential, **options)
    loop = asyncio.new_event_loop()
    return Synced(AioQueueClient(url, name, credential=credential, **options), loop, owns_loop=True)


def http_date(moment: datetime) -> str:
    return format_datetime(moment, usegmt=True)


def kind_of(client: Any) -> str:
    return "aio" if isinstance(client, Synced) else "sync"


# ----------------------------------------------------------------------------------------- queues


def test_create_is_idempotent_only_with_the_same_metadata(queue_service: Any, queue_name: str) -> None:
    queue = queue_service.create_queue(queue_name, metadata={"Purpose": "orders", "owner": "ops"})
    try:
        # The SDK turns Azure's 204 (exists, same metadata: names without case) into an error.
        with pytest.raises(ResourceExistsError) as same:
            queue_service.create_queue(queue_name, metadata={"purpose": "orders", "OWNER": "ops"})
        assert same.value.response.status_code == 204
        with pytest.raises(ResourceExistsError) as different:
            queue_service.create_queue(queue_name, metadata={"Purpose": "billing"})
        assert different.value.response.status_code == 409
        assert code_of(different.value) == "QueueAlreadyExists"
        properties = queue.get_queue_properties()
        assert properties.metadata == {"Purpose": "orders", "owner": "ops"}  # the case as set
        assert properties.approximate_message_count == 0
    finally:
        queue_service.delete_queue(queue_name)
    with pytest.raises(ResourceNotFoundError) as missing:
        queue_service.delete_queue(queue_name)
    assert code_of(missing.value) == "QueueNotFound"


def test_metadata_is_replaced_and_cleared(queue: Any) -> None:
    queue.set_queue_metadata({"a": "1", "B_2": "two words"})
    assert queue.get_queue_properties().metadata == {"a": "1", "B_2": "two words"}
    queue.set_queue_metadata({"c": "3"})
    assert queue.get_queue_properties().metadata == {"c": "3"}
    queue.set_queue_metadata({})
    assert queue.get_queue_properties().metadata == {}


def test_bad_names_and_metadata(queue_service: Any) -> None:
    bad_names = {
        "ab": "OutOfRangeInput",
        "a" * 64: "OutOfRangeInput",
        "Upper": "InvalidResourceName",
        "a--b": "InvalidResourceName",
        "-ab": "InvalidResourceName",
        "ab_c": "InvalidResourceName",
        "\u554a\u554a\u554a": "InvalidResourceName",
    }
    for name, code in bad_names.items():
        with pytest.raises(HttpResponseError) as error:
            queue_service.create_queue(name)
        assert (error.value.status_code, code_of(error.value)) == (400, code), name
    with pytest.raises(HttpResponseError) as error:
        queue_service.create_queue("badmeta", metadata={"1abc": "x"})
    assert (error.value.status_code, code_of(error.value)) == (400, "InvalidMetadata")
    with pytest.raises(HttpResponseError) as error:
        queue_service.create_queue("bigmeta", metadata={"big": "x" * 8190})
    assert (error.value.status_code, code_of(error.value)) == (400, "MetadataTooLarge")
    with pytest.raises(ResourceNotFoundError):
        queue_service.get_queue_client("badmeta").get_queue_properties()


def test_list_queues_by_prefix_pages_and_metadata(queue_service: Any, queue_name: str) -> None:
    names = [f"{queue_name}-{i}" for i in range(5)]
    for index, name in enumerate(names):
        queue_service.create_queue(name, metadata={"index": str(index)} if index % 2 else None)
    try:
        listed = list(queue_service.list_queues(name_starts_with=queue_name, include_metadata=True))
        assert [q.name for q in listed] == names
        assert [q.metadata for q in listed] == [{}, {"index": "1"}, {}, {"index": "3"}, {}]
        pages = queue_service.list_queues(name_starts_with=queue_name, results_per_page=2)
        if isinstance(queue_service, Synced):
            assert [q.name for q in pages] == names
        else:
            paged = pages.by_page()
            sizes = [len(list(page)) for page in paged]
            assert sizes == [2, 2, 1]
        assert list(queue_service.list_queues(name_starts_with=queue_name + "-9")) == []
    finally:
        for name in names:
            queue_service.delete_queue(name)


def test_list_queues_continuation_token(server: ServerProcess, queue_name: str) -> None:
    from azure.storage.queue import QueueServiceClient

    service = QueueServiceClient.from_connection_string(server.connection_string)
    names = [f"{queue_name}-{i}" for i in range(3)]
    for name in names:
        service.create_queue(name)
    try:
        pages = service.list_queues(name_starts_with=queue_name, results_per_page=2).by_page()
        first = [q.name for q in next(pages)]
        assert first == names[:2]
        token = pages.continuation_token
        assert token == f"/{DEV_ACCOUNT}/{names[2]}"
        rest = service.list_queues(name_starts_with=queue_name, results_per_page=2).by_page(token)
        assert [q.name for q in next(rest)] == names[2:]
    finally:
        for name in names:
            service.delete_queue(name)


def test_access_policies(queue: Any) -> None:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    policies = {
        f"p{i}": AccessPolicy(permission=QueueSasPermissions(read=True, process=i % 2 == 0), start=start,
                              expiry=start + timedelta(days=i + 1))
        for i in range(4)
    }  # fmt: skip
    policies["bare"] = None
    queue.set_queue_access_policy(policies)
    found = queue.get_queue_access_policy()
    assert set(found) == set(policies)
    assert found["p0"].permission == "rp" and found["p1"].permission == "r"
    assert found["p0"].start == "2024-01-01T00:00:00.0000000Z"
    assert found["bare"].permission is None
    with pytest.raises(HttpResponseError) as error:
        queue.set_queue_access_policy({f"x{i}": None for i in range(6)})
    assert (error.value.status_code, code_of(error.value)) == (400, "InvalidXmlDocument")
    queue.set_queue_access_policy({})
    assert queue.get_queue_access_policy() == {}


def test_service_properties_round_trip(queue_service: Any) -> None:
    original = queue_service.get_service_properties()
    try:
        rule = CorsRule(
            ["https://app.example"], ["GET", "PUT"], allowed_headers=["x-ms-*"], max_age_in_seconds=60
        )
        queue_service.set_service_properties(
            analytics_logging=QueueAnalyticsLogging(read=True, retention_policy=RetentionPolicy(True, 3)),
            hour_metrics=Metrics(enabled=True, include_apis=True, retention_policy=RetentionPolicy(True, 5)),
            minute_metrics=Metrics(enabled=False),
            cors=[rule],
        )
        found = queue_service.get_service_properties()
        assert found["analytics_logging"].read is True and found["analytics_logging"].write is False
        assert found["analytics_logging"].retention_policy.days == 3
        assert found["hour_metrics"].enabled and found["hour_metrics"].include_apis
        assert found["hour_metrics"].retention_policy.days == 5
        assert [(c.allowed_origins, c.allowed_methods, c.max_age_in_seconds) for c in found["cors"]] == [
            ("https://app.example", "GET,PUT", 60)
        ]
        queue_service.set_service_properties(cors=[])  # only Cors given: the rest is kept
        found = queue_service.get_service_properties()
        assert found["cors"] == [] and found["hour_metrics"].enabled
    finally:
        queue_service.set_service_properties(
            analytics_logging=original["analytics_logging"],
            hour_metrics=original["hour_metrics"],
            minute_metrics=original["minute_metrics"],
            cors=original["cors"],
        )


def test_service_stats_on_the_secondary(server: ServerProcess) -> None:
    from azure.storage.queue import QueueServiceClient

    secondary = f"127.0.0.1:{server.queue_port}/{DEV_ACCOUNT}-secondary"
    service = QueueServiceClient.from_connection_string(
        server.connection_string, secondary_hostname=secondary
    )
    stats = service.get_service_stats()
    assert stats["geo_replication"]["status"] == "live"


# ----------------------------------------------------------------------------------------- messages


def test_send_receive_update_delete(queue: Any) -> None:
    sent = queue.send_message("hello <&> w\u00f6rld \U0001f600")
    assert sent.pop_receipt and sent.inserted_on and sent.expires_on and sent.next_visible_on
    assert sent.expires_on - sent.inserted_on == timedelta(days=7)
    [peeked] = queue.peek_messages()
    assert (peeked.id, peeked.content, peeked.dequeue_count) == (sent.id, sent.content, 0)
    assert peeked.pop_receipt is None and peeked.next_visible_on is None
    got = queue.receive_message(visibility_timeout=30)
    assert (got.id, got.content, got.dequeue_count) == (sent.id, "hello <&> w\u00f6rld \U0001f600", 1)
    assert got.next_visible_on - got.inserted_on >= timedelta(seconds=29)
    assert queue.peek_messages() == [] and queue.receive_message() is None  # invisible now
    assert queue.get_queue_properties().approximate_message_count == 1
    updated = queue.update_message(got, content="second", visibility_timeout=0)
    assert updated.pop_receipt != got.pop_receipt
    with pytest.raises(ResourceNotFoundError) as stale:  # the receipt Get gave is stale now
        queue.delete_message(got.id, got.pop_receipt)
    assert code_of(stale.value) == "MessageNotFound"
    again = queue.receive_message()
    assert (again.content, again.dequeue_count) == ("second", 2)  # Update does not count a dequeue
    queue.delete_message(again)
    assert queue.get_queue_properties().approximate_message_count == 0
    with pytest.raises(ResourceNotFoundError):
        queue.delete_message(again)


def test_receive_many_in_order_and_clear(queue: Any) -> None:
    for index in range(40):
        queue.send_message(f"m{index:02d}")
    assert [m.content for m in queue.peek_messages(max_messages=32)] == [f"m{i:02d}" for i in range(32)]
    first = list(queue.receive_messages(max_messages=5, visibility_timeout=60))
    assert [m.content for m in first] == [f"m{i:02d}" for i in range(5)]
    batch = list(queue.receive_messages(messages_per_page=32, max_messages=32, visibility_timeout=60))
    assert [m.content for m in batch] == [f"m{i:02d}" for i in range(5, 37)]
    assert queue.get_queue_properties().approximate_message_count == 40
    queue.clear_messages()
    assert queue.get_queue_properties().approximate_message_count == 0
    assert queue.receive_message() is None


def test_send_with_visibility_and_ttl(queue: Any) -> None:
    delayed = queue.send_message("later", visibility_timeout=60)
    assert delayed.next_visible_on - delayed.inserted_on == timedelta(seconds=60)
    forever = queue.send_message("forever", time_to_live=-1)
    assert forever.expires_on == datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
    huge = queue.send_message("huge ttl", time_to_live=1073741824)
    assert huge.expires_on - huge.inserted_on == timedelta(seconds=1073741824)
    assert [m.content for m in queue.peek_messages(max_messages=32)] == ["forever", "huge ttl"]
    with pytest.raises(HttpResponseError) as error:
        queue.send_message("x", visibility_timeout=30, time_to_live=30)
    assert (error.value.status_code, code_of(error.value)) == (400, "InvalidQueryParameterValue")
    with pytest.raises(HttpResponseError) as error:
        queue.send_message("x", visibility_timeout=604801)
    assert (error.value.status_code, code_of(error.value)) == (400, "OutOfRangeQueryParameterValue")


def test_messages_expire(queue: Any) -> None:
    queue.send_message("short", time_to_live=1)
    queue.send_message("long")
    time.sleep(1.2)
    assert [m.content for m in queue.peek_messages(max_messages=32)] == ["long"]
    [got] = list(queue.receive_messages(max_messages=32))
    assert got.content == "long"


def test_parameter_ranges(queue: Any) -> None:
    with pytest.raises(HttpResponseError) as error:
        list(queue.receive_messages(max_messages=33, messages_per_page=33))
    assert (error.value.status_code, code_of(error.value)) == (400, "OutOfRangeQueryParameterValue")
    assert "numofmessages" in str(error.value)
    with pytest.raises(HttpResponseError) as error:
        queue.receive_message(visibility_timeout=0)
    assert code_of(error.value) == "OutOfRangeQueryParameterValue"
    message = queue.send_message("x")
    with pytest.raises(HttpResponseError) as error:
        queue.update_message(message, visibility_timeout=604801)
    assert code_of(error.value) == "OutOfRangeQueryParameterValue"


def test_message_size_limit(queue: Any) -> None:
    queue.send_message("a" * 65536)
    with pytest.raises(HttpResponseError) as error:
        queue.send_message("a" * 65537)
    assert (error.value.status_code, code_of(error.value)) == (413, "RequestBodyTooLarge")
    with pytest.raises(HttpResponseError) as error:
        queue.send_message("\u00e9" * 32769)  # 65,538 bytes of UTF-8
    assert code_of(error.value) == "RequestBodyTooLarge"
    [message] = queue.peek_messages()
    assert len(message.content) == 65536


def test_base64_encoding_is_the_clients_business(queue_service: Any, queue_name: str) -> None:
    encoded = queue_service.get_queue_client(
        queue_name,
        message_encode_policy=BinaryBase64EncodePolicy(),
        message_decode_policy=BinaryBase64DecodePolicy(),
    )
    encoded.create_queue()
    try:
        encoded.send_message(b"\x00\x01binary\xff")
        assert encoded.peek_messages()[0].content == b"\x00\x01binary\xff"
        plain = queue_service.get_queue_client(queue_name)
        assert plain.peek_messages()[0].content == "AAFiaW5hcnn/"
        text = queue_service.get_queue_client(
            queue_name,
            message_encode_policy=TextBase64EncodePolicy(),
            message_decode_policy=TextBase64DecodePolicy(),
        )
        text.send_message("<xml>")
        assert [m.content for m in plain.peek_messages(max_messages=2)] == ["AAFiaW5hcnn/", "PHhtbD4="]
    finally:
        queue_service.delete_queue(queue_name)


def test_missing_queue_everywhere(queue_service: Any, queue_name: str) -> None:
    missing = queue_service.get_queue_client(queue_name)
    for call in (
        missing.get_queue_properties,
        lambda: missing.set_queue_metadata({"a": "b"}),
        missing.get_queue_access_policy,
        lambda: missing.send_message("x"),
        missing.receive_message,
        missing.peek_messages,
        missing.clear_messages,
        lambda: missing.delete_message(
            "c8f1fa69-31c5-41b2-9d3e-5a7b1c5e0a11", "AgAAAAMAAAAAAAAAz0CDOFDq2AE="
        ),
    ):
        with pytest.raises(ResourceNotFoundError) as error:
            call()
        assert code_of(error.value) == "QueueNotFound"


# ----------------------------------------------------------------------------------------- SAS


def test_account_sas(queue_service: Any, server: ServerProcess, queue: Any) -> None:
    kind = kind_of(queue_service)
    expiry = datetime.now(UTC) + timedelta(hours=1)
    token = generate_account_sas(
        DEV_ACCOUNT,
        DEV_KEY,
        ResourceTypes(object=True),
        AccountSasPermissions(add=True, process=True),
        expiry,
    )
    client = queue_client_at(kind, server.queue_endpoint, queue.queue_name, credential=token)
    try:
        client.send_message("by account sas")
        assert client.receive_message().content == "by account sas"
        with pytest.raises(HttpResponseError) as error:  # metadata is a container-level read
            client.get_queue_properties()
        assert (error.value.status_code, code_of(error.value)) == (403, "AuthorizationResourceTypeMismatch")
        with pytest.raises(HttpResponseError) as error:
            client.peek_messages()  # needs r
        assert (error.value.status_code, code_of(error.value)) == (403, "AuthorizationPermissionMismatch")
    finally:
        client.close()


def test_sas_outside_its_window_says_why(queue_service: Any, server: ServerProcess, queue: Any) -> None:
    """Azure's reasons, every time an HTTP date: an expired SAS naming no start has an expiry
    that is not after its start, the request's time (recorded for an expired account SAS); one
    not valid yet is outside its time frame."""
    kind = kind_of(queue_service)
    now = datetime.now(UTC).replace(microsecond=0)
    gone, start, expiry = now - timedelta(days=1), now + timedelta(hours=1), now + timedelta(hours=2)
    expired = generate_account_sas(
        DEV_ACCOUNT, DEV_KEY, ResourceTypes(object=True), AccountSasPermissions(read=True), gone
    )
    early = generate_queue_sas(
        DEV_ACCOUNT, queue.queue_name, DEV_KEY, QueueSasPermissions(read=True), expiry, start=start
    )
    for token, reason in (
        (expired, f"Signed expiry time [{http_date(gone)}] has to be after signed start time ["),
        (early, f"Signature not valid in the specified time frame: Start [{http_date(start)}] - Expiry ["),
    ):
        client = queue_client_at(kind, server.queue_endpoint, queue.queue_name, credential=token)
        try:
            with pytest.raises(HttpResponseError) as error:
                client.peek_messages()
            assert (error.value.status_code, code_of(error.value)) == (403, "AuthenticationFailed")
            assert reason in str(error.value)
        finally:
            client.close()


def test_queue_sas_and_stored_policy(queue_service: Any, server: ServerProcess, queue: Any) -> None:
    kind = kind_of(queue_service)
    expiry = datetime.now(UTC) + timedelta(hours=1)
    token = generate_queue_sas(DEV_ACCOUNT, queue.queue_name, DEV_KEY, QueueSasPermissions(add=True), expiry)
    adder = queue_client_at(kind, server.queue_endpoint, queue.queue_name, credential=token)
    queue.set_queue_access_policy(
        {"readers": AccessPolicy(QueueSasPermissions(read=True, process=True), expiry)}
    )
    policy_token = generate_queue_sas(DEV_ACCOUNT, queue.queue_name, DEV_KEY, policy_id="readers")
    reader = queue_client_at(kind, server.queue_endpoint, queue.queue_name, credential=policy_token)
    try:
        adder.send_message("via sas")
        with pytest.raises(HttpResponseError) as error:
            adder.peek_messages()
        assert (error.value.status_code, code_of(error.value)) == (403, "AuthorizationPermissionMismatch")
        assert reader.peek_messages()[0].content == "via sas"
        got = reader.receive_message()
        reader.delete_message(got)
        assert reader.get_queue_properties().approximate_message_count == 0
        with pytest.raises(HttpResponseError) as error:
            reader.clear_messages()  # no queue SAS permission clears a queue
        assert error.value.status_code == 403
        queue.set_queue_access_policy({})  # revoking the policy revokes the token at once
        with pytest.raises(HttpResponseError) as error:
            reader.peek_messages()
        assert (error.value.status_code, code_of(error.value)) == (403, "AuthenticationFailed")
    finally:
        adder.close()
        reader.close()
