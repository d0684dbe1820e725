"""Property indexes: a selective filter with and without an index, what an index costs writes,
and how fast one is built. Prints numbers; asserts nothing.

Runs in-process against the Table service over each store (no HTTP: the numbers are the
engine's and the planner's, the part an index changes), in one run per store:

1. load ``--rows`` entities in batches of 100 (``Email`` unique, except ``--matches`` entities
   sharing the value ``needle@example.com``, spread over the table);
2. time ``Email eq 'needle@example.com'`` without an index (a table scan), ``--scan-repeats``
   times; build the index and report entities/s; time the same query through the index,
   ``--repeats`` times; print p50/p99 side by side with the ratio and the scanned counts;
3. insert ``--insert-rows`` entities in batches of 100, and ``--single-rows`` one by one, into a
   fresh table without an index and into one with an index on ``Email``, alternating rounds, and
   print entities/s of each and the ratio.

::

    .venv/bin/python benchmarks/indexes.py                          # SQLite, 200,000 entities
    .venv/bin/python benchmarks/indexes.py --rows 1000000 --store both --pg-url postgresql://…
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from tabulae.model import edm
from tabulae.model.mutation import Mutation, MutationKind
from tabulae.storage.stores import Stores
from tabulae.table.service import TableService

ACCOUNT = "bench"
NEEDLE = "needle@example.com"
FILTER = f"Email eq '{NEEDLE}'"


def entity(index: int, matches: int, rows: int, prefix: str = "") -> Mutation:
    step = max(1, rows // max(1, matches))
    email = (
        NEEDLE
        if matches and index % step == step // 2 and index // step < matches
        else f"u{index}@example.com"
    )
    properties = {
        "Email": (edm.STRING, prefix + email if email != NEEDLE else email),
        "Age": (edm.INT32, index % 90),
        "Name": (edm.STRING, f"person number {index}"),
        "Score": (edm.DOUBLE, index / 7),
    }
    return Mutation(MutationKind.INSERT, f"p{index // 1000:05d}", f"r{index % 1000:04d}", properties)


async def load(service: TableService, table: str, rows: int, matches: int, prefix: str = "") -> float:
    started = time.perf_counter()
    for first in range(0, rows, 100):
        batch = [entity(i, matches, rows, prefix) for i in range(first, min(rows, first + 100))]
        # one partition per batch: keys of 100 consecutive indexes share a partition
        by_pk: dict[str, list[Mutation]] = {}
        for mutation in batch:
            by_pk.setdefault(mutation.pk, []).append(mutation)
        for group in by_pk.values():
            await service.submit_batch(ACCOUNT, table, group)
    return time.perf_counter() - started


async def timed(call: Callable[[], Awaitable[Any]], repeats: int) -> tuple[list[float], Any]:
    times: list[float] = []
    result = None
    for _ in range(repeats):
        started = time.perf_counter()
        result = await call()
        times.append(time.perf_counter() - started)
    return times, result


def quantile(times: list[float], q: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def query_comparison(service: TableService, args: argparse.Namespace) -> None:
    await service.create_table(ACCOUNT, "people")
    seconds = await load(service, "people", args.rows, args.matches)
    print(f"  loaded {args.rows:,} entities in {seconds:.1f} s ({args.rows / seconds:,.0f} entities/s)")

    async def query() -> Any:
        """Every page, following continuation tokens (a long scan ends pages early)."""
        page = await service.query_entities(ACCOUNT, "people", FILTER, None, None, None)
        entities, scanned, pages = list(page.entities), page.scanned, 1
        while page.next_partition_token is not None:
            tokens = (page.next_partition_token, page.next_row_token)
            page = await service.query_entities(ACCOUNT, "people", FILTER, None, *tokens)
            entities += page.entities
            scanned += page.scanned
            pages += 1
        return page.query_class, entities, scanned, pages

    scan_times, scan_page = await timed(query, args.scan_repeats)
    started = time.perf_counter()
    info = await service.add_index(ACCOUNT, "people", "Email", edm.STRING, wait=True)
    build = time.perf_counter() - started
    assert info.state == "ready", info
    print(f"  index build: {build:.2f} s, {args.rows / build:,.0f} entities/s")
    await timed(query, 5)  # warm
    index_times, index_page = await timed(query, args.repeats)
    assert [e.rk for e in scan_page[1]] == [e.rk for e in index_page[1]]
    print(f"  {FILTER} ({len(index_page[1])} matches, all pages):")
    print(f"    {'':12} {'class':12} {'scanned':>10} {'pages':>6} {'p50 ms':>10} {'p99 ms':>10}")
    for name, times, page in (("unindexed", scan_times, scan_page), ("indexed", index_times, index_page)):
        p50, p99 = quantile(times, 0.5) * 1000, quantile(times, 0.99) * 1000
        print(f"    {name:12} {page[0]:12} {page[2]:>10,} {page[3]:>6} {p50:>10.3f} {p99:>10.3f}")
    ratio = statistics.median(scan_times) / statistics.median(index_times)
    print(f"    indexed is {ratio:,.0f}x faster (p50)")


async def insert_comparison(service: TableService, args: argparse.Namespace) -> None:
    rates: dict[str, list[float]] = {
        "batch, no index": [],
        "batch, 1 index": [],
        "single, no index": [],
        "single, 1 index": [],
    }
    for round_number in range(args.rounds):
        for indexed in (False, True):
            table = f"ins{round_number}{'i' if indexed else 'n'}"
            await service.create_table(ACCOUNT, table)
            if indexed:
                await service.add_index(ACCOUNT, table, "Email", edm.STRING, wait=True)
            label = "1 index" if indexed else "no index"
            seconds = await load(service, table, args.insert_rows, 0)
            rates[f"batch, {label}"].append(args.insert_rows / seconds)
            started = time.perf_counter()
            for i in range(args.single_rows):
                await service.write(ACCOUNT, table, entity(args.insert_rows + i, 0, 1, "s"))
            rates[f"single, {label}"].append(args.single_rows / (time.perf_counter() - started))
            await service.delete_table(ACCOUNT, table)
    print(f"  inserts ({args.rounds} alternating rounds, median entities/s):")
    for kind in ("batch", "single"):
        plain = statistics.median(rates[f"{kind}, no index"])
        with_index = statistics.median(rates[f"{kind}, 1 index"])
        cost = plain / with_index
        print(f"    {kind:7} no index {plain:>10,.0f}   1 index {with_index:>10,.0f}   cost {cost:.2f}x")


async def open_store(kind: str, args: argparse.Namespace, directory: Path) -> Stores:
    if kind == "sqlite":
        from tabulae.storage.sqlite import SqliteStores

        return SqliteStores(directory, durable=True)
    from tabulae.storage.postgres import PostgresStores

    if not args.pg_url:
        raise SystemExit("--store postgres needs --pg-url or TABULAE_TEST_PG_URL")
    return await PostgresStores.open(args.pg_url)


async def main(args: argparse.Namespace) -> None:
    kinds = ["sqlite", "postgres"] if args.store == "both" else [args.store]
    for kind in kinds:
        with tempfile.TemporaryDirectory(prefix="tabulae-bench-") as directory:
            stores = await open_store(kind, args, Path(directory))
            service = TableService(stores.tables)
            for table in await stores.tables.list_tables(ACCOUNT, None, 1000):
                await service.delete_table(ACCOUNT, table)  # a leftover of an interrupted run
            print(f"{kind}:")
            try:
                await query_comparison(service, args)
                await insert_comparison(service, args)
                await service.delete_table(ACCOUNT, "people")
            finally:
                await stores.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000, help="entities in the queried table")
    parser.add_argument("--matches", type=int, default=10, help="entities the filter matches")
    parser.add_argument("--repeats", type=int, default=200, help="indexed queries timed")
    parser.add_argument("--scan-repeats", type=int, default=5, help="unindexed queries timed")
    parser.add_argument("--insert-rows", type=int, default=20_000, help="entities per batch-insert round")
    parser.add_argument("--single-rows", type=int, default=500, help="entities per single-insert round")
    parser.add_argument("--rounds", type=int, default=3, help="alternating insert rounds")
    parser.add_argument("--store", choices=["sqlite", "postgres", "both"], default="sqlite")
    parser.add_argument("--pg-url", default=os.environ.get("TABULAE_TEST_PG_URL"))
    asyncio.run(main(parser.parse_args()))
