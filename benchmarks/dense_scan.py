"""A dense filtered scan on PostgreSQL and Citus, in process: every page of ``flag eq true``.

It loads ``--rows`` ~1 KiB entities (1,000 a partition, batches of 100) whose ``flag`` is true
for every other one (``--sparse``: one in 10,000), into a new database on ``--pg`` and a new
schema on ``--citus``, then reads every page of ``flag eq true`` through the Table service,
following continuation tokens, and prints the time, the pages, the entities returned and the
rows the database read for them: the growth of ``seq_tup_read + idx_tup_fetch`` of the entity
tables (on Citus, of the shards on every worker), read after the statistics were flushed.
On Citus it runs the scan twice over the same data: as Tabulae scans (partition stepping,
``tabulae.storage.postgres.citus_scans``) and with one statement over every shard (the plain
PostgreSQL plan), so the two compare in one run.

    .venv/bin/python benchmarks/dense_scan.py --pg postgresql://… --citus postgresql://… --rows 200000
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

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


async def scan(stores: PostgresStores) -> tuple[float, int, int]:
    service = TableService(stores.tables)
    token: tuple[str | None, str | None] = (None, None)
    pages = returned = 0
    started = time.perf_counter()
    while True:
        page = await service.query_entities(ACCOUNT, TABLE, "flag eq true", None, *token)
        pages += 1
        returned += len(page.entities)
        if page.next_partition_token is None:
            return time.perf_counter() - started, pages, returned
        token = (page.next_partition_token, page.next_row_token)


async def measure(name: str, url: str, citus: bool, rows: int, every: int, plain: bool = True) -> None:
    schema = url.split("search_path%3D", 1)[1] if "search_path%3D" in url else None
    stores = await PostgresStores.open(url)
    try:
        started = time.perf_counter()
        await load(stores, rows, every)
        print(f"{name}: loaded {rows:,} entities in {time.perf_counter() - started:.0f}s", flush=True)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE entities")
        variants: list[tuple[str, bool]] = [("", False)]
        if citus:
            variants = [("as Tabulae scans", True)] + (
                [("one statement over every shard", False)] if plain else []
            )
        for label, stepping in variants:
            stores.tables._citus = stepping
            await asyncio.sleep(FLUSH)
            before = rows_read(url, citus, schema)
            seconds, pages, returned = await scan(stores)
            await asyncio.sleep(FLUSH)
            read = rows_read(url, citus, schema) - before
            print(
                f"{name} {label}: {seconds:.2f}s, {pages} pages, {returned:,} entities returned,"
                f" {read:,} rows read ({read / max(returned, 1):.2f} per entity returned)",
                flush=True,
            )
    finally:
        await stores.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pg", metavar="URL")
    parser.add_argument("--citus", metavar="URL")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--sparse", action="store_true", help="one entity in 10,000 matches")
    parser.add_argument(
        "--no-plain", action="store_true", help="on Citus, leave out one statement over every shard"
    )
    args = parser.parse_args()
    every = 10_000 if args.sparse else 2
    runs: list[tuple[str, Any, bool]] = []
    if args.pg:
        runs.append(("postgres", postgres_store(args.pg), False))
    if args.citus:
        runs.append(("citus", citus_store(args.citus), True))
    for name, store, citus in runs:
        with store as url:
            asyncio.run(measure(name, url, citus, args.rows, every, not args.no_plain))


if __name__ == "__main__":
    main()
