"""Table operations: create, delete, list, query, names and metadata levels."""

from __future__ import annotations

import asyncio
from urllib.parse import quote

import pytest
from azure.core.exceptions import HttpResponseError, ResourceExistsError
from azure.data.tables import TableServiceClient
from azure.data.tables.aio import TableServiceClient as AsyncTableServiceClient

from tests.rawhttp import (
    JSON_FULL,
    JSON_MINIMAL,
    JSON_NOMETADATA,
    RawClient,
    RawResponse,
    assert_error,
    sdk_error_code,
)
from tests.serverproc import ServerProcess

INVALID_CHARS_MESSAGE = "The specifed resource name contains invalid characters."
LENGTH_MESSAGE = "The specified resource name length is not within the permissible limits."


def _media_type(response: RawResponse) -> str:
    return (response.header("Content-Type") or "").split(";")[0].strip()


def _names(response: RawResponse) -> list[str]:
    return [item["TableName"] for item in response.json()["value"]]


def _filter(expression: str) -> str:
    return "$filter=" + quote(expression, safe="")


# ------------------------------------------------------------------------------------------
# Create
# ------------------------------------------------------------------------------------------


def test_create_table_returns_201_with_body_and_location(
    raw: RawClient, server: ServerProcess, table_name: str
) -> None:
    response = raw.create_table(table_name)
    assert response.status == 201, response
    assert _media_type(response) == "application/json"
    assert "odata=minimalmetadata" in (response.header("Content-Type") or "")
    body = response.json()
    assert body["TableName"] == table_name
    assert body["odata.metadata"] == f"{server.endpoint}/$metadata#Tables/@Element"
    assert response.header("Location") == f"{server.endpoint}/Tables('{table_name}')"
    assert response.header("Preference-Applied") is None


def test_create_table_prefer_return_content(raw: RawClient, server: ServerProcess, table_name: str) -> None:
    response = raw.create_table(table_name, {"Prefer": "return-content"})
    assert response.status == 201, response
    assert response.json()["TableName"] == table_name
    assert response.header("Preference-Applied") == "return-content"
    assert response.header("Location") == f"{server.endpoint}/Tables('{table_name}')"


def test_create_table_prefer_return_no_content(
    raw: RawClient, server: ServerProcess, table_name: str
) -> None:
    response = raw.create_table(table_name, {"Prefer": "return-no-content"})
    assert response.status == 204, response
    assert response.body == b""
    location = f"{server.endpoint}/Tables('{table_name}')"
    assert response.header("Location") == location
    assert response.header("DataServiceId") == location
    assert response.header("Preference-Applied") == "return-no-content"
    # The table really exists.
    assert raw.request("GET", f"Tables('{table_name}')").status == 200


def test_create_table_via_sdk_sync_and_async(server: ServerProcess, table_name: str) -> None:
    with TableServiceClient.from_connection_string(server.connection_string) as service:
        client = service.create_table(table_name)
        assert client.table_name == table_name
        names = [t.name for t in service.query_tables(f"TableName eq '{table_name}'")]
        assert names == [table_name]

    async def run() -> list[str]:
        async with AsyncTableServiceClient.from_connection_string(server.connection_string) as service:
            async_name = table_name + "async"
            created = await service.create_table(async_name)
            assert created.table_name == async_name
            found = [t.name async for t in service.query_tables(f"TableName eq '{async_name}'")]
            await service.delete_table(async_name)
            after = [t.name async for t in service.query_tables(f"TableName eq '{async_name}'")]
            assert after == []
            return found

    assert asyncio.run(run()) == [table_name + "async"]


def test_create_duplicate_table_is_conflict(
    service: TableServiceClient, raw: RawClient, table_name: str
) -> None:
    service.create_table(table_name)
    with pytest.raises(ResourceExistsError):
        service.create_table(table_name)
    response = raw.create_table(table_name)
    assert_error(response, 409, "TableAlreadyExists", "The table specified already exists.")


def test_create_duplicate_table_is_case_insensitive(
    service: TableServiceClient, raw: RawClient, table_name: str
) -> None:
    service.create_table(table_name)
    with pytest.raises(ResourceExistsError):
        service.create_table(table_name.upper())
    assert_error(raw.create_table(table_name.upper()), 409, "TableAlreadyExists")


def test_conflict_with_prefer_carries_preference_applied(raw: RawClient, table_name: str) -> None:
    assert raw.create_table(table_name).status == 201
    response = raw.create_table(table_name, {"Prefer": "return-no-content"})
    assert_error(response, 409, "TableAlreadyExists")
    assert response.header("Preference-Applied") == "return-no-content"


def test_create_table_if_not_exists(service: TableServiceClient, table_name: str) -> None:
    first = service.create_table_if_not_exists(table_name)
    second = service.create_table_if_not_exists(table_name)
    assert first.table_name == second.table_name == table_name
    first.create_entity({"PartitionKey": "p", "RowKey": "r"})
    # The second call did not recreate (and empty) the table.
    assert [e["RowKey"] for e in second.list_entities()] == ["r"]


# ------------------------------------------------------------------------------------------
# Names
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "code", "message"),
    [
        ("ab", "OutOfRangeInput", LENGTH_MESSAGE),
        ("a" * 64, "OutOfRangeInput", LENGTH_MESSAGE),
        ("1abc", "InvalidResourceName", INVALID_CHARS_MESSAGE),
        ("abc-def", "InvalidResourceName", INVALID_CHARS_MESSAGE),
        ("abc_def", "InvalidResourceName", INVALID_CHARS_MESSAGE),
        ("t\u00e1bla", "InvalidResourceName", INVALID_CHARS_MESSAGE),
    ],
)
def test_invalid_table_name_exact_error(
    raw: RawClient, service: TableServiceClient, name: str, code: str, message: str
) -> None:
    assert_error(raw.create_table(name), 400, code, message)
    with pytest.raises(ValueError):
        service.create_table(name)


@pytest.mark.parametrize("name", ["abc-def", "ab"])
def test_invalid_table_name_on_delete_and_entity_ops_is_value_error(
    raw: RawClient, service: TableServiceClient, name: str
) -> None:
    with pytest.raises(ValueError):
        service.delete_table(name)
    client = service.get_table_client(name)
    with pytest.raises(ValueError):
        client.create_entity({"PartitionKey": "p", "RowKey": "r"})
    with pytest.raises(ValueError):
        client.upsert_entity({"PartitionKey": "p", "RowKey": "r"})
    expected = "OutOfRangeInput" if len(name) < 3 else "InvalidResourceName"
    assert_error(raw.insert(name, {"PartitionKey": "p", "RowKey": "r"}), 400, expected)
    assert_error(raw.request("GET", f"{name}()"), 400, expected)


def test_boundary_table_names_are_valid(service: TableServiceClient, table_name: str) -> None:
    long_name = (table_name + "z" * 63)[:63]
    assert len(long_name) == 63
    created = service.create_table(long_name)
    assert created.table_name == long_name
    assert [t.name for t in service.query_tables(f"TableName eq '{long_name}'")] == [long_name]
    service.delete_table(long_name)


def test_three_character_table_name(service: TableServiceClient, raw: RawClient) -> None:
    name = "Q7z"
    raw.request("DELETE", f"Tables('{name}')")
    response = raw.create_table(name)
    assert response.status == 201, response
    try:
        assert [t.name for t in service.query_tables(f"TableName eq '{name}'")] == [name]
    finally:
        service.delete_table(name)


@pytest.mark.parametrize("name", ["tables", "Tables", "TABLES"])
def test_reserved_name_tables(raw: RawClient, service: TableServiceClient, name: str) -> None:
    assert_error(raw.create_table(name), 400, "InvalidInput", "One of the request inputs is not valid.")
    with pytest.raises(HttpResponseError) as info:
        service.create_table(name)
    assert info.value.status_code == 400
    assert sdk_error_code(info.value) == "InvalidInput"


@pytest.mark.parametrize(
    "body",
    [b"{}", b'{"TableName": 5}', b'{"TableName": null}', b'{"TableName": "abc"', b"[]", b"not json"],
)
def test_create_table_bad_body_is_invalid_input(raw: RawClient, body: bytes) -> None:
    response = raw.request("POST", "Tables", body, {"Content-Type": JSON_NOMETADATA})
    assert_error(response, 400, "InvalidInput")


def test_table_name_case_is_preserved_and_lookup_is_case_insensitive(
    service: TableServiceClient, raw: RawClient, table_name: str
) -> None:
    name = "Mx" + table_name.upper()
    service.create_table(name)
    try:
        listed = [t.name for t in service.list_tables() if t.name.lower() == name.lower()]
        assert listed == [name]
        # Entity operations address the table case-insensitively.
        lower = service.get_table_client(name.lower())
        lower.create_entity({"PartitionKey": "p", "RowKey": "r", "v": 1})
        assert service.get_table_client(name).get_entity("p", "r")["v"] == 1
        single = raw.request("GET", f"Tables('{name.lower()}')")
        assert single.status == 200, single
        assert single.json()["TableName"] == name
        # TableName filters compare the stored name, case-sensitively.
        assert [t.name for t in service.query_tables(f"TableName eq '{name}'")] == [name]
        assert list(service.query_tables(f"TableName eq '{name.lower()}'")) == []
    finally:
        service.delete_table(name.lower())
    assert [t.name for t in service.query_tables(f"TableName eq '{name}'")] == []


# ------------------------------------------------------------------------------------------
# Delete / get one
# ------------------------------------------------------------------------------------------


def test_delete_table_returns_204(raw: RawClient, service: TableServiceClient, table_name: str) -> None:
    client = service.create_table(table_name)
    client.create_entity({"PartitionKey": "p", "RowKey": "r"})
    response = raw.request("DELETE", f"Tables('{table_name}')")
    assert response.status == 204, response
    assert response.body == b""
    assert list(service.query_tables(f"TableName eq '{table_name}'")) == []
    # Entities went with it: a recreated table is empty.
    recreated = service.create_table(table_name)
    assert list(recreated.list_entities()) == []


def test_delete_table_via_sdk_and_other_case(service: TableServiceClient, table_name: str) -> None:
    service.create_table(table_name)
    service.delete_table(table_name.upper())
    assert list(service.query_tables(f"TableName eq '{table_name}'")) == []


def test_delete_missing_table(raw: RawClient, service: TableServiceClient, table_name: str) -> None:
    service.delete_table(table_name)  # the SDK swallows the 404
    response = raw.request("DELETE", f"Tables('{table_name}')")
    assert_error(response, 404, "ResourceNotFound", "The specified resource does not exist.")


def test_get_single_table(raw: RawClient, server: ServerProcess, table_name: str) -> None:
    raw.create_table(table_name)
    response = raw.request("GET", f"Tables('{table_name}')")
    assert response.status == 200, response
    assert response.json()["TableName"] == table_name
    missing = raw.request("GET", f"Tables('{table_name}zz')")
    assert missing.status == 404, missing


# ------------------------------------------------------------------------------------------
# Query / list
# ------------------------------------------------------------------------------------------


def test_list_tables_across_pages_sdk(service: TableServiceClient, table_name: str) -> None:
    names = [f"{table_name}p{c}" for c in "abcde"]
    for name in reversed(names):
        service.create_table(name)
    pages = [
        [t.name for t in page]
        for page in service.query_tables(
            f"TableName ge '{table_name}p' and TableName lt '{table_name}q'", results_per_page=2
        ).by_page()
    ]
    assert pages == [names[0:2], names[2:4], names[4:5]]

    # list_tables pages through everything (other tests' tables too) without loss or duplicates.
    seen: list[str] = []
    for page in service.list_tables(results_per_page=2).by_page():
        items = [t.name for t in page]
        assert 1 <= len(items) <= 2
        seen.extend(items)
    assert len(seen) == len(set(seen))
    assert set(names) <= set(seen)


def test_list_tables_continuation_header(
    raw: RawClient, service: TableServiceClient, table_name: str
) -> None:
    names = [f"{table_name}n{c}" for c in "abcde"]
    for name in names:
        service.create_table(name)
    flt = _filter(f"TableName ge '{table_name}n' and TableName lt '{table_name}o'")
    collected: list[str] = []
    tokens: list[str] = []
    query = f"{flt}&$top=2"
    for _ in range(10):
        response = raw.request("GET", f"Tables?{query}")
        assert response.status == 200, response
        page = _names(response)
        assert len(page) <= 2
        collected.extend(page)
        token = response.header("x-ms-continuation-NextTableName")
        if token is None:
            break
        assert token and " " not in token
        tokens.append(token)
        query = f"{flt}&$top=2&NextTableName={quote(token, safe='')}"
    assert collected == names
    assert len(tokens) == 2  # pages of 2, 2, 1: no token after the last page

    # $top covering everything: one page, no continuation.
    whole = raw.request("GET", f"Tables?{flt}&$top=5")
    assert _names(whole) == names
    assert whole.header("x-ms-continuation-NextTableName") is None


def test_query_tables_by_name(service: TableServiceClient, table_name: str) -> None:
    service.create_table(table_name)
    service.create_table(table_name + "other")
    assert [t.name for t in service.query_tables(f"TableName eq '{table_name}'")] == [table_name]
    parameterised = service.query_tables("TableName eq @name", parameters={"name": table_name})
    assert [t.name for t in parameterised] == [table_name]
    assert list(service.query_tables(f"TableName eq '{table_name}nope'")) == []


def test_query_tables_filter_on_other_property_is_invalid(raw: RawClient) -> None:
    response = raw.request("GET", "Tables?" + _filter("Foo eq 'x'"))
    assert_error(response, 400, "InvalidInput")


def test_list_tables_bad_continuation_token(raw: RawClient) -> None:
    response = raw.request("GET", "Tables?NextTableName=" + quote("not a token at all", safe=""))
    assert_error(response, 400, "InvalidInput")


# ------------------------------------------------------------------------------------------
# Metadata levels
# ------------------------------------------------------------------------------------------


def test_query_tables_metadata_levels(raw: RawClient, server: ServerProcess, table_name: str) -> None:
    raw.create_table(table_name)
    target = "Tables?" + _filter(f"TableName eq '{table_name}'")

    none = raw.request("GET", target, headers={"Accept": JSON_NOMETADATA})
    assert none.status == 200, none
    assert none.json() == {"value": [{"TableName": table_name}]}
    assert "odata=nometadata" in (none.header("Content-Type") or "")

    minimal = raw.request("GET", target, headers={"Accept": JSON_MINIMAL})
    assert minimal.json() == {
        "odata.metadata": f"{server.endpoint}/$metadata#Tables",
        "value": [{"TableName": table_name}],
    }
    assert "odata=minimalmetadata" in (minimal.header("Content-Type") or "")

    full = raw.request("GET", target, headers={"Accept": JSON_FULL})
    body = full.json()
    assert body["odata.metadata"] == f"{server.endpoint}/$metadata#Tables"
    assert body["value"] == [
        {
            "odata.type": "devstoreaccount1.Tables",
            "odata.id": f"{server.endpoint}/Tables('{table_name}')",
            "odata.editLink": f"Tables('{table_name}')",
            "TableName": table_name,
        }
    ]
    assert "odata=fullmetadata" in (full.header("Content-Type") or "")


def test_create_table_metadata_levels(raw: RawClient, server: ServerProcess, table_name: str) -> None:
    none = raw.create_table(table_name + "a", {"Accept": JSON_NOMETADATA})
    assert none.status == 201, none
    assert none.json() == {"TableName": table_name + "a"}

    full = raw.create_table(table_name + "b", {"Accept": JSON_FULL})
    assert full.status == 201, full
    name = table_name + "b"
    assert full.json() == {
        "odata.metadata": f"{server.endpoint}/$metadata#Tables/@Element",
        "odata.type": "devstoreaccount1.Tables",
        "odata.id": f"{server.endpoint}/Tables('{name}')",
        "odata.editLink": f"Tables('{name}')",
        "TableName": name,
    }


def test_empty_query_result_has_value_array(raw: RawClient, table_name: str) -> None:
    response = raw.request("GET", "Tables?" + _filter(f"TableName eq '{table_name}'"))
    assert response.status == 200, response
    assert response.json()["value"] == []


@pytest.mark.parametrize("top", ["1001", "-1", "abc", "1.5"])
def test_query_tables_invalid_top(raw: RawClient, top: str) -> None:
    assert_error(raw.request("GET", f"Tables?$top={top}"), 400, "InvalidInput")


def test_query_tables_top_limits_the_page(
    raw: RawClient, service: TableServiceClient, table_name: str
) -> None:
    for c in "abc":
        service.create_table(f"{table_name}q{c}")
    flt = _filter(f"TableName ge '{table_name}q' and TableName lt '{table_name}r'")
    response = raw.request("GET", f"Tables?{flt}&$top=1000")
    assert _names(response) == [f"{table_name}q{c}" for c in "abc"]
    assert response.header("x-ms-continuation-NextTableName") is None
    first = raw.request("GET", f"Tables?{flt}&$top=1")
    assert _names(first) == [f"{table_name}qa"]
    assert first.header("x-ms-continuation-NextTableName")
