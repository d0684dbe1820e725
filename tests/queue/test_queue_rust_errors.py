"""Queue errors as Azure gave them to the Rust SDK's tests (``Azure/azure-sdk-assets``,
``rust/sdk/storage/azure_storage_queue/tests/data/``, x-ms-version 2026-04-06), the recorded
bodies replayed over raw HTTP against ``tabulae serve``; the SDK (sync and aio) is refused too."""

from __future__ import annotations

import asyncio

import pytest
from azure.core.exceptions import HttpResponseError
from azure.storage.queue import AccessPolicy, CorsRule, QueueServiceClient, RetentionPolicy
from azure.storage.queue import Metrics as QueueMetrics
from azure.storage.queue.aio import QueueServiceClient as AsyncQueueServiceClient

from tests.queuehttp import QueueHttp, assert_error
from tests.serverproc import ServerProcess

VERSION = {"x-ms-version": "2026-04-06"}
PROPERTIES = "/?comp=properties&restype=service"
_RULE = (
    "<CorsRule><AllowedHeaders>*</AllowedHeaders><AllowedMethods>GET</AllowedMethods>"
    "<AllowedOrigins>http://example.com</AllowedOrigins><ExposedHeaders>*</ExposedHeaders>"
    "<MaxAgeInSeconds>60</MaxAgeInSeconds></CorsRule>"
)
_OFF = "<RetentionPolicy><Enabled>false</Enabled></RetentionPolicy>"
_METRICS = f"<Enabled>false</Enabled>{_OFF}<Version>1.0</Version>"
_LOGGING = f"<Delete>false</Delete><Read>false</Read>{_OFF}<Version>1.0</Version><Write>false</Write>"
SIX_RULES = (  # test_set_cors_too_many_rules: 1810 bytes
    '<?xml version="1.0" encoding="utf-8"?><StorageServiceProperties><Cors>' + _RULE * 6 + "</Cors>"
    f"<HourMetrics>{_METRICS}</HourMetrics><Logging>{_LOGGING}</Logging>"
    f"<MinuteMetrics>{_METRICS}</MinuteMetrics></StorageServiceProperties>"
)
RETENTION_366 = (  # test_set_retention_too_long: 796 bytes
    '<?xml version="1.0" encoding="utf-8"?><StorageServiceProperties><Cors><CorsRule>'
    "<AllowedHeaders>x-ms-meta-target</AllowedHeaders><AllowedMethods>GET,POST</AllowedMethods>"
    "<AllowedOrigins>https://example.com</AllowedOrigins><ExposedHeaders>x-ms-meta-data</ExposedHeaders>"
    f"<MaxAgeInSeconds>3600</MaxAgeInSeconds></CorsRule></Cors><HourMetrics>{_METRICS}</HourMetrics>"
    "<Logging><Delete>false</Delete><Read>false</Read><RetentionPolicy><Days>366</Days>"
    "<Enabled>true</Enabled></RetentionPolicy><Version>1.0</Version><Write>false</Write></Logging>"
    f"<MinuteMetrics>{_METRICS}</MinuteMetrics></StorageServiceProperties>"
)
SIXTEEN_IDS = (  # test_set_access_policy_too_many_identifiers: 1811 bytes
    '<?xml version="1.0" encoding="utf-8"?><SignedIdentifiers>'
    + "".join(
        f"<SignedIdentifier><AccessPolicy><Permission>r</Permission></AccessPolicy><Id>policy{i}</Id>"
        "</SignedIdentifier>"
        for i in range(16)
    )
    + "</SignedIdentifiers>"
)


def test_too_many_cors_rules_and_identifiers_name_no_place(server: ServerProcess) -> None:
    """Six CORS rules (``queue_service_client/test_set_cors_too_many_rules.json``) and sixteen
    signed identifiers (``queue_client/test_set_access_policy_too_many_identifiers.json``):
    400 InvalidXmlDocument with LineNumber 0, LinePosition 0 and an empty Reason, 294 bytes."""
    assert (len(SIX_RULES), len(SIXTEEN_IDS)) == (1810, 1811)  # the recorded bodies
    http = QueueHttp(server.queue_port)
    assert http.create("rusttoomany").status == 201
    try:
        for target, body in ((PROPERTIES, SIX_RULES), ("/rusttoomany?comp=acl", SIXTEEN_IDS)):
            reply = http.request("PUT", target, body, {"Content-Type": "application/xml", **VERSION})
            assert_error(reply, 400, "InvalidXmlDocument", LineNumber="0", LinePosition="0", Reason="")
            assert reply.body.endswith(
                b"<LineNumber>0</LineNumber><LinePosition>0</LinePosition><Reason /></Error>"
            )
            assert len(reply.body) == 294
        service = QueueServiceClient.from_connection_string(server.connection_string)
        with pytest.raises(HttpResponseError) as caught:
            service.get_queue_client("rusttoomany").set_queue_access_policy(
                {f"p{i}": AccessPolicy(permission="r") for i in range(6)}
            )
        assert caught.value.error_code == "InvalidXmlDocument"

        async def aio_cors() -> str | None:
            async with AsyncQueueServiceClient.from_connection_string(server.connection_string) as client:
                try:
                    await client.set_service_properties(cors=[CorsRule(["http://example.com"], ["GET"])] * 6)
                except HttpResponseError as error:
                    return error.error_code
            return None

        assert asyncio.run(aio_cors()) == "InvalidXmlDocument"
    finally:
        http.delete("rusttoomany")


def test_a_retention_over_365_days_is_a_document_error(server: ServerProcess) -> None:
    """``queue_service_client/test_set_retention_too_long.json``: Logging's retention of 366
    days is 400 InvalidXmlDocument at line 1, position 542 (the name of ``<Enabled>`` after
    ``</Days>``) with the Reason that days must be 1 to 365, 376 bytes; the properties stay."""
    assert len(RETENTION_366) == 796
    http = QueueHttp(server.queue_port)
    before = http.request("GET", PROPERTIES, None, VERSION).body
    reply = http.request("PUT", PROPERTIES, RETENTION_366, {"Content-Type": "application/xml", **VERSION})
    assert_error(
        reply, 400, "InvalidXmlDocument", LineNumber="1", LinePosition="542",
        Reason="Retention days must be greater than 0 and less than or equal to 365 days.",
    )  # fmt: skip
    assert len(reply.body) == 376
    zero = RETENTION_366.replace("<Days>366</Days>", "<Days>0</Days>")
    reply = http.request("PUT", PROPERTIES, zero, {"Content-Type": "application/xml", **VERSION})
    assert_error(reply, 400, "InvalidXmlDocument", LineNumber="1", LinePosition="540")
    assert http.request("GET", PROPERTIES, None, VERSION).body == before  # nothing was set
    service = QueueServiceClient.from_connection_string(server.connection_string)
    with pytest.raises(HttpResponseError) as caught:
        service.set_service_properties(
            hour_metrics=QueueMetrics(
                enabled=True, include_apis=True, retention_policy=RetentionPolicy(True, 366)
            )
        )
    assert caught.value.error_code == "InvalidXmlDocument"
