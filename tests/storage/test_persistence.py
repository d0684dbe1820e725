"""Durability: acknowledged writes survive a graceful restart and a SIGKILL (own server per test)."""

from __future__ import annotations

import signal
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import EdmType, EntityProperty, TableServiceClient, UpdateMode

from tests.rawhttp import RawClient
from tests.serverproc import ServerProcess


def _snapshot(service: TableServiceClient, tables: list[str]) -> dict[str, list[tuple[Any, ...]]]:
    """Every entity of every table: keys, ETag, Timestamp and properties."""
    result: dict[str, list[tuple[Any, ...]]] = {}
    for name in tables:
        client = service.get_table_client(name)
        result[name] = [
            (
                e["PartitionKey"],
                e["RowKey"],
                e.metadata["etag"],
                e.metadata["timestamp"],
                sorted((k, repr(v)) for k, v in e.items()),
            )
            for e in client.list_entities()
        ]
    return result


def test_graceful_restart_keeps_everything(fresh_server: ServerProcess) -> None:
    tables = ["persistA", "PersistMixed", "persistC"]
    with TableServiceClient.from_connection_string(fresh_server.connection_string) as service:
        for name in tables:
            service.create_table(name)
        service.create_table("persistGone")
        service.delete_table("persistGone")

        a = service.get_table_client("persistA")
        for i in range(20):
            a.create_entity(
                {
                    "PartitionKey": f"p{i % 3}",
                    "RowKey": f"r{i:03d}",
                    "i": i,
                    "big": EntityProperty(2**40 + i, EdmType.INT64),
                    "f": i / 7,
                    "s": "é😀" * i,
                    "b": bytes([i]) * i,
                    "d": datetime(2020, 1, 1, 0, 0, i, 123456, tzinfo=UTC),
                    "g": uuid.UUID(int=i),
                    "t": i % 2 == 0,
                }
            )
        a.update_entity({"PartitionKey": "p0", "RowKey": "r000", "i": -1}, mode=UpdateMode.MERGE)
        a.upsert_entity({"PartitionKey": "p1", "RowKey": "r001", "only": "this"}, mode=UpdateMode.REPLACE)
        a.delete_entity("p2", "r002")

        mixed = service.get_table_client("PersistMixed")
        mixed.create_entity({"PartitionKey": "", "RowKey": "", "quote": "it's"})
        mixed.create_entity({"PartitionKey": "k'ey", "RowKey": "r%20 +", "v": 1.0})

        before = _snapshot(service, tables)
        listed_before = sorted(t.name for t in service.list_tables())

    assert before["persistA"][0][:2] == ("p0", "r000")
    assert len(before["persistA"]) == 19

    fresh_server.stop(signal.SIGTERM)
    fresh_server.start()

    with TableServiceClient.from_connection_string(fresh_server.connection_string) as service:
        assert sorted(t.name for t in service.list_tables()) == listed_before == sorted(tables)
        assert _snapshot(service, tables) == before
        a = service.get_table_client("persistA")
        assert a.get_entity("p0", "r000")["i"] == -1
        assert set(a.get_entity("p1", "r001")) == {"PartitionKey", "RowKey", "only"}
        with pytest.raises(ResourceNotFoundError):
            a.get_entity("p2", "r002")

        # New writes after the restart get fresh ETags.
        old_etag = a.get_entity("p0", "r003").metadata["etag"]
        new_etag = a.update_entity({"PartitionKey": "p0", "RowKey": "r003", "x": 1}, mode=UpdateMode.MERGE)[
            "etag"
        ]
        assert new_etag != old_etag
        etags = {row[2] for rows in before.values() for row in rows}
        assert new_etag not in etags


def test_sigkill_after_acknowledged_writes_loses_nothing(fresh_server: ServerProcess) -> None:
    with TableServiceClient.from_connection_string(fresh_server.connection_string) as service:
        table = service.create_table("killTest")
        etags: dict[str, str] = {}
        for i in range(60):
            result = table.create_entity({"PartitionKey": "p", "RowKey": f"{i:03d}", "v": i})
            etags[f"{i:03d}"] = result["etag"]
        for i in range(0, 60, 3):
            etags[f"{i:03d}"] = table.update_entity(
                {"PartitionKey": "p", "RowKey": f"{i:03d}", "v": -i}, mode=UpdateMode.MERGE
            )["etag"]
        for i in range(1, 60, 10):
            table.delete_entity("p", f"{i:03d}")
            del etags[f"{i:03d}"]
        table.submit_transaction(
            [("upsert", {"PartitionKey": "p", "RowKey": f"b{i}", "v": i}) for i in range(5)]
        )
        service.create_table("killSecond")
        # The very last acknowledged write, immediately before the kill.
        last = RawClient(fresh_server.port).insert("killSecond", {"PartitionKey": "x", "RowKey": "y", "z": 1})
        assert last.status == 201, last

    fresh_server.stop(signal.SIGKILL)
    fresh_server.start()

    with TableServiceClient.from_connection_string(fresh_server.connection_string) as service:
        table = service.get_table_client("killTest")
        stored = {e["RowKey"]: e for e in table.list_entities()}
        expected_rows = set(etags) | {f"b{i}" for i in range(5)}
        assert set(stored) == expected_rows
        for rk, etag in etags.items():
            assert stored[rk].metadata["etag"] == etag, rk
            i = int(rk)
            assert stored[rk]["v"] == (-i if i % 3 == 0 else i)
        assert [stored[f"b{i}"]["v"] for i in range(5)] == list(range(5))
        second = service.get_table_client("killSecond").get_entity("x", "y")
        assert second["z"] == 1
        assert second.metadata["etag"] == last.header("ETag")
