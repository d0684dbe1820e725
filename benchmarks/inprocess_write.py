"""One point write's CPU through Tabulae's application, in process: no HTTP server, no client.

Like ``inprocess.py`` for reads: it builds the real ASGI app on a durable SQLite store in a
scratch directory (Table service only) and sends point inserts (each a new key, spread over 100
partitions as the wrk workload does) or insert-or-merge requests (over preloaded keys), one
after another. Each request is a commit of its own here (no concurrency, so no group), which
makes the count deterministic enough to compare two versions under callgrind:

    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out \\
        .venv/bin/python benchmarks/inprocess_write.py --op insert --requests 2000
    callgrind_annotate /tmp/cg.out | head

``--concurrent N`` keeps N requests in flight (``asyncio.gather``), so N writes share each
group commit, as under wrk's 32 connections. ``--profile`` prints the top of cProfile. Without
either it prints the CPU time per request (``time.process_time``, this process and its threads).
``--in-memory`` skips the fsyncs, as ``tabulae serve --in-memory`` does.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import time

import protocol
from inprocess import OVERRIDES, TABLE, _call, _headers, fresh_store, table_app

PARTITIONS = 100


async def run(op: str, requests: int, concurrent: int, profile: bool, durable: bool) -> float:
    """Create the table, then time ``requests`` writes; returns CPU µs per request."""
    async with table_app(durable=durable, prefix="bench-inprocess-write-") as (app, date):
        frags = protocol.entity_fragments()
        insert_path = protocol.table_path(TABLE)
        insert_auth = _headers(protocol.INSERT, insert_path, date, b"", True)
        insert_auth = [(k, v) for k, v in insert_auth if k != "Content-Length"]

        def insert(index: int) -> tuple[str, str, list[tuple[str, str]], bytes, int]:
            body = protocol.fill(frags, f"p{index % PARTITIONS:03d}", f"r{index:09d}").encode()
            return "POST", insert_path, [*insert_auth, ("Content-Length", str(len(body)))], body, 201

        def merge(index: int) -> tuple[str, str, list[tuple[str, str]], bytes, int]:
            pk, rk = f"p{index % PARTITIONS:03d}", f"r{index % 1000:09d}"
            body = protocol.fill(frags, pk, rk).encode()
            path = protocol.entity_path(TABLE, pk, rk)
            return "PATCH", path, _headers(protocol.MERGE, path, date, body, True), body, 204

        if op == "upsert":  # preload the keys the merges hit
            for index in range(1000):
                method, target, headers, body, _ = insert(index)
                await _call(app, method, target, headers, body)
        make = insert if op == "insert" else merge
        offset = 1000 if op == "insert" else 0
        prepared = [make(offset + index) for index in range(requests)]

        async def one(item: tuple[str, str, list[tuple[str, str]], bytes, int]) -> None:
            method, target, headers, body, expect = item
            status = await _call(app, method, target, headers, body)
            assert status == expect, (status, target)

        profiler = cProfile.Profile(time.process_time) if profile else None  # CPU, not the waits
        started = time.process_time()
        if profiler:
            profiler.enable()
        for start in range(0, requests, concurrent):
            await asyncio.gather(*(one(item) for item in prepared[start : start + concurrent]))
        if profiler:
            profiler.disable()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(40)
        return (time.process_time() - started) / requests * 1e6


def main() -> None:
    """Command line."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--op", choices=("insert", "upsert"), default="insert")
    parser.add_argument("--requests", type=int, default=5_000)
    parser.add_argument("--concurrent", type=int, default=1)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--in-memory", action="store_true", help="no fsync (the store's --in-memory)")
    parser.add_argument("--store", metavar="URL", help="a PostgreSQL server: run on a new database there")
    parser.add_argument("--workers", type=int, help="the settings' worker count (default: the cores)")
    args = parser.parse_args()
    if args.workers:
        OVERRIDES["workers"] = args.workers
    with fresh_store(args.store):
        per = asyncio.run(run(args.op, args.requests, args.concurrent, args.profile, not args.in_memory))
    print(
        f"{args.op}: {per:.1f} µs CPU per request (in process, {args.requests:,} requests,"
        f" {args.concurrent} in flight)"
    )


if __name__ == "__main__":
    main()
