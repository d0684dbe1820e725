"""Clients whose endpoint already ends in the table name (``TableClient("…/acct/t", "t")``).

Such a client sends ``/acct/t/Tables``, ``/acct/t/Tables('t')``, ``/acct/t/$batch`` and
``/acct/t/?restype=service&comp=properties``. Azure addresses ``t/…`` to table ``t``'s entities
and answers with the errors recorded in azure-data-tables' tests against real Azure, which the SDK
turns into a hint about the account URL: create → 404 ``TableNotFound`` (or 400
``PropertiesNeedValue`` when ``t`` exists), delete → 400 ``InvalidInput`` "The number of keys
specified in the URI does not match…", ``$batch`` → 415 ``MediaTypeNotSupported``, service
properties → 400 ``InvalidQueryParameterValue`` in the ``m:error`` XML form.
"""

from __future__ import annotations

import asyncio
import xml.etree.ElementTree as ET
from collections.abc import Iterator

import pytest
from azure.core.credentials import AzureNamedKeyCredential
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.data.tables import TableAnalyticsLogging, TableClient, TableServiceClient
from azure.data.tables.aio import TableClient as AsyncTableClient

from tests.rawhttp import RawClient, assert_error
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess

CREDENTIAL = AzureNamedKeyCredential(DEV_ACCOUNT, DEV_KEY)
HINT = "Please check your account URL."
METADATA_NS = "{http://schemas.microsoft.com/ado/2007/08/dataservices/metadata}"


@pytest.fixture
def wrong_client(server: ServerProcess, table_name: str) -> Iterator[TableClient]:
    with TableClient(
        f"{server.endpoint}/{table_name}", table_name, credential=CREDENTIAL, retry_total=0
    ) as client:
        yield client


def test_sdk_table_client_with_the_table_in_its_url(
    server: ServerProcess, service: TableServiceClient, wrong_client: TableClient, table_name: str
) -> None:
    with pytest.raises(ResourceNotFoundError) as missing:
        wrong_client.create_table()
    assert "table specified does not exist" in str(missing.value) and HINT in str(missing.value)
    with (
        TableClient(
            f"{server.endpoint}/{table_name}", table_name + "x", credential=CREDENTIAL, retry_total=0
        ) as other,
        pytest.raises(ResourceNotFoundError) as other_missing,
    ):
        other.create_table()
    assert HINT in str(other_missing.value)
    statuses: list[int] = []
    wrong_client.delete_table(raw_response_hook=lambda r: statuses.append(r.http_response.status_code))
    assert statuses == [404]  # TableNotFound, which the SDK's delete_table passes over

    service.create_table(table_name)
    try:
        with pytest.raises(HttpResponseError) as exists:
            wrong_client.create_table()
        assert exists.value.status_code == 400 and "values are not specified" in str(exists.value)
        assert HINT in str(exists.value)
        with pytest.raises(HttpResponseError) as delete:
            wrong_client.delete_table()
        assert delete.value.status_code == 400
        message = str(delete.value)
        assert "URI does not match number of key properties for the resource" in message
        assert f"'{DEV_ACCOUNT}.{table_name}'" in message and HINT in message
        assert list(service.query_tables(f"TableName eq '{table_name}'"))  # nothing was deleted
    finally:
        service.delete_table(table_name)


def test_async_table_client_with_the_table_in_its_url(
    server: ServerProcess, service: TableServiceClient, table_name: str
) -> None:
    async def run() -> tuple[str, str]:
        async with AsyncTableClient(
            f"{server.endpoint}/{table_name}", table_name, credential=CREDENTIAL, retry_total=0
        ) as client:
            with pytest.raises(ResourceNotFoundError) as missing:
                await client.create_table()
            service.create_table(table_name)
            with pytest.raises(HttpResponseError) as delete:
                await client.delete_table()
            return str(missing.value), str(delete.value)

    try:
        missing, delete = asyncio.run(run())
    finally:
        service.delete_table(table_name)
    assert "table specified does not exist" in missing and HINT in missing
    assert "number of key properties" in delete and HINT in delete


def test_batch_under_the_table_path_is_415(
    raw: RawClient, service: TableServiceClient, table_name: str
) -> None:
    """What azure-data-tables sends for ``submit_transaction`` on such a client (recorded: 415)."""
    service.create_table(table_name)
    try:
        body = (
            "--batch_b\r\nContent-Type: multipart/mixed; boundary=changeset_c\r\n\r\n--changeset_c\r\n"
            "Content-Type: application/http\r\nContent-Transfer-Encoding: binary\r\nContent-ID: 0\r\n\r\n"
            f"PATCH {raw.endpoint}/{table_name}/{table_name}(PartitionKey='a',RowKey='b') HTTP/1.1\r\n"
            'Content-Type: application/json\r\n\r\n{"PartitionKey": "a", "RowKey": "b"}\r\n'
            "--changeset_c--\r\n\r\n--batch_b--\r\n"
        )
        response = raw.request(
            "POST", f"{table_name}/$batch", body, {"Content-Type": "multipart/mixed; boundary=batch_b"}
        )
        assert_error(response, 415, "MediaTypeNotSupported", "None of the provided media types are supported")
        assert list(service.get_table_client(table_name).list_entities()) == []
    finally:
        service.delete_table(table_name)


def test_query_under_the_table_path_is_501(
    raw: RawClient, service: TableServiceClient, table_name: str
) -> None:
    assert_error(raw.request("GET", f"{table_name}/Tables"), 404, "TableNotFound")
    service.create_table(table_name)
    try:
        response = raw.request("GET", f"{table_name}/Tables?$filter=TableName%20eq%20'{table_name}'")
        assert_error(response, 501, "NotImplemented")
    finally:
        service.delete_table(table_name)


def test_service_properties_under_a_table_path(
    server: ServerProcess, raw: RawClient, table_name: str
) -> None:
    with TableServiceClient(f"{server.endpoint}/{table_name}", credential=CREDENTIAL, retry_total=0) as tsc:
        with pytest.raises(HttpResponseError) as get:
            tsc.get_service_properties()
        with pytest.raises(HttpResponseError) as put:
            tsc.set_service_properties(analytics_logging=TableAnalyticsLogging(write=True))
        with pytest.raises(ResourceNotFoundError) as create:
            tsc.create_table(table_name)
    for error in (get.value, put.value):
        assert error.status_code == 400
        assert "Value for one of the query parameters specified in the request URI is invalid" in str(error)
        assert HINT in str(error)
    assert HINT in str(create.value)
    response = raw.request(
        "GET", f"{table_name}/?restype=service&comp=properties", headers={"Accept": "application/xml"}
    )
    assert response.status == 400, response
    assert response.header("x-ms-error-code") == "InvalidQueryParameterValue"
    assert response.header("Content-Type") == "application/xml"
    root = ET.fromstring(response.body)
    assert root.tag == f"{METADATA_NS}error"
    assert [child.tag for child in root] == [f"{METADATA_NS}code", f"{METADATA_NS}message"]
    assert root.findtext(f"{METADATA_NS}code") == "InvalidQueryParameterValue"


def test_deeper_paths_are_still_invalid_uri(raw: RawClient) -> None:
    for target in ("a/b/c", "Tables/x", "a(PartitionKey='p',RowKey='r')/x"):
        assert_error(raw.request("GET", target), 400, "InvalidUri")
