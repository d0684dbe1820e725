"""What the stores cost on a real Citus cluster, read from its own ``EXPLAIN``.

Each test records the statements a store operation sends (with their parameters), then asks the
coordinator to ``EXPLAIN`` them: Citus names the shards (tasks) each statement goes to and, with
``ANALYZE``, the rows it fetched from them. Point operations, entity group transactions, scans
bounded to one partition, and every statement of a queue's messages or of one blob's content
must go to one shard; a filtered page must fetch rows in proportion to the page, not to the
table. These run only when ``TABULAE_TEST_CITUS_URL`` names a coordinator (CI has none and skips
them); each test gets a store of its own in a fresh schema.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabulae.model import edm
from tabulae.model.mutation import Mutation, MutationKind
from tabulae.model.queues import QueueMessage
from tabulae.storage.blobs import (
    BASE,
    BlobKey,
    BlobRecord,
    BlobState,
    BlobWrite,
    ContainerRecord,
    FoundBlob,
    TagQuery,
    next_ticks,
)
from tabulae.storage.indexes import IndexProbe
from tabulae.storage.postgres import PostgresStores, wire
from tabulae.storage.postgres.engine import CITUS_SETTINGS
from tabulae.storage.scans import FULL_RANGE, KeyBound, KeyRange
from tabulae.table.service import TableService
from tests.backends import CITUS_ENV
from tests.conftest import fresh_citus_store

CITUS_URL = os.environ.get(CITUS_ENV)
pytestmark = pytest.mark.skipif(not CITUS_URL, reason=f"needs {CITUS_ENV} (a Citus coordinator)")

ACCOUNT = "acct"
Statement = tuple[str, Any]


class Recording:
    """A pooled connection (or one of its cursors) that notes every statement sent through it,
    and otherwise is one."""

    def __init__(self, target: Any, log: list[Statement]) -> None:
        self._target = target
        self._log = log

    async def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        self._log.append((query if isinstance(query, str) else query.as_string(None), params))
        result = await self._target.execute(query, params, **kwargs)
        return self if result is self._target else result

    def cursor(self, *args: Any, **kwargs: Any) -> Recording:
        return Recording(self._target.cursor(*args, **kwargs), self._log)

    async def executemany(self, query: Any, rows: Any, **kwargs: Any) -> Any:
        rows = list(rows)
        self._log.extend((query, row) for row in rows[:1])  # one row shows where they all go
        return await self._target.executemany(query, rows, **kwargs)

    async def __aenter__(self) -> Recording:
        await self._target.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._target.__aexit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)


@asynccontextmanager
async def recorded(url: str, **options: Any) -> AsyncIterator[tuple[PostgresStores, list[Statement]]]:
    """The stores of ``url`` (opened with ``options``) with every statement their operations
    send noted in the list."""
    stores = await PostgresStores.open(url, max_size=4, **options)
    log: list[Statement] = []
    real_run = stores.database.run

    async def run(fn: Callable[[Any], Awaitable[Any]], **kwargs: Any) -> Any:
        return await real_run(lambda conn: fn(Recording(conn, log)), **kwargs)

    stores.database.run = run  # type: ignore[method-assign]
    real_spare, real_give_back = stores.database.spare, stores.database.give_back

    async def spare() -> Any:  # statements a plan sends aside are noted too
        conn = await real_spare()
        return None if conn is None else Recording(conn, log)

    async def give_back(conn: Any) -> None:
        await real_give_back(conn._target if isinstance(conn, Recording) else conn)

    stores.database.spare = spare  # type: ignore[method-assign]
    stores.database.give_back = give_back  # type: ignore[method-assign]
    real_exchange = wire.exchange

    async def exchange(conn: Any, calls: Any) -> Any:
        log.extend(wire_statement(statement, params) for statement, params in calls)
        return await real_exchange(conn, calls)

    wire.exchange = exchange  # type: ignore[assignment]
    for store in (stores.queues, stores.blobs):  # those that keep the pool's runner as their own
        if hasattr(store, "_run"):
            store._run = run
    try:
        yield stores, log
    finally:
        wire.exchange = real_exchange  # type: ignore[assignment]
        await stores.close()


def wire_statement(statement: wire.Statement, params: Any) -> Statement:
    """A statement sent through libpq directly (:mod:`~tabulae.storage.postgres.wire`) as psycopg
    runs it: ``$n`` as named parameters, their bytes as the values they encode."""
    values: dict[str, Any] = {}
    for index, (oid, value) in enumerate(zip(statement.types, params, strict=True), 1):
        if oid == wire.INT8:
            values[f"p{index}"] = wire.read_int8(value)
        elif oid == wire.TEXT:
            values[f"p{index}"] = value.decode()
        else:
            values[f"p{index}"] = value
    text = re.sub(r"\$(\d+)", r"%(p\1)s", statement.text.decode())
    return text, values


def citus_scans(plan: Any) -> list[dict[str, Any]]:
    """Every Citus node of an ``EXPLAIN (FORMAT JSON)`` plan tree."""
    found: list[dict[str, Any]] = []
    if isinstance(plan, dict):
        if "Distributed Query" in plan:
            found.append(plan)
        for value in plan.values():
            found.extend(citus_scans(value))
    elif isinstance(plan, list):
        for value in plan:
            found.extend(citus_scans(value))
    return found


async def explain(url: str, statement: Statement, analyze: bool = False) -> list[dict[str, Any]]:
    """The Citus nodes of one recorded statement's plan (run, for ``analyze``, in a transaction
    that is rolled back)."""
    query, params = statement
    async with await psycopg.AsyncConnection.connect(url) as conn:
        if "CROSS JOIN LATERAL (SELECT" in query:  # a Citus stepping probe: as the store sends it
            await conn.execute("SET LOCAL citus.subquery_pushdown TO on")
        options = "ANALYZE, FORMAT JSON" if analyze else "FORMAT JSON"
        cursor = await conn.execute(f"EXPLAIN ({options}) {query}", params)  # type: ignore[arg-type]
        row = await cursor.fetchone()
        await conn.rollback()
    assert row is not None
    plan = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    return citus_scans(plan)


def task_counts(nodes: list[dict[str, Any]]) -> list[int]:
    return [int(node["Distributed Query"]["Job"]["Task Count"]) for node in nodes]


def statements_of(log: list[Statement]) -> list[Statement]:
    """The recorded statements that touch tables (not BEGIN, COMMIT or SAVEPOINT, nor the
    partition epoch's: a sequence on the coordinator, no shard's)."""
    verbs = ("SELECT", "INSERT", "UPDATE", "DELETE", "WITH")
    return [
        s for s in log if s[0].lstrip().upper().startswith(verbs) and "entity_partition_epoch" not in s[0]
    ]


async def assert_single_shard(url: str, log: list[Statement]) -> int:
    """Every recorded statement goes to at most one shard; returns how many were checked."""
    checked = statements_of(log)
    assert checked
    for statement in checked:
        counts = task_counts(await explain(url, statement))
        assert all(count <= 1 for count in counts), (statement[0], counts)
    log.clear()
    return len(checked)


def run(body: Callable[[str], Awaitable[None]]) -> None:
    assert CITUS_URL is not None
    url = fresh_citus_store(CITUS_URL)
    asyncio.run(body(url))


def test_db_init_set_the_executor_settings() -> None:
    async def body(url: str) -> None:
        async with await psycopg.AsyncConnection.connect(url) as conn:
            for setting, value in CITUS_SETTINGS.items():
                row = await (await conn.execute(f"SHOW {setting}")).fetchone()
                assert row == (value,), setting

    run(body)


def test_point_operations_and_batches_go_to_one_shard() -> None:
    async def body(url: str) -> None:
        async with recorded(url) as (stores, log):
            tables = stores.tables
            await tables.create_table(ACCOUNT, "Things")
            log.clear()
            await tables.apply(ACCOUNT, "Things", [Mutation(MutationKind.INSERT, "p", "r", {})])
            await assert_single_shard(url, log)
            assert await tables.get_entity(ACCOUNT, "Things", "p", "r") is not None
            await assert_single_shard(url, log)
            batch = [Mutation(MutationKind.REPLACE, "p", f"{i:03d}", {}) for i in range(100)]
            await tables.apply(ACCOUNT, "Things", batch)
            await assert_single_shard(url, log)
            await tables.apply(ACCOUNT, "Things", [Mutation(MutationKind.DELETE, "p", "r", None, "*")])
            await assert_single_shard(url, log)

    run(body)


async def planner_messages(url: str, statement: Statement) -> list[str]:
    """What Citus's planner says (``DEBUG2``) about one recorded statement, run in a transaction
    that is rolled back."""
    query, params = statement
    said: list[str] = []
    async with await psycopg.AsyncConnection.connect(url) as conn:
        conn.add_notice_handler(lambda notice: said.append(notice.message_primary or ""))
        await conn.execute("SET client_min_messages = debug2")
        await conn.execute(query, params)  # type: ignore[arg-type]
        await conn.rollback()
    return said


FAST_PATH = "for a fast-path router query"  # "Distributed planning", or "Deferred pruning" when bound


def test_point_operations_plan_on_the_fast_path_or_one_shard() -> None:
    """Every statement of a single-entity write that reads or changes ``entities`` (the row lock,
    the conditional update and delete) and the table lookup take Citus's fast-path router
    planner, which skips the general planner; inserts of ``VALUES`` take Citus's own insert
    path. The point read is routed to one shard by the router planner but not on the fast
    path: its in-statement check that the table still exists reads a second table (measured:
    splitting the check into a second statement costs more than the fast path saves)."""

    async def body(url: str) -> None:
        async with recorded(url) as (stores, log):
            tables = stores.tables
            await tables.create_table(ACCOUNT, "Fast")
            log.clear()
            for kind, props in (
                (MutationKind.INSERT, {}),
                (MutationKind.REPLACE, {}),
                (MutationKind.DELETE, None),
            ):
                await tables.apply(
                    ACCOUNT, "Fast", [Mutation(kind, "p", "r", props, "*" if props is None else None)]
                )
            seen: dict[str, list[str]] = {}
            for statement in statements_of(log):
                verb = statement[0].split()[0].upper()
                said = await planner_messages(url, statement)
                assert any("router plan" in message for message in said), (statement[0], said)
                if verb == "INSERT":
                    continue
                assert any(FAST_PATH in message for message in said), (statement[0], said)
                seen.setdefault(verb, []).append(statement[0])
            assert {"SELECT", "UPDATE", "DELETE"} <= set(seen)
            await tables.apply(ACCOUNT, "Fast", [Mutation(MutationKind.INSERT, "p", "r", {})])
            log.clear()
            assert await tables.get_entity(ACCOUNT, "Fast", "p", "r") is not None
            for statement in statements_of(log):
                said = await planner_messages(url, statement)
                assert any("router plan" in message for message in said), (statement[0], said)

    run(body)


def test_scans_bounded_to_one_partition_go_to_one_shard() -> None:
    async def body(url: str) -> None:
        async with recorded(url) as (stores, log):
            tables = stores.tables
            await tables.create_table(ACCOUNT, "Things")
            for pk in ("a", "b", "c"):
                rows = [Mutation(MutationKind.INSERT, pk, f"{i:02d}", {}) for i in range(20)]
                await tables.apply(ACCOUNT, "Things", rows)
            log.clear()
            partition = KeyRange(KeyBound("b", None, True), KeyBound("b", None, True))
            assert len(await tables.scan(ACCOUNT, "Things", [partition], None, 100)) == 20
            await assert_single_shard(url, log)
            rows_of_b = KeyRange(KeyBound("b", "05", False), KeyBound("b", "10", True))
            found = await tables.scan(ACCOUNT, "Things", [rows_of_b], ("b", "07"), 100)
            assert [e.rk for e in found] == ["08", "09", "10"]
            await assert_single_shard(url, log)
            # A whole-table scan cannot be routed: it asks every shard, which the next test bounds.
            await tables.scan(ACCOUNT, "Things", [FULL_RANGE], None, 10)
            scans = [s for s in statements_of(log) if "FROM entities" in s[0]]
            assert max(task_counts(await explain(url, scans[-1]))) > 1

    run(body)


def test_a_filtered_page_fetches_rows_in_proportion_to_the_page() -> None:
    """4,000 entities in 40 partitions; a page of ten matches of a filter every other entity
    passes. Each scan statement asks every shard for at most its chunk of rows, and chunks start
    at the page's size, so the page fetches far fewer rows than the table holds (with chunks of
    1,000 it fetched every one of them)."""

    async def body(url: str) -> None:
        async with recorded(url) as (stores, log):
            tables = stores.tables
            await tables.create_table(ACCOUNT, "Things")
            for p in range(40):
                rows = [
                    Mutation(
                        MutationKind.INSERT, f"p{p:02d}", f"{i:03d}", {"even": (edm.BOOLEAN, i % 2 == 0)}
                    )
                    for i in range(100)
                ]
                await tables.apply(ACCOUNT, "Things", rows)
            log.clear()
            page = await TableService(tables).query_entities(
                ACCOUNT, "Things", "even eq true", 10, None, None
            )
            assert len(page.entities) == 10 and page.next_partition_token is not None
            fetched = 0
            shards = 0
            for statement in [s for s in statements_of(log) if "FROM entities" in s[0]]:
                for node in await explain(url, statement, analyze=True):
                    fetched += int(node["Actual Rows"])
                    shards = max(shards, int(node["Distributed Query"]["Job"]["Task Count"]))
            assert shards > 1
            assert fetched <= shards * (11 + 44)  # the first two chunks, each row a possible match
            assert fetched < 4000 // 2

    run(body)


def message(text: str) -> QueueMessage:
    return QueueMessage(str(uuid.uuid4()), 1, 10**15, 1, 0, "put-" + text, text)


def test_every_statement_of_a_queues_messages_goes_to_one_shard() -> None:
    async def body(url: str) -> None:
        async with recorded(url) as (stores, log):
            queues = stores.queues
            await queues.create_queue(ACCOUNT, "q", b"")
            log.clear()
            for text in ("one", "two", "three"):
                await queues.put_message(ACCOUNT, "q", message(text))
            await assert_single_shard(url, log)
            assert [m.text for m in await queues.peek_messages(ACCOUNT, "q", 32, 2)] == [
                "one",
                "two",
                "three",
            ]
            await assert_single_shard(url, log)
            taken = await queues.take_messages(ACCOUNT, "q", 2, 2, 100, "r1")
            assert [m.text for m in taken] == ["one", "two"]
            await assert_single_shard(url, log)
            await queues.update_message(ACCOUNT, "q", taken[0].id, "r1", 3, 3, "r2", "uno")
            await assert_single_shard(url, log)
            await queues.delete_message(ACCOUNT, "q", taken[1].id, "r1", 3)
            await assert_single_shard(url, log)

    run(body)


async def _chunks(data: bytes) -> AsyncIterator[bytes]:
    for i in range(0, len(data), 1 << 20):
        yield data[i : i + (1 << 20)]


def test_a_blobs_rows_and_chunks_go_to_one_shard() -> None:
    """A blob of three 4 MiB chunks: uploading, committing, and reading it back are all
    single-shard statements (its chunks live with its record)."""

    async def body(url: str) -> None:
        async with recorded(url) as (stores, log):
            blobs = stores.blobs
            await blobs.create_container(ACCOUNT, ContainerRecord("box", next_ticks(None)))
            key = BlobKey(ACCOUNT, "box", "big/blob")
            data = os.urandom(9 * 1024 * 1024)
            log.clear()
            staged = await blobs.stage(key, _chunks(data), None)

            def decide(state: BlobState) -> BlobWrite:
                new = BlobRecord(
                    name=key.name, snapshot=BASE, blob_type="BlockBlob", size=len(data),
                    ticks=state.ticks, created=state.ticks,
                )  # fmt: skip
                return BlobWrite(result=new, base=new, content=[staged.extent], drop_staged=True)

            await blobs.write_blob(key, decide, staged=staged)
            found = await blobs.get_blob(key, BASE, content=True)
            assert found is not None and found[1] is not None
            read = b"".join([piece async for piece in blobs.read(key, found[1], 0, len(data))])
            assert read == data
            assert await assert_single_shard(url, log) >= 3
        # The upload's chunk inserts run on a connection of their own (not recorded): the
        # catalog shows where its rows went. All carry the blob's key, and the chunk and blob
        # tables are colocated, so the blob's record and its content are in one shard group.
        async with await psycopg.AsyncConnection.connect(url) as conn:
            cursor = await conn.execute(
                "SELECT count(*), count(DISTINCT c.dkey), min(c.dkey) = min(b.dkey)"
                " FROM blob_chunks c, (SELECT dkey FROM blobs WHERE name = %s) b",
                (key.name,),
            )
            assert await cursor.fetchone() == (3, 1, True)
            cursor = await conn.execute(
                "SELECT count(DISTINCT colocationid) FROM pg_dist_partition"
                " WHERE logicalrelid = ANY(ARRAY['blobs', 'blob_chunks', 'blob_extents']::regclass[])"
            )
            assert await cursor.fetchone() == (1,)

    run(body)


def test_a_blobs_tags_live_on_its_shard_and_a_tag_search_runs_on_the_shards() -> None:
    """Writing a blob with index tags is single-shard (its tag rows carry its key, in a table
    colocated with the blobs), and Find Blobs by Tags is one distributed query whose joins of
    tag rows run inside each shard (no repartition between workers)."""

    async def body(url: str) -> None:
        async with recorded(url) as (stores, log):
            blobs = stores.blobs
            await blobs.create_container(ACCOUNT, ContainerRecord("box", next_ticks(None)))
            key = BlobKey(ACCOUNT, "box", "tagged")
            log.clear()

            def decide(state: BlobState) -> BlobWrite:
                new = BlobRecord(
                    name=key.name, snapshot=BASE, blob_type="BlockBlob", size=0, ticks=state.ticks,
                    created=state.ticks, tags={"a": "1", "b": "2"},
                )  # fmt: skip
                return BlobWrite(result=new, base=new, content=[])

            await blobs.write_blob(key, decide)
            assert any("blob_tags" in statement[0] for statement in statements_of(log))
            assert await assert_single_shard(url, log) >= 2
            query = TagQuery((("a", "=", "1"), ("b", ">", "1")))
            for container in ("box", None):
                found = await blobs.find_blobs_by_tags(ACCOUNT, container, query, None, 10)
                assert found == [FoundBlob("box", "tagged", {"a": "1", "b": "2"})]
            searches = [s for s in statements_of(log) if "FROM blob_tags t0" in s[0]]
            assert len(searches) == 2
            for statement in searches:
                nodes = await explain(url, statement)
                assert len(nodes) == 1, statement[0]
        async with await psycopg.AsyncConnection.connect(url) as conn:
            cursor = await conn.execute(
                "SELECT count(DISTINCT colocationid) FROM pg_dist_partition"
                " WHERE logicalrelid = ANY(ARRAY['blobs', 'blob_tags']::regclass[])"
            )
            assert await cursor.fetchone() == (1,)

    run(body)


def test_a_property_index_is_scanned_on_the_shards() -> None:
    """An index lookup's statement can read the partial expression index on every shard it asks
    (``citus.explain_all_tasks`` shows each shard's own plan): the index exists on the shards and
    the statement each shard receives still implies its predicate."""

    async def body(url: str) -> None:
        async with recorded(url) as (stores, log):
            tables = stores.tables
            await tables.create_table(ACCOUNT, "Indexed")
            for i in range(300):
                props = {"Color": (edm.STRING, f"c{i % 30}")}
                await tables.apply(
                    ACCOUNT, "Indexed", [Mutation(MutationKind.INSERT, f"p{i % 7}", f"r{i:04d}", props)]
                )
            info = await TableService(tables).add_index(ACCOUNT, "Indexed", "Color", edm.STRING, wait=True)
            assert info.state == "ready", info
            await tables.ready_indexes(ACCOUNT, "Indexed")
            log.clear()
            probe = IndexProbe("Color", edm.STRING, points=((edm.STRING, "c7"),))
            chunk = await tables.index_scan(ACCOUNT, "Indexed", probe, [FULL_RANGE], None, 100)
            assert len(chunk.rows) == 10
            lookups = [s for s in statements_of(log) if " FROM entities " in s[0]]
            assert lookups
            async with await psycopg.AsyncConnection.connect(url) as conn:
                # A few rows per shard cost less to read whole than through any index, so the
                # shards' planners are told to avoid that (SET LOCAL, sent on to the workers):
                # what is checked is that the index can serve the lookup on every shard, i.e.
                # the statement Citus sends each shard still implies the index's predicate.
                await conn.execute("SET citus.explain_all_tasks = on")
                await conn.execute("SET citus.propagate_set_commands = 'local'")
                await conn.execute("SET LOCAL enable_seqscan = off")
                for query, params in lookups:
                    cursor = await conn.execute(f"EXPLAIN (FORMAT JSON) {query}", params)  # type: ignore[arg-type]
                    row = await cursor.fetchone()
                    assert row is not None
                    plan = row[0] if not isinstance(row[0], str) else json.loads(row[0])
                    jobs = [node["Distributed Query"]["Job"] for node in citus_scans(plan)]
                    assert jobs and all(job.get("Tasks") for job in jobs), query
                    text = json.dumps(plan)
                    assert '"Index Name": "px_' in text and '"Seq Scan"' not in text, (query, text[:3000])

    run(body)


# ------------------------------------------------------------------ partition-stepping scans

DENSITIES = {"all": 1, "half": 2, "fifth": 5, "none": 0}
STEPPING_FILTERS = [
    "flag eq true",
    "flag eq false",
    "not flag",
    "n lt 7",
    "n ge 3 and flag eq true",
    "n lt 2 or flag eq false",
    "flag eq true and PartitionKey ge 'p03'",
    "flag eq true and PartitionKey lt 'p04' and RowKey ge 'r005'",
    "RowKey lt 'r010' and flag eq true",
    "PartitionKey eq 'p02' and flag eq true",
]


@pytest.fixture(scope="module")
def stepping_url() -> str:
    assert CITUS_URL is not None
    return fresh_citus_store(CITUS_URL)


async def _pages_of(service: TableService, table: str, text: str, top: int | None) -> list[Any]:
    pages: list[Any] = []
    token: tuple[str | None, str | None] = (None, None)
    for _ in range(500):
        page = await service.query_entities(ACCOUNT, table, text, top, *token)
        pages.append(
            (
                [(e.pk, e.rk, e.ticks, e.blob) for e in page.entities],
                page.next_partition_token,
                page.next_row_token,
                page.scanned,
            )
        )
        if page.next_partition_token is None:
            return pages
        token = (page.next_partition_token, page.next_row_token)
    raise AssertionError("paging did not end")


_stepping_tables = iter(range(10**9))


def _assert_same_page(stepped: Any, plain: Any, context: object) -> None:
    """Stepping's page is the plain plan's: its entities (and their versions), its continuation
    and its count of rows scanned."""
    assert [(e.pk, e.rk, e.ticks) for e in stepped.entities] == [
        (e.pk, e.rk, e.ticks) for e in plain.entities
    ], context
    assert (stepped.next_partition_token, stepped.next_row_token, stepped.scanned) == (
        plain.next_partition_token,
        plain.next_row_token,
        plain.scanned,
    ), context


async def _load_flagged(tables: Any, table: str, partitions: Iterable[int], size: int) -> None:
    """Partitions ``pNN`` of ``size`` entities (RowKeys ``000``…), every other one matching
    ``flag eq true``."""
    for p in partitions:
        rows = [
            Mutation(MutationKind.INSERT, f"p{p:02d}", f"{i:03d}", {"flag": (edm.BOOLEAN, i % 2 == 0)})
            for i in range(size)
        ]
        await tables.apply(ACCOUNT, table, rows)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    partitions=st.lists(
        st.tuples(st.integers(1, 40), st.sampled_from(sorted(DENSITIES))), min_size=1, max_size=7
    ),
    queries=st.lists(
        st.tuples(st.sampled_from(STEPPING_FILTERS), st.one_of(st.none(), st.integers(1, 45))),
        min_size=1,
        max_size=4,
    ),
    resume=st.booleans(),
)
def test_stepping_scans_give_the_pages_of_one_statement_over_every_shard(
    stepping_url: str, partitions: list[tuple[int, str]], queries: list[tuple[str, int | None]], resume: bool
) -> None:
    """Partitions of drawn sizes whose entities match at drawn densities; every query paged with
    a drawn ``$top``, following tokens: stepping through partitions and one statement over
    every shard give the same entities, in the same order, the same tokens and the same
    counts of rows scanned. With ``resume``, stepping continues from each token the plain plan
    handed out, and the reverse."""
    table = f"steps{next(_stepping_tables)}"

    async def body() -> None:
        stores = await PostgresStores.open(stepping_url, max_size=2)
        try:
            tables = stores.tables
            assert tables._citus
            await tables.create_table(ACCOUNT, table)
            for number, (size, density) in enumerate(partitions):
                every = DENSITIES[density]
                group = [
                    Mutation(
                        MutationKind.INSERT,
                        f"p{number:02d}",
                        f"r{row:03d}",
                        {
                            "flag": (edm.BOOLEAN, every != 0 and row % every == 0),
                            "n": (edm.INT32, row % 10),
                        },
                    )
                    for row in range(size)
                ]
                await tables.apply(ACCOUNT, table, group)
            service = TableService(tables)
            for text, top in queries:
                tables._citus = False
                expected = await _pages_of(service, table, text, top)
                tables._citus = True
                actual = await _pages_of(service, table, text, top)
                assert actual == expected, (text, top)
                if resume and len(expected) > 1:
                    for page, (_rows, next_pk, next_rk, _scanned) in zip(
                        expected[1:], expected, strict=False
                    ):
                        tables._citus = True
                        stepped = await service.query_entities(ACCOUNT, table, text, top, next_pk, next_rk)
                        assert [(e.pk, e.rk) for e in stepped.entities] == [(r[0], r[1]) for r in page[0]]
                        assert (stepped.next_partition_token, stepped.next_row_token) == page[1:3]
            await tables.delete_table(ACCOUNT, table)
        finally:
            await stores.close()

    asyncio.run(body())


def test_a_dense_scan_steps_and_reads_about_what_it_returns(stepping_url: str) -> None:
    """Twelve partitions of 60 entities, every other one matching, read in pages of 50: stepping
    reads each page from the one or two partitions it lies in (statements routed to one shard,
    and one-row probes of every shard's key index for the next partition), so the rows the
    workers send back stay within twice the rows returned; one statement over every shard sends
    each shard's fill of every page."""

    async def body() -> None:
        async with recorded(stepping_url) as (stores, log):
            tables = stores.tables
            await tables.create_table(ACCOUNT, "Dense")
            await _load_flagged(tables, "Dense", range(12), 60)
            service = TableService(tables)
            sent: dict[bool, int] = {}
            for stepping in (True, False):
                tables._citus = stepping
                log.clear()
                returned = sum(
                    len(rows) for rows, *_ in await _pages_of(service, "Dense", "flag eq true", 50)
                )
                assert returned == 12 * 30
                fetched = 0
                for statement in [s for s in statements_of(log) if "FROM entities" in s[0]]:
                    if "count(*)" in statement[0]:
                        continue  # counts read the key index and send one row per shard
                    for node in await explain(stepping_url, statement, analyze=True):
                        fetched += int(node["Actual Rows"])
                sent[stepping] = fetched
            assert sent[True] <= 2 * 12 * 30, sent
            assert sent[False] > 2 * sent[True], sent

    asyncio.run(body())


def _probes(log: list[Statement]) -> int:
    """Statements of a filtered scan that ask every shard (neither a partition's read nor a count)."""
    return sum(
        1
        for text, _params in statements_of(log)
        if "FROM entities" in text and "%(part)s" not in text and "count(*)" not in text
    )


def test_a_dense_scan_asks_every_shard_about_once_a_page(stepping_url: str) -> None:
    """Forty partitions of 30 entities, every other one matching, read in pages of 40: each page
    crosses three or four partitions, yet sends one probe over every shard, now and then two (a
    probe checks the partitions the previous page expected next, several at once), where one
    per partition crossed was sent before. The pages are those of one statement over every
    shard."""

    async def body() -> None:
        async with recorded(stepping_url) as (stores, log):
            tables = stores.tables
            await tables.create_table(ACCOUNT, "Probes")
            await _load_flagged(tables, "Probes", range(40), 30)
            service = TableService(tables)
            log.clear()
            stepped = await _pages_of(service, "Probes", "flag eq true", 40)
            probes = _probes(log)
            tables._citus = False
            assert await _pages_of(service, "Probes", "flag eq true", 40) == stepped
            assert len(stepped) == 15
            # one probe per partition crossed before: 40 and more
            assert probes < 40 and probes <= 2 * len(stepped), (probes, len(stepped))

    asyncio.run(body())


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    partitions=st.lists(
        st.tuples(st.integers(1, 30), st.sampled_from(sorted(DENSITIES))), min_size=2, max_size=8
    ),
    text=st.sampled_from(STEPPING_FILTERS),
    top=st.one_of(st.none(), st.integers(1, 25)),
    changes=st.lists(
        st.one_of(st.none(), st.tuples(st.integers(0, 8), st.booleans())), min_size=1, max_size=8
    ),
)
def test_stepping_pages_follow_partitions_made_and_emptied_between_pages(
    stepping_url: str,
    partitions: list[tuple[int, str]],
    text: str,
    top: int | None,
    changes: list[tuple[int, bool] | None],
) -> None:
    """Between pages another front-end creates a partition where none was (``True``: in a gap of
    the key order the previous page's probe did not see) or empties one (``False``), or nothing
    changes (``None``: the next page trusts what the last probe found, the partition epoch
    unmoved), so the partitions a page expected next may be wrong: from each token, stepping
    gives the page, token and count of rows scanned that one statement over every shard gives
    from that token."""
    table = f"moves{next(_stepping_tables)}"

    def group(pk: str, size: int, every: int, kind: MutationKind) -> list[Mutation]:
        return [
            Mutation(
                kind,
                pk,
                f"r{row:03d}",
                {"flag": (edm.BOOLEAN, every != 0 and row % every == 0), "n": (edm.INT32, row % 10)}
                if kind is MutationKind.INSERT
                else None,
                None if kind is MutationKind.INSERT else "*",
            )
            for row in range(size)
        ]

    async def body() -> None:
        stores = await PostgresStores.open(stepping_url, max_size=2)
        other = await PostgresStores.open(stepping_url, max_size=2)  # another front-end's writes
        try:
            tables = stores.tables
            await tables.create_table(ACCOUNT, table)
            live: dict[int, int] = {}
            for number, (size, density) in enumerate(partitions):
                await tables.apply(
                    ACCOUNT, table, group(f"p{2 * number:02d}", size, DENSITIES[density], MutationKind.INSERT)
                )
                live[2 * number] = size
            service = TableService(tables)
            token: tuple[str | None, str | None] = (None, None)
            pending = list(changes)
            for _ in range(200):
                tables._citus = True
                stepped = await service.query_entities(ACCOUNT, table, text, top, *token)
                tables._citus = False
                plain = await service.query_entities(ACCOUNT, table, text, top, *token)
                _assert_same_page(stepped, plain, (text, top, token))
                if stepped.next_partition_token is None:
                    break
                token = (stepped.next_partition_token, stepped.next_row_token)
                change = pending.pop(0) if pending else None
                if change is not None:
                    where, create = change
                    number = 2 * min(where, len(partitions) - 1)
                    if create and number + 1 not in live:
                        await other.tables.apply(
                            ACCOUNT, table, group(f"p{number + 1:02d}", 7, 1, MutationKind.INSERT)
                        )
                        live[number + 1] = 7
                    elif not create and live.get(number):
                        await other.tables.apply(
                            ACCOUNT, table, group(f"p{number:02d}", live[number], 0, MutationKind.DELETE)
                        )
                        live[number] = 0
            else:
                raise AssertionError("paging did not end")
            await tables.delete_table(ACCOUNT, table)
        finally:
            await other.close()
            await stores.close()

    asyncio.run(body())


def test_a_page_reads_what_the_last_one_expected_while_a_probe_checks_it(stepping_url: str) -> None:
    """Partitions of 60 entities, every other one matching, read in pages of 30: a page that
    resumes at the end of a partition reads the partition the previous page expected next while
    a probe on another connection checks that it is the next. A partition made in that gap
    between two pages is found all the same (the probe disowns the read, and the page holds the
    new partition's entities), and a partition expected but emptied meanwhile is stepped over:
    every page is the one a statement over every shard gives."""

    def group(pk: str, size: int) -> list[Mutation]:
        return [
            Mutation(MutationKind.INSERT, pk, f"{i:03d}", {"flag": (edm.BOOLEAN, i % 2 == 0)})
            for i in range(size)
        ]

    async def body() -> None:
        async with recorded(stepping_url) as (stores, log):
            tables = stores.tables
            await tables.create_table(ACCOUNT, "Gaps")
            for p in range(0, 12, 2):
                await tables.apply(ACCOUNT, "Gaps", group(f"p{p:02d}", 60))
            service = TableService(tables)
            first = await service.query_entities(ACCOUNT, "Gaps", "flag eq true", 30, None, None)
            assert {e.pk for e in first.entities} == {"p00"}
            token = (first.next_partition_token, first.next_row_token)
            await tables.apply(ACCOUNT, "Gaps", group("p01", 60))  # in the gap the page expected
            log.clear()
            stepped = await service.query_entities(ACCOUNT, "Gaps", "flag eq true", 30, *token)
            texts = [text for text, _params in statements_of(log)]
            assert any("CROSS JOIN LATERAL" in text for text in texts)  # the probe
            assert any("= ANY(" in text and "%(need)s" in text for text in texts)  # the read beside it
            tables._citus = False
            plain = await service.query_entities(ACCOUNT, "Gaps", "flag eq true", 30, *token)
            assert [(e.pk, e.rk) for e in stepped.entities] == [(e.pk, e.rk) for e in plain.entities]
            assert [e.pk for e in stepped.entities][:5] == ["p01"] * 5
            assert (stepped.next_partition_token, stepped.next_row_token, stepped.scanned) == (
                plain.next_partition_token,
                plain.next_row_token,
                plain.scanned,
            )
            # the partitions a page expects emptied before it: each page is still the plain one
            token = (stepped.next_partition_token, stepped.next_row_token)
            for emptied in (2, 6):
                gone = [
                    Mutation(MutationKind.DELETE, f"p{emptied:02d}", f"{i:03d}", None, "*") for i in range(60)
                ]
                await tables.apply(ACCOUNT, "Gaps", gone)
                tables._citus = True
                stepped = await service.query_entities(ACCOUNT, "Gaps", "flag eq true", 30, *token)
                tables._citus = False
                plain = await service.query_entities(ACCOUNT, "Gaps", "flag eq true", 30, *token)
                assert [(e.pk, e.rk) for e in stepped.entities] == [(e.pk, e.rk) for e in plain.entities]
                assert (stepped.next_partition_token, stepped.next_row_token, stepped.scanned) == (
                    plain.next_partition_token,
                    plain.next_row_token,
                    plain.scanned,
                )
                token = (stepped.next_partition_token, stepped.next_row_token)

    asyncio.run(body())


def test_without_wide_probes_a_dense_scan_asks_for_one_partition_at_a_time(stepping_url: str) -> None:
    """A Citus without ``citus.subquery_pushdown`` (the store checks at start) never sends the
    wide probe: every probe asks for the next partition alone, and the pages are those of one
    statement over every shard all the same."""

    async def body() -> None:
        async with recorded(stepping_url) as (stores, log):
            tables = stores.tables
            assert tables._scan_hints.wide_probes  # this Citus has the setting
            tables._scan_hints.wide_probes = False
            await tables.create_table(ACCOUNT, "Narrow")
            await _load_flagged(tables, "Narrow", range(12), 30)
            service = TableService(tables)
            log.clear()
            stepped = await _pages_of(service, "Narrow", "flag eq true", 40)
            assert not any("unnest(" in text for text, _params in statements_of(log))
            tables._citus = False
            assert await _pages_of(service, "Narrow", "flag eq true", 40) == stepped
            assert sum(len(rows) for rows, *_ in stepped) == 12 * 15

    asyncio.run(body())


def test_a_page_resuming_inside_a_partition_reads_its_rest_and_the_next_in_one_statement(
    stepping_url: str,
) -> None:
    """Partitions of 60 entities, every other one matching (30 matches each), read in pages of
    45: every page ends inside a partition, so the next resumes there. Once a page has seen how
    many matches a partition gives, the next reads that partition's rest and the partition after
    it in one statement, while a probe on another connection checks that partition (it read the
    rest alone, probed, then read the next: three reads a page). The one row a page reads past
    its end (to know whether another page follows) comes with the count of rows examined up to
    it, and the partitions before it are counted beside that read, so no count waits for the
    page's last row. The pages, tokens and counts of rows examined are those of one statement
    over every shard."""

    async def body() -> None:
        async with recorded(stepping_url) as (stores, log):
            tables = stores.tables
            await tables.create_table(ACCOUNT, "Rests")
            await _load_flagged(tables, "Rests", range(10), 60)
            service = TableService(tables)
            token: tuple[str | None, str | None] = (None, None)
            reads: list[list[int]] = []  # each page's reads: how many partitions each names
            counts_after: list[int] = []  # each page's counts sent once its last row was known
            while True:
                log.clear()
                page = await service.query_entities(ACCOUNT, "Rests", "flag eq true", 45, *token)
                counts_after.append(sum(1 for text, _params in statements_of(log) if "%(last_r)s" in text))
                reads.append(
                    [
                        len(params["batch"]) if "= ANY(" in text else 1
                        for text, params in statements_of(log)
                        if "%(need)s" in text
                    ]
                )
                if page.next_partition_token is None:
                    break
                token = (page.next_partition_token, page.next_row_token)
            assert len(reads) == 7
            # the rest and the partition after it, then the first match beyond the page
            assert all(page_reads == [2, 1] for page_reads in reads[1:-1]), reads
            assert counts_after[1:-1] == [0] * 5, counts_after
            tables._citus = True
            stepped = await _pages_of(service, "Rests", "flag eq true", 45)
            tables._citus = False
            assert await _pages_of(service, "Rests", "flag eq true", 45) == stepped
            assert sum(len(rows) for rows, *_ in stepped) == 10 * 30

    asyncio.run(body())


def test_pages_trust_what_a_probe_found_while_the_partition_epoch_stays(stepping_url: str) -> None:
    """Forty partitions of 30 entities, every other one matching, read in pages of 40. A probe
    finds the next few partitions after several points, each certain; with no write since (the
    partition epoch, read first in each probe, is where it was), the pages that follow read
    those partitions without asking every shard again, until the chain runs out: half the
    probes or fewer of the same scan without the epoch (one or two a page), and the same pages
    as one statement over every shard."""

    async def body() -> None:
        async with recorded(stepping_url) as (stores, log):
            tables = stores.tables
            assert tables._scan_hints.epochs  # db init --citus made the epoch
            await tables.create_table(ACCOUNT, "Trusted")
            await _load_flagged(tables, "Trusted", range(40), 30)
            service = TableService(tables)
            probes: dict[bool, list[int]] = {}  # each middle page's probes
            for epochs in (False, True):
                tables._scan_hints.epochs = epochs
                token: tuple[str | None, str | None] = (None, None)
                stepped, probes[epochs] = [], []
                while True:
                    log.clear()
                    page = await service.query_entities(ACCOUNT, "Trusted", "flag eq true", 40, *token)
                    stepped.append([(e.pk, e.rk) for e in page.entities])
                    probes[epochs].append(_probes(log))
                    if page.next_partition_token is None:
                        break
                    token = (page.next_partition_token, page.next_row_token)
                del probes[epochs][0], probes[epochs][-1]  # the first page finds where to start
            tables._citus = False
            plain = await _pages_of(service, "Trusted", "flag eq true", 40)
            assert stepped == [[(pk, rk) for pk, rk, *_ in rows] for rows, *_ in plain]
            assert len(stepped) == 15
            # a probe a page, each checking what the last page expected; with the epoch, one
            # every third page or so
            assert all(probes[False]), probes
            assert 2 * sum(probes[True]) <= sum(probes[False]), probes

    asyncio.run(body())


@pytest.mark.parametrize("kind", [MutationKind.INSERT, MutationKind.REPLACE])
def test_a_partition_another_front_end_makes_between_pages_is_found(
    stepping_url: str, kind: MutationKind
) -> None:
    """Partitions p00, p02 … p38 of 30 entities, every other one matching, read in pages of 40
    by one front-end, whose pages trust the partitions a probe found while the partition epoch
    stays. Between two such pages another front-end (its own pool and process state) makes
    partition p(odd) just ahead, by an insert (sent in one round trip) or an upsert (the general
    write path): its write moves the epoch on after its commit, so the next page probes again
    and holds the new partition's entities. Every page is the one a statement over every shard
    gives from the same token."""
    table = f"fronts{next(_stepping_tables)}"

    async def body() -> None:
        async with recorded(stepping_url) as (stores, log):
            other = await PostgresStores.open(stepping_url, max_size=2)
            try:
                tables = stores.tables
                await tables.create_table(ACCOUNT, table)
                await _load_flagged(tables, table, range(0, 40, 2), 30)
                service = TableService(tables)
                token: tuple[str | None, str | None] = (None, None)
                made: list[str] = []
                probed_after: list[bool] = []
                seen: set[str] = set()
                for _ in range(100):
                    log.clear()
                    tables._citus = True
                    stepped = await service.query_entities(ACCOUNT, table, "flag eq true", 40, *token)
                    probed = _probes(log) > 0
                    seen.update(e.pk for e in stepped.entities)
                    if made and len(probed_after) < len(made):
                        probed_after.append(probed)
                    tables._citus = False
                    plain = await service.query_entities(ACCOUNT, table, "flag eq true", 40, *token)
                    _assert_same_page(stepped, plain, token)
                    if stepped.next_partition_token is None:
                        break
                    token = (stepped.next_partition_token, stepped.next_row_token)
                    at = int(stepped.entities[-1].pk[1:])  # the partition the page ended in
                    # once a page trusted its chain (no probe), a partition appears just ahead
                    if not probed and at % 2 == 0 and at + 1 < 40 and len(made) < 3:
                        pk = f"p{at + 1:02d}"
                        await other.tables.apply(
                            ACCOUNT,
                            table,
                            [Mutation(kind, pk, f"{i:03d}", {"flag": (edm.BOOLEAN, True)}) for i in range(5)],
                        )
                        made.append(pk)
                else:
                    raise AssertionError("paging did not end")
                assert made and probed_after and all(probed_after), (made, probed_after)
                assert set(made) <= seen, (made, sorted(seen))
                await tables.delete_table(ACCOUNT, table)
            finally:
                await other.close()

    asyncio.run(body())


def test_a_schema_distributed_before_the_epoch_pages_as_before_until_db_init_runs_again() -> None:
    """A Citus schema distributed before the partition epoch existed (its sequence dropped here)
    serves as before: inserts move no epoch, no statement names it, and every page's probe
    checks what it reads, giving the pages of one statement over every shard. ``db init
    --citus`` run again adds the sequence, and a front-end opened after it trusts its probes."""

    async def body(url: str) -> None:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute("DROP SEQUENCE entity_partition_epoch")
        async with recorded(url) as (stores, log):
            tables = stores.tables
            assert not tables._epoch and not tables._scan_hints.epochs
            await tables.create_table(ACCOUNT, "Before")
            await _load_flagged(tables, "Before", range(20), 30)
            service = TableService(tables)
            stepped = await _pages_of(service, "Before", "flag eq true", 40)
            assert not any("entity_partition_epoch" in text for text, _params in log)
            tables._citus = False
            assert await _pages_of(service, "Before", "flag eq true", 40) == stepped
        init = [sys.executable, "-m", "tabulae", "db", "init", "--citus", "--store", url]
        subprocess.run(init, check=True, capture_output=True)
        upgraded = await PostgresStores.open(url, max_size=2)
        try:
            assert upgraded.tables._scan_hints.epochs
        finally:
            await upgraded.close()

    run(body)
