"""Query Entities and Query Tables through the official Python SDK, sync and aio.

Covers ``query_entities`` with ``parameters`` of every type the SDK substitutes, every literal
form of the grammar, the evaluation rules (literal on the left, bare booleans, ``not``, missing
properties, type mismatch and widening, UTF-16 ordinal order), ``select`` (including a property
the entity lacks), and paging across thousands of rows.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from urllib.parse import quote

import pytest
from azure.core.exceptions import HttpResponseError
from azure.data.tables import EdmType, EntityProperty, TableClient, TableServiceClient
from azure.data.tables.aio import TableClient as AioTableClient
from azure.data.tables.aio import TableServiceClient as AioTableServiceClient

from tests.rawhttp import RawClient
from tests.serverproc import ServerProcess

ID_1 = uuid.UUID("c9da6455-213d-42c9-9a79-3e9149a57833")
ID_2 = uuid.UUID("00000000-0000-0000-0000-0000000000ff")
WHEN_1 = datetime(2020, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
WHEN_2 = datetime(1999, 12, 31, 23, 59, 59, tzinfo=UTC)


def utf16(text: str) -> bytes:
    return text.encode("utf-16-be", "surrogatepass")


# The three rows every evaluation test queries. Row "3" lacks most properties.
ROWS: list[dict[str, Any]] = [
    {
        "PartitionKey": "p",
        "RowKey": "1",
        "name": "O'Brien",
        "flag": True,
        "n": 7,
        "big": EntityProperty(2**40, EdmType.INT64),
        "small64": EntityProperty(5, EdmType.INT64),
        "x": 1.5,
        "dbl": 5.0,
        "when": WHEN_1,
        "id": ID_1,
        "blob": b"\x00\x01\xff",
    },
    {
        "PartitionKey": "p",
        "RowKey": "2",
        "name": "it''s",
        "flag": False,
        "n": -7,
        "big": EntityProperty(-(2**40), EdmType.INT64),
        "small64": EntityProperty(-5, EdmType.INT64),
        "x": 1e300,
        "dbl": 2.5,
        "when": WHEN_2,
        "id": ID_2,
        "blob": b"",
    },
    {"PartitionKey": "q", "RowKey": "3", "name": "plain", "flag": True},
]


@pytest.fixture(scope="module")
def rows(server: ServerProcess) -> Iterator[TableClient]:
    """A table holding ``ROWS`` (read-only for the tests of this module)."""
    name = f"qsdkrows{os.getpid()}"
    with TableServiceClient.from_connection_string(server.connection_string) as service:
        client = service.create_table(name)
        for row in ROWS:
            client.create_entity(row)
        yield client
        client.close()
        service.delete_table(name)


def row_keys(client: TableClient, query_filter: str, **kwargs: Any) -> list[str]:
    return [entity["RowKey"] for entity in client.query_entities(query_filter, **kwargs)]


# ------------------------------------------------------------------------------- parameters

PARAMETER_CASES = [
    ("name eq @v", {"v": "O'Brien"}, ["1"]),
    ("name eq @v", {"v": "it''s"}, ["2"]),
    ("name eq @v", {"v": "O'Brien "}, []),
    ("flag eq @v", {"v": True}, ["1", "3"]),
    ("flag eq @v", {"v": False}, ["2"]),
    ("n eq @v", {"v": 7}, ["1"]),
    ("n lt @v", {"v": 0}, ["2"]),
    ("n ge @lo and n le @hi", {"lo": -7, "hi": 7}, ["1", "2"]),
    ("big eq @v", {"v": 2**40}, ["1"]),
    ("big lt @v", {"v": -(2**39)}, ["2"]),
    ("big gt @v", {"v": 2**33}, ["1"]),
    ("small64 eq @v", {"v": 5}, ["1"]),  # Int32 literal widened to the Int64 property
    ("dbl eq @v", {"v": 5}, ["1"]),  # Int32 literal widened to the Double property
    ("dbl eq @v", {"v": 5.0}, ["1"]),
    ("x eq @v", {"v": 1.5}, ["1"]),
    ("x eq @v", {"v": 1e300}, ["2"]),
    ("x gt @v", {"v": 1e-05}, ["1", "2"]),
    ("when eq @v", {"v": WHEN_1}, ["1"]),
    ("when eq @v", {"v": WHEN_1.astimezone(timezone(timedelta(hours=5)))}, ["1"]),
    ("when lt @v", {"v": datetime(2000, 1, 1, tzinfo=UTC)}, ["2"]),
    ("id eq @v", {"v": ID_1}, ["1"]),
    ("id ne @v", {"v": ID_1}, ["2"]),
    ("blob eq @v", {"v": b"\x00\x01\xff"}, ["1"]),
    ("blob eq @v", {"v": b""}, ["2"]),
    ("blob gt @v", {"v": b"\x00"}, ["1"]),
    ("PartitionKey eq @pk and RowKey eq @rk", {"pk": "p", "rk": "2"}, ["2"]),
    ("PartitionKey eq @pk and flag eq @f", {"pk": "q", "f": True}, ["3"]),
]


@pytest.mark.parametrize(("query_filter", "parameters", "expected"), PARAMETER_CASES)
def test_query_entities_with_parameters(
    rows: TableClient, query_filter: str, parameters: dict[str, Any], expected: list[str]
) -> None:
    assert row_keys(rows, query_filter, parameters=parameters) == expected


def test_parameter_values_round_trip_with_select(rows: TableClient) -> None:
    entities = list(
        rows.query_entities(
            "n eq @n and name eq @name",
            parameters={"n": 7, "name": "O'Brien"},
            select=["name", "big", "when", "id", "blob", "x", "flag"],
        )
    )
    assert len(entities) == 1
    entity = entities[0]
    assert set(entity.keys()) == {"name", "big", "when", "id", "blob", "x", "flag"}
    assert entity["name"] == "O'Brien"
    assert entity["big"].value == 2**40 and entity["big"].edm_type == EdmType.INT64
    assert entity["when"] == WHEN_1
    assert entity["id"] == ID_1
    assert entity["blob"] == b"\x00\x01\xff"
    assert entity["x"] == 1.5 and entity["flag"] is True


def test_int_parameter_between_2_31_and_2_32_is_rejected(rows: TableClient) -> None:
    """The SDK sends 2**31..2**32-1 without ``L``; Azure rejects the Int32 literal."""
    with pytest.raises(HttpResponseError) as info:
        row_keys(rows, "n eq @v", parameters={"v": 2**31})
    assert info.value.status_code == 400


# ------------------------------------------------------------------------------- $select


def test_select_missing_property_is_null(rows: TableClient, raw: RawClient) -> None:
    entities = list(rows.query_entities("RowKey eq @rk", parameters={"rk": "3"}, select=["name", "n", "big"]))
    assert len(entities) == 1
    entity = entities[0]
    assert entity["name"] == "plain"
    assert entity.get("n") is None and entity.get("big") is None
    assert "PartitionKey" not in entity and "RowKey" not in entity
    assert entity.metadata["etag"]

    filter_text = quote("RowKey eq '3'", safe="")
    response = raw.request("GET", f"{rows.table_name}()?$filter={filter_text}&$select=name,n")
    assert response.status == 200, response
    (body,) = response.json()["value"]
    assert body["name"] == "plain"
    assert "n" in body and body["n"] is None  # "name":null, not omitted
    assert "odata.etag" in body
    assert "PartitionKey" not in body and "RowKey" not in body and "Timestamp" not in body


def test_select_system_properties(rows: TableClient) -> None:
    entities = list(rows.list_entities(select=["RowKey", "n"]))
    assert [dict(e) for e in entities] == [
        {"RowKey": "1", "n": 7},
        {"RowKey": "2", "n": -7},
        {"RowKey": "3", "n": None},
    ]


# -------------------------------------------------------------------------- literal forms

LITERAL_CASES = [
    ("when eq datetime'2020-01-02T03:04:05.678901Z'", ["1"]),
    ("when eq datetime'2020-01-02T03:04:05.6789010Z'", ["1"]),
    ("when eq datetime'2020-01-02T03:04:05.678901099Z'", ["1"]),  # beyond 100 ns: truncated
    ("when eq datetime'2020-01-02T04:04:05.678901+01:00'", ["1"]),  # normalised to UTC
    ("when eq datetime'2020-01-01T22:34:05.678901-04:30'", ["1"]),
    ("when eq datetime'1999-12-31T23:59:59Z'", ["2"]),
    ("when lt datetime'2000-01-01T00:00:00.000000Z'", ["2"]),
    ("when gt datetime'1999-12-31T23:59:59Z'", ["1"]),
    ("id eq guid'c9da6455-213d-42c9-9a79-3e9149a57833'", ["1"]),
    ("id eq guid'C9DA6455-213D-42C9-9A79-3E9149A57833'", ["1"]),
    ("id ne guid'C9DA6455-213D-42C9-9A79-3E9149A57833'", ["2"]),
    ("blob eq X'0001ff'", ["1"]),
    ("blob eq X'0001FF'", ["1"]),
    ("blob eq binary'0001fF'", ["1"]),
    ("blob eq X''", ["2"]),
    ("blob lt X'0002'", ["1", "2"]),
    ("blob gt X'0001'", ["1"]),
    ("big eq 1099511627776L", ["1"]),
    ("big eq 1099511627776l", ["1"]),
    ("big eq -1099511627776L", ["2"]),
    ("big gt 0L", ["1"]),
    ("small64 eq 5L", ["1"]),
    ("x eq 1.5", ["1"]),
    ("x eq 1.5d", ["1"]),
    ("x eq 1.5D", ["1"]),
    ("x eq 15E-1", ["1"]),
    ("x eq 0.15e1", ["1"]),
    ("x eq 1e300", ["2"]),
    ("x eq 1E+300", ["2"]),
    ("x lt 1.5000000001", ["1"]),
    ("dbl eq 5d", ["1"]),
    ("dbl eq 5.0", ["1"]),
    ("dbl eq 5L", ["1"]),  # Int64 literal widened to Double
    ("dbl eq 2.5 or dbl eq 5", ["1", "2"]),
    ("n eq -7", ["2"]),
    ("flag eq true", ["1", "3"]),
    ("flag eq false", ["2"]),
    ("flag ne true", ["2"]),
    ("flag gt false", ["1", "3"]),
    ("flag lt true", ["2"]),
    ("name eq 'O''Brien'", ["1"]),
    ("name eq 'it''''s'", ["2"]),
    ("name eq ''", []),
    ("name gt ''", ["1", "2", "3"]),
    ("true", ["1", "2", "3"]),
    ("false", []),
    ("PartitionKey eq 'p' and true", ["1", "2"]),
    ("PartitionKey eq 'p' and false", []),
]


@pytest.mark.parametrize(("query_filter", "expected"), LITERAL_CASES)
def test_literal_forms(rows: TableClient, query_filter: str, expected: list[str]) -> None:
    assert row_keys(rows, query_filter) == expected


# ----------------------------------------------------------------------- evaluation rules

EVALUATION_CASES = [
    # Literal on the left means the same as the property on the left with the operator flipped.
    ("7 eq n", ["1"]),
    ("0 gt n", ["2"]),
    ("0 lt n", ["1"]),
    ("-7 ge n", ["2"]),
    ("'O''Brien' eq name", ["1"]),
    ("'p' eq PartitionKey and '2' le RowKey", ["2"]),
    ("datetime'2000-01-01T00:00:00Z' gt when", ["2"]),
    ("X'0001ff' eq blob", ["1"]),
    ("2L lt big", ["1"]),
    # A bare boolean property is ``X eq true``; on a non-Boolean or missing property it is false.
    ("flag", ["1", "3"]),
    ("not flag", ["2"]),
    ("not (flag)", ["2"]),
    ("name", []),
    ("not name", ["1", "2", "3"]),
    ("nosuch", []),
    ("flag and n gt 0", ["1"]),
    ("flag or n lt 0", ["1", "2", "3"]),
    # not (...) negates the whole comparison, including a false one on a missing property.
    ("not (n eq 7)", ["2", "3"]),
    ("not(n eq 7)", ["2", "3"]),
    ("not (n ne 7)", ["1", "3"]),
    ("not (PartitionKey eq 'p' and n gt 0)", ["2", "3"]),
    ("not not (n eq 7)", ["1"]),
    ("not (not (n eq 7) or flag eq false)", ["1"]),
    # Missing properties: every comparison is false, ``ne`` included.
    ("n ne 7", ["2"]),
    ("n ne 0", ["1", "2"]),
    ("nosuch ne 1", []),
    ("nosuch ne 'x'", []),
    ("nosuch lt 'x'", []),
    ("nosuch le 1", []),
    ("n lt 100", ["1", "2"]),
    ("id ne guid'00000000-0000-0000-0000-000000000000'", ["1", "2"]),
    # null: ``X eq null`` is true when X is missing, ``X ne null`` when present.
    ("n eq null", ["3"]),
    ("n ne null", ["1", "2"]),
    ("null eq n", ["3"]),
    ("name ne null", ["1", "2", "3"]),
    # Type mismatch: eq/gt/ge false, ne/lt/le true (only where the property exists).
    ("n eq '7'", []),
    ("n gt '7'", []),
    ("n ge '7'", []),
    ("n ne '7'", ["1", "2"]),
    ("n lt '7'", ["1", "2"]),
    ("n le '7'", ["1", "2"]),
    ("'7' gt n", ["1", "2"]),  # = n lt '7'
    ("'7' lt n", []),  # = n gt '7'
    ("n eq 7.0", []),  # a Double literal is never narrowed to an Int32 property
    ("n ne 7.0", ["1", "2"]),
    ("n eq 7L", []),  # nor an Int64 literal
    ("n le 7L", ["1", "2"]),
    ("small64 eq 5.0", []),  # nor a Double literal to an Int64 property
    ("name eq guid'c9da6455-213d-42c9-9a79-3e9149a57833'", []),
    ("name ne guid'c9da6455-213d-42c9-9a79-3e9149a57833'", ["1", "2", "3"]),
    ("id eq 'c9da6455-213d-42c9-9a79-3e9149a57833'", []),
    ("id ne 'c9da6455-213d-42c9-9a79-3e9149a57833'", ["1", "2"]),
    ("when eq '2020-01-02T03:04:05.678901Z'", []),
    ("blob eq '0001ff'", []),
    ("flag eq 1", []),
    ("flag ne 1", ["1", "2", "3"]),
    ("big gt 'a'", []),
    ("big lt 'a'", ["1", "2"]),
    ("PartitionKey eq 1", []),
    ("PartitionKey ne 1", ["1", "2", "3"]),
    ("RowKey lt 1", ["1", "2", "3"]),
    ("RowKey ge 1", []),
    ("PartitionKey eq null", []),
    ("PartitionKey ne null", ["1", "2", "3"]),
    ("Timestamp gt datetime'2000-01-01T00:00:00Z'", ["1", "2", "3"]),
    ("Timestamp lt datetime'2000-01-01T00:00:00Z'", []),
    ("Timestamp eq 'x'", []),
    ("Timestamp ne 'x'", ["1", "2", "3"]),
    # Precedence: and binds tighter than or; parentheses group.
    ("n eq 7 or n eq -7 and flag", ["1"]),
    ("(n eq 7 or n eq -7) and flag eq false", ["2"]),
    ("PartitionKey eq 'q' or PartitionKey eq 'p' and RowKey eq '1'", ["1", "3"]),
]


@pytest.mark.parametrize(("query_filter", "expected"), EVALUATION_CASES)
def test_evaluation_rules(rows: TableClient, query_filter: str, expected: list[str]) -> None:
    assert row_keys(rows, query_filter) == expected


def test_timestamp_filters_as_a_datetime(rows: TableClient, raw: RawClient) -> None:
    """Timestamp is an ordinary DateTime; the emitted string filters exactly."""
    stamps = {e["RowKey"]: e["Timestamp"] for e in raw.request("GET", f"{rows.table_name}()").json()["value"]}
    for row_key, stamp in stamps.items():
        same = [k for k, v in stamps.items() if v == stamp]
        assert row_keys(rows, f"Timestamp eq datetime'{stamp}'") == same
        later = sorted(k for k, v in stamps.items() if parse_stamp(v) > parse_stamp(stamp))
        assert row_keys(rows, f"Timestamp gt datetime'{stamp}'") == later
        assert row_key not in row_keys(rows, f"datetime'{stamp}' lt Timestamp")


def parse_stamp(text: str) -> tuple[str, int]:
    whole, _, fraction = text.rstrip("Z").partition(".")
    return whole, int(fraction.ljust(7, "0"))


def test_whitespace_and_plus_as_space(rows: TableClient, raw: RawClient) -> None:
    """Several spaces separate tokens; ``+`` in a query string decodes to a space."""
    assert row_keys(rows, "  n   eq    7  ") == ["1"]
    response = raw.request("GET", f"{rows.table_name}()?$filter=n+eq+7")
    assert response.status == 200, response
    assert [e["RowKey"] for e in response.json()["value"]] == ["1"]


def test_long_filter_is_accepted(rows: TableClient) -> None:
    """Accept at least 32 KiB of URL (here about 30 KiB once percent-encoded)."""
    long_name = "O'" + "é" * 5000
    assert row_keys(rows, "name eq @v or name eq @w", parameters={"v": long_name, "w": "plain"}) == ["3"]


# ------------------------------------------------------------------- UTF-16 ordinal order

# In code-point order U+E000 and U+FFFD come before U+10000 and U+1F600; in UTF-16 the
# surrogate pairs (D800 DC00, D83D DE00) sort before U+E000.
UNICODE_KEYS = ["a", "B", "z", "é", "\ue000", "\ufffd", "\U0001f600", "\U00010000", "", "ab", "A"]
UTF16_ORDER = ["", "A", "B", "a", "ab", "z", "é", "\U00010000", "\U0001f600", "\ue000", "\ufffd"]


@pytest.fixture(scope="module")
def unicode_rows(server: ServerProcess) -> Iterator[TableClient]:
    name = f"qsdkutf{os.getpid()}"
    with TableServiceClient.from_connection_string(server.connection_string) as service:
        client = service.create_table(name)
        client.submit_transaction(
            [("create", {"PartitionKey": "u", "RowKey": k, "s": k}) for k in UNICODE_KEYS]
        )
        for k in UNICODE_KEYS:
            client.create_entity({"PartitionKey": k, "RowKey": "r", "s": k})
        yield client
        client.close()
        service.delete_table(name)


def test_utf16_order_is_assumed_correctly() -> None:
    assert sorted(UNICODE_KEYS, key=utf16) == UTF16_ORDER
    assert sorted(UNICODE_KEYS) != UTF16_ORDER  # code-point order differs


def test_keys_come_back_in_utf16_ordinal_order(unicode_rows: TableClient) -> None:
    listed = [(e["PartitionKey"], e["RowKey"]) for e in unicode_rows.list_entities()]
    expected = sorted(
        [("u", k) for k in UNICODE_KEYS] + [(k, "r") for k in UNICODE_KEYS],
        key=lambda key: (utf16(key[0]), utf16(key[1])),
    )
    assert listed == expected
    paged = [(e["PartitionKey"], e["RowKey"]) for e in unicode_rows.list_entities(results_per_page=3)]
    assert paged == expected


COMPARE = {
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
}


@pytest.mark.parametrize("literal", ["\ue000", "\U0001f600", "a", "", "é", "\uffff", "\U00010000"])
@pytest.mark.parametrize("prop", ["RowKey", "s"])
def test_string_comparisons_are_utf16_ordinal(unicode_rows: TableClient, literal: str, prop: str) -> None:
    """RowKey (planned as a key range) and a user property (evaluated per row) agree on the order."""
    for op, compare in COMPARE.items():
        expected = [k for k in UTF16_ORDER if compare(utf16(k), utf16(literal))]
        got = row_keys(unicode_rows, f"PartitionKey eq 'u' and {prop} {op} @v", parameters={"v": literal})
        assert got == expected, op


def test_partition_key_ranges_are_utf16_ordinal(unicode_rows: TableClient) -> None:
    got = [
        e["PartitionKey"]
        for e in unicode_rows.query_entities(
            "PartitionKey gt @lo and PartitionKey lt @hi and RowKey eq 'r'",
            parameters={"lo": "z", "hi": "\ue000"},
        )
    ]
    assert got == ["é", "\U00010000", "\U0001f600"]


# ------------------------------------------------------------------ paging across 2,500 rows

BIG_PARTITIONS = 5
BIG_PER_PARTITION = 500


@pytest.fixture(scope="module")
def big(server: ServerProcess) -> Iterator[TableClient]:
    """2,500 rows in five partitions, loaded with batches of 100 (one loader thread per partition)."""
    name = f"qsdkbig{os.getpid()}"

    def load(p: int) -> None:
        with TableClient.from_connection_string(server.connection_string, name) as loader:
            for start in range(0, BIG_PER_PARTITION, 100):
                loader.submit_transaction(
                    [
                        (
                            "create",
                            {"PartitionKey": f"p{p}", "RowKey": f"{r:04d}", "n": p * BIG_PER_PARTITION + r},
                        )
                        for r in range(start, start + 100)
                    ]
                )

    with TableServiceClient.from_connection_string(server.connection_string) as service:
        client = service.create_table(name)
        with ThreadPoolExecutor(BIG_PARTITIONS) as pool:
            list(pool.map(load, range(BIG_PARTITIONS)))
        yield client
        client.close()
        service.delete_table(name)


BIG_KEYS = [(f"p{p}", f"{r:04d}") for p in range(BIG_PARTITIONS) for r in range(BIG_PER_PARTITION)]


@pytest.mark.parametrize("per_page", [None, 1000, 333, 97])
def test_list_entities_pages_across_thousands_of_rows(big: TableClient, per_page: int | None) -> None:
    pages = [
        [(e["PartitionKey"], e["RowKey"]) for e in page]
        for page in big.list_entities(results_per_page=per_page).by_page()
    ]
    assert [key for page in pages for key in page] == BIG_KEYS  # every row exactly once, in key order
    limit = per_page or 1000
    assert all(len(page) <= limit for page in pages)
    assert len(pages) >= -(-len(BIG_KEYS) // limit)


def test_query_entities_pages_a_filtered_scan(big: TableClient) -> None:
    pages = list(big.query_entities("n ge @lo and n lt @hi", parameters={"lo": 400, "hi": 2100}).by_page())
    keys = [(e["PartitionKey"], e["RowKey"]) for page in pages for e in page]
    assert keys == BIG_KEYS[400:2100]
    assert all(len(list(page)) <= 1000 for page in pages)


def test_results_per_page_limits_the_page_not_the_total(big: TableClient) -> None:
    query = big.query_entities("PartitionKey eq @pk", parameters={"pk": "p3"}, results_per_page=50)
    pages = [list(page) for page in query.by_page()]
    assert sum(len(page) for page in pages) == BIG_PER_PARTITION
    assert [len(page) for page in pages[:-1]] == [50] * (len(pages) - 1)


def test_top_on_the_wire_limits_one_page(big: TableClient, raw: RawClient) -> None:
    response = raw.request("GET", f"{big.table_name}()?$top=5")
    assert response.status == 200, response
    assert [e["RowKey"] for e in response.json()["value"]] == ["0000", "0001", "0002", "0003", "0004"]
    assert response.header("x-ms-continuation-NextPartitionKey")
    response = raw.request("GET", f"{big.table_name}()")
    assert len(response.json()["value"]) == 1000  # at most 1,000 without $top
    assert response.header("x-ms-continuation-NextRowKey")


# ------------------------------------------------------------------------------ Query Tables


@pytest.fixture
def prefixed_tables(service: TableServiceClient, table_name: str) -> Iterator[list[str]]:
    names = [f"{table_name}t{i}" for i in range(5)]
    for name in names:
        service.create_table(name)
    yield names
    for name in names:
        service.delete_table(name)


def test_query_tables_by_name_and_prefix(service: TableServiceClient, prefixed_tables: list[str]) -> None:
    exact = [t.name for t in service.query_tables("TableName eq @n", parameters={"n": prefixed_tables[2]})]
    assert exact == [prefixed_tables[2]]
    prefix = prefixed_tables[0][:-1]
    upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    ranged = service.query_tables(
        "TableName ge @lo and TableName lt @hi", parameters={"lo": prefix, "hi": upper}, results_per_page=2
    )
    assert [t.name for t in ranged] == prefixed_tables
    pages = [
        [t.name for t in page]
        for page in service.query_tables(
            "TableName ge @lo and TableName lt @hi",
            parameters={"lo": prefix, "hi": upper},
            results_per_page=2,
        ).by_page()
    ]
    assert pages == [prefixed_tables[0:2], prefixed_tables[2:4], prefixed_tables[4:]]
    assert [t.name for t in service.query_tables("TableName eq @n", parameters={"n": prefix + "zz"})] == []
    assert [
        t.name for t in service.query_tables("not (TableName ne @n )", parameters={"n": prefixed_tables[1]})
    ] == [prefixed_tables[1]]


def test_list_tables_pages_and_finds_every_table(
    service: TableServiceClient, prefixed_tables: list[str]
) -> None:
    names = [t.name for t in service.list_tables(results_per_page=2)]
    assert len(names) == len(set(names))
    assert set(prefixed_tables) <= set(names)
    assert names == sorted(names, key=str.lower)


def test_query_tables_rejects_other_properties(
    service: TableServiceClient, prefixed_tables: list[str]
) -> None:
    with pytest.raises(HttpResponseError) as info:
        list(service.query_tables("Name eq @n", parameters={"n": prefixed_tables[0]}))
    assert info.value.status_code == 400


# ------------------------------------------------------------------------------------- aio


def test_aio_queries_parameters_select_and_paging(
    server: ServerProcess, rows: TableClient, big: TableClient
) -> None:
    async def run() -> None:
        async with AioTableClient.from_connection_string(server.connection_string, rows.table_name) as client:
            got = [
                e["RowKey"]
                async for e in client.query_entities(
                    "when eq @w and id eq @i and blob eq @b and big eq @big",
                    parameters={"w": WHEN_1, "i": ID_1, "b": b"\x00\x01\xff", "big": 2**40},
                )
            ]
            assert got == ["1"]
            selected = [
                dict(e)
                async for e in client.query_entities("n lt @z", parameters={"z": 0}, select=["name", "zz"])
            ]
            assert selected == [{"name": "it''s", "zz": None}]
            assert [e["RowKey"] async for e in client.query_entities("not (n eq 7)")] == ["2", "3"]
        async with AioTableClient.from_connection_string(server.connection_string, big.table_name) as client:
            keys = []
            sizes = []
            async for page in client.list_entities(results_per_page=900).by_page():
                batch = [(e["PartitionKey"], e["RowKey"]) async for e in page]
                sizes.append(len(batch))
                keys.extend(batch)
            assert keys == BIG_KEYS
            assert all(size <= 900 for size in sizes)
        async with AioTableServiceClient.from_connection_string(server.connection_string) as service:
            names = [
                t.name
                async for t in service.query_tables("TableName eq @n", parameters={"n": rows.table_name})
            ]
            assert names == [rows.table_name]

    asyncio.run(run())
