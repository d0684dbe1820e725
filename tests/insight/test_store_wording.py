"""The append-only warning of a running server says what its own store does with the pattern.

Azure range-partitions a table by PartitionKey, which is why increasing keys matter in
production; locally SQLite and PostgreSQL put them on one end of a B-tree and Citus hashes them
over its shards. The server learns its store's kind when it opens it, and ``/metrics`` (JSON)
carries the wording (issue 35).
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from azure.data.tables import TableServiceClient

from tests.serverproc import ServerProcess

LOCAL_CLAUSE = {
    "sqlite": "here SQLite puts them on the rightmost leaf of one B-tree",
    "postgres": "here PostgreSQL puts them on the rightmost leaf of the key index",
    "citus": "here Citus spreads them over its shards by a hash of the PartitionKey",
}


def metrics(server: ServerProcess) -> dict[str, Any]:
    with urllib.request.urlopen(
        f"http://127.0.0.1:{server.port}/metrics?format=json", timeout=30
    ) as response:
        document: dict[str, Any] = json.loads(response.read())
    return document


def test_append_only_warning_names_the_store_in_use(server: ServerProcess, table_name: str) -> None:
    with TableServiceClient.from_connection_string(server.connection_string) as service:
        client = service.create_table(table_name)
        for n in range(20):  # one client, one connection: one worker sees the whole run
            client.create_entity({"PartitionKey": f"2026-11-27T06:{n:02d}", "RowKey": "r"})
    warnings = [
        w for w in metrics(server)["warnings"] if w["kind"] == "append-only" and w["table"] == table_name
    ]
    assert len(warnings) == 1, warnings
    message = warnings[0]["message"]
    assert (
        "on Azure, which range-partitions by PartitionKey, every insert lands on the last range partition"
        in message
    )
    assert LOCAL_CLAUSE[server.backend] in message
    assert [store for store, clause in LOCAL_CLAUSE.items() if clause in message] == [server.backend]
