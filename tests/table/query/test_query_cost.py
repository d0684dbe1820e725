"""Every query response says what it cost (README, "Seeing what your design costs"):
``x-tabulae-query-class`` and ``x-tabulae-scanned``, on point reads and table listings too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from azure.data.tables import TableClient, TableServiceClient

from tests.rawhttp import RawClient, RawResponse, py_keys

README = Path(__file__).resolve().parents[3] / "README.md"


def _cost(response: RawResponse) -> tuple[str | None, str | None]:
    assert response.status == 200, response
    return response.header("x-tabulae-query-class"), response.header("x-tabulae-scanned")


def _sdk_cost(call: Any) -> tuple[str | None, str | None]:
    seen: list[tuple[str | None, str | None]] = []

    def hook(response: Any) -> None:
        headers = response.http_response.headers
        seen.append((headers.get("x-tabulae-query-class"), headers.get("x-tabulae-scanned")))

    call(hook)
    return seen[-1]


def test_point_read_of_an_entity(raw: RawClient, table: TableClient) -> None:
    table.create_entity({"PartitionKey": "p", "RowKey": "r"})
    assert _cost(raw.get_entity(table.table_name, "p", "r")) == ("point", "1")
    assert _sdk_cost(lambda hook: table.get_entity("p", "r", raw_response_hook=hook)) == ("point", "1")


def test_point_read_of_a_table(raw: RawClient, table: TableClient) -> None:
    assert _cost(raw.request("GET", f"Tables('{table.table_name}')")) == ("point", "1")


def test_table_listing_is_a_scan_of_the_account_tables(
    raw: RawClient, service: TableServiceClient, table: TableClient
) -> None:
    query_class, scanned = _cost(raw.request("GET", f"Tables?$filter=TableName%20eq%20'{table.table_name}'"))
    assert query_class == "table-scan" and scanned is not None
    total = len(list(service.list_tables()))
    assert int(scanned) == total  # every table name was read to find the one that matched
    assert _sdk_cost(lambda hook: list(service.list_tables(raw_response_hook=hook)))[0] == "table-scan"


@pytest.mark.parametrize(
    ("query", "query_class", "scanned"),
    [
        ("PartitionKey eq 'b' and RowKey eq '2'", "point", 1),
        ("PartitionKey eq 'b' and RowKey ge '2'", "row-range", 2),
        ("PartitionKey eq 'b' and v eq 1", "row-range", 3),  # one partition, read whole
        ("PartitionKey ge 'b'", "partition-scan", 6),
        ("v eq 1", "table-scan", 9),
    ],
)
def test_entity_queries_by_class(
    raw: RawClient, table: TableClient, query: str, query_class: str, scanned: int
) -> None:
    for pk in "abc":
        for rk in "123":
            table.create_entity({"PartitionKey": pk, "RowKey": rk, "v": 1})
    response = raw.request("GET", f"{table.table_name}()?$filter={query.replace(' ', '%20')}")
    assert _cost(response) == (query_class, str(scanned))
    assert raw.get_entity(table.table_name, "b", "2").header("x-tabulae-query-class") == "point"
    assert raw.request("GET", table.table_name + py_keys("b", "2")).status == 200


def test_readme_defines_the_classes_in_both_vocabularies() -> None:
    text = README.read_text()
    for ours in ("`point`", "`row-range`", "`partition-scan`", "`table-scan`"):
        assert ours in text
    for theirs in ("row range scan", "partition range scan", "range query", "partition scan", "table scan"):
        assert theirs in text.lower(), theirs
