"""A dense filtered scan on PostgreSQL and Citus, in process: every page of ``flag eq true``.

It loads ``--rows`` ~1 KiB entities (1,000 a partition, batches of 100) whose ``flag`` is true
for every other one (``--sparse``: one in 10,000), into a new database on ``--pg`` and a new
schema on ``--citus``, then reads every page of ``flag eq true`` through the Table service,
following continuation tokens, and prints the time, the pages, the entities returned and the
rows the database read for them: the growth of ``seq_tup_read + idx_tup_fetch`` of the entity
tables (on Citus, of the shards on every worker), read after the statistics were flushed.
Both stores are loaded first; then ``--repeat`` rounds each scan PostgreSQL and, moments later,
Citus as Tabulae scans (partition stepping, ``tabulae.storage.postgres.citus_scans``), and print
Citus's time over PostgreSQL's for every round, since one run on a busy machine says little
(rows read are counted in the first round). Last, Citus once more with one statement over every
shard (the plain PostgreSQL plan), so the two plans compare in one run.

    .venv/bin/python benchmarks/dense_scan.py --pg postgresql://… --citus postgresql://… --rows 200000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from typing import NamedTuple

import psycopg
from stores import citus_store, postgres_store

from tabulae.model import edm
from tabulae.model.mutation import Mutation, MutationKind
from tabulae.storage.postgres import PostgresStores
from tabulae.table.service import TableService

ACCOUNT = "devstoreaccount1"
TABLE = "dense"
PARTITION_ROWS = 1000
FLUSH = 11.0  # seconds: an idle backend flushes its table statistics within 10

_READ = (
    "SELECT coalesce(sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)), 0)"
    " FROM pg_stat_user_tables WHERE relname LIKE 'entities%%' AND schemaname = current_schema()"
)


def rows_read(url: str, citus: bool, schema: str | None) -> int:
    """Rows the entity tables (or their shards) have read so far."""
    with psycopg.connect(url, autocommit=True) as conn:
        if not citus:
            row = conn.execute(_READ).fetchone()
            return int(row[0]) if row else 0
        query = _READ.replace("%%", "%").replace("current_schema()", f"'{schema}'")
        results = conn.execute(
            "SELECT result FROM run_command_on_workers(%s)",
            (query,),  # type: ignore[arg-type]
        ).fetchall()
        return sum(int(result) for (result,) in results)


async def load(stores: PostgresStores, rows: int, every: int) -> None:
    await stores.tables.create_table(ACCOUNT, TABLE)
    pad = "x" * 900
    for start in range(0, rows, 100):
        pk = f"p{start // PARTITION_ROWS:05d}"
        group = [
            Mutation(
                MutationKind.INSERT,
                pk,
                f"r{index % PARTITION_ROWS:04d}",
                {"flag": (edm.BOOLEAN, index % every == 0), "pad": (edm.STRING, pad)},
            )
            for index in range(start, min(rows, start + 100))
        ]
        await stores.tables.apply(ACCOUNT, TABLE, group)


async def scan(stores: PostgresStores, top: int | None = None) -> tuple[float, int, int]:
    service = TableService(stores.tables)
    token: tuple[str | None, str | None] = (None, None)
    pages = returned = 0
    started = time.perf_counter()
    while True:
        page = await service.query_entities(ACCOUNT, TABLE, "flag eq true", top, *token)
        pages += 1
        returned += len(page.entities)
        if page.next_partition_token is None:
            return time.perf_counter() - started, pages, returned
        token = (page.next_partition_token, page.next_row_token)


class Store(NamedTuple):
    name: str
    url: str
    citus: bool
    stores: PostgresStores


async def measured_scan(
    store: Store, stepping: bool, count_rows: bool, top: int | None
) -> tuple[float, int, int, int | None]:
    """One scan of every page: seconds, pages, entities returned, rows read (when counted)."""
    schema = store.url.split("search_path%3D", 1)[1] if "search_path%3D" in store.url else None
    store.stores.tables._citus = stepping
    before = 0
    if count_rows:
        await asyncio.sleep(FLUSH)
        before = rows_read(store.url, store.citus, schema)
    seconds, pages, returned = await scan(store.stores, top)
    if not count_rows:
        return seconds, pages, returned, None
    await asyncio.sleep(FLUSH)
    return seconds, pages, returned, rows_read(store.url, store.citus, schema) - before


async def measure(
    opened: list[tuple[str, str, bool]], rows: int, every: int, repeat: int, plain: bool, top: int | None
) -> None:
    """Load every store, then scan them in turn ``repeat`` times (PostgreSQL, then Citus as
    Tabulae scans, so each round compares two scans made moments apart), counting the rows
    read in the first round; then, on Citus, one statement over every shard once."""
    stores: list[Store] = []
    try:
        for name, url, citus in opened:
            store = Store(name, url, citus, await PostgresStores.open(url))
            stores.append(store)
            started = time.perf_counter()
            await load(store.stores, rows, every)
            print(f"{name}: loaded {rows:,} entities in {time.perf_counter() - started:.0f}s", flush=True)
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE entities")
        times: dict[str, list[float]] = {store.name: [] for store in stores}
        for round_ in range(repeat):
            for store in stores:
                seconds, pages, returned, read = await measured_scan(store, store.citus, round_ == 0, top)
                times[store.name].append(seconds)
                label = "as Tabulae scans" if store.citus else ""
                counted = (
                    ""
                    if read is None
                    else (f", {read:,} rows read ({read / max(returned, 1):.2f} per entity returned)")
                )
                print(
                    f"round {round_ + 1} {store.name} {label}: {seconds:.2f}s, {pages} pages,"
                    f" {returned:,} entities returned{counted}",
                    flush=True,
                )
        if "postgres" in times and "citus" in times:
            ratios = [c / p for p, c in zip(times["postgres"], times["citus"], strict=True)]
            print("citus / postgres, each round: " + ", ".join(f"{r:.2f}x" for r in ratios), flush=True)
        for store in stores:
            if store.citus and plain:
                seconds, pages, returned, read = await measured_scan(store, False, True, top)
                print(
                    f"{store.name} one statement over every shard: {seconds:.2f}s, {pages} pages,"
                    f" {returned:,} entities returned, {read:,} rows read"
                    f" ({(read or 0) / max(returned, 1):.2f} per entity returned)",
                    flush=True,
                )
    finally:
        for store in stores:
            await store.stores.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pg", metavar="URL")
    parser.add_argument("--citus", metavar="URL")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--sparse", action="store_true", help="one entity in 10,000 matches")
    parser.add_argument(
        "--top",
        type=int,
        help="entities a page (default the service's 1,000: every page ends where a partition's"
        " matches do; 300 ends pages inside partitions)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="rounds of scans (rows read: the first)")
    parser.add_argument(
        "--no-plain", action="store_true", help="on Citus, leave out one statement over every shard"
    )
    args = parser.parse_args()
    every = 10_000 if args.sparse else 2
    with contextlib.ExitStack() as stack:
        opened: list[tuple[str, str, bool]] = []
        if args.pg:
            opened.append(("postgres", stack.enter_context(postgres_store(args.pg)), False))
        if args.citus:
            opened.append(("citus", stack.enter_context(citus_store(args.citus)), True))
        asyncio.run(measure(opened, args.rows, every, args.repeat, not args.no_plain, args.top))


if __name__ == "__main__":
    main()
