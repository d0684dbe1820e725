"""The azure-data-tables samples' own flows, unchanged, against the server's connection string.

These use the fixtures of Tabulae's own pytest plugin (``tabulae_connection_string``,
``tabulae_name``), as a user's test suite would: a server for the session, fresh names per test."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import pytest
from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.data.tables import TableClient, TableServiceClient, TableTransactionError, UpdateMode
from azure.data.tables.aio import TableClient as AsyncTableClient
from azure.data.tables.aio import TableServiceClient as AsyncTableServiceClient

PRODUCT_ID = UUID("f4d7a2f1-5b3e-4c2a-9a55-0c7c8b1f2e3d")
LAST_UPDATED = datetime(2024, 5, 6, 7, 8, 9, 101112, tzinfo=UTC)


def _sample_entity() -> dict[str, Any]:
    # The entity of sample_insert_delete_entities.py (with a fixed time and id).
    return {
        "PartitionKey": "color",
        "RowKey": "brand",
        "text": "Marker",
        "color": "Purple",
        "price": 4.99,
        "last_updated": LAST_UPDATED,
        "product_id": PRODUCT_ID,
        "inventory_count": 42,
        "barcode": b"135aefg8oj0ld58",
    }


def _query_entities() -> list[dict[str, Any]]:
    # The data set of sample_query_table.py (deterministic values).
    names = ["marker", "pencil", "pen", "marker", "crayon", "marker"]
    brands = ["Crayola", "Sharpie", "Bic", "Expo", "Crayola", "Sharpie"]
    colors = ["Red", "Blue", "Black", "Green", "Yellow", "Purple"]
    values = [10, 30, 45, 26, 50, 99]
    return [
        {"PartitionKey": "pk", "RowKey": str(i), "Name": n, "Brand": b, "Color": c, "Value": v}
        for i, (n, b, c, v) in enumerate(zip(names, brands, colors, values, strict=True))
    ]


def _check_sample_entity(got: dict[str, Any]) -> None:
    assert got["text"] == "Marker"
    assert got["color"] == "Purple"
    assert got["price"] == 4.99
    assert got["last_updated"] == LAST_UPDATED
    assert got["product_id"] == PRODUCT_ID
    assert got["inventory_count"] == 42
    assert got["barcode"] == b"135aefg8oj0ld58"


def test_sample_flow_sync(tabulae_connection_string: str, tabulae_name: str) -> None:
    connection_string, table_name = tabulae_connection_string, tabulae_name
    # sample_create_delete_table.py
    with TableServiceClient.from_connection_string(connection_string) as table_service_client:
        table_client = table_service_client.create_table(table_name=table_name)
        assert table_client.table_name == table_name
        with pytest.raises(ResourceExistsError):
            table_service_client.create_table(table_name=table_name)

        # sample_query_tables.py
        queried = table_service_client.query_tables("TableName eq @name", parameters={"name": table_name})
        assert [t.name for t in queried] == [table_name]
        assert table_name in [t.name for t in table_service_client.list_tables()]

    # sample_insert_delete_entities.py / sample_update_upsert_merge_entities.py
    with TableClient.from_connection_string(connection_string, table_name) as table_client:
        entity = _sample_entity()
        created = table_client.create_entity(entity=entity)
        assert created["etag"]
        with pytest.raises(ResourceExistsError):
            table_client.create_entity(entity=entity)

        got = table_client.get_entity(partition_key=entity["PartitionKey"], row_key=entity["RowKey"])
        _check_sample_entity(got)

        got["text"] = "New Marker"
        table_client.update_entity(mode=UpdateMode.REPLACE, entity=got)
        table_client.upsert_entity(
            mode=UpdateMode.MERGE, entity={"PartitionKey": "color", "RowKey": "brand", "n": 1}
        )
        merged = table_client.get_entity("color", "brand")
        assert merged["text"] == "New Marker"
        assert merged["n"] == 1

        # sample_query_table.py
        for e in _query_entities():
            table_client.upsert_entity(e)
        parameters = {"pk": "pk"}
        by_partition = list(table_client.query_entities("PartitionKey eq @pk", parameters=parameters))
        assert [e["RowKey"] for e in by_partition] == [str(i) for i in range(6)]

        name_filter = "Name eq @name"
        markers = list(
            table_client.query_entities(
                query_filter=name_filter, select=["Brand", "Color"], parameters={"name": "marker"}
            )
        )
        assert [(e["Brand"], e["Color"]) for e in markers] == [
            ("Crayola", "Red"),
            ("Expo", "Green"),
            ("Sharpie", "Purple"),
        ]
        assert all(set(e) == {"Brand", "Color"} for e in markers)

        ranged = table_client.query_entities(
            query_filter="Value gt @lower and Value lt @upper", parameters={"lower": 25, "upper": 50}
        )
        assert sorted(e["Value"] for e in ranged) == [26, 30, 45]

        # sample_batching.py
        operations: list[Any] = [
            ("create", {"PartitionKey": "batch", "RowKey": "A", "v": 1}),
            ("create", {"PartitionKey": "batch", "RowKey": "B", "v": 2}),
            ("upsert", {"PartitionKey": "batch", "RowKey": "C", "v": 3}),
        ]
        assert len(table_client.submit_transaction(operations)) == 3
        operations = [
            ("update", {"PartitionKey": "batch", "RowKey": "A", "v": 10}),
            ("delete", {"PartitionKey": "batch", "RowKey": "B"}),
            ("upsert", {"PartitionKey": "batch", "RowKey": "C", "w": 4}, {"mode": "merge"}),
        ]
        table_client.submit_transaction(operations)
        batch = {e["RowKey"]: dict(e) for e in table_client.query_entities("PartitionKey eq 'batch'")}
        assert set(batch) == {"A", "C"}
        assert batch["A"]["v"] == 10
        assert (batch["C"]["v"], batch["C"]["w"]) == (3, 4)
        with pytest.raises(TableTransactionError) as info:
            table_client.submit_transaction(
                [
                    ("upsert", {"PartitionKey": "batch", "RowKey": "D"}),
                    ("create", {"PartitionKey": "batch", "RowKey": "A"}),
                ]
            )
        assert info.value.index == 1
        with pytest.raises(ResourceNotFoundError):
            table_client.get_entity("batch", "D")

        table_client.delete_entity(row_key=entity["RowKey"], partition_key=entity["PartitionKey"])
        with pytest.raises(ResourceNotFoundError):
            table_client.get_entity("color", "brand")

    with TableServiceClient.from_connection_string(connection_string) as table_service_client:
        table_service_client.delete_table(table_name=table_name)
        assert list(table_service_client.query_tables(f"TableName eq '{table_name}'")) == []


def test_sample_flow_async(tabulae_connection_string: str, tabulae_name: str) -> None:
    connection_string, table_name = tabulae_connection_string, tabulae_name

    async def run() -> None:
        async with AsyncTableServiceClient.from_connection_string(connection_string) as table_service_client:
            table_client = await table_service_client.create_table(table_name=table_name)
            assert table_client.table_name == table_name
            names = [t.name async for t in table_service_client.list_tables()]
            assert table_name in names

        async with AsyncTableClient.from_connection_string(connection_string, table_name) as table_client:
            entity = _sample_entity()
            await table_client.upsert_entity(entity=entity)
            got = await table_client.get_entity(partition_key="color", row_key="brand")
            _check_sample_entity(got)

            for e in _query_entities():
                await table_client.create_entity(entity=e)
            parameters = {"pk": "pk"}
            rows = [
                e["RowKey"]
                async for e in table_client.query_entities("PartitionKey eq @pk", parameters=parameters)
            ]
            assert rows == [str(i) for i in range(6)]

            pages = []
            async for page in table_client.list_entities(results_per_page=4).by_page():
                pages.append([e["RowKey"] async for e in page])
            assert [rk for page in pages for rk in page] == ["brand", *[str(i) for i in range(6)]]
            assert all(len(page) <= 4 for page in pages)

            await table_client.submit_transaction(
                [
                    ("upsert", {"PartitionKey": "pk", "RowKey": "0", "Value": 11}, {"mode": "merge"}),
                    ("delete", {"PartitionKey": "pk", "RowKey": "1"}),
                ]
            )
            remaining = [
                e["RowKey"]
                async for e in table_client.query_entities("PartitionKey eq @pk", parameters=parameters)
            ]
            assert remaining == ["0", "2", "3", "4", "5"]

            await table_client.delete_entity(row_key="brand", partition_key="color")
            with pytest.raises(ResourceNotFoundError):
                await table_client.get_entity(partition_key="color", row_key="brand")
            await table_client.delete_entity(row_key="brand", partition_key="color")

        async with AsyncTableServiceClient.from_connection_string(connection_string) as table_service_client:
            await table_service_client.delete_table(table_name=table_name)
            left = [t.name async for t in table_service_client.query_tables(f"TableName eq '{table_name}'")]
            assert left == []

    asyncio.run(run())


def test_table_client_create_and_delete_table(tabulae_connection_string: str, tabulae_name: str) -> None:
    table_name = tabulae_name
    # TableClient.create_table / delete_table, as in sample_create_delete_table.py.
    with TableClient.from_connection_string(tabulae_connection_string, table_name) as table_client:
        created = table_client.create_table()
        assert created.name == table_name
        table_client.create_entity({"PartitionKey": "p", "RowKey": "r"})
        table_client.delete_table()
        table_client.delete_table()  # already gone: no error
    with TableServiceClient.from_connection_string(tabulae_connection_string) as service:
        assert list(service.query_tables(f"TableName eq '{table_name}'")) == []
