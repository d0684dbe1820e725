"""Requests the .NET SDK (``Azure.Data.Tables``) sends, answered as its recordings of real Azure
show (``Azure/azure-sdk-assets``, ``net/sdk/tables/Azure.Data.Tables/tests/SessionRecords/``).

The .NET client sends ``$format=application/json;odata=minimalmetadata`` on every OData request
and a table SAS in the query string; the tests send the same request lines over raw HTTP.

* ``TableClientLiveTests(Storage)/ValidateSasCredentialsWithRowKeyAndPartitionKeyRanges.json``
  (x-ms-version 2020-12-06): a SAS with ``spk=epk=somPartition`` and ``srk=erk=01`` lists only
  row 01, and a point read of row 02, which exists, is 404 ResourceNotFound (not a 403): the key
  range hides the entity, as it hides it from a query.
* ``TableServiceClientLiveTests(Storage)/ValidateAccountSasCredentialsWithResourceTypes.json``:
  Get Service Properties answers its document after a byte order mark, Logging's elements in the
  order ``Read``, ``Write``, ``Delete`` (the REST reference's example, and the request, put
  ``Delete`` first), with no ``Cache-Control``.
* Every OData answer carries ``X-Content-Type-Options: nosniff``, those without a body and the
  errors too: Insert Entity with ``Prefer: return-no-content`` (204), Delete Table (204), the
  403 and 404 errors (``ValidateSasCredentials``, ``...WithRowKeyAndPartitionKeyRanges``) and
  Insert Or Merge (``UpsertAndQueryWithSingleQuoteNames(True).json``, 204 to a ``PATCH``).

The Python SDK's recordings of the storage service (``python/sdk/tables/azure-data-tables/tests/
recordings/``, host ``*.table.core.windows.net``) decide two more answers:

* ``test_table_batch.pyTestTableBatchtest_batch_update.json`` and
  ``...test_batch_same_row_operations_fail.json`` (azure-data-tables 12.8.0b1, x-ms-version
  2025-07-05), ``test_encoder.pyTestTableEncodertest_encoder_batch.json`` (12.6.0b1,
  2019-02-02): the client writes ``Content-ID: 0``, ``1`` among each part's MIME headers, and
  Azure's answer parts carry no ``Content-ID``, the 204s of updates nor the 400
  ``InvalidDuplicateRow``. The legacy Node SDK wrote its ``content-id`` inside the embedded
  request, and Azure echoed that one after the status line (its 2014 recordings).
* ``test_table_entity.pyTestTableEntitytest_query_invalid_filter.json`` (x-ms-version
  2019-02-02): ``$filter=aaa bbb ccc`` is 400 ``InvalidInput`` "Syntax error at position 7 in
  'aaa bbb ccc'.": the offset just past ``bbb``, the token that follows a whole expression.
* ``test_table_entity.pyTestTableEntitytest_insert_entity_property_name_too_long.json`` and
  ``...test_insert_entity_too_many_properties.json`` (x-ms-version 2019-02-02): a property name of
  256 characters is 400 ``PropertyNameTooLong`` "The property name exceeds the maximum allowed
  length (255).", and 255 properties besides the keys 400 ``TooManyProperties`` "The entity
  contains more properties than allowed. Each entity can include up to 252 properties to store
  data. Each entity also has 3 system properties."
* ``test_encoder.pyTestTableEncodertest_encoder_create_entity_atypical_values.json``
  (x-ms-version 2019-02-02): an insert whose ``RowKey`` is the JSON number ``1`` is 400
  ``InvalidInput`` "One of the request inputs is not valid." (not ``PropertiesNeedValue``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from azure.core.credentials import AzureNamedKeyCredential
from azure.core.exceptions import HttpResponseError
from azure.data.tables import TableClient, TableSasPermissions, generate_table_sas
from azure.data.tables.aio import TableClient as AsyncTableClient

from tests.rawhttp import JSON_MINIMAL, RawClient, RawResponse, assert_error, py_keys, sdk_error_code
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess
from tests.table.api.test_batch_raw import (
    assert_success,
    insert,
    legacy_node_batch,
    merge,
    python_batch,
    send,
)

FORMAT = "$format=application%2Fjson%3Bodata%3Dminimalmetadata"
PROPERTIES = "?restype=service&comp=properties"
# The service properties of the recording's account, as Azure wrote them after the declaration.
AZURE_PROPERTIES = (
    "<StorageServiceProperties><Logging><Version>1.0</Version><Read>false</Read><Write>false</Write>"
    "<Delete>false</Delete><RetentionPolicy><Enabled>false</Enabled></RetentionPolicy></Logging>"
    "<HourMetrics><Version>1.0</Version><Enabled>true</Enabled><IncludeAPIs>true</IncludeAPIs>"
    "<RetentionPolicy><Enabled>true</Enabled><Days>7</Days></RetentionPolicy></HourMetrics><MinuteMetrics>"
    "<Version>1.0</Version><Enabled>false</Enabled><RetentionPolicy><Enabled>false</Enabled></RetentionPolicy>"
    "</MinuteMetrics><Cors /></StorageServiceProperties>"
)
DECLARATION = b'\xef\xbb\xbf<?xml version="1.0" encoding="utf-8"?>'
NET_HEADERS = {"Accept": JSON_MINIMAL, "DataServiceVersion": "3.0", "x-ms-version": "2020-12-06"}


def _sas_get(server: ServerProcess, target: str, token: str) -> RawResponse:
    """A GET as the .NET client sends it with a SAS credential: ``$format`` first, then the token."""
    return RawClient(server.port).request(
        "GET", f"{target}?{FORMAT}&{token}", headers=NET_HEADERS, auth="none"
    )


def test_point_read_outside_the_sas_key_range_is_not_found(server: ServerProcess, table: TableClient) -> None:
    for rk in ("01", "02"):
        table.create_entity({"PartitionKey": "somPartition", "RowKey": rk, "SomeIntProperty": int(rk)})
    token = generate_table_sas(
        AzureNamedKeyCredential(DEV_ACCOUNT, DEV_KEY),
        table.table_name,
        permission=TableSasPermissions(read=True),
        expiry=datetime.now(UTC) + timedelta(hours=1),
        start_pk="somPartition",
        end_pk="somPartition",
        start_rk="01",
        end_rk="01",
    )

    listed = _sas_get(server, f"{table.table_name}()", token)
    assert listed.status == 200, listed
    assert [row["RowKey"] for row in listed.json()["value"]] == ["01"]

    inside = _sas_get(server, table.table_name + py_keys("somPartition", "01"), token)
    assert inside.status == 200, inside
    assert inside.json()["SomeIntProperty"] == 1

    outside = _sas_get(server, table.table_name + py_keys("somPartition", "02"), token)
    assert_error(outside, 404, "ResourceNotFound")
    assert b"SomeIntProperty" not in outside.body
    # The entity is there: the account key reads it.
    assert table.get_entity("somPartition", "02")["SomeIntProperty"] == 2


@pytest.fixture
def restored(raw: RawClient) -> Iterator[RawClient]:
    """The account's service properties are put back as they were (other tests share them)."""
    before = raw.request("GET", PROPERTIES, headers={"Accept": "application/xml"})
    assert before.status == 200, before
    yield raw
    put = raw.request("PUT", PROPERTIES, before.body, headers={"Content-Type": "application/xml"})
    assert put.status == 202, put


def test_service_properties_document_as_azure_writes_it(restored: RawClient) -> None:
    # The same properties set in the request's order: Delete first, as the .NET client writes it.
    document = AZURE_PROPERTIES.replace(
        "<Read>false</Read><Write>false</Write><Delete>false</Delete>",
        "<Delete>false</Delete><Read>false</Read><Write>false</Write>",
    )
    headers = {"Content-Type": "application/xml", "x-ms-version": "2020-12-06"}
    put = restored.request("PUT", PROPERTIES, "\ufeff" + document, headers=headers)
    assert put.status == 202, put
    got = restored.request(
        "GET", PROPERTIES, headers={"Accept": "application/xml", "x-ms-version": "2020-12-06"}
    )
    assert got.status == 200, got
    assert got.header("Content-Type") == "application/xml"
    assert got.header("Cache-Control") is None
    assert got.body == DECLARATION + AZURE_PROPERTIES.encode()


def test_every_odata_answer_says_nosniff(raw: RawClient, table_name: str) -> None:
    headers = {**NET_HEADERS, "Content-Type": "application/json;odata=nometadata"}
    created = raw.request("POST", f"Tables?{FORMAT}", {"TableName": table_name}, headers)
    assert created.status == 201, created
    entity = f"{table_name}(PartitionKey='PartitionWithi%27%27singleQuote',RowKey='01%27%27')?{FORMAT}"
    answers = [
        raw.request("POST", f"{table_name}?{FORMAT}", {"PartitionKey": "p", "RowKey": "r"},
                    {**headers, "Prefer": "return-no-content"}),
        raw.request("PATCH", entity, {"PartitionKey": "PartitionWithi'singleQuote", "RowKey": "01'", "V": 1},
                    {**headers, "Content-Type": "application/json"}),
        raw.request("PUT", entity, {"V": 2}, {**headers, "Content-Type": "application/json"}),
        raw.request("DELETE", entity, headers={**NET_HEADERS, "If-Match": "*"}),
        raw.request("GET", f"{table_name}(PartitionKey='p',RowKey='missing')?{FORMAT}", headers=NET_HEADERS),
        raw.request("DELETE", f"Tables('{table_name}')", headers=NET_HEADERS),
    ]  # fmt: skip
    assert [answer.status for answer in answers] == [204, 204, 204, 204, 404, 204], answers
    for answer in [created, *answers]:
        assert answer.header("X-Content-Type-Options") == "nosniff", answer
        assert answer.header("Cache-Control") == "no-cache", answer


def _content_ids(response: RawResponse, *, bodies: bool) -> list[str | None]:
    """The ``Content-ID`` of each answer part (None where it has none); one echoed is the first
    line after the status line, as Azure writes it."""
    ids: list[str | None] = []
    for part in assert_success(response, 2, bodies=bodies):
        lines = [line for line in part.header_lines if line.lower().startswith("content-id:")]
        assert lines in ([], part.header_lines[:1]), part.header_lines
        ids.append(lines[0].split(":", 1)[1].strip() if lines else None)
    return ids


def test_batch_echoes_the_embedded_content_id_only(raw: RawClient, table: TableClient) -> None:
    name = table.table_name
    # azure-data-tables 12.8's form: Content-ID: 0, 1 among the parts' MIME headers.
    mime = send(raw, python_batch(raw.endpoint, [insert(name, "a", v=1), insert(name, "b", v=2)]))
    assert _content_ids(mime, bodies=True) == [None, None]
    # The legacy Node SDK's form: content-id: 0, 1 inside each embedded request.
    embedded = send(
        raw, legacy_node_batch(raw.endpoint, [insert(name, "c", v=1), merge(name, "a", "*", v=3)])
    )
    assert _content_ids(embedded, bodies=False) == ["0", "1"]
    assert [entity["v"] for entity in table.list_entities()] == [3, 2, 1]


def test_the_sdk_reads_a_transaction_without_content_ids(server: ServerProcess, table: TableClient) -> None:
    """azure-data-tables sends Content-IDs and reads its answers in order, as Azure's come."""
    results = table.submit_transaction(
        [("create", {"PartitionKey": "p", "RowKey": "s"}), ("upsert", {"PartitionKey": "p", "RowKey": "t"})]
    )
    assert [sorted(result) for result in results] == [["etag"], ["etag"]]

    async def run() -> None:
        async with AsyncTableClient.from_connection_string(
            server.connection_string, table.table_name
        ) as client:
            answers = await client.submit_transaction(
                [
                    ("delete", {"PartitionKey": "p", "RowKey": "s"}),
                    ("update", {"PartitionKey": "p", "RowKey": "t", "v": 1}),
                ]
            )
            assert len(answers) == 2 and "etag" in answers[1]

    asyncio.run(run())
    assert [entity["RowKey"] for entity in table.list_entities()] == ["t"]


RECORDED_FILTER = "aaa bbb ccc"
RECORDED_SYNTAX_ERROR = "Syntax error at position 7 in 'aaa bbb ccc'."


def test_filter_followed_by_more_is_refused_past_the_extra_token(raw: RawClient, table: TableClient) -> None:
    table.create_entity({"PartitionKey": "pk", "RowKey": "rk0", "value": 1})
    answer = raw.request(
        "GET", f"{table.table_name}()?$filter=aaa%20bbb%20ccc", headers={"Accept": JSON_MINIMAL}
    )
    assert_error(answer, 400, "InvalidInput", RECORDED_SYNTAX_ERROR)


def test_the_sdk_sees_the_recorded_syntax_error(server: ServerProcess, table: TableClient) -> None:
    with pytest.raises(HttpResponseError) as info:
        list(table.query_entities(RECORDED_FILTER))
    assert info.value.status_code == 400
    assert RECORDED_SYNTAX_ERROR in str(info.value)

    async def run() -> None:
        async with AsyncTableClient.from_connection_string(
            server.connection_string, table.table_name
        ) as client:
            with pytest.raises(HttpResponseError) as async_info:
                [entity async for entity in client.query_entities(RECORDED_FILTER)]
            assert async_info.value.status_code == 400
            assert RECORDED_SYNTAX_ERROR in str(async_info.value)

    asyncio.run(run())


NAME_TOO_LONG = "The property name exceeds the maximum allowed length (255)."
TOO_MANY = (
    "The entity contains more properties than allowed. Each entity can include up to 252 properties"
    " to store data. Each entity also has 3 system properties."
)


def test_property_limits_in_azures_words(raw: RawClient, table: TableClient) -> None:
    headers = {"Content-Type": "application/json;odata=nometadata"}
    long_name = raw.request(
        "POST", table.table_name, {"PartitionKey": "pk", "RowKey": "rk", "a" * 256: "badval"}, headers
    )
    assert_error(long_name, 400, "PropertyNameTooLong")
    assert long_name.error_message == NAME_TOO_LONG
    wide = {"PartitionKey": "pk", "RowKey": "rk", **{f"key{i}": f"value{i}" for i in range(255)}}
    too_many = raw.request("POST", table.table_name, wide, headers)
    assert_error(too_many, 400, "TooManyProperties")
    assert too_many.error_message == TOO_MANY


def test_the_sdk_sees_the_property_limits_in_azures_words(server: ServerProcess, table: TableClient) -> None:
    wide = {"PartitionKey": "pk", "RowKey": "rk", **{f"key{i}": f"value{i}" for i in range(255)}}
    with pytest.raises(HttpResponseError) as info:
        table.create_entity(wide)
    assert TOO_MANY in str(info.value)

    async def run() -> None:
        async with AsyncTableClient.from_connection_string(
            server.connection_string, table.table_name
        ) as client:
            with pytest.raises(HttpResponseError) as async_info:
                await client.create_entity({"PartitionKey": "pk", "RowKey": "rk", "a" * 256: "badval"})
            assert NAME_TOO_LONG in str(async_info.value)

    asyncio.run(run())


def test_a_numeric_key_is_invalid_input(raw: RawClient, table: TableClient) -> None:
    headers = {"Content-Type": "application/json;odata=nometadata"}
    for body in (b'{"PartitionKey":"PK","RowKey":1,"Data":2}', b'{"PartitionKey":1.5,"RowKey":"RK"}'):
        answer = raw.request("POST", table.table_name, body, headers)
        assert_error(answer, 400, "InvalidInput", "One of the request inputs is not valid.")
    # A key left out is still PropertiesNeedValue.
    assert_error(
        raw.request("POST", table.table_name, b'{"PartitionKey":"PK"}', headers), 400, "PropertiesNeedValue"
    )


def test_the_sdk_sends_a_numeric_key_and_is_refused(server: ServerProcess, table: TableClient) -> None:
    with pytest.raises(HttpResponseError) as info:
        table.create_entity({"PartitionKey": "PK", "RowKey": 1})
    assert sdk_error_code(info.value) == "InvalidInput"

    async def run() -> None:
        async with AsyncTableClient.from_connection_string(
            server.connection_string, table.table_name
        ) as client:
            with pytest.raises(HttpResponseError) as async_info:
                await client.create_entity({"PartitionKey": "PK", "RowKey": 1})
            assert sdk_error_code(async_info.value) == "InvalidInput"

    asyncio.run(run())
    assert list(table.list_entities()) == []
