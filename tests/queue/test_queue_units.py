"""The Queue service's pure pieces: receipts, parameter rules, operation resolution, the queue SAS
string-to-sign against the SDK's, metadata rules, header case on the wire, queue targets and
queue insight."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from azure.storage.queue import QueueSasPermissions, generate_queue_sas
from prometheus_client.parser import text_string_to_metric_families

from tabulae.admission.throttle import Targets, Throttle
from tabulae.auth.sas import parse_sas
from tabulae.http.protocol import restore_header_case
from tabulae.insight.queues import QueueInsight
from tabulae.model.errors import ServiceError
from tabulae.model.metadata import check_metadata, same_metadata
from tabulae.model.names import check_lower_dns_name
from tabulae.queue.api.operations import Operation, resolve_operation
from tabulae.queue.api.routing import Resource
from tabulae.queue.api.sas import QueueGrant, queue_sas_string_to_sign, verify_sas
from tabulae.queue.service import check_ttl, client_receipt, new_nonce, read_receipt
from tabulae.storage.queues import QueueStats

KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def code(call: object, *args: object) -> str:
    with pytest.raises(ServiceError) as error:
        call(*args)  # type: ignore[operator]
    return error.value.code


def test_receipts_round_trip_and_name_their_message() -> None:
    message_id = "ab75d089-cbc7-464c-8857-6de0183989b0"
    nonce = new_nonce()
    receipt = client_receipt(nonce, message_id)
    assert len(receipt) == 28 and receipt.endswith("=")  # 20 bytes, like Azure's
    stored, tag = read_receipt(receipt)
    assert stored == nonce and tag == bytes.fromhex("ab75d089cbc7464c")
    assert client_receipt(nonce, "11111111-cbc7-464c-8857-6de0183989b0") != receipt
    for bad in ("", "not base64!", receipt[:-1]):
        assert code(read_receipt, bad) == "InvalidQueryParameterValue", bad
    # Base64 that is no receipt of ours names no message: the message is looked up first (.NET
    # SDK's DeleteMessagAsync_Error, 2024-08-04, 'mwhojmtartdffgntginp' is 404 MessageNotFound).
    for other in ("AwAAAAMAAAAAAAAAuKOvkyhl3AE=", receipt[:-4], "mwhojmtartdffgntginp"):
        assert read_receipt(other) == ("", b""), other


def test_ttl_rules_by_version() -> None:
    assert check_ttl(None, "2026-10-06") == 604800
    assert check_ttl(-1, "2026-10-06") is None
    assert check_ttl(1073741824, "2026-10-06") == 1073741824
    assert code(check_ttl, 0, "2026-10-06") == "InvalidQueryParameterValue"
    assert code(check_ttl, -1, "2017-04-17") == "OutOfRangeQueryParameterValue"
    assert code(check_ttl, 604801, "2017-04-17") == "OutOfRangeQueryParameterValue"


@pytest.mark.parametrize(
    ("resource", "method", "comp", "restype", "peekonly", "expected"),
    [
        (Resource.SERVICE, "GET", "list", None, None, Operation.LIST_QUEUES),
        (Resource.SERVICE, "PUT", "properties", "service", None, Operation.SET_SERVICE_PROPERTIES),
        (Resource.SERVICE, "GET", "stats", "service", None, Operation.GET_SERVICE_STATS),
        (Resource.QUEUE, "PUT", None, None, None, Operation.CREATE_QUEUE),
        (Resource.QUEUE, "HEAD", "metadata", None, None, Operation.GET_METADATA),
        (Resource.QUEUE, "PUT", "acl", None, None, Operation.SET_ACL),
        (Resource.MESSAGES, "GET", None, None, "TRUE", Operation.PEEK_MESSAGES),
        (Resource.MESSAGES, "GET", None, None, "false", Operation.GET_MESSAGES),
        (Resource.MESSAGES, "DELETE", None, None, None, Operation.CLEAR_MESSAGES),
        (Resource.MESSAGE, "PUT", None, None, None, Operation.UPDATE_MESSAGE),
    ],
)
def test_operations(
    resource: Resource,
    method: str,
    comp: str | None,
    restype: str | None,
    peekonly: str | None,
    expected: Operation,
) -> None:
    assert resolve_operation(resource, method, comp=comp, restype=restype, peekonly=peekonly) is expected


def test_queue_sas_matches_the_sdk() -> None:
    token = generate_queue_sas(
        "devstoreaccount1",
        "myqueue",
        KEY,
        QueueSasPermissions(read=True, process=True),
        expiry=datetime(2030, 1, 1, tzinfo=UTC),
        start=datetime(2024, 1, 1, tzinfo=UTC),
    )
    from urllib.parse import parse_qsl

    parsed = parse_sas(dict(parse_qsl(token)))
    assert parsed is not None
    text = queue_sas_string_to_sign(parsed, "devstoreaccount1", "myqueue")
    assert text.split("\n")[3] == "/queue/devstoreaccount1/myqueue"
    grant = verify_sas(
        parsed,
        account="devstoreaccount1",
        keys=[__import__("base64").b64decode(KEY)],
        queue="myqueue",
        policy_lookup=None,
        is_https=False,
        client_ip="127.0.0.1",
        now=datetime(2025, 1, 1, tzinfo=UTC),
    )
    grant.check(Operation.PEEK_MESSAGES)
    grant.check(Operation.DELETE_MESSAGE)
    assert code(grant.check, Operation.PUT_MESSAGE) == "AuthorizationPermissionMismatch"
    assert code(grant.check, Operation.CREATE_QUEUE) == "AuthorizationFailure"
    assert code(grant.check, Operation.DELETE_QUEUE) == "AuthorizationFailure"


def test_account_grants() -> None:
    grant = QueueGrant(True, frozenset("rp"), frozenset("co"))
    grant.check(Operation.GET_MESSAGES)
    grant.check(Operation.DELETE_MESSAGE)  # container or object will do
    assert code(grant.check, Operation.LIST_QUEUES) == "AuthorizationResourceTypeMismatch"
    assert code(grant.check, Operation.GET_ACL) == "AuthorizationResourceTypeMismatch"
    assert code(grant.check, Operation.PUT_MESSAGE) == "AuthorizationPermissionMismatch"


def test_names_and_metadata() -> None:
    check_lower_dns_name("abc")
    check_lower_dns_name("a-b-c-1")
    assert code(check_lower_dns_name, "ab") == "OutOfRangeInput"
    assert code(check_lower_dns_name, "a--b") == "InvalidResourceName"
    assert check_metadata([("Color", "blue"), ("_x1", "")]) == {"Color": "blue", "_x1": ""}
    assert code(check_metadata, [("", "x")]) == "EmptyMetadataKey"
    assert code(check_metadata, [("a", "1"), ("A", "2")]) == "InvalidMetadata"
    assert code(check_metadata, [("n", "x" * 8192)]) == "MetadataTooLarge"
    assert same_metadata({"Color": "blue"}, {"color": "blue"})
    assert not same_metadata({"Color": "blue"}, {"color": "Blue"})


def test_response_header_case_is_restored() -> None:
    head = (
        b"HTTP/1.1 200 OK\r\nx-ms-meta-color: blue\r\nx-ms-meta-size: 1\r\n"
        b"x-tabulae-header-case: x-ms-meta-Color\r\ncontent-length: 0\r\n\r\n"
    )
    assert restore_header_case(head) == (
        b"HTTP/1.1 200 OK\r\nx-ms-meta-Color: blue\r\nx-ms-meta-size: 1\r\ncontent-length: 0\r\n\r\n"
    )
    plain = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"
    assert restore_header_case(plain) is plain


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_queue_targets_share_the_account_bucket() -> None:
    clock = FakeClock()
    throttle = Throttle(Targets(partition_rate=100, account_rate=10, queue_rate=4), clock=clock)
    for _ in range(4):
        throttle.admit_queue("acct", "q", 1)
    assert code(throttle.admit_queue, "acct", "q", 1) == "ServerBusy"  # the queue's own target
    for _ in range(6):
        throttle.admit("acct", "t", "p", 1)  # tables spend what the queue left of the account
    with pytest.raises(ServiceError) as error:
        throttle.admit_queue("acct", "other", 1)
    assert "account limit" in error.value.message
    clock.now += 1.0
    throttle.admit_queue("acct", "q", 1)
    throttle.charge_queue("acct", "q", 30)  # a Get that returned 31 messages: a debt
    clock.now += 1.0
    assert code(throttle.admit_queue, "acct", "q", 1) == "ServerBusy"


def test_queue_insight_counts_rates_and_warns(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    insight = QueueInsight(clock, window_seconds=10, queue_target=10, poison_threshold=2)
    for _ in range(5):
        insight.record("acct", "q", op="put", messages=1, status=201)
    insight.record("acct", "q", op="get", messages=2, dequeue_counts=(1, 3), status=200)
    insight.record("acct", "q", op="delete", messages=1, status=204)
    insight.record("acct", "q", op="put", status=503, throttled=True)
    with caplog.at_level(logging.WARNING, logger="tabulae.insight"):
        insight.record("acct", "q", op="get", messages=1, dequeue_counts=(4,), status=200)
    assert any("dequeued more than 2" in r.message for r in caplog.records)
    stats = [QueueStats("acct", "q", 3, 2, 999_000_000, 1)]
    snapshot = insight.snapshot(stats, 1_000_000_000)
    [entry] = snapshot["queues"]
    assert entry["messages"] == {"put": 5, "get": 3, "peek": 0, "update": 0, "delete": 1}
    assert entry["throttled"] == 1 and entry["requests"] == 9 and entry["poison_dequeues_seen"] == 2
    assert entry["depth"] == 3 and entry["oldest_visible_age_seconds"] == 1.0
    assert entry["rates"]["put"] == 0.5
    kinds = {w["kind"] for w in snapshot["warnings"]}
    assert kinds == {"poison-messages", "hot-queue"}  # throttled once: over its target
    text = insight.prometheus(stats, 1_000_000_000)
    names = {family.name for family in text_string_to_metric_families(text)}
    assert {"tabulae_queue_depth", "tabulae_queue_poison_messages", "tabulae_queue_messages"} <= names
    insight.forget_queue("acct", "q")
    assert insight.snapshot([], 0)["queues"] == []
