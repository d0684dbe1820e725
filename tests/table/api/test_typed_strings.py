"""Typed values written as JSON strings, and annotations of annotations.

Azure reads ``"Data1": "12345", "Data1@odata.type": "Edm.Int32"`` as the Int32 12345 (recorded:
azure-data-tables' encoder tests against real Azure return ``"Data1": 12345``), likewise
``"3.14"`` as a Double and ``"False"`` as a Boolean, on every write. azure-data-tables 12.x sends
exactly such bodies for a dict that already carries ``@odata.type`` members, and adds an annotation
to each annotation (``"Data1@odata.type@odata.type": "Edm.String"``), which the service ignores.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from typing import Any

import pytest
from azure.data.tables import EdmType, EntityProperty, TableClient, UpdateMode
from azure.data.tables.aio import TableClient as AsyncTableClient

from tests.rawhttp import JSON_NOMETADATA, RawClient, assert_error, py_keys
from tests.serverproc import ServerProcess

# What a user hands the SDK when the types came from elsewhere (an export, another store): the
# SDK sends every value as a string with its annotation, and annotates each annotation again.
ANNOTATED: dict[str, Any] = {
    "PartitionKey": "p",
    "PartitionKey@odata.type": "Edm.String",
    "Data1": "12345",
    "Data1@odata.type": "Edm.Int32",
    "Data2": "False",
    "Data2@odata.type": "Edm.Boolean",
    "Data3": "3.14",
    "Data3@odata.type": "Edm.Double",
    "Data4": "1152921504606846976",
    "Data4@odata.type": "Edm.Int64",
    "Data5": "8845475a-38ee-4531-b777-3ea048090fbc",
    "Data5@odata.type": "Edm.Guid",
    "Data6": "NaN",
    "Data6@odata.type": "Edm.Double",
}
# How Azure answers the entity back in minimal metadata (the recorded form).
STORED_WIRE: dict[str, Any] = {
    "Data1": 12345,
    "Data2": False,
    "Data3": 3.14,
    "Data4@odata.type": "Edm.Int64",
    "Data4": "1152921504606846976",
    "Data5@odata.type": "Edm.Guid",
    "Data5": "8845475a-38ee-4531-b777-3ea048090fbc",
    "Data6@odata.type": "Edm.Double",
    "Data6": "NaN",
}


def _wire(raw: RawClient, table: str, rk: str) -> dict[str, Any]:
    response = raw.get_entity(table, "p", rk)
    assert response.status == 200, response
    system = {"odata.metadata", "odata.etag", "PartitionKey", "RowKey", "Timestamp", "Timestamp@odata.type"}
    return {name: value for name, value in response.json().items() if name not in system}


def _assert_stored(raw: RawClient, table: str, rk: str) -> None:
    assert _wire(raw, table, rk) == STORED_WIRE


def _entity(rk: str) -> dict[str, Any]:
    return {**ANNOTATED, "RowKey": rk, "RowKey@odata.type": "Edm.String"}


def test_sdk_sends_annotations_of_annotations() -> None:
    """The premise, checked on the installed SDK: it annotates every annotation."""
    from azure.data.tables._serialize import _add_entity_properties

    sent = _add_entity_properties(_entity("r"))
    assert sent["Data1"] == "12345" and sent["Data1@odata.type"] == "Edm.Int32"
    assert sent["Data1@odata.type@odata.type"] == "Edm.String"


def test_every_single_write_of_the_sdk(raw: RawClient, table: TableClient) -> None:
    table.create_entity(_entity("create"))
    _assert_stored(raw, table.table_name, "create")
    table.upsert_entity(_entity("upsert-merge"), mode=UpdateMode.MERGE)
    _assert_stored(raw, table.table_name, "upsert-merge")
    table.upsert_entity(_entity("upsert-replace"), mode=UpdateMode.REPLACE)
    _assert_stored(raw, table.table_name, "upsert-replace")
    for mode in (UpdateMode.MERGE, UpdateMode.REPLACE):
        rk = f"update-{mode.value}"
        table.create_entity({"PartitionKey": "p", "RowKey": rk, "Data1": 0})
        table.update_entity(_entity(rk), mode=mode)
        _assert_stored(raw, table.table_name, rk)
    got = table.get_entity("p", "create")
    assert got["Data1"] == 12345 and got["Data2"] is False and got["Data3"] == 3.14
    assert got["Data4"] == EntityProperty(1152921504606846976, EdmType.INT64)
    assert got["Data5"] == uuid.UUID("8845475a-38ee-4531-b777-3ea048090fbc")
    assert math.isnan(got["Data6"])


def test_every_write_in_a_batch(raw: RawClient, table: TableClient) -> None:
    table.create_entity({"PartitionKey": "p", "RowKey": "u1"})
    table.create_entity({"PartitionKey": "p", "RowKey": "u2"})
    table.submit_transaction(
        [
            ("create", _entity("b-create")),
            ("upsert", _entity("b-upsert-merge"), {"mode": UpdateMode.MERGE}),
            ("upsert", _entity("b-upsert-replace"), {"mode": UpdateMode.REPLACE}),
            ("update", _entity("u1"), {"mode": UpdateMode.MERGE}),
            ("update", _entity("u2"), {"mode": UpdateMode.REPLACE}),
        ]
    )
    for rk in ("b-create", "b-upsert-merge", "b-upsert-replace", "u1", "u2"):
        _assert_stored(raw, table.table_name, rk)


def test_async_writes(server: ServerProcess, raw: RawClient, table: TableClient) -> None:
    async def run() -> None:
        async with AsyncTableClient.from_connection_string(
            server.connection_string, table.table_name
        ) as client:
            await client.create_entity(_entity("a-create"))
            await client.upsert_entity(_entity("a-upsert"), mode=UpdateMode.MERGE)
            await client.submit_transaction([("create", _entity("a-batch"))])

    asyncio.run(run())
    for rk in ("a-create", "a-upsert", "a-batch"):
        _assert_stored(raw, table.table_name, rk)


# The string forms each type accepts (.NET parsing, invariant culture), and the value stored.
ACCEPTED: list[tuple[str, str, Any]] = [
    ("Edm.Int32", "12345", 12345),
    ("Edm.Int32", " -12 ", -12),
    ("Edm.Int32", "+007", 7),
    ("Edm.Int32", "2147483647", 2147483647),
    ("Edm.Int32", "-2147483648", -2147483648),
    ("Edm.Int64", "-9223372036854775808", EntityProperty(-(2**63), EdmType.INT64)),
    ("Edm.Int64", "\t42\n", EntityProperty(42, EdmType.INT64)),
    ("Edm.Double", "3.14", 3.14),
    ("Edm.Double", "-1.5e3", -1500.0),
    ("Edm.Double", "1,000.5", 1000.5),
    ("Edm.Double", ".5", 0.5),
    ("Edm.Double", "5.", 5.0),
    ("Edm.Double", " 2 ", 2.0),
    ("Edm.Double", "Infinity", math.inf),
    ("Edm.Double", "-Infinity", -math.inf),
    ("Edm.Boolean", "False", False),
    ("Edm.Boolean", "TRUE", True),
    ("Edm.Boolean", " true ", True),
    ("Edm.Guid", "8845475A38EE4531B7773EA048090FBC", uuid.UUID("8845475a-38ee-4531-b777-3ea048090fbc")),
    ("Edm.Guid", "(8845475a-38ee-4531-b777-3ea048090fbc)", uuid.UUID("8845475a-38ee-4531-b777-3ea048090fbc")),
    ("Edm.Binary", "AAEC\r\nAw==", b"\x00\x01\x02\x03"),
]


@pytest.mark.parametrize(("edm_type", "text", "expected"), ACCEPTED, ids=lambda v: repr(v)[:30])
def test_accepted_string_forms(
    raw: RawClient, table: TableClient, edm_type: str, text: str, expected: Any
) -> None:
    body = {"PartitionKey": "p", "RowKey": "r", "v": text, "v@odata.type": edm_type}
    response = raw.insert(table.table_name, body, {"Content-Type": JSON_NOMETADATA})
    assert response.status == 201, response
    stored = table.get_entity("p", "r")["v"]
    if isinstance(expected, float) and math.isinf(expected):
        assert stored == expected
    else:
        assert stored == expected and type(stored) is type(expected)


def test_accepted_forms_are_answered_in_canonical_form(raw: RawClient, table: TableClient) -> None:
    body = {
        "PartitionKey": "p",
        "RowKey": "r",
        "i": " 12 ",
        "i@odata.type": "Edm.Int32",
        "d": "1,000.5",
        "d@odata.type": "Edm.Double",
        "b": "FALSE",
        "b@odata.type": "Edm.Boolean",
        "g": "{8845475A-38EE-4531-B777-3EA048090FBC}",
        "g@odata.type": "Edm.Guid",
    }
    assert raw.insert(table.table_name, body).status == 201
    assert _wire(raw, table.table_name, "r") == {
        "i": 12,
        "d": 1000.5,
        "b": False,
        "g@odata.type": "Edm.Guid",
        "g": "8845475a-38ee-4531-b777-3ea048090fbc",
    }


REFUSED: list[tuple[str, str]] = [
    ("Edm.Int32", "0x1F"),
    ("Edm.Int32", "1,000"),
    ("Edm.Int32", "1.0"),
    ("Edm.Int32", "2147483648"),
    ("Edm.Int32", ""),
    ("Edm.Int64", "9223372036854775808"),
    ("Edm.Double", "1_000"),
    ("Edm.Double", "inf"),
    ("Edm.Double", "INF"),
    ("Edm.Double", "nan"),
    ("Edm.Double", "0x10"),
    ("Edm.Double", "1e400"),
    ("Edm.Double", "."),
    ("Edm.Boolean", "1"),
    ("Edm.Boolean", "yes"),
    ("Edm.Guid", "{8845475a-38ee-4531-b777-3ea048090fbc"),
]


@pytest.mark.parametrize(("edm_type", "text"), REFUSED, ids=repr)
def test_refused_string_forms(raw: RawClient, table: TableClient, edm_type: str, text: str) -> None:
    body = {"PartitionKey": "p", "RowKey": "r", "v": text, "v@odata.type": edm_type}
    assert_error(raw.insert(table.table_name, body), 400, "InvalidInput", "An error occurred")
    merge = raw.request("MERGE", table.table_name + py_keys("p", "r"), {"v": text, "v@odata.type": edm_type})
    assert_error(merge, 400, "InvalidInput")


def test_annotation_of_an_annotation_is_ignored_on_every_write(raw: RawClient, table: TableClient) -> None:
    body = {
        "PartitionKey": "p",
        "RowKey": "r",
        "X": "7",
        "X@odata.type": "Edm.Int64",
        "X@odata.type@odata.type": "Edm.String",
        "RowKey@odata.type@odata.type": "Edm.Whatever",
    }
    assert raw.insert(table.table_name, body).status == 201
    assert _wire(raw, table.table_name, "r") == {"X@odata.type": "Edm.Int64", "X": "7"}
    for method in ("PUT", "MERGE"):
        response = raw.request(method, table.table_name + py_keys("p", "r"), body, {"If-Match": "*"})
        assert response.status == 204, response
    assert _wire(raw, table.table_name, "r") == {"X@odata.type": "Edm.Int64", "X": "7"}
