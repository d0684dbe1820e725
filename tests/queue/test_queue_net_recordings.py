"""Requests the .NET SDK (``Azure.Storage.Queues``) sends, answered as its recordings of real
Azure show (``Azure/azure-sdk-assets``, ``net/sdk/storage/Azure.Storage.Queues/tests/
SessionRecords/``, x-ms-version 2024-08-04). Raw HTTP, so the bytes are the ones compared.

* ``ServiceClientTests/SetPropertiesAsync.json``: the client sends the document after a byte order
  mark, with Logging's ``Delete`` first and a CORS rule's ``AllowedOrigins`` first; the service
  reads it back in its own order: ``Read``, ``Write``, ``Delete``, and ``AllowedMethods`` before
  ``AllowedOrigins``.
* ``QueueClientTests/CreateAsync_WithQueueServiceSas.json``: Create Queue with a queue SAS
  (``sp=raup``) is 403 ``AuthorizationFailure``, "This request is not authorized to perform this
  operation." (x-ms-version 2018-11-09): no queue SAS permission creates a queue.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlencode

import pytest

from tests.queuehttp import BOM, DECLARATION, QueueHttp, assert_error, queue_sas

PROPERTIES = "/?restype=service&comp=properties"

# The request body of the recording's first Set Service Properties (what the .NET client writes).
NET_SET_BODY = (
    "\ufeff<StorageServiceProperties><Logging><Version>1.0</Version><Delete>false</Delete>"
    "<Read>false</Read><Write>false</Write><RetentionPolicy><Enabled>false</Enabled></RetentionPolicy>"
    "</Logging><HourMetrics><Version>1.0</Version><Enabled>true</Enabled><IncludeAPIs>true</IncludeAPIs>"
    "<RetentionPolicy><Enabled>true</Enabled><Days>7</Days></RetentionPolicy></HourMetrics><MinuteMetrics>"
    "<Version>1.0</Version><Enabled>false</Enabled><RetentionPolicy><Enabled>true</Enabled><Days>7</Days>"
    "</RetentionPolicy></MinuteMetrics><Cors><CorsRule><AllowedOrigins>http://www.contoso.com,"
    "http://www.fabrikam.com</AllowedOrigins><AllowedMethods>GET,PUT</AllowedMethods><AllowedHeaders>"
    "x-ms-meta-customheader,x-ms-meta-target*</AllowedHeaders><ExposedHeaders>x-ms-meta-customheader,"
    "x-ms-meta-data*</ExposedHeaders><MaxAgeInSeconds>500</MaxAgeInSeconds></CorsRule></Cors>"
    "</StorageServiceProperties>"
)

# What Azure answered to the Get Service Properties that followed, after its declaration.
AZURE_GET_BODY = (
    "<StorageServiceProperties><Logging><Version>1.0</Version><Read>false</Read><Write>false</Write>"
    "<Delete>false</Delete><RetentionPolicy><Enabled>false</Enabled></RetentionPolicy></Logging>"
    "<HourMetrics><Version>1.0</Version><Enabled>true</Enabled><IncludeAPIs>true</IncludeAPIs>"
    "<RetentionPolicy><Enabled>true</Enabled><Days>7</Days></RetentionPolicy></HourMetrics><MinuteMetrics>"
    "<Version>1.0</Version><Enabled>false</Enabled><RetentionPolicy><Enabled>true</Enabled><Days>7</Days>"
    "</RetentionPolicy></MinuteMetrics><Cors><CorsRule><AllowedMethods>GET,PUT</AllowedMethods>"
    "<AllowedOrigins>http://www.contoso.com,http://www.fabrikam.com</AllowedOrigins><AllowedHeaders>"
    "x-ms-meta-customheader,x-ms-meta-target*</AllowedHeaders><ExposedHeaders>x-ms-meta-customheader,"
    "x-ms-meta-data*</ExposedHeaders><MaxAgeInSeconds>500</MaxAgeInSeconds></CorsRule></Cors>"
    "</StorageServiceProperties>"
)


@pytest.fixture
def restored(queue_http: QueueHttp) -> Iterator[QueueHttp]:
    """The account's service properties are put back as they were (other tests share them)."""
    before = queue_http.request("GET", PROPERTIES)
    assert before.status == 200, before
    yield queue_http
    assert queue_http.request("PUT", PROPERTIES, before.body).status == 202


def test_service_properties_read_back_in_azures_order(restored: QueueHttp) -> None:
    headers = {"x-ms-version": "2024-08-04"}
    assert restored.request("PUT", PROPERTIES, NET_SET_BODY, headers).status == 202
    got = restored.request("GET", PROPERTIES, headers=headers)
    assert got.status == 200, got
    assert got.header("content-type") == "application/xml"
    assert got.header("cache-control") == "no-cache"
    assert got.body == DECLARATION + AZURE_GET_BODY.encode()
    assert got.body.startswith(BOM)


def test_create_queue_with_a_queue_sas_is_refused(queue_http: QueueHttp, queue_name: str) -> None:
    token = urlencode(queue_sas(queue_name, sp="raup", sv="2025-01-05"))
    refused = queue_http.request(
        "PUT", f"/{queue_name}?{token}", auth="none", headers={"x-ms-version": "2018-11-09"}
    )
    assert_error(refused, 403, "AuthorizationFailure")
    assert (refused.xml().findtext("Message") or "").startswith(
        "This request is not authorized to perform this operation.\n"
    )
    assert queue_http.request("GET", f"/{queue_name}?comp=metadata").status == 404
