"""Several stateless front-ends over one PostgreSQL database behave as one service (issue #8),
on plain PostgreSQL and, when ``TABULAE_TEST_CITUS_URL`` is set, on Citus."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.core import MatchConditions
from azure.core.exceptions import ResourceModifiedError, ResourceNotFoundError
from azure.data.tables import TableClient, TableServiceClient, UpdateMode

from tests.backends import database_backends
from tests.conftest import fresh_store
from tests.serverproc import ServerProcess


@pytest.fixture(params=database_backends())
def frontends(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """Two single-worker front-ends on different ports over one fresh store (skipped, or failed
    under CI, when its database is not configured: ``tests/backends.py``)."""
    args = [*fresh_store(request.param), "--workers", "1"]
    first = ServerProcess(tmp_path / "a", extra_args=args).start()
    second = ServerProcess(tmp_path / "b", extra_args=args).start()
    yield first, second
    first.stop()
    second.stop()


def _table(server: ServerProcess, name: str) -> TableClient:
    return TableServiceClient.from_connection_string(server.connection_string).get_table_client(name)


def test_if_match_increments_through_both_front_ends_lose_no_update(
    frontends: tuple[ServerProcess, ServerProcess],
) -> None:
    first, second = frontends
    TableServiceClient.from_connection_string(first.connection_string).create_table("counters")
    _table(first, "counters").create_entity({"PartitionKey": "c", "RowKey": "1", "n": 0})
    successes: list[int] = []
    lock = threading.Lock()

    def worker(server: ServerProcess) -> None:
        client = _table(server, "counters")
        done = 0
        while done < 10:
            entity = client.get_entity("c", "1")
            entity["n"] += 1
            try:
                client.update_entity(
                    entity,
                    mode=UpdateMode.REPLACE,
                    etag=entity.metadata["etag"],
                    match_condition=MatchConditions.IfNotModified,
                )
            except ResourceModifiedError:
                continue
            done += 1
        with lock:
            successes.append(done)

    threads = [threading.Thread(target=worker, args=(server,)) for server in (first, second) * 4]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(successes) == 80
    assert _table(second, "counters").get_entity("c", "1")["n"] == 80


def test_batches_from_one_front_end_are_atomic_for_readers_of_the_other(
    frontends: tuple[ServerProcess, ServerProcess],
) -> None:
    first, second = frontends
    TableServiceClient.from_connection_string(first.connection_string).create_table("gens")
    writer = _table(first, "gens")
    writer.submit_transaction(
        [("create", {"PartitionKey": "g", "RowKey": f"{i:02d}", "gen": 0}) for i in range(20)]
    )
    stop = threading.Event()
    torn: list[set[int]] = []

    def reader() -> None:
        client = _table(second, "gens")
        while not stop.is_set():
            gens = {entity["gen"] for entity in client.query_entities("PartitionKey eq 'g'")}
            if len(gens) != 1:
                torn.append(gens)

    thread = threading.Thread(target=reader)
    thread.start()
    for generation in range(1, 16):
        writer.submit_transaction(
            [("update", {"PartitionKey": "g", "RowKey": f"{i:02d}", "gen": generation}) for i in range(20)]
        )
    stop.set()
    thread.join()
    assert torn == []
    assert {entity["gen"] for entity in _table(second, "gens").list_entities()} == {15}


def test_continuation_token_of_one_front_end_works_on_the_other(
    frontends: tuple[ServerProcess, ServerProcess],
) -> None:
    first, second = frontends
    TableServiceClient.from_connection_string(first.connection_string).create_table("paging")
    client = _table(first, "paging")
    for chunk in range(3):
        client.submit_transaction(
            [("create", {"PartitionKey": "p", "RowKey": f"{chunk}-{i:03d}"}) for i in range(100)]
        )
    pages = client.list_entities(results_per_page=120).by_page()
    first_page = [entity["RowKey"] for entity in next(pages)]
    token = pages.continuation_token
    assert token is not None and len(first_page) == 120
    rest = _table(second, "paging").list_entities(results_per_page=120).by_page(continuation_token=token)
    remaining = [entity["RowKey"] for page in rest for entity in page]
    assert first_page + remaining == sorted(f"{c}-{i:03d}" for c in range(3) for i in range(100))


def test_table_created_on_one_front_end_and_deleted_on_the_other(
    frontends: tuple[ServerProcess, ServerProcess],
) -> None:
    first, second = frontends
    TableServiceClient.from_connection_string(first.connection_string).create_table("shared")
    _table(second, "shared").create_entity({"PartitionKey": "a", "RowKey": "b"})
    assert _table(first, "shared").get_entity("a", "b")["RowKey"] == "b"
    TableServiceClient.from_connection_string(second.connection_string).delete_table("shared")
    with pytest.raises(ResourceNotFoundError):
        _table(first, "shared").get_entity("a", "b")
    TableServiceClient.from_connection_string(first.connection_string).create_table("shared")
    assert list(_table(second, "shared").list_entities()) == []
