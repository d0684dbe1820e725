"""Batch atomicity under concurrency: readers never see half a batch.

Writers commit batches of 100 operations into one partition while readers poll it. Each batch
stamps every row it writes with one ``gen`` value, so a reader's snapshot is consistent exactly
when all its rows carry the same ``gen`` (and, since a batch has one Timestamp, the same ETag).
Two workloads:

* updates: every batch rewrites all 100 rows of partition ``u`` (upserts and updates, merge and
  replace), from several writers at once;
* inserts and deletes: every batch deletes the 50 rows of the previous generation and inserts 50
  new ones, so a reader must see exactly 50 rows, all of one generation.

The same checks run with writer and reader threads on the sync SDK and with ``asyncio.gather`` on
the aio SDK, against the session server and against one started with ``--workers 2`` (several
processes over one store: atomicity must come from the storage transaction). The workload is a
fixed number of batches; readers stop when the writers are done. No assertion depends on timing:
only on what each snapshot contains.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from azure.data.tables import TableClient, TableServiceClient, TableTransactionError
from azure.data.tables.aio import TableClient as AsyncTableClient

from tests.conftest import fresh_store
from tests.serverproc import ServerProcess

ROWS = 100  # rows of the update partition; each update batch writes all of them
CHURN_ROWS = 50  # rows per generation in the insert/delete partitions (50 deletes + 50 inserts)
WRITERS = 2
BATCHES_PER_WRITER = 5
CHURN_BATCHES = 6
READERS = 2
MAX_READS = 5_000  # per reader: a bound, never reached unless the writers hang
JOIN_TIMEOUT = 60.0


@pytest.fixture(scope="module")
def workers2(server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """``--workers 2`` on the session server's backend (its own data directory or database)."""
    extra = fresh_store(server.backend)
    process = ServerProcess(
        tmp_path_factory.mktemp("workers2"), extra_args=[*extra, "--workers", "2"], backend=server.backend
    ).start()
    yield process
    process.stop()


@pytest.fixture(params=["shared", "workers-2"])
def target(request: pytest.FixtureRequest, server: ServerProcess, workers2: ServerProcess) -> ServerProcess:
    """The session server (default worker count), then one with several processes over one store."""
    return server if request.param == "shared" else workers2


@pytest.fixture
def tables(target: ServerProcess, table_name: str) -> Iterator[tuple[str, str]]:
    """Two tables: one for the update workload, one for the insert/delete workload."""
    names = (table_name + "u", table_name + "c")
    with TableServiceClient.from_connection_string(target.connection_string) as service:
        for name in names:
            service.create_table(name)
        yield names
        for name in names:
            service.delete_table(name)


# --------------------------------------------------------------------------------------------
# The workloads: batches and snapshot checks shared by the sync and aio runs
# --------------------------------------------------------------------------------------------


def row_key(i: int) -> str:
    return f"r{i:03d}"


def initial_batch() -> list[Any]:
    return [("create", {"PartitionKey": "u", "RowKey": row_key(i), "gen": 0, "i": i}) for i in range(ROWS)]


def update_batch(writer: int, number: int) -> tuple[int, list[Any]]:
    """Batch ``number`` of ``writer``: all rows to one new ``gen``, with a varying operation mix."""
    gen = writer * 1000 + number
    ops: list[Any] = []
    for i in range(ROWS):
        entity = {"PartitionKey": "u", "RowKey": row_key(i), "gen": gen, "i": i, "writer": writer}
        kind = "upsert" if (i + number) % 2 else "update"
        mode = "merge" if (i + writer + number) % 3 else "replace"
        ops.append((kind, entity, {"mode": mode}))
    return gen, ops


def churn_batch(partition: str, gen: int) -> list[Any]:
    """Delete generation ``gen - 1`` (if any) and insert generation ``gen``: one atomic swap."""
    ops: list[Any] = []
    if gen > 0:
        ops += [
            ("delete", {"PartitionKey": partition, "RowKey": f"{gen - 1:04d}-{j:02d}"})
            for j in range(CHURN_ROWS)
        ]
    ops += [
        ("create", {"PartitionKey": partition, "RowKey": f"{gen:04d}-{j:02d}", "gen": gen})
        for j in range(CHURN_ROWS)
    ]
    return ops


def check_update_snapshot(entities: list[Any]) -> int:
    """All ROWS rows, one ``gen``, one ETag; return the gen."""
    assert [e["RowKey"] for e in entities] == [row_key(i) for i in range(ROWS)]
    gens = {e["gen"] for e in entities}
    assert len(gens) == 1, f"partial batch visible: gens {sorted(gens)}"
    assert len({e.metadata["etag"] for e in entities}) == 1
    assert all(e["i"] == i for i, e in enumerate(entities))
    (gen,) = gens
    return int(gen)


def check_churn_snapshot(entities: list[Any], partition: str) -> int:
    """Exactly one generation's CHURN_ROWS rows; return the gen."""
    rows = [e for e in entities if e["PartitionKey"] == partition]
    gens = {e["gen"] for e in rows}
    assert len(gens) == 1, f"partial batch visible in {partition}: gens {sorted(gens)}, {len(rows)} rows"
    (gen,) = gens
    assert [e["RowKey"] for e in rows] == [f"{gen:04d}-{j:02d}" for j in range(CHURN_ROWS)]
    assert len({e.metadata["etag"] for e in rows}) == 1
    return int(gen)


@dataclass
class Observations:
    """What the readers saw, per reader, in order."""

    update_gens: list[list[int]] = field(default_factory=list)
    churn_gens: dict[str, list[list[int]]] = field(default_factory=dict)
    written: dict[int, list[int]] = field(default_factory=dict)  # writer -> gens, in commit order


def check_observations(obs: Observations) -> None:
    all_written = {0} | {gen for gens in obs.written.values() for gen in gens}
    for seen in obs.update_gens:
        assert seen, "a reader made no read"
        assert set(seen) <= all_written
        # A writer's batches commit in order, so a reader never goes back to an older batch of
        # the same writer (monotonic reads).
        for writer in obs.written:
            mine = [gen for gen in seen if gen // 1000 == writer and gen]
            assert mine == sorted(mine), (writer, mine)
    for per_reader in obs.churn_gens.values():
        for seen in per_reader:
            assert seen
            assert seen == sorted(seen)
            assert set(seen) <= set(range(CHURN_BATCHES))


def check_final_state(entities_u: list[Any], entities_c: list[Any], obs: Observations) -> None:
    gen = check_update_snapshot(entities_u)
    assert gen in {gens[-1] for gens in obs.written.values()}
    for partition in ("c0", "c1"):
        assert check_churn_snapshot(entities_c, partition) == CHURN_BATCHES - 1


# --------------------------------------------------------------------------------------------
# Threads on the sync SDK
# --------------------------------------------------------------------------------------------


def run_threads(functions: Iterable[Callable[[], None]]) -> None:
    errors: list[BaseException] = []

    def guard(function: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                function()
            except BaseException as exc:  # reported in the main thread
                errors.append(exc)

        return run

    threads = [threading.Thread(target=guard(f), daemon=True) for f in functions]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + JOIN_TIMEOUT
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    assert not any(thread.is_alive() for thread in threads), "a worker thread did not finish"
    if errors:
        raise errors[0]


def test_readers_never_see_partial_batches_threads(target: ServerProcess, tables: tuple[str, str]) -> None:
    updates, churn = tables
    connection = target.connection_string

    def client(name: str) -> TableClient:
        return TableClient.from_connection_string(connection, name)

    with client(updates) as setup:
        assert len(setup.submit_transaction(initial_batch())) == ROWS
    with client(churn) as setup:
        for partition in ("c0", "c1"):
            setup.submit_transaction(churn_batch(partition, 0))

    obs = Observations(written={w: [] for w in range(1, WRITERS + 1)})
    writers_left = threading.Semaphore(0)
    start = threading.Barrier(WRITERS + 2 + READERS + 1, timeout=JOIN_TIMEOUT)  # + coordinator

    def update_writer(writer: int) -> Callable[[], None]:
        def run() -> None:
            try:
                with client(updates) as table:
                    start.wait()
                    for number in range(1, BATCHES_PER_WRITER + 1):
                        gen, ops = update_batch(writer, number)
                        results = table.submit_transaction(ops)
                        assert len(results) == ROWS and len({r["etag"] for r in results}) == 1
                        obs.written[writer].append(gen)
            finally:
                writers_left.release()

        return run

    def churn_writer(partition: str) -> Callable[[], None]:
        def run() -> None:
            try:
                with client(churn) as table:
                    start.wait()
                    for gen in range(1, CHURN_BATCHES):
                        assert len(table.submit_transaction(churn_batch(partition, gen))) == 2 * CHURN_ROWS
            finally:
                writers_left.release()

        return run

    done = threading.Event()

    def reader(index: int) -> Callable[[], None]:
        update_seen: list[int] = []
        churn_seen: dict[str, list[int]] = {"c0": [], "c1": []}
        obs.update_gens.append(update_seen)
        for partition, seen in churn_seen.items():
            obs.churn_gens.setdefault(partition, []).append(seen)

        def run() -> None:
            with client(updates) as u_table, client(churn) as c_table:
                start.wait()
                for count in range(MAX_READS):
                    finished = done.is_set()  # decided before the read: the last read is after the writers
                    if (count + index) % 2:
                        entities = list(u_table.query_entities("PartitionKey eq 'u'"))
                    else:
                        entities = list(u_table.list_entities())
                    update_seen.append(check_update_snapshot(entities))
                    whole = list(c_table.list_entities())
                    for partition, seen in churn_seen.items():
                        seen.append(check_churn_snapshot(whole, partition))
                    if finished:
                        return
                raise AssertionError("readers exceeded MAX_READS")

        return run

    def coordinator() -> None:
        start.wait()
        try:
            for _ in range(WRITERS + 2):
                assert writers_left.acquire(timeout=JOIN_TIMEOUT)
        finally:
            done.set()

    run_threads(
        [
            *(update_writer(w) for w in range(1, WRITERS + 1)),
            churn_writer("c0"),
            churn_writer("c1"),
            *(reader(i) for i in range(READERS)),
            coordinator,
        ]
    )

    check_observations(obs)
    with client(updates) as u_table, client(churn) as c_table:
        check_final_state(list(u_table.list_entities()), list(c_table.list_entities()), obs)


# --------------------------------------------------------------------------------------------
# asyncio.gather on the aio SDK
# --------------------------------------------------------------------------------------------


async def _collect(pages: Any) -> list[Any]:
    return [entity async for entity in pages]


async def _aio_workload(
    connection: str, updates: str, churn: str
) -> tuple[Observations, list[Any], list[Any]]:
    obs = Observations(written={w: [] for w in range(1, WRITERS + 1)})
    async with (
        AsyncTableClient.from_connection_string(connection, updates) as u_table,
        AsyncTableClient.from_connection_string(connection, churn) as c_table,
    ):
        assert len(await u_table.submit_transaction(initial_batch())) == ROWS
        for partition in ("c0", "c1"):
            await c_table.submit_transaction(churn_batch(partition, 0))
        done = asyncio.Event()

        async def update_writer(writer: int) -> None:
            for number in range(1, BATCHES_PER_WRITER + 1):
                gen, ops = update_batch(writer, number)
                results = await u_table.submit_transaction(ops)
                assert len(results) == ROWS and len({r["etag"] for r in results}) == 1
                obs.written[writer].append(gen)

        async def churn_writer(partition: str) -> None:
            for gen in range(1, CHURN_BATCHES):
                assert len(await c_table.submit_transaction(churn_batch(partition, gen))) == 2 * CHURN_ROWS

        async def writers() -> None:
            await asyncio.gather(
                *(update_writer(w) for w in range(1, WRITERS + 1)), churn_writer("c0"), churn_writer("c1")
            )
            done.set()

        async def reader(index: int) -> None:
            update_seen: list[int] = []
            obs.update_gens.append(update_seen)
            churn_seen: dict[str, list[int]] = {"c0": [], "c1": []}
            for partition, seen in churn_seen.items():
                obs.churn_gens.setdefault(partition, []).append(seen)
            for count in range(MAX_READS):
                finished = done.is_set()
                if (count + index) % 2:
                    entities = await _collect(u_table.query_entities("PartitionKey eq 'u'"))
                else:
                    entities = await _collect(u_table.list_entities())
                update_seen.append(check_update_snapshot(entities))
                whole = await _collect(c_table.list_entities())
                for partition, seen in churn_seen.items():
                    seen.append(check_churn_snapshot(whole, partition))
                if finished:
                    return
            raise AssertionError("readers exceeded MAX_READS")

        await asyncio.wait_for(asyncio.gather(writers(), *(reader(i) for i in range(READERS))), JOIN_TIMEOUT)
        final_u = await _collect(u_table.list_entities())
        final_c = await _collect(c_table.list_entities())
    return obs, final_u, final_c


def test_readers_never_see_partial_batches_aio(target: ServerProcess, tables: tuple[str, str]) -> None:
    updates, churn = tables
    obs, final_u, final_c = asyncio.run(_aio_workload(target.connection_string, updates, churn))
    check_observations(obs)
    check_final_state(final_u, final_c, obs)


def test_failed_batches_leave_no_trace_under_concurrency(
    target: ServerProcess, tables: tuple[str, str]
) -> None:
    """Batches that fail at their last operation (a duplicate insert) race with readers: no
    reader ever sees any of their earlier 99 writes."""
    updates, _ = tables
    connection = target.connection_string
    with TableClient.from_connection_string(connection, updates) as setup:
        setup.submit_transaction(initial_batch())
    done = threading.Event()
    failures: list[int | None] = []
    seen: list[int] = []

    def writer() -> None:
        try:
            with TableClient.from_connection_string(connection, updates) as table:
                for number in range(1, BATCHES_PER_WRITER + 1):
                    _gen, ops = update_batch(9, number)
                    ops[-1] = ("create", {"PartitionKey": "u", "RowKey": row_key(ROWS - 1)})  # exists: 409
                    try:
                        table.submit_transaction(ops)
                    except TableTransactionError as error:
                        failures.append(error.index)
        finally:
            done.set()

    def reader() -> None:
        with TableClient.from_connection_string(connection, updates) as table:
            for _ in range(MAX_READS):
                finished = done.is_set()
                seen.append(check_update_snapshot(list(table.query_entities("PartitionKey eq 'u'"))))
                if finished:
                    return

    run_threads([writer, reader, reader])
    assert failures == [ROWS - 1] * BATCHES_PER_WRITER
    assert set(seen) == {0}
    with TableClient.from_connection_string(connection, updates) as table:
        assert check_update_snapshot(list(table.list_entities())) == 0
