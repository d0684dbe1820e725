"""Filtered table scans in process, on SQLite and PostgreSQL, for one or more checkouts side by side.

The scan of ``compare.py`` without HTTP: ``$filter=tag eq 'needle'`` over N ~1 KiB entities (one
in 10,000 matches), every page, through ``TableService.query_entities``. It prints entities
scanned per second for each engine and each source tree given, all in one run over the same
data, so a change to the scan path (``--source /path/to/other/checkout``) is compared A/B:

    .venv/bin/python benchmarks/pushdown.py --rows 1000000
    .venv/bin/python benchmarks/pushdown.py --rows 200000 --pg-url postgresql://... \\
        --source /work/main --source .

Data is loaded once per directory/database (``--data``) and reused by later runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

TABLE = "pushdownscan"
ACCOUNT = "devstoreaccount1"
NEEDLE_EVERY = 10_000
PARTITION_ROWS = 10_000
FILTER = "tag eq 'needle'"


def _props(index: int) -> dict[str, tuple[str, Any]]:
    tag = "needle" if index % NEEDLE_EVERY == 7 else "hay"
    return {
        "tag": ("Edm.String", tag),
        "n": ("Edm.Int32", 7),
        "ratio": ("Edm.Double", 0.5),
        "flag": ("Edm.Boolean", True),
        "payload": ("Edm.String", "x" * 900),
    }


async def _open(engine: str, data: Path, pg_url: str | None) -> Any:
    if engine == "sqlite":
        from tabulae.storage.sqlite import SqliteStores

        return SqliteStores(data / "sqlite", durable=False)
    from tabulae.storage.postgres import PostgresStores, init_schema

    await init_schema(pg_url or "", citus=False)
    return await PostgresStores.open(pg_url or "", max_size=4)


async def _load(engine: str, data: Path, pg_url: str | None, rows: int) -> None:
    from tabulae.model.errors import ServiceError
    from tabulae.model.mutation import Mutation, MutationKind

    stores = await _open(engine, data, pg_url)
    try:
        store = stores.tables
        table = f"{TABLE}{rows}"
        try:
            await store.create_table(ACCOUNT, table)
        except ServiceError:
            return  # loaded by an earlier run
        started = time.monotonic()
        for start in range(0, rows, 1000):
            pk = f"s{start // PARTITION_ROWS:05d}"
            batch = [
                Mutation(MutationKind.INSERT, pk, f"r{i % PARTITION_ROWS:04d}", _props(i))
                for i in range(start, min(rows, start + 1000))
            ]
            await store.apply(ACCOUNT, table, batch)
        print(
            f"  loaded {rows:,} entities into {engine} in {time.monotonic() - started:.0f}s", file=sys.stderr
        )
    finally:
        await stores.close()


async def _measure(engine: str, data: Path, pg_url: str | None, rows: int, repeat: int) -> dict[str, Any]:
    from tabulae.table.service import TableService

    stores = await _open(engine, data, pg_url)
    try:
        service = TableService(stores.tables, page_time_budget=60.0)
        rates = []
        found = 0
        for _ in range(repeat):
            started = time.perf_counter()
            scanned = found = 0
            npk = nrk = None
            while True:
                page = await service.query_entities(ACCOUNT, f"{TABLE}{rows}", FILTER, None, npk, nrk)
                scanned += page.scanned
                found += len(page.entities)
                npk, nrk = page.next_partition_token, page.next_row_token
                if npk is None:
                    break
            rates.append(scanned / (time.perf_counter() - started))
        import tabulae

        return {"rates": rates, "found": found, "module": tabulae.__file__}
    finally:
        await stores.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--data", type=Path, default=Path("/tmp/tabulae-pushdown-bench"))
    parser.add_argument("--pg-url", help="also measure PostgreSQL at this URL")
    parser.add_argument(
        "--source", action="append", help="a checkout to measure (repeatable; default: this one)"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--engines", default="sqlite,postgres")
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # internal: one engine, in a child
    args = parser.parse_args()
    here = Path(__file__).resolve().parent.parent
    if args.measure:
        result = asyncio.run(_measure(args.measure, args.data, args.pg_url, args.rows, args.repeat))
        print(json.dumps(result))
        return
    engines = [e for e in args.engines.split(",") if e == "sqlite" or args.pg_url]
    args.data.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(here))
    for engine in engines:
        asyncio.run(_load(engine, args.data, args.pg_url, args.rows))
    sources = [Path(s).resolve() for s in (args.source or [str(here)])]
    print(f"filtered table scan, {args.rows:,} entities, $filter={FILTER}, best/median of {args.repeat}")
    print(f"{'engine':<10} {'source':<40} {'best ent/s':>12} {'median':>12} {'matches':>8}")
    for engine in engines:
        for source in sources:
            command = [sys.executable, __file__, "--measure", engine, "--rows", str(args.rows)]
            command += ["--data", str(args.data), "--repeat", str(args.repeat)]
            if args.pg_url:
                command += ["--pg-url", args.pg_url]
            env = {**os.environ, "PYTHONPATH": str(source)}
            output = subprocess.run(command, env=env, capture_output=True, text=True, check=True, cwd=source)
            result = json.loads(output.stdout.strip().splitlines()[-1])
            rates = result["rates"]
            assert result["module"].startswith(str(source)), result["module"]
            best, median = max(rates), statistics.median(rates)
            print(
                f"{engine:<10} {str(source)[-40:]:<40} {best:>12,.0f} {median:>12,.0f} {result['found']:>8}",
                flush=True,
            )


if __name__ == "__main__":
    main()
