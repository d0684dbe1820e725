"""Validation and limits: exact status and error code for each rule."""

from __future__ import annotations

import json
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError
from azure.data.tables import TableClient, UpdateMode

from tests.rawhttp import RawClient, RawResponse, assert_error, py_keys, sdk_error_code

VALUE_TOO_LARGE = "The property value exceeds the maximum allowed size (64KB)."
NEEDS_VALUE = "The values are not specified for all properties in the entity."


def _insert(
    raw: RawClient, table: TableClient, props: dict[str, Any], pk: str = "p", rk: str = "r"
) -> RawResponse:
    return raw.insert(table.table_name, {"PartitionKey": pk, "RowKey": rk, **props})


def _insert_bytes(raw: RawClient, table: TableClient, body: bytes) -> RawResponse:
    return raw.insert(table.table_name, body)


def _sdk_error(excinfo: pytest.ExceptionInfo[HttpResponseError]) -> tuple[int | None, str | None]:
    """Status and service error code of an SDK error (create_entity re-raises it undecoded)."""
    return excinfo.value.status_code, sdk_error_code(excinfo.value)


# ------------------------------------------------------------------------------------------
# Property count, names
# ------------------------------------------------------------------------------------------


def test_252_user_properties_accepted(raw: RawClient, table: TableClient) -> None:
    props = {f"p{i}": i for i in range(252)}
    response = _insert(raw, table, props)
    assert response.status == 201, response
    stored = table.get_entity("p", "r")
    assert len(stored) == 254  # + PartitionKey and RowKey
    assert stored["p251"] == 251


def test_253_user_properties_rejected(raw: RawClient, table: TableClient) -> None:
    props = {f"p{i}": i for i in range(253)}
    assert_error(_insert(raw, table, props), 400, "TooManyProperties")
    with pytest.raises(HttpResponseError) as info:
        table.create_entity({"PartitionKey": "p", "RowKey": "sdk", **props})
    assert _sdk_error(info) == (400, "TooManyProperties")
    with pytest.raises(HttpResponseError) as info:
        table.upsert_entity({"PartitionKey": "p", "RowKey": "sdk", **props})
    assert _sdk_error(info) == (400, "TooManyProperties")
    assert list(table.list_entities()) == []


def test_merge_beyond_252_properties_rejected(table: TableClient) -> None:
    table.create_entity({"PartitionKey": "p", "RowKey": "r", **{f"p{i}": i for i in range(252)}})
    with pytest.raises(HttpResponseError) as info:
        table.update_entity({"PartitionKey": "p", "RowKey": "r", "extra": 1}, mode=UpdateMode.MERGE)
    assert _sdk_error(info) == (400, "TooManyProperties")
    assert "extra" not in table.get_entity("p", "r")
    # Merging into existing properties is fine.
    table.update_entity({"PartitionKey": "p", "RowKey": "r", "p0": "changed"}, mode=UpdateMode.MERGE)
    assert table.get_entity("p", "r")["p0"] == "changed"


@pytest.mark.parametrize("name", ["a-b", "1abc", "a b", "a.b", "", "a$", "x/y"])
def test_invalid_property_name(raw: RawClient, table: TableClient, name: str) -> None:
    response = _insert(raw, table, {name: 1})
    assert_error(response, 400, "PropertyNameInvalid", "The property name is invalid.")


@pytest.mark.parametrize("name", ["_x", "x1", "Name_2", "ñame", "über", "名前"])
def test_valid_property_names(raw: RawClient, table: TableClient, name: str) -> None:
    response = _insert(raw, table, {name: 1})
    assert response.status == 201, response
    assert table.get_entity("p", "r")[name] == 1


def test_property_name_length(raw: RawClient, table: TableClient) -> None:
    ok = "n" * 255
    response = _insert(raw, table, {ok: 1})
    assert response.status == 201, response
    assert table.get_entity("p", "r")[ok] == 1
    too_long = "n" * 256
    assert_error(_insert(raw, table, {too_long: 1}, rk="r2"), 400, "PropertyNameTooLong")
    with pytest.raises(HttpResponseError) as info:
        table.create_entity({"PartitionKey": "p", "RowKey": "r3", too_long: 1})
    assert _sdk_error(info) == (400, "PropertyNameTooLong")


def test_duplicate_property_in_json(raw: RawClient, table: TableClient) -> None:
    body = b'{"PartitionKey":"p","RowKey":"r","a":1,"a":2}'
    assert_error(_insert_bytes(raw, table, body), 400, "DuplicatePropertiesSpecified")
    merge = raw.request("MERGE", table.table_name + py_keys("p", "r"), b'{"b":1,"b":"x"}')
    assert_error(merge, 400, "DuplicatePropertiesSpecified")
    assert list(table.list_entities()) == []


# ------------------------------------------------------------------------------------------
# Value sizes
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ok", "too_large"),
    [
        ("x" * 32768, "x" * 32769),
        ("é" * 32768, "é" * 32769),
        ("😀" * 16384, "😀" * 16384 + "a"),
    ],
    ids=["ascii", "bmp", "astral"],
)
def test_string_limit_counts_utf16_units(raw: RawClient, table: TableClient, ok: str, too_large: str) -> None:
    table.create_entity({"PartitionKey": "p", "RowKey": "ok", "s": ok})
    assert table.get_entity("p", "ok")["s"] == ok
    assert_error(
        _insert(raw, table, {"s": too_large}, rk="big"), 400, "PropertyValueTooLarge", VALUE_TOO_LARGE
    )
    with pytest.raises(HttpResponseError) as info:
        table.upsert_entity({"PartitionKey": "p", "RowKey": "big2", "s": too_large})
    assert _sdk_error(info) == (400, "PropertyValueTooLarge")


def test_binary_limit(raw: RawClient, table: TableClient) -> None:
    ok = bytes(65536)
    table.create_entity({"PartitionKey": "p", "RowKey": "ok", "b": ok})
    assert table.get_entity("p", "ok")["b"] == ok
    with pytest.raises(HttpResponseError) as info:
        table.create_entity({"PartitionKey": "p", "RowKey": "big", "b": bytes(65537)})
    assert _sdk_error(info) == (400, "PropertyValueTooLarge")


def _formula_size(entity: dict[str, Any]) -> int:
    """Entity size by the formula in "Understanding the Table service data model"."""
    size = 4 + 2 * len(entity["PartitionKey"]) + 2 * len(entity["RowKey"])
    for name, value in entity.items():
        if name in ("PartitionKey", "RowKey"):
            continue
        if isinstance(value, bytes):
            value_size = 4 + len(value)
        elif isinstance(value, str):
            value_size = 4 + len(value.encode("utf-16-le"))
        else:
            raise AssertionError(value)
        size += 8 + 2 * len(name) + value_size
    return size


def test_entity_of_about_1_mib_is_accepted(table: TableClient) -> None:
    entity: dict[str, Any] = {"PartitionKey": "p", "RowKey": "r"}
    for i in range(15):
        entity[f"b{i:02d}"] = bytes([i]) * 65536
    entity["tail"] = b"\x01" * 58000
    size = _formula_size(entity)
    assert 1_030_000 < size <= 1_048_576
    table.create_entity(entity)
    stored = table.get_entity("p", "r")
    assert stored["tail"] == entity["tail"]
    assert stored["b14"] == entity["b14"]


def test_entity_of_about_1_mib_of_strings_is_accepted(table: TableClient) -> None:
    entity: dict[str, Any] = {"PartitionKey": "p", "RowKey": "r"}
    for i in range(15):
        entity[f"s{i:02d}"] = chr(ord("a") + i) * 32768
    entity["tail"] = "z" * 29000
    size = _formula_size(entity)
    assert 1_030_000 < size <= 1_048_576
    table.create_entity(entity)
    assert table.get_entity("p", "r")["tail"] == entity["tail"]


def test_entity_over_1_mib_is_rejected(raw: RawClient, table: TableClient) -> None:
    entity: dict[str, Any] = {"PartitionKey": "p", "RowKey": "r"}
    for i in range(16):
        entity[f"b{i:02d}"] = bytes([i]) * 65536
    entity["extra"] = b"\x02" * 8000
    assert _formula_size(entity) > 1_048_576 + 8000
    with pytest.raises(HttpResponseError) as info:
        table.create_entity(entity)
    assert _sdk_error(info) == (400, "EntityTooLarge")
    with pytest.raises(HttpResponseError) as info:
        table.upsert_entity(entity)
    assert _sdk_error(info) == (400, "EntityTooLarge")


def test_entity_over_1_mib_of_strings_is_rejected(table: TableClient) -> None:
    entity: dict[str, Any] = {"PartitionKey": "p", "RowKey": "r"}
    for i in range(16):
        entity[f"s{i:02d}"] = chr(ord("a") + i) * 32768
    entity["extra"] = "z" * 8000
    assert _formula_size(entity) > 1_048_576 + 8000
    with pytest.raises(HttpResponseError) as info:
        table.create_entity(entity)
    assert _sdk_error(info) == (400, "EntityTooLarge")


def test_merge_growing_entity_over_1_mib_is_rejected(table: TableClient) -> None:
    entity: dict[str, Any] = {"PartitionKey": "p", "RowKey": "r"}
    for i in range(15):
        entity[f"b{i:02d}"] = bytes([i]) * 65536
    table.create_entity(entity)
    with pytest.raises(HttpResponseError) as info:
        table.update_entity(
            {"PartitionKey": "p", "RowKey": "r", "x": bytes(65536), "y": bytes(20000)}, mode=UpdateMode.MERGE
        )
    assert _sdk_error(info) == (400, "EntityTooLarge")
    assert "x" not in table.get_entity("p", "r")


# ------------------------------------------------------------------------------------------
# Keys
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["PartitionKey", "RowKey"])
def test_key_length_limit(raw: RawClient, table: TableClient, which: str) -> None:
    ok = {"PartitionKey": "p", "RowKey": "r", which: "k" * 1024}
    response = raw.insert(table.table_name, ok)
    assert response.status == 201, response
    assert table.get_entity(ok["PartitionKey"], ok["RowKey"])[which] == "k" * 1024

    too_long = {"PartitionKey": "p", "RowKey": "r", which: "k" * 1025}
    assert_error(raw.insert(table.table_name, too_long), 400, "PropertyValueTooLarge")
    with pytest.raises(HttpResponseError) as info:
        table.create_entity(too_long)
    assert _sdk_error(info) == (400, "PropertyValueTooLarge")
    # Keys taken from the URL (Insert Or Replace) obey the same limit.
    with pytest.raises(HttpResponseError) as info:
        table.upsert_entity(too_long)
    assert _sdk_error(info) == (400, "PropertyValueTooLarge")


def test_key_length_counts_utf16_units(raw: RawClient, table: TableClient) -> None:
    ok = "😀" * 512  # 1024 UTF-16 code units
    table.create_entity({"PartitionKey": ok, "RowKey": "r"})
    assert table.get_entity(ok, "r")["PartitionKey"] == ok
    too_long = "😀" * 512 + "a"  # 1025 units
    assert_error(
        raw.insert(table.table_name, {"PartitionKey": "p", "RowKey": too_long}), 400, "PropertyValueTooLarge"
    )


FORBIDDEN_KEY_CHARS = ["/", "\\", "#", "?", "\x00", "\x01", "\x1f", "\x7f", "\x80", "\x9f"]


@pytest.mark.parametrize("which", ["PartitionKey", "RowKey"])
@pytest.mark.parametrize("char", FORBIDDEN_KEY_CHARS, ids=[f"U+{ord(c):04X}" for c in FORBIDDEN_KEY_CHARS])
def test_forbidden_key_chars_in_body(raw: RawClient, table: TableClient, which: str, char: str) -> None:
    entity = {"PartitionKey": "p", "RowKey": "r", which: f"a{char}b"}
    response = raw.insert(table.table_name, entity)
    assert_error(response, 400, "OutOfRangeInput", f"The '{which}' parameter of value ")
    assert list(table.list_entities()) == []


@pytest.mark.parametrize("char", ["\u00a0", " ", "~", "'", "%", "&", "é", "\u2028"])
def test_allowed_unusual_key_chars(table: TableClient, char: str) -> None:
    table.create_entity({"PartitionKey": f"a{char}b", "RowKey": f"c{char}d"})
    assert table.get_entity(f"a{char}b", f"c{char}d")["RowKey"] == f"c{char}d"


URL_KEY_CASES = [
    ("%2F", 400, "InvalidInput"),
    ("%5C", 400, "InvalidInput"),
    ("%23", 400, "OutOfRangeInput"),
    ("%3F", 400, "OutOfRangeInput"),
    ("%01", 400, None),
    ("%1F", 400, None),
    ("%7F", 400, None),
]


@pytest.mark.parametrize(("encoded", "status", "code"), URL_KEY_CASES)
@pytest.mark.parametrize("method", ["GET", "PUT", "MERGE", "DELETE"])
def test_forbidden_key_chars_in_url(
    raw: RawClient, table: TableClient, encoded: str, status: int, code: str | None, method: str
) -> None:
    body = {"a": 1} if method in ("PUT", "MERGE") else None
    headers: dict[str, str | None] = {"If-Match": "*"} if method == "DELETE" else {}
    for target in (f"(PartitionKey='a{encoded}b',RowKey='r')", f"(PartitionKey='p',RowKey='a{encoded}b')"):
        response = raw.request(method, table.table_name + target, body, headers)
        if code is None:
            assert response.status == status, response
        else:
            assert_error(response, status, code)
    assert list(table.list_entities()) == []


@pytest.mark.parametrize(
    ("char", "code"), [("/", "InvalidInput"), ("\\", "InvalidInput"), ("#", "OutOfRangeInput")]
)
def test_forbidden_key_chars_through_sdk_url(table: TableClient, char: str, code: str) -> None:
    with pytest.raises(HttpResponseError) as info:
        table.get_entity(f"a{char}b", "r")
    assert _sdk_error(info) == (400, code)
    with pytest.raises(HttpResponseError) as info:
        table.delete_entity(f"a{char}b", "r")
    assert _sdk_error(info) == (400, code)
    # Upserts carry the key in the URL and in the body; either rule may report it.
    with pytest.raises(HttpResponseError) as info:
        table.upsert_entity({"PartitionKey": f"a{char}b", "RowKey": "r"})
    assert info.value.status_code == 400
    assert sdk_error_code(info.value) in (code, "OutOfRangeInput")
    assert list(table.list_entities()) == []


@pytest.mark.parametrize(
    "entity",
    [{"RowKey": "r"}, {"PartitionKey": "p"}, {}],
    ids=["no-pk", "no-rk", "no-keys"],
)
def test_missing_keys(raw: RawClient, table: TableClient, entity: dict[str, Any]) -> None:
    response = raw.insert(table.table_name, {**entity, "a": 1})
    assert_error(response, 400, "PropertiesNeedValue", NEEDS_VALUE)
    with pytest.raises(ValueError):
        table.create_entity({**entity, "a": 1})


@pytest.mark.parametrize(
    "body",
    [
        b'{"PartitionKey":5,"RowKey":"r"}',
        b'{"PartitionKey":"p","RowKey":null}',
        b'{"PartitionKey":"p","RowKey":true}',
        b'{"PartitionKey":["p"],"RowKey":"r"}',
    ],
)
def test_non_string_keys(raw: RawClient, table: TableClient, body: bytes) -> None:
    response = _insert_bytes(raw, table, body)
    assert response.status == 400, response
    assert response.error_code in ("PropertiesNeedValue", "InvalidInput"), response


# ------------------------------------------------------------------------------------------
# Value ranges and types
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", ["1600-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "1601-01-01T00:00:00+00:01"]
)
def test_datetime_out_of_range(raw: RawClient, table: TableClient, value: str) -> None:
    response = _insert(raw, table, {"d": value, "d@odata.type": "Edm.DateTime"})
    assert_error(response, 400, "OutOfRangeInput", "The 'd' parameter of value ")


@pytest.mark.parametrize("value", ["1601-01-01T00:00:00Z", "9999-12-31T23:59:59.9999999Z"])
def test_datetime_bounds_accepted(raw: RawClient, table: TableClient, value: str) -> None:
    response = _insert(raw, table, {"d": value, "d@odata.type": "Edm.DateTime"})
    assert response.status == 201, response


@pytest.mark.parametrize(
    "fragment",
    [
        b'"v":2147483648,"v@odata.type":"Edm.Int32"',
        b'"v":-2147483649,"v@odata.type":"Edm.Int32"',
        b'"v":"9223372036854775808","v@odata.type":"Edm.Int64"',
        b'"v":"-9223372036854775809","v@odata.type":"Edm.Int64"',
        b'"v":9223372036854775808,"v@odata.type":"Edm.Int64"',
        b'"v":1.7976931348623159e308,"v@odata.type":"Edm.Double"',
        b'"v":1.7976931348623159e308',
        b'"v":-1.7976931348623159e308',
        b'"v":"1.7976931348623159e308","v@odata.type":"Edm.Double"',
        b'"v":1e400',
    ],
)
def test_numeric_overflow_is_invalid_input(raw: RawClient, table: TableClient, fragment: bytes) -> None:
    response = _insert_bytes(raw, table, b'{"PartitionKey":"p","RowKey":"r",' + fragment + b"}")
    assert_error(response, 400, "InvalidInput")


def test_largest_double_is_accepted(raw: RawClient, table: TableClient) -> None:
    body = b'{"PartitionKey":"p","RowKey":"r","v":1.797693134862315e308,"w":1.7976931348623157e308}'
    response = _insert_bytes(raw, table, body)
    assert response.status == 201, response
    stored = table.get_entity("p", "r")
    assert stored["v"] == 1.797693134862315e308
    assert stored["w"] == 1.7976931348623157e308


@pytest.mark.parametrize(
    "edm_type", ["Edm.Decimal", "Edm.Single", "Edm.DateTimeOffset", "Edm.Byte", "Edm.Foo", ""]
)
def test_unknown_odata_type(raw: RawClient, table: TableClient, edm_type: str) -> None:
    response = _insert(raw, table, {"v": "1", "v@odata.type": edm_type})
    assert_error(response, 400, "InvalidInput")


@pytest.mark.parametrize(
    "prop",
    [
        {"v": "not-a-guid", "v@odata.type": "Edm.Guid"},
        {"v": "!!!not base64!!!", "v@odata.type": "Edm.Binary"},
        {"v": "yesterday", "v@odata.type": "Edm.DateTime"},
        {"v": "abc", "v@odata.type": "Edm.Int64"},
        {"v": "12.5", "v@odata.type": "Edm.Int64"},
        {"v": 1.5, "v@odata.type": "Edm.Int32"},
        {"v": "abc", "v@odata.type": "Edm.Double"},
        {"v": {"nested": 1}},
        {"v": [1, 2]},
        {"v": 5, "v@odata.type": "Edm.String"},
        {"v@odata.type": "Edm.Int64"},
    ],
    ids=lambda p: json.dumps(p)[:50],
)
def test_unparseable_values_are_invalid_input(
    raw: RawClient, table: TableClient, prop: dict[str, Any]
) -> None:
    assert_error(_insert(raw, table, prop), 400, "InvalidInput")


@pytest.mark.parametrize(
    "body", [b'{"PartitionKey": "p",', b"{'PartitionKey': 'p'}", b"", b"\xff\xfe{}", b"NaN"], ids=repr
)
def test_malformed_json_is_invalid_input(raw: RawClient, table: TableClient, body: bytes) -> None:
    assert_error(_insert_bytes(raw, table, body), 400, "InvalidInput")
    response = raw.request("PUT", table.table_name + py_keys("p", "r"), body)
    assert_error(response, 400, "InvalidInput")


@pytest.mark.parametrize(
    "body", [b"[]", b'"text"', b"1", b"null", b"true", b'[{"PartitionKey":"p","RowKey":"r"}]']
)
def test_non_object_json_is_invalid_input(raw: RawClient, table: TableClient, body: bytes) -> None:
    assert_error(_insert_bytes(raw, table, body), 400, "InvalidInput")
    response = raw.request("MERGE", table.table_name + py_keys("p", "r"), body, {"If-Match": "*"})
    assert response.status == 400, response
    assert list(table.list_entities()) == []
