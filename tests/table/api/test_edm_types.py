"""Edm types: exact round trips through the SDK, and the wire form of responses."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import math
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from azure.data.tables import EdmType, EntityProperty, TableClient
from azure.data.tables.aio import TableClient as AsyncTableClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.rawhttp import (
    JSON_FULL,
    JSON_NOMETADATA,
    RawClient,
    parse_edm_datetime,
    py_keys,
)
from tests.serverproc import ServerProcess

_rows = itertools.count()

ROUND_TRIP_CASES: list[tuple[str, Any]] = [
    ("str_plain", "hello"),
    ("str_empty", ""),
    ("str_unicode", "ünïcödé 中文"),
    ("str_astral", "emoji 😀 and 𝄞"),
    ("str_controls", "line\nbreak\ttab\x01\x1f\x7f"),
    ("str_nul", "nul\x00inside"),
    ("str_quotes", 'it\'s "quoted" \\ back'),
    ("bool_true", True),
    ("bool_false", False),
    ("int32_zero", 0),
    ("int32_min", -(2**31)),
    ("int32_max", 2**31 - 1),
    ("int64_min", EntityProperty(-(2**63), EdmType.INT64)),
    ("int64_max", EntityProperty(2**63 - 1, EdmType.INT64)),
    ("int64_small", EntityProperty(5, EdmType.INT64)),
    ("int64_beyond_double", EntityProperty(2**53 + 1, EdmType.INT64)),
    ("float_half", 0.5),
    ("float_third", 1 / 3),
    ("float_tenth", 0.1),
    ("float_neg", -1.25),
    ("float_integral", 5.0),
    ("float_zero", 0.0),
    ("float_neg_zero", -0.0),
    ("float_big_integral", 1e16),
    ("float_huge", 1e300),
    ("float_max", 1.7976931348623157e308),
    ("float_min_normal", 2.2250738585072014e-308),
    ("float_denormal", 5e-324),
    ("float_nan", math.nan),
    ("float_inf", math.inf),
    ("float_neg_inf", -math.inf),
    ("datetime_micro", datetime(2020, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)),
    ("datetime_whole", datetime(2021, 6, 9, 16, 21, 44, tzinfo=UTC)),
    ("datetime_offset", datetime(2020, 1, 1, 2, 0, 0, tzinfo=timezone(timedelta(hours=2)))),
    ("datetime_min", datetime(1601, 1, 1, tzinfo=UTC)),
    ("datetime_max", datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)),
    ("guid_random", uuid.UUID("c9da6455-213d-42c9-9a79-3e9149a57833")),
    ("guid_zero", uuid.UUID(int=0)),
    ("guid_max", uuid.UUID(int=2**128 - 1)),
    ("bytes_empty", b""),
    ("bytes_small", b"\x00\xff\x10"),
    ("bytes_64k", bytes(range(256)) * 256),
]


def assert_same_value(expected: Any, actual: Any) -> None:
    """``actual`` (read back through the SDK) is exactly ``expected`` (what was written)."""
    if isinstance(expected, EntityProperty):
        assert isinstance(actual, EntityProperty), (expected, actual)
        assert actual.edm_type == expected.edm_type
        assert type(actual.value) is type(expected.value)
        assert actual.value == expected.value
    elif isinstance(expected, bool):
        assert actual is expected
    elif isinstance(expected, int):
        assert type(actual) is int, (expected, actual)
        assert actual == expected
    elif isinstance(expected, float):
        assert type(actual) is float, (expected, actual)
        if math.isnan(expected):
            assert math.isnan(actual)
        else:
            assert actual == expected
            assert math.copysign(1.0, actual) == math.copysign(1.0, expected)
    elif isinstance(expected, datetime):
        assert isinstance(actual, datetime), (expected, actual)
        assert actual.tzinfo is not None
        assert actual == expected
    elif isinstance(expected, uuid.UUID):
        assert actual == expected
    elif isinstance(expected, bytes):
        assert type(actual) is bytes, (expected, actual)
        assert actual == expected
    else:
        assert type(actual) is type(expected), (expected, actual)
        assert actual == expected


def _user_props(entity: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entity.items() if k not in ("PartitionKey", "RowKey")}


def _roundtrip(table: TableClient, props: dict[str, Any]) -> dict[str, Any]:
    rk = f"r{next(_rows)}"
    table.create_entity({"PartitionKey": "p", "RowKey": rk, **props})
    return _user_props(dict(table.get_entity("p", rk)))


@pytest.mark.parametrize(("name", "value"), ROUND_TRIP_CASES, ids=[c[0] for c in ROUND_TRIP_CASES])
def test_round_trip_sync(table: TableClient, name: str, value: Any) -> None:
    got = _roundtrip(table, {"v": value})
    assert set(got) == {"v"}
    assert_same_value(value, got["v"])
    # Also through a query (a different response shape) and after a replace.
    rk = f"r{next(_rows)}"
    table.upsert_entity({"PartitionKey": "q", "RowKey": rk, "v": value})
    listed = list(table.query_entities("PartitionKey eq 'q' and RowKey eq @rk", parameters={"rk": rk}))
    assert len(listed) == 1
    assert_same_value(value, listed[0]["v"])


def test_round_trip_all_types_in_one_entity(table: TableClient) -> None:
    props = {f"p_{name}": value for name, value in ROUND_TRIP_CASES if name != "bytes_64k"}
    got = _roundtrip(table, props)
    assert set(got) == set(props)
    for key, value in props.items():
        assert_same_value(value, got[key])


def test_round_trip_async(server: ServerProcess, table: TableClient) -> None:
    props = {f"p_{name}": value for name, value in ROUND_TRIP_CASES}

    async def run() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        async with AsyncTableClient.from_connection_string(
            server.connection_string, table_name=table.table_name
        ) as client:
            await client.create_entity({"PartitionKey": "a", "RowKey": "1", **props})
            got = await client.get_entity("a", "1")
            listed = [e async for e in client.query_entities("PartitionKey eq @pk", parameters={"pk": "a"})]
            return dict(got), [dict(e) for e in listed]

    got, listed = asyncio.run(run())
    assert len(listed) == 1
    for entity in (_user_props(got), _user_props(listed[0])):
        assert set(entity) == set(props)
        for key, value in props.items():
            assert_same_value(value, entity[key])


def test_datetime_keeps_100ns_precision(raw: RawClient, table: TableClient) -> None:
    name = table.table_name
    body = {
        "PartitionKey": "p",
        "RowKey": "ticks",
        "when": "2020-01-02T03:04:05.1234567Z",
        "when@odata.type": "Edm.DateTime",
        "late": "9999-12-31T23:59:59.9999999Z",
        "late@odata.type": "Edm.DateTime",
    }
    assert raw.insert(name, body).status == 201
    entity = table.get_entity("p", "ticks")
    when = entity["when"]
    assert when == datetime(2020, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
    assert parse_edm_datetime(when.tables_service_value) == parse_edm_datetime("2020-01-02T03:04:05.1234567Z")

    # Writing the SDK's own TablesEntityDatetime back keeps the seventh digit.
    copy = dict(entity)
    copy["RowKey"] = "copy"
    table.create_entity(copy)
    response = raw.get_entity(name, "p", "copy")
    stored = response.json()
    assert parse_edm_datetime(stored["when"]) == parse_edm_datetime("2020-01-02T03:04:05.1234567Z")
    assert parse_edm_datetime(stored["late"]) == parse_edm_datetime("9999-12-31T23:59:59.9999999Z")


@pytest.mark.parametrize(
    ("sent", "expected"),
    [
        ("2020-01-01T00:00:00Z", "2020-01-01T00:00:00Z"),
        ("2020-01-01T00:00:00.5Z", "2020-01-01T00:00:00.5Z"),
        ("2020-01-01T00:00:00.123Z", "2020-01-01T00:00:00.123Z"),
        ("2020-01-01T00:00:00.000000Z", "2020-01-01T00:00:00Z"),
        ("2020-01-01T02:00:00+02:00", "2020-01-01T00:00:00Z"),
        ("2020-01-01T02:30:00.25+02:30", "2020-01-01T00:00:00.25Z"),
        ("2019-12-31T19:00:00-05:00", "2020-01-01T00:00:00Z"),
    ],
)
def test_datetime_inputs_are_normalised_to_utc(
    raw: RawClient, table: TableClient, sent: str, expected: str
) -> None:
    body = {"PartitionKey": "p", "RowKey": "r", "d": sent, "d@odata.type": "Edm.DateTime"}
    assert raw.insert(table.table_name, body).status == 201
    value = raw.get_entity(table.table_name, "p", "r").json()["d"]
    assert value.endswith("Z")
    assert parse_edm_datetime(value) == parse_edm_datetime(expected)


def test_timestamp_metadata_is_a_utc_datetime(table: TableClient) -> None:
    before = datetime.now(UTC) - timedelta(minutes=5)
    table.create_entity({"PartitionKey": "p", "RowKey": "r"})
    stamp = table.get_entity("p", "r").metadata["timestamp"]
    assert isinstance(stamp, datetime)
    assert stamp.tzinfo is not None
    assert before < stamp < datetime.now(UTC) + timedelta(minutes=5)


# ------------------------------------------------------------------------------------------
# Lenient request forms the server must accept
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prop", "expected"),
    [
        ({"v": 5, "v@odata.type": "Edm.Int64"}, EntityProperty(5, EdmType.INT64)),
        ({"v": 9007199254740993, "v@odata.type": "Edm.Int64"}, EntityProperty(2**53 + 1, EdmType.INT64)),
        ({"v": "-9223372036854775808", "v@odata.type": "Edm.Int64"}, EntityProperty(-(2**63), EdmType.INT64)),
        ({"v": 3000000000}, 3000000000.0),
        ({"v": -2147483649}, -2147483649.0),
        ({"v": 2147483647}, 2147483647),
        ({"v": 1.5}, 1.5),
        ({"v": 1e3}, 1000.0),
        ({"v": 7, "v@odata.type": "Edm.Int32"}, 7),
        ({"v": 7, "v@odata.type": "Edm.Double"}, 7.0),
        ({"v": "NaN", "v@odata.type": "Edm.Double"}, math.nan),
        ({"v": "Infinity", "v@odata.type": "Edm.Double"}, math.inf),
        ({"v": "-Infinity", "v@odata.type": "Edm.Double"}, -math.inf),
        ({"v": "2.5", "v@odata.type": "Edm.Double"}, 2.5),
        ({"v": True, "v@odata.type": "Edm.Boolean"}, True),
        ({"v": "s", "v@odata.type": "Edm.String"}, "s"),
        (
            {"v": "C9DA6455-213D-42C9-9A79-3E9149A57833", "v@odata.type": "Edm.Guid"},
            uuid.UUID("c9da6455-213d-42c9-9a79-3e9149a57833"),
        ),
        (
            {"v": "{c9da6455-213d-42c9-9a79-3e9149a57833}", "v@odata.type": "Edm.Guid"},
            uuid.UUID("c9da6455-213d-42c9-9a79-3e9149a57833"),
        ),
        ({"v": "AAEC", "v@odata.type": "Edm.Binary"}, b"\x00\x01\x02"),
    ],
    ids=lambda v: repr(v)[:40],
)
def test_request_value_forms(raw: RawClient, table: TableClient, prop: dict[str, Any], expected: Any) -> None:
    response = raw.insert(table.table_name, {"PartitionKey": "p", "RowKey": "r", **prop})
    assert response.status == 201, response
    assert_same_value(expected, table.get_entity("p", "r")["v"])


@pytest.mark.parametrize(
    "text", ["２０２４-01-01T00:00:00Z", "2024-01-01T00:00:00.１Z", "2024-01-01T00:00:00+０1:00"]
)
def test_a_datetime_with_digits_of_another_script_is_invalid_input(
    raw: RawClient, table: TableClient, text: str
) -> None:
    body = {"PartitionKey": "p", "RowKey": "r", "v": text, "v@odata.type": "Edm.DateTime"}
    response = raw.insert(table.table_name, body)
    assert response.status == 400 and response.error_code == "InvalidInput"
    assert list(table.list_entities()) == []


# ------------------------------------------------------------------------------------------
# Wire form of responses
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Num:
    """A JSON number as it appeared on the wire."""

    kind: str
    text: str


def _parse_literal(body: bytes) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(
        body, parse_int=lambda s: Num("int", s), parse_float=lambda s: Num("float", s)
    )
    return parsed


WIRE_ENTITY: dict[str, Any] = {
    "PartitionKey": "p",
    "RowKey": "r",
    "big": EntityProperty(5, EdmType.INT64),
    "huge": EntityProperty(2**63 - 1, EdmType.INT64),
    "d": 5.0,
    "frac": 1.5,
    "nan": math.nan,
    "flag": True,
    "off": False,
    "when": datetime(2020, 1, 1, 12, 30, tzinfo=UTC),
    "n": 7,
    "s": "text",
    "g": uuid.UUID("C9DA6455-213D-42C9-9A79-3E9149A57833"),
    "b": b"\x00\x01\x02",
}


def test_minimal_metadata_wire_form(raw: RawClient, server: ServerProcess, table: TableClient) -> None:
    table.create_entity(WIRE_ENTITY)
    response = raw.get_entity(table.table_name, "p", "r")
    assert response.status == 200, response
    body = _parse_literal(response.body)

    assert body["big@odata.type"] == "Edm.Int64"
    assert body["big"] == "5"
    assert body["huge@odata.type"] == "Edm.Int64"
    assert body["huge"] == str(2**63 - 1)

    d = body["d"]
    assert isinstance(d, Num) and d.kind == "float", d
    assert float(d.text) == 5.0
    assert "." in d.text or "e" in d.text.lower(), d.text
    assert body.get("d@odata.type", "Edm.Double") == "Edm.Double"
    assert body["frac"] == Num("float", "1.5")
    assert body["nan"] == "NaN"
    assert body["nan@odata.type"] == "Edm.Double"

    assert body["flag"] is True
    assert body["off"] is False
    assert "flag@odata.type" not in body
    assert "off@odata.type" not in body

    assert body["when@odata.type"] == "Edm.DateTime"
    assert body["when"].endswith("Z")
    assert parse_edm_datetime(body["when"]) == parse_edm_datetime("2020-01-01T12:30:00Z")

    assert body["n"] == Num("int", "7")
    assert "n@odata.type" not in body
    assert body["s"] == "text"
    assert "s@odata.type" not in body

    assert body["g@odata.type"] == "Edm.Guid"
    assert uuid.UUID(body["g"]) == WIRE_ENTITY["g"]
    assert body["b@odata.type"] == "Edm.Binary"
    assert base64.b64decode(body["b"], validate=True) == b"\x00\x01\x02"

    assert body["Timestamp"].endswith("Z")
    assert "Timestamp@odata.type" not in body
    assert body["PartitionKey"] == "p"
    assert body["RowKey"] == "r"
    assert body["odata.metadata"] == f"{server.endpoint}/$metadata#{table.table_name}/@Element"
    assert "odata.type" not in body

    # Annotations precede their values.
    order = [k for k, _ in response.json_pairs()]
    for prop in ("big", "huge", "nan", "when", "g", "b"):
        assert order.index(f"{prop}@odata.type") < order.index(prop), order


def test_full_metadata_wire_form(raw: RawClient, server: ServerProcess, table: TableClient) -> None:
    table.create_entity(WIRE_ENTITY)
    name = table.table_name
    response = raw.get_entity(name, "p", "r", {"Accept": JSON_FULL})
    assert response.status == 200, response
    assert "odata=fullmetadata" in (response.header("Content-Type") or "")
    body = response.json()
    assert body["odata.type"] == f"devstoreaccount1.{name}"
    assert body["odata.id"] == f"{server.endpoint}/{name}(PartitionKey='p',RowKey='r')"
    assert body["odata.editLink"] == f"{name}(PartitionKey='p',RowKey='r')"
    assert body["odata.etag"] == response.header("ETag")
    assert body["Timestamp@odata.type"] == "Edm.DateTime"
    assert body["big@odata.type"] == "Edm.Int64"
    assert body["big"] == "5"
    assert "flag@odata.type" not in body

    # The SDK itself can consume full metadata.
    with TableClient.from_connection_string(server.connection_string, table_name=name) as client:
        got = client.get_entity("p", "r", headers={"Accept": JSON_FULL})
        assert_same_value(WIRE_ENTITY["big"], got["big"])
        assert got["flag"] is True


def test_no_metadata_wire_form(raw: RawClient, table: TableClient) -> None:
    table.create_entity(WIRE_ENTITY)
    response = raw.get_entity(table.table_name, "p", "r", {"Accept": JSON_NOMETADATA})
    assert response.status == 200, response
    assert "odata=nometadata" in (response.header("Content-Type") or "")
    body = response.json()
    assert not [k for k in body if k.startswith("odata.") or "@odata." in k]
    assert body["big"] == "5"
    assert body["flag"] is True
    assert body["when"].endswith("Z")
    assert body["Timestamp"].endswith("Z")
    assert response.header("ETag")

    listed = raw.request("GET", table.table_name + "()", headers={"Accept": JSON_NOMETADATA})
    assert set(listed.json()) == {"value"}
    assert not [k for k in listed.json()["value"][0] if k.startswith("odata.") or "@odata." in k]


def test_query_response_wire_form(raw: RawClient, server: ServerProcess, table: TableClient) -> None:
    table.create_entity(WIRE_ENTITY)
    response = raw.request("GET", table.table_name + "()")
    assert response.status == 200, response
    body = response.json()
    assert body["odata.metadata"] == f"{server.endpoint}/$metadata#{table.table_name}"
    [entity] = body["value"]
    assert entity["big"] == "5"
    assert entity["big@odata.type"] == "Edm.Int64"
    assert "flag@odata.type" not in entity
    assert entity["odata.etag"]
    single = raw.request("GET", table.table_name + py_keys("p", "r")).json()
    assert single["odata.etag"] == entity["odata.etag"]


# ------------------------------------------------------------------------------------------
# Property-based round trip
# ------------------------------------------------------------------------------------------

RESERVED = {"partitionkey", "rowkey", "timestamp"}

property_names = st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_]{0,30}\Z").filter(lambda n: n.lower() not in RESERVED)

property_values = st.one_of(
    st.text(max_size=40),
    st.booleans(),
    st.integers(min_value=-(2**31), max_value=2**31 - 1),
    st.integers(min_value=-(2**63), max_value=2**63 - 1).map(lambda v: EntityProperty(v, EdmType.INT64)),
    st.floats(allow_nan=True, allow_infinity=True),
    st.datetimes(
        min_value=datetime(1601, 1, 1),
        max_value=datetime(9999, 12, 31, 23, 59, 59, 999999),
        timezones=st.just(UTC),
    ),
    st.uuids(),
    st.binary(max_size=64),
)

entities = st.lists(
    st.tuples(property_names, property_values), max_size=10, unique_by=lambda kv: kv[0].lower()
).map(dict)


@settings(
    max_examples=30,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(props=entities)
def test_random_entities_round_trip(table: TableClient, props: dict[str, Any]) -> None:
    got = _roundtrip(table, props)
    assert set(got) == set(props)
    for key, value in props.items():
        assert_same_value(value, got[key])
