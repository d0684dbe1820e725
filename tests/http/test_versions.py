"""``x-ms-version``: known service versions are served and echoed; anything else is 400
``InvalidHeaderValue`` (Azure: "The value for one of the HTTP headers is not in the correct
format.", naming the header and the value), for a malformed value and an unknown future date alike.
"""

from __future__ import annotations

import asyncio
import xml.etree.ElementTree as ET
from collections.abc import Callable

import pytest
from azure.core.exceptions import HttpResponseError
from azure.core.pipeline import PipelineRequest
from azure.data.tables import TableClient, TableServiceClient
from azure.data.tables.aio import TableServiceClient as AsyncTableServiceClient

from tabulae.http.versions import KNOWN_VERSIONS
from tests.rawhttp import RawClient, assert_error
from tests.serverproc import ServerProcess

MESSAGE = "The value for one of the HTTP headers is not in the correct format."


def test_every_known_version_is_served_and_echoed(raw: RawClient) -> None:
    assert {"2009-09-19", "2019-02-02", "2025-07-05", "2026-10-06"} <= KNOWN_VERSIONS
    for version in sorted(KNOWN_VERSIONS):
        response = raw.request("GET", "Tables", headers={"x-ms-version": version})
        assert response.status == 200, (version, response)
        assert response.header("x-ms-version") == version


def test_without_the_header_the_default_version_is_echoed(raw: RawClient) -> None:
    response = raw.request("GET", "Tables", headers={"x-ms-version": None})
    assert response.status == 200, response
    assert response.header("x-ms-version") == "2019-02-02"


@pytest.mark.parametrize("api_version", ["2019-02-02", "2019-07-07", "2020-12-06"])
def test_every_version_the_sdk_offers(server: ServerProcess, table_name: str, api_version: str) -> None:
    with TableServiceClient.from_connection_string(
        server.connection_string, api_version=api_version
    ) as client:
        table = client.create_table(table_name)
        table.create_entity({"PartitionKey": "p", "RowKey": "r"})
        assert [e["RowKey"] for e in table.list_entities()] == ["r"]
        client.delete_table(table_name)


@pytest.mark.parametrize("version", ["invalid", "3025-01-01", "2019-02-03", "2019-02-02 ", ""])
def test_unknown_versions_are_invalid_header_value(raw: RawClient, version: str) -> None:
    response = raw.request("GET", "Tables", headers={"x-ms-version": version})
    assert_error(response, 400, "InvalidHeaderValue", MESSAGE)
    assert response.header("x-ms-version") is None  # Azure's answer echoes no version


def test_xml_operations_name_the_header_and_value(raw: RawClient, table: TableClient) -> None:
    for target in (f"{table.table_name}?comp=acl", "?restype=service&comp=properties"):
        response = raw.request(
            "GET", target, headers={"x-ms-version": "3025-01-01", "Accept": "application/xml"}
        )
        assert response.status == 400, response
        assert response.header("x-ms-error-code") == "InvalidHeaderValue"
        root = ET.fromstring(response.body)
        assert root.tag == "Error"
        assert root.findtext("Code") == "InvalidHeaderValue"
        assert (root.findtext("Message") or "").startswith(MESSAGE)
        assert (root.findtext("HeaderName"), root.findtext("HeaderValue")) == ("x-ms-version", "3025-01-01")


def test_an_unknown_version_changes_nothing(raw: RawClient, table: TableClient) -> None:
    response = raw.insert(
        table.table_name, {"PartitionKey": "p", "RowKey": "r"}, {"x-ms-version": "2099-01-01"}
    )
    assert_error(response, 400, "InvalidHeaderValue")
    assert list(table.list_entities()) == []


def _set_version(value: str) -> Callable[[PipelineRequest], None]:
    """A request hook that makes the SDK send ``x-ms-version: value`` (its own check refuses
    versions it does not know, so a client cannot be built with one)."""

    def hook(request: PipelineRequest) -> None:
        request.http_request.headers["x-ms-version"] = value

    return hook


def test_sdk_sending_an_unknown_version(server: ServerProcess) -> None:
    with (
        TableServiceClient.from_connection_string(
            server.connection_string, retry_total=0, raw_request_hook=_set_version("invalid")
        ) as client,
        pytest.raises(HttpResponseError) as error,
    ):
        list(client.list_tables())
    assert error.value.status_code == 400
    assert error.value.error_code == "InvalidHeaderValue"

    async def run() -> HttpResponseError:
        async with AsyncTableServiceClient.from_connection_string(
            server.connection_string, retry_total=0, raw_request_hook=_set_version("3025-01-01")
        ) as aclient:
            with pytest.raises(HttpResponseError) as aerror:
                await aclient.get_service_properties()
            return aerror.value

    async_error = asyncio.run(run())
    assert async_error.status_code == 400 and async_error.error_code == "InvalidHeaderValue"
    assert "HeaderValue:3025-01-01" in str(async_error)
