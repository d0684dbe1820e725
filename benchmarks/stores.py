"""Tabulae's stores side by side: the same table workloads on SQLite, PostgreSQL and Citus in one run.

Usage (from the repository root)::

    .venv/bin/python benchmarks/stores.py --pg postgresql://user@host/db \\
        --citus postgresql://user@coordinator/db --duration 10 --tabulae-args "--workers 2"

Each store starts empty: SQLite in a fresh data directory, PostgreSQL in a new database created
on the server of ``--pg`` (dropped afterwards), Citus in a new schema of the ``--citus``
coordinator's database (the extension installed there and the workers added), distributed by
``tabulae db init --citus``. Stores whose URL is not given are left out. Every other option is
``compare.py``'s (``--workloads``, ``--duration``, ``--connections``, ``--preload-rows``,
``--scan-rows``, ``--json``...); see benchmarks/README.md.

CPU per operation is Tabulae's and, for PostgreSQL and Citus, the database's: every process of
the clusters serving the store on this machine (``dbcpu.py``), printed apart and summed, since
on SQLite the database's work is inside Tabulae's processes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict

import compare
from dbcpu import DatabaseCpu
from servers import TabulaeServer
from workloads import WORKLOADS

DEFAULT_WORKLOADS = "insert,read,batch,range,scan"
STORES = ("sqlite", "postgres", "citus")


@contextlib.contextmanager
def postgres_store(url: str) -> Iterator[str]:
    """A new database on the server of ``url``, dropped when done."""
    import psycopg

    name = f"tabulae_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type]
    try:
        base, query = url.split("?", 1) if "?" in url else (url, "")
        # the query stays: it may name the server (``?host=/run/postgresql``, a Unix socket)
        yield base.rsplit("/", 1)[0] + "/" + name + (f"?{query}" if query else "")
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # type: ignore[arg-type]


@contextlib.contextmanager
def citus_store(url: str, executor_defaults: bool = False) -> Iterator[str]:
    """A new schema in the coordinator's database, distributed with ``db init --citus``; dropped
    when done. (A new database would need the extension and the workers set up again.) With
    ``executor_defaults`` the settings ``db init --citus`` made are reset to Citus's defaults,
    to show what they change."""
    import psycopg

    name = f"tabulae_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')  # type: ignore[arg-type]
    store = f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{name}"
    try:
        subprocess.run(
            [sys.executable, "-m", "tabulae", "db", "init", "--citus", "--store", store], check=True
        )
        yield store
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')  # type: ignore[arg-type]


@contextlib.contextmanager
def store_args(store: str, args: argparse.Namespace) -> Iterator[tuple[list[str], DatabaseCpu | None]]:
    """The ``serve`` flags of a fresh store of the kind ``store``, and its database server's
    processes (None for SQLite, which runs inside Tabulae's)."""
    if store == "sqlite":
        yield [], None
    elif store == "postgres":
        with postgres_store(args.pg) as url:
            yield ["--store", url], DatabaseCpu(args.pg, url.split("?", 1)[0].rsplit("/", 1)[1], citus=False)
    else:
        with citus_store(args.citus, args.citus_executor_defaults) as url:
            yield ["--store", url], DatabaseCpu(args.citus, None, citus=True)


def print_table(names: list[str], results: dict[str, dict[str, compare.Outcome]]) -> None:
    """One row per workload: each store's throughput and p99, and Citus against PostgreSQL."""
    stores = [s for s in STORES if s in results]
    headers = ["workload", "unit"]
    for store in stores:
        headers += [store, "p99 ms"]
    if {"citus", "postgres"} <= set(stores):
        headers.append("citus/postgres")
    rows = []
    for name in names:
        outcomes = [results[s].get(name) for s in stores]
        unit = next((o.unit for o in outcomes if o is not None), WORKLOADS[name].title)
        row = [f"{name} ({WORKLOADS[name].title})", unit]
        for outcome in outcomes:
            flag = " !" if outcome is not None and outcome.flagged else ""
            row += [compare.fmt_rate(outcome.throughput if outcome else None) + flag,
                    compare.fmt_ms(outcome.p99_ms if outcome else None)]  # fmt: skip
        if {"citus", "postgres"} <= set(stores):
            c, p = results["citus"].get(name), results["postgres"].get(name)
            row.append(compare.fmt_ratio(c.throughput if c else None, p.throughput if p else None))
        rows.append(row)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    print()
    print(" | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("-+-".join("-" * w for w in widths))
    for row in rows:
        print(
            " | ".join(
                c.rjust(w) if i >= 2 else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    print("(! = flagged: failed validation, non-2xx answers or socket errors; see above)")
    compare.print_cpu(results)
    print_cost(names, results)


def print_cost(names: list[str], results: dict[str, dict[str, compare.Outcome]]) -> None:
    """CPU per operation, Tabulae's and the database server's apart and together: on SQLite
    the database runs inside Tabulae's processes, so only the total compares across stores."""
    stores = [s for s in STORES if s in results]
    headers = ["CPU µs per operation"]
    for store in stores:
        headers += [f"{store} Tabulae", f"{store} database", f"{store} total"]
    rows = []
    for name in names:
        row = [name]
        for store in stores:
            use = results[store][name].cpu_use if name in results[store] else None
            if use is None:
                row += ["-", "-", "-"]
                continue
            database = use.database_us
            row += [
                f"{use.server_us:,.1f}",
                "in Tabulae" if database is None else f"{database:,.1f}",
                f"{use.server_us + (database or 0.0):,.1f}",
            ]
        rows.append(row)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    print()
    print(" | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("-+-".join("-" * w for w in widths))
    for row in rows:
        print(
            " | ".join(
                c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    print(
        "(per operation of each workload's unit: a request, or an entity for batch and scan; "
        "database = every process of the PostgreSQL clusters serving the store, see benchmarks/README.md)"
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pg", metavar="URL", help="a PostgreSQL server to create a fresh database on")
    parser.add_argument("--citus", metavar="URL", help="a Citus coordinator's database (extension installed)")
    parser.add_argument("--no-sqlite", action="store_true", help="leave SQLite out")
    parser.add_argument(
        "--citus-executor-defaults",
        action="store_true",
        help="reset the executor settings db init --citus makes, to measure Citus's defaults",
    )
    ours, rest = parser.parse_known_args(argv)
    if not any(arg.startswith("--workloads") for arg in rest):
        rest += ["--workloads", DEFAULT_WORKLOADS]
    args = compare.parse_args(rest)
    args.pg, args.citus, args.citus_executor_defaults = ours.pg, ours.citus, ours.citus_executor_defaults
    options = compare.options_from(args)
    compare.ensure_wrk()
    names = [n.strip() for n in args.workloads.split(",") if n.strip()]
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        print(f"unknown workloads: {', '.join(unknown)}", file=sys.stderr)
        return 2
    stores = [s for s in STORES if (s == "sqlite" and not ours.no_sqlite) or (s == "postgres" and ours.pg)
              or (s == "citus" and ours.citus)]  # fmt: skip
    started = time.monotonic()
    results: dict[str, dict[str, compare.Outcome]] = {}
    for store in stores:
        with store_args(store, args) as (extra, database):
            server = TabulaeServer([*extra, *shlex.split(args.tabulae_args)])
            if database is not None:
                print(f"== {store}: database CPU counted from {database.describe()}", flush=True)
                server.database_cpu = database.seconds
            results[store] = {o.workload: o for o in compare.run_server(server, store, names, options)}
    print(
        f"\nSame wrk client and settings for every store: {options.connections} connections, "
        f"{options.threads} threads, {options.duration:.0f}s per workload; tabulae serve {args.tabulae_args}"
    )
    print_table(names, results)
    print(f"total time {time.monotonic() - started:.0f}s")
    if args.json:
        payload = {s: {n: asdict(o) for n, o in per.items()} for s, per in results.items()}
        args.json.write_text(json.dumps(payload, indent=2))
    return 1 if any(o.flagged for per in results.values() for o in per.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
