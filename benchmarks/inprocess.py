"""One request's CPU through Tabulae's application, in process: no HTTP server, no client.

It builds the real ASGI app (a SQLite store in a scratch directory, Table service only) and calls
it with the same kind of request again and again. ``--workload read`` (the default) preloads one
benchmark entity and reads it, signed with Shared Key, or with a table SAS in the query string
(the same token every time, as one client holding one token sends it). ``--keys N`` preloads N
entities (N/100 per partition over up to 100 partitions) and reads them in turn, as compare.py's
wrk clients read random keys: nothing keyed on the URL or its signature is then reused from one
read to the next, which reading one key again and again hides. ``--workload batch`` sends
``$batch`` requests of 100 inserts in the Python SDK's byte layout (compare.py's batch workload),
each into a fresh partition.

Deterministic enough to compare two versions of the code under callgrind:

    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out \\
        .venv/bin/python benchmarks/inprocess.py --auth sas --keys 500 --requests 2000
    callgrind_annotate /tmp/cg.out | head

Without valgrind it prints the CPU time per request (``time.process_time``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import pstats
import random
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import protocol
from pgturns import TurnCounter
from signing import http_date, table_sas

from tabulae.compose import build_gateway
from tabulae.config import Settings

TABLE = "bench"
PROFILE = ""  # cProfile's sort key with --profile, else empty
CONCURRENT = 1  # reads in flight at once (--concurrent)
ROUND_TRIPS = False  # count round trips to the store (--round-trips)
OVERRIDES: dict[str, Any] = {}  # settings the command line changed (--targets, --store)
COUNTER: TurnCounter | None = None  # counts round trips to the store with --round-trips


@contextlib.contextmanager
def fresh_store(url: str | None) -> Iterator[None]:
    """With ``url`` (a PostgreSQL server), the app's store is a new database on it, dropped
    afterwards (``--store``); without, the default SQLite store."""
    if url is None:
        yield
        return
    from stores import postgres_store

    global COUNTER
    with postgres_store(url) as store, contextlib.ExitStack() as stack:
        if ROUND_TRIPS:  # the app talks to the database through the counting proxy
            COUNTER = stack.enter_context(TurnCounter(store))
            store = COUNTER.url
        OVERRIDES["store_url"] = store
        try:
            yield
        finally:
            OVERRIDES.pop("store_url", None)
            COUNTER = None


@contextlib.contextmanager
def profiled() -> Iterator[None]:
    """The timed loop under cProfile when ``--profile`` asked for it (the top printed after)."""
    if not PROFILE:
        yield
        return
    profiler = cProfile.Profile(time.process_time)  # CPU, not the waits on the database
    profiler.enable()
    try:
        yield
    finally:
        profiler.disable()
        pstats.Stats(profiler).sort_stats(PROFILE).print_stats(50)


async def _call(app: Any, method: str, target: str, headers: list[tuple[str, str]], body: bytes) -> int:
    """Send one request through the ASGI app; returns the status."""
    path, _, query = target.partition("?")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 10002),
    }
    sent = False
    status = 0

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(scope, receive, send)
    return status


def _headers(
    shape: protocol.Shape, target: str, date: str, body: bytes, signed: bool
) -> list[tuple[str, str]]:
    headers = protocol.header_lines(shape, "127.0.0.1:10002", date)
    if signed:
        headers.append(("Authorization", protocol.sign(shape, target, date)))
    headers.append(("Content-Length", str(len(body))))
    return headers


@contextlib.asynccontextmanager
async def table_app(
    *, durable: bool = True, prefix: str = "bench-inprocess-"
) -> AsyncIterator[tuple[Any, str]]:
    """The Table app on a SQLite store in a scratch directory, started, with the benchmark table
    created; yields the app and the request date. ``durable=False`` skips fsync (``--in-memory``)."""
    scratch = tempfile.TemporaryDirectory(prefix=prefix)
    settings = Settings(data_dir=Path(scratch.name), services=("table",), port=10002, in_memory=not durable)
    for name, value in OVERRIDES.items():
        setattr(settings, name, value)
    if settings.workers > 1:  # as `serve` does for its workers: the directory they share
        settings.peers_dir = scratch.name
    app = build_gateway(settings)
    await app.startup()
    try:
        date = http_date()
        create = b'{"TableName": "%s"}' % TABLE.encode()
        tables = f"/{protocol.ACCOUNT}/Tables"
        await _call(app, "POST", tables, _headers(protocol.INSERT, tables, date, create, True), create)
        yield app, date
    finally:
        await app.shutdown()
        scratch.cleanup()


async def run_batches(requests: int, size: int) -> float:
    """Send ``requests`` batches of ``size`` inserts; returns CPU µs per entity."""
    async with table_app() as (app, date):
        template = protocol.BatchTemplate.create("127.0.0.1:10002", TABLE, date)
        shape = protocol.batch_shape(template.boundary)
        target = f"/{protocol.ACCOUNT}/$batch"
        frags = protocol.entity_fragments()
        bodies = [
            template.body([protocol.fill(frags, f"p{n:06d}", f"r{i:03d}") for i in range(size)])
            for n in range(requests + 1)
        ]
        headers = _headers(shape, target, date, bodies[0], True)
        assert await _call(app, "POST", target, headers, bodies[0]) == 202
        started = time.process_time()
        with profiled():
            for body in bodies[1:]:
                await _call(app, "POST", target, headers, body)
        return (time.process_time() - started) / (requests * size) * 1e6


async def run(auth: str, requests: int, keys_count: int = 1) -> float:
    """Preload, then time ``requests`` point reads; returns CPU µs per request."""
    async with table_app() as (app, date):
        insert = protocol.table_path(TABLE)
        keys = [(f"p{i % 100:03d}", f"r{i // 100:06d}") for i in range(keys_count)]
        for pk, rk in keys:
            entity = protocol.fill(protocol.entity_fragments(), pk, rk).encode()
            status = await _call(
                app, "POST", insert, _headers(protocol.INSERT, insert, date, entity, True), entity
            )
            assert status == 201, status
        sas = table_sas(TABLE, "r", protocol.API_VERSION) if auth == "sas" else ""
        reads = []
        for pk, rk in keys:
            target = protocol.entity_path(TABLE, pk, rk)
            if sas:
                target += "?" + sas
            headers = _headers(protocol.GET, target, date, b"", auth == "shared-key")
            assert await _call(app, "GET", target, headers, b"") == 200
            reads.append((target, headers))
        started = time.process_time()
        with profiled():
            for start in range(0, requests, CONCURRENT):  # CONCURRENT reads in flight at once
                if CONCURRENT == 1:  # awaited directly: no task per read to count
                    await _call(app, "GET", *reads[start % keys_count], b"")
                    continue
                await asyncio.gather(
                    *(
                        _call(app, "GET", *reads[i % keys_count], b"")
                        for i in range(start, start + CONCURRENT)
                    )
                )
        return (time.process_time() - started) / requests * 1e6


async def run_ranges(requests: int) -> float:
    """Preload one partition of 1,000 entities, then time ``requests`` queries of 100 of them
    (compare.py's ``range`` workload: ``PartitionKey eq`` and a ``RowKey`` range); returns CPU
    µs per query."""
    async with table_app() as (app, date):
        insert = protocol.table_path(TABLE)
        for i in range(1_000):
            entity = protocol.fill(protocol.entity_fragments(), "p000", f"r{i:06d}").encode()
            status = await _call(
                app, "POST", insert, _headers(protocol.INSERT, insert, date, entity, True), entity
            )
            assert status == 201, status
        queries = []
        for start in range(0, 900, 9):
            text = f"PartitionKey eq 'p000' and RowKey ge 'r{start:06d}' and RowKey lt 'r{start + 100:06d}'"
            target = protocol.query_path(TABLE, text)
            queries.append((target, _headers(protocol.GET, target, date, b"", True)))
        assert await _call(app, "GET", *queries[0], b"") == 200
        started = time.process_time()
        with profiled():
            for n in range(requests):
                await _call(app, "GET", *queries[n % len(queries)], b"")
        return (time.process_time() - started) / requests * 1e6


async def run_pages(requests: int) -> float:
    """Create four 1 GiB page blobs on a Blob-only app, then time ``requests`` Put Page of 4 KiB
    at random page offsets, in turn over the blobs (compare.py's page workload, account SAS);
    returns CPU µs per write."""
    from blobs import CONTAINER, VERSION, account_sas

    scratch = tempfile.TemporaryDirectory(prefix="bench-inprocess-pages-")
    settings = Settings(data_dir=Path(scratch.name), services=("blob",), port=10000)
    for name, value in OVERRIDES.items():
        setattr(settings, name, value)
    app = build_gateway(settings)
    await app.startup()
    try:
        sas = account_sas()
        base = [("Host", "127.0.0.1:10000"), ("x-ms-version", VERSION)]
        container = f"/{protocol.ACCOUNT}/{CONTAINER}"
        assert await _call(app, "PUT", f"{container}?restype=container&{sas}", base, b"") == 201
        names = [f"{container}/disk-{i}" for i in range(4)]
        create = [*base, ("x-ms-blob-type", "PageBlob"), ("x-ms-blob-content-length", str(1024**3))]
        for name in names:
            assert await _call(app, "PUT", f"{name}?{sas}", create, b"") == 201
        rng = random.Random(0)
        data = rng.randbytes(4096)
        writes = []
        for n in range(requests + 1):
            offset = rng.randrange(1024**3 // 4096) * 4096
            headers = [*base, ("x-ms-page-write", "update"), ("Content-Length", "4096"),
                       ("x-ms-range", f"bytes={offset}-{offset + 4095}")]  # fmt: skip
            writes.append((f"{names[n % len(names)]}?comp=page&{sas}", headers))
        assert await _call(app, "PUT", *writes[0], data) == 201
        turns = COUNTER.turns if COUNTER is not None else 0
        started = time.process_time()
        with profiled():
            for target, headers in writes[1:]:
                await _call(app, "PUT", target, headers, data)
        spent = (time.process_time() - started) / requests * 1e6
        if COUNTER is not None:
            print(f"page: {(COUNTER.turns - turns) / requests:.2f} round trips to the store per Put Page")
        return spent
    finally:
        await app.shutdown()
        scratch.cleanup()


def main() -> None:
    """Command line."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workload", choices=("read", "batch", "range", "page"), default="read")
    parser.add_argument("--auth", choices=("shared-key", "sas"), default="shared-key")
    parser.add_argument("--requests", type=int, default=None, help="20,000 reads or 200 batches")
    parser.add_argument("--keys", type=int, default=1, help="distinct entities read in turn")
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--store", metavar="URL", help="a PostgreSQL server: run on a new database there")
    parser.add_argument(
        "--round-trips",
        action="store_true",
        help="with --store, count the round trips to the database (through a counting proxy)",
    )
    parser.add_argument("--workers", type=int, help="the settings' worker count (default: the cores)")
    parser.add_argument("--profile", nargs="?", const="tottime", default="", help="print cProfile's top")
    parser.add_argument("--concurrent", type=int, default=1, help="reads in flight at once")
    parser.add_argument(
        "--targets",
        choices=("off", "worker", "server"),
        default="off",
        help="enforce targets high enough never to refuse: 'worker' a bucket per process, 'server' the "
        "buckets two workers share (the ledger)",
    )
    args = parser.parse_args()
    if args.workers:
        OVERRIDES["workers"] = args.workers
    global PROFILE, CONCURRENT, ROUND_TRIPS
    PROFILE, CONCURRENT, ROUND_TRIPS = args.profile, args.concurrent, args.round_trips
    if args.targets != "off":
        OVERRIDES.update(targets=True, partition_target=1e12, account_target=1e12)
        OVERRIDES["workers"] = 2 if args.targets == "server" else 1
    if args.workload == "batch":
        batches = args.requests or 200
        with fresh_store(args.store):
            per = asyncio.run(run_batches(batches, args.batch_size))
        print(f"batch: {per:.1f} µs CPU per entity (in process, {batches:,} batches of {args.batch_size})")
        return
    if args.workload == "range":
        queries = args.requests or 2_000
        with fresh_store(args.store):
            per = asyncio.run(run_ranges(queries))
        print(f"range: {per:.1f} µs CPU per 100-row query (in process, {queries:,} queries)")
        return
    if args.workload == "page":
        writes = args.requests or 2_000
        with fresh_store(args.store):
            per = asyncio.run(run_pages(writes))
        print(f"page: {per:.1f} µs CPU per Put Page of 4 KiB (in process, {writes:,} writes)")
        return
    args.requests = args.requests or 20_000
    with fresh_store(args.store):
        per = asyncio.run(run(args.auth, args.requests, args.keys))
    print(
        f"{args.auth}: {per:.1f} µs CPU per point read "
        f"(in process, {args.requests:,} reads of {args.keys:,} keys)"
    )


if __name__ == "__main__":
    main()
