"""Entity operations: insert, get, update, merge, upserts, delete and ETags."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from azure.core import MatchConditions
from azure.core.exceptions import ResourceExistsError, ResourceModifiedError, ResourceNotFoundError
from azure.data.tables import TableClient, TableServiceClient, UpdateMode
from azure.data.tables.aio import TableClient as AsyncTableClient

from tests.rawhttp import (
    JSON_NOMETADATA,
    RawClient,
    RawResponse,
    assert_error,
    etag_from_timestamp,
    parse_edm_datetime,
    py_keys,
)
from tests.serverproc import ServerProcess

STALE_ETAG = "W/\"datetime'2000-01-01T00%3A00%3A00.0000000Z'\""
CONDITION_MESSAGE = "The update condition specified in the request was not satisfied."


def _user_props(entity: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entity.items() if k not in ("PartitionKey", "RowKey")}


def _etag(client: TableClient, pk: str = "p", rk: str = "r") -> str:
    return str(client.get_entity(pk, rk).metadata["etag"])


def _entity_url(raw: RawClient, table: str, pk: str = "p", rk: str = "r") -> str:
    return f"{raw.endpoint}/{table}{py_keys(pk, rk)}"


def _write(
    raw: RawClient,
    method: str,
    table: str,
    body: dict[str, Any] | None,
    if_match: str | None = None,
    pk: str = "p",
    rk: str = "r",
    headers: Mapping[str, str | None] | None = None,
    extra_headers: tuple[tuple[str, str], ...] = (),
) -> RawResponse:
    all_headers: dict[str, str | None] = {"If-Match": if_match, **(headers or {})}
    return raw.request(method, table + py_keys(pk, rk), body, all_headers, extra_headers=extra_headers)


# ------------------------------------------------------------------------------------------
# Insert
# ------------------------------------------------------------------------------------------


def test_insert_returns_201_with_entity(raw: RawClient, server: ServerProcess, table: TableClient) -> None:
    name = table.table_name
    response = raw.insert(name, {"PartitionKey": "p", "RowKey": "r", "n": 7, "s": "text"})
    assert response.status == 201, response
    body = response.json()
    assert body["odata.metadata"] == f"{server.endpoint}/$metadata#{name}/@Element"
    assert body["odata.etag"] == response.header("ETag")
    assert body["PartitionKey"] == "p"
    assert body["RowKey"] == "r"
    assert body["n"] == 7
    assert body["s"] == "text"
    parse_edm_datetime(body["Timestamp"])
    assert response.header("Location") == _entity_url(raw, name)
    assert response.header("Preference-Applied") is None
    # Property order on the wire: odata.etag first, then the keys and Timestamp.
    keys = [k for k, _ in response.json_pairs() if k != "odata.metadata"]
    assert keys[:4] == ["odata.etag", "PartitionKey", "RowKey", "Timestamp"]


def test_insert_prefer_return_no_content(raw: RawClient, table: TableClient) -> None:
    name = table.table_name
    response = raw.insert(name, {"PartitionKey": "p", "RowKey": "r", "n": 1}, {"Prefer": "return-no-content"})
    assert response.status == 204, response
    assert response.body == b""
    assert response.header("Location") == _entity_url(raw, name)
    assert response.header("DataServiceId") == _entity_url(raw, name)
    assert response.header("Preference-Applied") == "return-no-content"
    etag = response.header("ETag")
    assert etag and etag.startswith("W/\"datetime'")
    assert _etag(table) == etag


def test_insert_prefer_return_content(raw: RawClient, table: TableClient) -> None:
    response = raw.insert(
        table.table_name, {"PartitionKey": "p", "RowKey": "r"}, {"Prefer": "return-content"}
    )
    assert response.status == 201, response
    assert response.header("Preference-Applied") == "return-content"
    assert response.json()["RowKey"] == "r"


def test_insert_via_sdk_returns_etag(table: TableClient) -> None:
    result = table.create_entity({"PartitionKey": "p", "RowKey": "r", "v": "x"})
    assert result["etag"] == _etag(table)


def test_insert_duplicate_is_conflict(raw: RawClient, table: TableClient) -> None:
    table.create_entity({"PartitionKey": "p", "RowKey": "r"})
    with pytest.raises(ResourceExistsError):
        table.create_entity({"PartitionKey": "p", "RowKey": "r", "other": 1})
    response = raw.insert(table.table_name, {"PartitionKey": "p", "RowKey": "r"})
    assert_error(response, 409, "EntityAlreadyExists", "The specified entity already exists.")
    assert "other" not in table.get_entity("p", "r")


def test_insert_ignores_if_match(raw: RawClient, table: TableClient) -> None:
    response = raw.insert(table.table_name, {"PartitionKey": "p", "RowKey": "r"}, {"If-Match": STALE_ETAG})
    assert response.status == 201, response


def test_insert_ignores_timestamp_and_odata_properties(raw: RawClient, table: TableClient) -> None:
    response = raw.insert(
        table.table_name,
        {
            "PartitionKey": "p",
            "RowKey": "r",
            "Timestamp": "2000-01-01T00:00:00Z",
            "odata.etag": STALE_ETAG,
            "v": 1,
        },
    )
    assert response.status == 201, response
    stored = table.get_entity("p", "r")
    stamp = stored.metadata["timestamp"]
    assert stamp is not None and stamp.year > 2000
    assert _user_props(dict(stored)) == {"v": 1}


def test_null_property_is_not_stored(raw: RawClient, table: TableClient) -> None:
    response = raw.insert(table.table_name, {"PartitionKey": "p", "RowKey": "r", "x": None, "y": 1})
    assert response.status == 201, response
    assert _user_props(dict(table.get_entity("p", "r"))) == {"y": 1}


def test_property_names_are_case_sensitive(table: TableClient) -> None:
    table.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1, "A": 2})
    assert _user_props(dict(table.get_entity("p", "r"))) == {"a": 1, "A": 2}


# ------------------------------------------------------------------------------------------
# Get
# ------------------------------------------------------------------------------------------


def test_get_entity(raw: RawClient, server: ServerProcess, table: TableClient) -> None:
    table.create_entity({"PartitionKey": "p", "RowKey": "r", "a": "x", "n": 3})
    entity = table.get_entity("p", "r")
    assert dict(entity) == {"PartitionKey": "p", "RowKey": "r", "a": "x", "n": 3}
    response = raw.get_entity(table.table_name, "p", "r")
    assert response.status == 200, response
    body = response.json()
    assert "value" not in body
    assert body["odata.metadata"] == f"{server.endpoint}/$metadata#{table.table_name}/@Element"
    assert body["odata.etag"] == response.header("ETag") == entity.metadata["etag"]
    assert body["a"] == "x"


def test_get_missing_entity(raw: RawClient, table: TableClient) -> None:
    with pytest.raises(ResourceNotFoundError):
        table.get_entity("p", "missing")
    response = raw.get_entity(table.table_name, "p", "missing")
    assert_error(response, 404, "ResourceNotFound", "The specified resource does not exist.")


def test_get_entity_with_select(raw: RawClient, table: TableClient) -> None:
    table.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1, "b": 2})
    selected = table.get_entity("p", "r", select=["a"])
    assert selected["a"] == 1
    assert "b" not in selected
    response = raw.request("GET", table.table_name + py_keys("p", "r") + "?$select=a,missing")
    assert response.status == 200, response
    body = response.json()
    assert body["a"] == 1
    assert body["missing"] is None
    assert "odata.etag" in body
    assert "b" not in body
    assert "PartitionKey" not in body
    assert "RowKey" not in body
    assert "Timestamp" not in body


# ------------------------------------------------------------------------------------------
# Update (replace)
# ------------------------------------------------------------------------------------------


def test_update_replace_with_etag(raw: RawClient, table: TableClient) -> None:
    created = table.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1, "b": 2})
    etag = created["etag"]
    updated = table.update_entity(
        {"PartitionKey": "p", "RowKey": "r", "a": 5},
        mode=UpdateMode.REPLACE,
        etag=etag,
        match_condition=MatchConditions.IfNotModified,
    )
    assert updated["etag"] != etag
    assert _user_props(dict(table.get_entity("p", "r"))) == {"a": 5}

    with pytest.raises(ResourceModifiedError):
        table.update_entity(
            {"PartitionKey": "p", "RowKey": "r", "a": 6},
            mode=UpdateMode.REPLACE,
            etag=etag,
            match_condition=MatchConditions.IfNotModified,
        )
    response = _write(raw, "PUT", table.table_name, {"a": 7}, if_match=etag)
    assert_error(response, 412, "UpdateConditionNotSatisfied", CONDITION_MESSAGE)
    assert table.get_entity("p", "r")["a"] == 5


def test_update_raw_returns_204_with_new_etag(raw: RawClient, table: TableClient) -> None:
    etag = table.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1})["etag"]
    response = _write(
        raw, "PUT", table.table_name, {"PartitionKey": "p", "RowKey": "r", "a": 2}, if_match=etag
    )
    assert response.status == 204, response
    assert response.body == b""
    new_etag = response.header("ETag")
    assert new_etag and new_etag != etag
    assert _etag(table) == new_etag


def test_update_if_match_star_on_missing_is_404(raw: RawClient, table: TableClient) -> None:
    with pytest.raises(ResourceNotFoundError):
        table.update_entity({"PartitionKey": "p", "RowKey": "missing", "a": 1}, mode=UpdateMode.REPLACE)
    with pytest.raises(ResourceNotFoundError):
        table.update_entity({"PartitionKey": "p", "RowKey": "missing", "a": 1}, mode=UpdateMode.MERGE)
    for method in ("PUT", "MERGE", "PATCH"):
        response = _write(raw, method, table.table_name, {"a": 1}, if_match="*", rk="missing")
        assert_error(response, 404, "ResourceNotFound")
        response = _write(raw, method, table.table_name, {"a": 1}, if_match=STALE_ETAG, rk="missing")
        assert_error(response, 404, "ResourceNotFound")
    with pytest.raises(ResourceNotFoundError):
        table.get_entity("p", "missing")


def test_update_if_match_star_replaces(raw: RawClient, table: TableClient) -> None:
    table.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1, "b": 2})
    response = _write(raw, "PUT", table.table_name, {"c": 3}, if_match="*")
    assert response.status == 204, response
    assert _user_props(dict(table.get_entity("p", "r"))) == {"c": 3}


def test_url_keys_are_authoritative_on_put(raw: RawClient, table: TableClient) -> None:
    response = _write(
        raw, "PUT", table.table_name, {"PartitionKey": "other", "RowKey": "other", "a": 1}, pk="p", rk="r"
    )
    if response.status == 400:
        assert response.error_code is not None
        return
    assert response.status == 204, response
    assert table.get_entity("p", "r")["a"] == 1
    with pytest.raises(ResourceNotFoundError):
        table.get_entity("other", "other")


# ------------------------------------------------------------------------------------------
# Merge
# ------------------------------------------------------------------------------------------


def test_merge_via_sdk_patch(table: TableClient) -> None:
    etag = table.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1, "b": 2})["etag"]
    result = table.update_entity(
        {"PartitionKey": "p", "RowKey": "r", "b": "two", "c": 3},
        mode=UpdateMode.MERGE,
        etag=etag,
        match_condition=MatchConditions.IfNotModified,
    )
    assert result["etag"] != etag
    assert _user_props(dict(table.get_entity("p", "r"))) == {"a": 1, "b": "two", "c": 3}
    with pytest.raises(ResourceModifiedError):
        table.update_entity(
            {"PartitionKey": "p", "RowKey": "r", "d": 4},
            mode=UpdateMode.MERGE,
            etag=etag,
            match_condition=MatchConditions.IfNotModified,
        )


def test_merge_via_merge_verb(raw: RawClient, table: TableClient) -> None:
    etag = table.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1})["etag"]
    response = _write(raw, "MERGE", table.table_name, {"b": 2}, if_match="*")
    assert response.status == 204, response
    assert response.header("ETag") not in (None, etag)
    assert _user_props(dict(table.get_entity("p", "r"))) == {"a": 1, "b": 2}
    stale = _write(raw, "MERGE", table.table_name, {"c": 3}, if_match=etag)
    assert_error(stale, 412, "UpdateConditionNotSatisfied")
    current = _etag(table)
    fresh = _write(raw, "MERGE", table.table_name, {"c": 3}, if_match=current)
    assert fresh.status == 204, fresh
    assert _user_props(dict(table.get_entity("p", "r"))) == {"a": 1, "b": 2, "c": 3}


def test_merge_via_post_x_http_method(raw: RawClient, table: TableClient) -> None:
    table.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1})
    response = _write(
        raw, "POST", table.table_name, {"b": 2}, if_match="*", headers={"X-HTTP-Method": "MERGE"}
    )
    assert response.status == 204, response
    assert response.header("ETag")
    assert _user_props(dict(table.get_entity("p", "r"))) == {"a": 1, "b": 2}


@pytest.mark.parametrize("form", ["MERGE", "PATCH", "POST"])
def test_insert_or_merge_without_if_match(raw: RawClient, table: TableClient, form: str) -> None:
    headers = {"X-HTTP-Method": "MERGE"} if form == "POST" else {}
    created = _write(raw, form, table.table_name, {"a": 1}, headers=headers)
    assert created.status == 204, created
    assert created.header("ETag")
    merged = _write(raw, form, table.table_name, {"b": 2}, headers=headers)
    assert merged.status == 204, merged
    assert merged.header("ETag") != created.header("ETag")
    assert _user_props(dict(table.get_entity("p", "r"))) == {"a": 1, "b": 2}


def test_merge_can_change_property_type(table: TableClient) -> None:
    table.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1})
    table.update_entity({"PartitionKey": "p", "RowKey": "r", "a": "now text"}, mode=UpdateMode.MERGE)
    assert table.get_entity("p", "r")["a"] == "now text"


def test_merge_null_leaves_property_untouched(raw: RawClient, table: TableClient) -> None:
    table.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1, "b": 2})
    response = _write(raw, "MERGE", table.table_name, {"a": None, "c": 3}, if_match="*")
    assert response.status == 204, response
    assert _user_props(dict(table.get_entity("p", "r"))) == {"a": 1, "b": 2, "c": 3}


# ------------------------------------------------------------------------------------------
# Upserts
# ------------------------------------------------------------------------------------------


def test_upsert_replace_and_merge_modes(table: TableClient) -> None:
    first = table.upsert_entity({"PartitionKey": "p", "RowKey": "r", "a": 1, "b": 2}, mode=UpdateMode.REPLACE)
    assert _user_props(dict(table.get_entity("p", "r"))) == {"a": 1, "b": 2}

    second = table.upsert_entity({"PartitionKey": "p", "RowKey": "r", "c": 3}, mode=UpdateMode.MERGE)
    assert _user_props(dict(table.get_entity("p", "r"))) == {"a": 1, "b": 2, "c": 3}

    third = table.upsert_entity({"PartitionKey": "p", "RowKey": "r", "d": 4}, mode=UpdateMode.REPLACE)
    assert _user_props(dict(table.get_entity("p", "r"))) == {"d": 4}

    fourth = table.upsert_entity({"PartitionKey": "p", "RowKey": "new", "e": 5}, mode=UpdateMode.MERGE)
    assert _user_props(dict(table.get_entity("p", "new"))) == {"e": 5}

    etags = [first["etag"], second["etag"], third["etag"], fourth["etag"]]
    assert all(etags)
    assert len(set(etags[:3])) == 3


def test_insert_or_replace_raw(raw: RawClient, table: TableClient) -> None:
    created = _write(raw, "PUT", table.table_name, {"a": 1, "b": 2})
    assert created.status == 204, created
    assert created.body == b""
    assert created.header("ETag")
    replaced = _write(raw, "PUT", table.table_name, {"c": 3})
    assert replaced.status == 204, replaced
    assert replaced.header("ETag") != created.header("ETag")
    assert _user_props(dict(table.get_entity("p", "r"))) == {"c": 3}


def test_body_odata_etag_is_not_if_match(raw: RawClient, table: TableClient) -> None:
    table.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1})
    response = _write(raw, "PUT", table.table_name, {"odata.etag": STALE_ETAG, "a": 2})
    assert response.status == 204, response
    assert table.get_entity("p", "r")["a"] == 2


# ------------------------------------------------------------------------------------------
# Delete
# ------------------------------------------------------------------------------------------


def test_delete_if_match_star(raw: RawClient, table: TableClient) -> None:
    table.create_entity({"PartitionKey": "p", "RowKey": "r"})
    table.delete_entity("p", "r")
    with pytest.raises(ResourceNotFoundError):
        table.get_entity("p", "r")
    table.create_entity({"PartitionKey": "p", "RowKey": "r"})
    response = _write(raw, "DELETE", table.table_name, None, if_match="*")
    assert response.status == 204, response
    assert response.body == b""
    with pytest.raises(ResourceNotFoundError):
        table.get_entity("p", "r")


def test_delete_with_etag(raw: RawClient, table: TableClient) -> None:
    etag = table.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1})["etag"]
    new_etag = table.update_entity({"PartitionKey": "p", "RowKey": "r", "a": 2})["etag"]
    with pytest.raises(ResourceModifiedError):
        table.delete_entity("p", "r", etag=etag, match_condition=MatchConditions.IfNotModified)
    stale = _write(raw, "DELETE", table.table_name, None, if_match=etag)
    assert_error(stale, 412, "UpdateConditionNotSatisfied", CONDITION_MESSAGE)
    assert table.get_entity("p", "r")["a"] == 2
    table.delete_entity("p", "r", etag=new_etag, match_condition=MatchConditions.IfNotModified)
    with pytest.raises(ResourceNotFoundError):
        table.get_entity("p", "r")


def test_delete_entity_object_with_etag(table: TableClient) -> None:
    table.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1})
    entity = table.get_entity("p", "r")
    table.delete_entity(entity, match_condition=MatchConditions.IfNotModified)
    assert list(table.list_entities()) == []


def test_delete_missing_entity(raw: RawClient, table: TableClient) -> None:
    table.delete_entity("p", "missing")  # the SDK swallows the 404
    response = _write(raw, "DELETE", table.table_name, None, if_match="*", rk="missing")
    assert_error(response, 404, "ResourceNotFound", "The specified resource does not exist.")
    response = _write(raw, "DELETE", table.table_name, None, if_match=STALE_ETAG, rk="missing")
    assert_error(response, 404, "ResourceNotFound")


def test_delete_without_if_match_is_412(raw: RawClient, table: TableClient) -> None:
    table.create_entity({"PartitionKey": "p", "RowKey": "r"})
    response = _write(raw, "DELETE", table.table_name, None)
    assert_error(response, 412, "UpdateConditionNotSatisfied")
    assert table.get_entity("p", "r")["RowKey"] == "r"


# ------------------------------------------------------------------------------------------
# Missing table
# ------------------------------------------------------------------------------------------

MISSING_TABLE_OPS: list[tuple[str, str, bool, dict[str, str | None]]] = [
    ("POST", "", True, {}),
    ("GET", "()", False, {}),
    ("GET", "", False, {}),
    ("GET", "(PartitionKey='p',RowKey='r')", False, {}),
    ("PUT", "(PartitionKey='p',RowKey='r')", True, {"If-Match": "*"}),
    ("PUT", "(PartitionKey='p',RowKey='r')", True, {}),
    ("MERGE", "(PartitionKey='p',RowKey='r')", True, {"If-Match": "*"}),
    ("PATCH", "(PartitionKey='p',RowKey='r')", True, {}),
    ("POST", "(PartitionKey='p',RowKey='r')", True, {"X-HTTP-Method": "MERGE"}),
    ("DELETE", "(PartitionKey='p',RowKey='r')", False, {"If-Match": "*"}),
]


@pytest.mark.parametrize(("method", "suffix", "has_body", "headers"), MISSING_TABLE_OPS)
def test_missing_table_raw(
    raw: RawClient, table_name: str, method: str, suffix: str, has_body: bool, headers: dict[str, str | None]
) -> None:
    body = {"PartitionKey": "p", "RowKey": "r", "a": 1} if has_body else None
    response = raw.request(method, table_name + suffix, body, headers)
    assert_error(response, 404, "TableNotFound", "The table specified does not exist.")


def test_missing_table_sdk(service: TableServiceClient, table_name: str) -> None:
    client = service.get_table_client(table_name)
    entity = {"PartitionKey": "p", "RowKey": "r", "a": 1}
    with pytest.raises(ResourceNotFoundError):
        client.create_entity(entity)
    with pytest.raises(ResourceNotFoundError):
        client.get_entity("p", "r")
    with pytest.raises(ResourceNotFoundError):
        client.update_entity(entity, mode=UpdateMode.REPLACE)
    with pytest.raises(ResourceNotFoundError):
        client.update_entity(entity, mode=UpdateMode.MERGE)
    with pytest.raises(ResourceNotFoundError):
        client.upsert_entity(entity, mode=UpdateMode.REPLACE)
    with pytest.raises(ResourceNotFoundError):
        client.upsert_entity(entity, mode=UpdateMode.MERGE)
    with pytest.raises(ResourceNotFoundError):
        list(client.list_entities())
    with pytest.raises(ResourceNotFoundError):
        list(client.query_entities("PartitionKey eq 'p'"))
    client.delete_entity("p", "r")  # 404 swallowed
    assert list(service.query_tables(f"TableName eq '{table_name}'")) == []


# ------------------------------------------------------------------------------------------
# ETags
# ------------------------------------------------------------------------------------------


def test_etag_header_matches_body_and_timestamp(raw: RawClient, table: TableClient) -> None:
    inserted = raw.insert(table.table_name, {"PartitionKey": "p", "RowKey": "r", "a": 1})
    body = inserted.json()
    assert inserted.header("ETag") == body["odata.etag"] == etag_from_timestamp(body["Timestamp"])

    got = raw.get_entity(table.table_name, "p", "r")
    got_body = got.json()
    assert got.header("ETag") == got_body["odata.etag"] == etag_from_timestamp(got_body["Timestamp"])
    assert got_body["Timestamp"] == body["Timestamp"]

    listed = raw.request("GET", table.table_name + "()")
    for entity in listed.json()["value"]:
        assert entity["odata.etag"] == etag_from_timestamp(entity["Timestamp"])
    assert listed.json()["value"][0]["odata.etag"] == got.header("ETag")

    merged = _write(raw, "MERGE", table.table_name, {"b": 2}, if_match="*")
    after = raw.get_entity(table.table_name, "p", "r")
    assert merged.header("ETag") == after.header("ETag") == etag_from_timestamp(after.json()["Timestamp"])


def test_every_write_changes_the_etag(raw: RawClient, table: TableClient) -> None:
    etags = [table.create_entity({"PartitionKey": "p", "RowKey": "r", "n": 0})["etag"]]
    etags.append(
        table.update_entity({"PartitionKey": "p", "RowKey": "r", "n": 1}, mode=UpdateMode.REPLACE)["etag"]
    )
    etags.append(
        table.update_entity({"PartitionKey": "p", "RowKey": "r", "n": 2}, mode=UpdateMode.MERGE)["etag"]
    )
    etags.append(
        table.upsert_entity({"PartitionKey": "p", "RowKey": "r", "n": 3}, mode=UpdateMode.REPLACE)["etag"]
    )
    etags.append(
        table.upsert_entity({"PartitionKey": "p", "RowKey": "r", "n": 4}, mode=UpdateMode.MERGE)["etag"]
    )
    # Rapid identical writes, as fast as the client can issue them.
    for _ in range(10):
        response = _write(raw, "PUT", table.table_name, {"n": 5}, if_match="*")
        assert response.status == 204, response
        etags.append(str(response.header("ETag")))
    assert len(set(etags)) == len(etags), etags

    # Timestamps (from which the ETags derive) strictly increase.
    stamps: list[tuple[Any, int]] = []
    for etag in etags:
        assert etag.startswith("W/\"datetime'") and etag.endswith("'\"")
        stamp = etag[len("W/\"datetime'") : -2].replace("%3A", ":")
        stamps.append(parse_edm_datetime(stamp))
    assert stamps == sorted(stamps)
    assert len(set(stamps)) == len(stamps)


# ------------------------------------------------------------------------------------------
# X-HTTP-Method tunnelling and If-Match validation
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["PUT", "PATCH", "MERGE", "DELETE", "GET"])
def test_x_http_method_requires_post(raw: RawClient, table: TableClient, method: str) -> None:
    table.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1})
    body = None if method in ("GET", "DELETE") else {"a": 2}
    response = _write(raw, method, table.table_name, body, if_match="*", headers={"X-HTTP-Method": "MERGE"})
    assert_error(response, 400, "XMethodNotUsingPost")
    assert table.get_entity("p", "r")["a"] == 1


def test_x_http_method_incorrect_count(raw: RawClient, table: TableClient) -> None:
    table.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1})
    response = _write(
        raw,
        "POST",
        table.table_name,
        {"a": 2},
        if_match="*",
        extra_headers=(("X-HTTP-Method", "MERGE"), ("X-HTTP-Method", "MERGE")),
    )
    assert_error(response, 400, "XMethodIncorrectCount")
    assert table.get_entity("p", "r")["a"] == 1


@pytest.mark.parametrize("value", ["FOO", "GET", "MERGEX"])
def test_x_http_method_incorrect_value(raw: RawClient, table: TableClient, value: str) -> None:
    table.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1})
    response = _write(raw, "POST", table.table_name, {"a": 2}, if_match="*", headers={"X-HTTP-Method": value})
    assert_error(response, 400, "XMethodIncorrectValue")
    assert table.get_entity("p", "r")["a"] == 1


def test_x_http_method_delete_and_put(raw: RawClient, table: TableClient) -> None:
    table.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1, "b": 2})
    replaced = _write(raw, "POST", table.table_name, {"c": 3}, if_match="*", headers={"X-HTTP-Method": "PUT"})
    assert replaced.status == 204, replaced
    assert _user_props(dict(table.get_entity("p", "r"))) == {"c": 3}
    deleted = _write(raw, "POST", table.table_name, None, if_match="*", headers={"X-HTTP-Method": "DELETE"})
    assert deleted.status == 204, deleted
    with pytest.raises(ResourceNotFoundError):
        table.get_entity("p", "r")


@pytest.mark.parametrize("method", ["PUT", "MERGE", "PATCH", "DELETE"])
@pytest.mark.parametrize("if_match", ["garbage", '"strong-etag"', "W/garbage"])
def test_malformed_if_match_is_invalid_input(
    raw: RawClient, table: TableClient, method: str, if_match: str
) -> None:
    table.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1})
    body = None if method == "DELETE" else {"a": 2}
    response = _write(raw, method, table.table_name, body, if_match=if_match)
    assert_error(response, 400, "InvalidInput")
    assert table.get_entity("p", "r")["a"] == 1


LOWER_STALE = "w/" + STALE_ETAG[2:]


@pytest.mark.parametrize("method", ["PUT", "MERGE", "PATCH", "DELETE"])
def test_lower_case_weak_etag_is_compared(raw: RawClient, table: TableClient, method: str) -> None:
    """``w/"…"`` is a well-formed weak ETag: a stale one is 412, the current one in lower case works."""
    etag = table.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1})["etag"]
    body = None if method == "DELETE" else {"a": 2}
    stale = _write(raw, method, table.table_name, body, if_match=LOWER_STALE)
    assert_error(stale, 412, "UpdateConditionNotSatisfied")
    assert table.get_entity("p", "r")["a"] == 1
    current = _write(raw, method, table.table_name, body, if_match="w/" + etag[2:])
    assert current.status == 204, current


def test_several_etags_in_if_match_are_invalid_input(raw: RawClient, table: TableClient) -> None:
    etag = table.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1})["etag"]
    response = _write(raw, "PUT", table.table_name, {"a": 2}, if_match=f"{etag}, {STALE_ETAG}")
    assert_error(response, 400, "InvalidInput", "The etag value")
    repeated = raw.request(
        "PUT",
        table.table_name + py_keys("p", "r"),
        {"a": 2},
        extra_headers=(("If-Match", etag), ("If-Match", etag)),
    )
    assert_error(repeated, 400, "InvalidInput")
    assert table.get_entity("p", "r")["a"] == 1


@pytest.mark.parametrize("method", ["PUT", "DELETE"])
def test_if_none_match_is_invalid_input(raw: RawClient, table: TableClient, method: str) -> None:
    table.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1})
    body = None if method == "DELETE" else {"a": 2}
    only_none = _write(raw, method, table.table_name, body, headers={"If-None-Match": "*"})
    assert_error(only_none, 400, "InvalidInput")
    both = _write(raw, method, table.table_name, body, if_match="*", headers={"If-None-Match": "*"})
    assert_error(both, 400, "InvalidInput")
    assert table.get_entity("p", "r")["a"] == 1


def test_if_match_with_surrounding_whitespace(raw: RawClient, table: TableClient) -> None:
    etag = table.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1})["etag"]
    response = raw.request(
        "PUT", table.table_name + py_keys("p", "r"), {"a": 2}, extra_headers=(("If-Match", f"  {etag}  "),)
    )
    assert response.status == 204, response


# ------------------------------------------------------------------------------------------
# Request content types and the async client
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        JSON_NOMETADATA,
        "application/json; charset=utf-8",
        "application/json;odata=minimalmetadata",
    ],
)
def test_request_content_type_variants(raw: RawClient, table: TableClient, content_type: str) -> None:
    response = raw.insert(
        table.table_name, {"PartitionKey": "p", "RowKey": "r"}, {"Content-Type": content_type}
    )
    assert response.status == 201, response


def test_async_entity_lifecycle(server: ServerProcess, table: TableClient) -> None:
    async def run() -> None:
        async with AsyncTableClient.from_connection_string(
            server.connection_string, table_name=table.table_name
        ) as client:
            created = await client.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1, "b": 2})
            got = await client.get_entity("p", "r")
            assert got.metadata["etag"] == created["etag"]
            assert _user_props(dict(got)) == {"a": 1, "b": 2}

            await client.update_entity({"PartitionKey": "p", "RowKey": "r", "c": 3}, mode=UpdateMode.MERGE)
            assert _user_props(dict(await client.get_entity("p", "r"))) == {"a": 1, "b": 2, "c": 3}
            await client.update_entity({"PartitionKey": "p", "RowKey": "r", "d": 4}, mode=UpdateMode.REPLACE)
            assert _user_props(dict(await client.get_entity("p", "r"))) == {"d": 4}

            with pytest.raises(ResourceModifiedError):
                await client.update_entity(
                    {"PartitionKey": "p", "RowKey": "r", "e": 5},
                    etag=created["etag"],
                    match_condition=MatchConditions.IfNotModified,
                )
            with pytest.raises(ResourceExistsError):
                await client.create_entity({"PartitionKey": "p", "RowKey": "r"})

            await client.upsert_entity({"PartitionKey": "p", "RowKey": "s", "x": 1}, mode=UpdateMode.MERGE)
            rows = [e["RowKey"] async for e in client.list_entities()]
            assert rows == ["r", "s"]

            await client.delete_entity("p", "r")
            await client.delete_entity("p", "r")  # missing: no error
            with pytest.raises(ResourceNotFoundError):
                await client.get_entity("p", "r")

    asyncio.run(run())


def test_sdk_against_localhost_uses_post_tunnelling(server: ServerProcess, table: TableClient) -> None:
    # A "localhost" endpoint on a port other than 10002 looks like Cosmos to the SDK, which then
    # sends Merge as POST + X-HTTP-Method: MERGE. The server must accept that form.
    connection_string = server.connection_string.replace("127.0.0.1", "localhost")
    with TableClient.from_connection_string(connection_string, table_name=table.table_name) as client:
        sent: list[tuple[str, str | None]] = []

        def record(request: Any) -> None:
            sent.append((request.http_request.method, request.http_request.headers.get("X-HTTP-Method")))

        etag = client.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1})["etag"]
        client.update_entity(
            {"PartitionKey": "p", "RowKey": "r", "b": 2},
            mode=UpdateMode.MERGE,
            etag=etag,
            match_condition=MatchConditions.IfNotModified,
            raw_request_hook=record,
        )
        client.upsert_entity(
            {"PartitionKey": "p", "RowKey": "s", "c": 3}, mode=UpdateMode.MERGE, raw_request_hook=record
        )
        with pytest.raises(ResourceModifiedError):
            client.update_entity(
                {"PartitionKey": "p", "RowKey": "r", "d": 4},
                mode=UpdateMode.MERGE,
                etag=etag,
                match_condition=MatchConditions.IfNotModified,
            )
    assert sent == [("POST", "MERGE"), ("POST", "MERGE")]
    assert _user_props(dict(table.get_entity("p", "r"))) == {"a": 1, "b": 2}
    assert _user_props(dict(table.get_entity("p", "s"))) == {"c": 3}


# ------------------------------------------------------------------------------------------
# Concurrency: writes to one entity are linearizable
# ------------------------------------------------------------------------------------------

WRITERS = 12


def _parallel(count: int, work: Callable[[int], RawResponse]) -> list[RawResponse]:
    barrier = threading.Barrier(count)

    def run(i: int) -> RawResponse:
        barrier.wait()
        return work(i)

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(run, range(count)))


def test_concurrent_conditional_updates_have_one_winner(raw: RawClient, table: TableClient) -> None:
    etag = table.create_entity({"PartitionKey": "p", "RowKey": "r", "winner": -1})["etag"]
    responses = _parallel(
        WRITERS, lambda i: _write(raw, "PUT", table.table_name, {"winner": i}, if_match=etag)
    )
    statuses = sorted(r.status for r in responses)
    assert statuses == [204] + [412] * (WRITERS - 1), responses
    [winner] = [i for i, r in enumerate(responses) if r.status == 204]
    stored = table.get_entity("p", "r")
    assert stored["winner"] == winner
    assert stored.metadata["etag"] == responses[winner].header("ETag")


def test_concurrent_inserts_have_one_winner(raw: RawClient, table: TableClient) -> None:
    responses = _parallel(
        WRITERS, lambda i: raw.insert(table.table_name, {"PartitionKey": "p", "RowKey": "r", "who": i})
    )
    statuses = sorted(r.status for r in responses)
    assert statuses == [201] + [409] * (WRITERS - 1), responses
    [winner] = [i for i, r in enumerate(responses) if r.status == 201]
    assert table.get_entity("p", "r")["who"] == winner


def test_concurrent_merges_lose_no_update(raw: RawClient, table: TableClient) -> None:
    table.create_entity({"PartitionKey": "p", "RowKey": "r"})
    responses = _parallel(
        WRITERS, lambda i: _write(raw, "MERGE", table.table_name, {f"m{i}": i}, if_match="*")
    )
    assert [r.status for r in responses] == [204] * WRITERS, responses
    etags = [r.header("ETag") for r in responses]
    assert len(set(etags)) == WRITERS
    assert _user_props(dict(table.get_entity("p", "r"))) == {f"m{i}": i for i in range(WRITERS)}


def test_get_ignores_conditional_headers(raw: RawClient, table: TableClient) -> None:
    table.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1})
    for headers in ({"If-Match": STALE_ETAG}, {"If-None-Match": "*"}, {"If-None-Match": _etag(table)}):
        response = raw.get_entity(table.table_name, "p", "r", headers)
        assert response.status == 200, (headers, response)
        assert response.json()["a"] == 1


def test_odata_control_information_in_body_is_ignored(raw: RawClient, table: TableClient) -> None:
    body = {
        "PartitionKey": "p",
        "RowKey": "r",
        "odata.metadata": "http://elsewhere/$metadata#x/@Element",
        "odata.type": "other.type",
        "odata.id": "http://elsewhere/x",
        "odata.editLink": "x(PartitionKey='a',RowKey='b')",
        "Timestamp": "2000-01-01T00:00:00Z",
        "Timestamp@odata.type": "Edm.DateTime",
        "a": 1,
    }
    assert raw.insert(table.table_name, body).status == 201
    assert _write(raw, "MERGE", table.table_name, body, if_match="*").status == 204
    assert _write(raw, "PUT", table.table_name, body, if_match="*").status == 204
    stored = table.get_entity("p", "r")
    assert _user_props(dict(stored)) == {"a": 1}
    stamp = stored.metadata["timestamp"]
    assert stamp is not None and stamp.year > 2000
