"""The benchmark workloads: data generation (Lua data files), preloading and validation.

Every workload writes a Lua data file for its wrk script, then sends a sample of the very same
pre-signed requests through the Python client and checks the answers (status, and for queries
and batches the content) before wrk times anything.
"""

from __future__ import annotations

import json
import random
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import protocol
import queues
from client import Reply, TableHttp, count_batch_successes, preload
from queues import QueueHttp
from signing import http_date, table_sas

BENCH_TABLE = "bench"
INSERT_TABLE = "inserts"
BATCH_TABLE = "batches"
SCAN_TABLE = "scan"
PARTITIONS = 100
MAX_LIST = 100_000  # distinct pre-signed requests per list workload
SAMPLE = 20  # requests checked per list workload before timing
SCAN_PARTITION_ROWS = 1000
NEEDLE_EVERY = 10_000  # one entity in this many matches the scan's residual predicate
NEEDLE_OFFSET = 4321


@dataclass
class Options:
    """Settings shared by every workload of one run (identical for both servers)."""

    duration: float = 10.0
    connections: int = 32
    threads: int = 2
    preload_rows: int = 100_000
    scan_rows: int = 1_000_000
    azurite_scan_rows: int = 200_000
    scan_connections: int = 2
    scan_max_duration: float = 120.0
    batch_size: int = 100
    timeout: float = 30.0
    queue_messages: int = 50_000  # messages in the get+delete queue before it runs


@dataclass
class Prepared:
    """What wrk needs for one workload, plus the validation verdict."""

    script: str
    data_file: Path
    connections: int
    duration: float
    timeout: float
    multiplier: float = 1.0  # entities per request (batch size), 1 otherwise
    unit: str = "req/s"
    checked: int = 0
    failures: list[str] = field(default_factory=list)
    rows: int = 0  # scan only: entities a full scan examines
    note: str = ""
    rate_stat: str = ""  # a per-run count wrk's script reports; throughput = it / seconds


class Context:
    """Per-server state: where to write files, what has been preloaded."""

    def __init__(
        self,
        target: str,
        host: str,
        options: Options,
        workdir: Path,
        queue_host: str | None = None,
        blob_host: str | None = None,
    ) -> None:
        self.target = target
        self.host = host
        self.queue_host = queue_host or host  # where the Queue service listens
        self.blob_host = blob_host or host  # and the Blob service
        self.options = options
        self.workdir = workdir
        self.rng = random.Random(20261122)
        self.bench_loaded = False
        self.scan_loaded = 0
        self.tables_created = False
        self.run_id = uuid.uuid4().hex[:6]

    def service_host(self, service: str) -> str:
        """Where the workloads of ``service`` (table, queue, blob) send their requests."""
        return {"queue": self.queue_host, "blob": self.blob_host}.get(service, self.host)

    @property
    def rows_per_partition(self) -> int:
        """Rows in each of the 100 partitions of the preloaded table."""
        return max(200, self.options.preload_rows // PARTITIONS)

    def scan_rows(self) -> int:
        """Entities in the scan table for this target (Azurite may be capped)."""
        if self.target == "azurite":
            return min(self.options.scan_rows, self.options.azurite_scan_rows)
        return self.options.scan_rows

    async def ensure_tables(self, http: TableHttp) -> None:
        """Create the benchmark tables once."""
        if not self.tables_created:
            for table in (BENCH_TABLE, INSERT_TABLE, BATCH_TABLE, SCAN_TABLE):
                await http.create_table(table)
            self.tables_created = True

    async def ensure_bench(self, http: TableHttp) -> None:
        """Preload 100 partitions x rows_per_partition 1 KiB entities (batches of 100)."""
        await self.ensure_tables(http)
        if self.bench_loaded:
            return
        frags = protocol.entity_fragments()
        per = self.rows_per_partition
        size = self.options.batch_size

        def batches() -> Iterator[tuple[str, list[str]]]:
            for p in range(PARTITIONS):
                pk = bench_pk(p)
                for start in range(0, per, size):
                    rows = range(start, min(per, start + size))
                    yield pk, [protocol.fill(frags, pk, bench_rk(r)) for r in rows]

        loaded, seconds = await preload(http, BENCH_TABLE, batches())
        print(f"  preloaded {loaded:,} entities into {BENCH_TABLE} in {seconds:.1f}s", flush=True)
        self.bench_loaded = True

    async def ensure_scan(self, http: TableHttp) -> None:
        """Preload the scan table: scan_rows() entities, one in NEEDLE_EVERY tagged 'needle'."""
        await self.ensure_tables(http)
        rows = self.scan_rows()
        if self.scan_loaded >= rows:
            return
        hay = protocol.entity_fragments("hay")
        needle = protocol.entity_fragments("needle")
        size = min(self.options.batch_size, SCAN_PARTITION_ROWS)
        start_rows = self.scan_loaded
        reported = [time.monotonic()]

        def batches() -> Iterator[tuple[str, list[str]]]:
            for start in range(start_rows, rows, size):
                pk = f"s{start // SCAN_PARTITION_ROWS:05d}"
                bodies = []
                for index in range(
                    start, min(rows, start + size, (start // SCAN_PARTITION_ROWS + 1) * SCAN_PARTITION_ROWS)
                ):
                    frags = needle if is_needle(index) else hay
                    bodies.append(protocol.fill(frags, pk, f"r{index % SCAN_PARTITION_ROWS:04d}"))
                yield pk, bodies

        def progress(done: int) -> None:
            if time.monotonic() - reported[0] > 15:
                reported[0] = time.monotonic()
                print(f"    ... {start_rows + done:,} / {rows:,}", flush=True)

        loaded, seconds = await preload(http, SCAN_TABLE, batches(), progress=progress)
        rate = loaded / seconds if seconds else 0
        print(
            f"  preloaded {loaded:,} entities into {SCAN_TABLE} in {seconds:.1f}s ({rate:,.0f}/s)", flush=True
        )
        self.scan_loaded = rows


def bench_pk(index: int) -> str:
    """PartitionKey of preloaded partition ``index``."""
    return f"p{index:03d}"


def bench_rk(index: int) -> str:
    """RowKey of preloaded row ``index``."""
    return f"r{index:06d}"


def is_needle(index: int) -> bool:
    """Whether scan entity ``index`` matches the residual predicate."""
    return index % NEEDLE_EVERY == NEEDLE_OFFSET


def expected_needles(rows: int) -> int:
    """How many of ``rows`` scan entities match."""
    return sum(1 for i in range(NEEDLE_OFFSET, rows, NEEDLE_EVERY))


def write_data(path: Path, data: dict[str, object]) -> Path:
    """Write a Lua data file (``return {...}``) for a wrk script."""
    path.write_text("return " + protocol.lua_value(data) + "\n")
    return path


@dataclass(frozen=True)
class Line:
    """One pre-signed request of a list workload."""

    method: str
    target: str
    auth: str
    pk: str = ""
    rk: str = ""

    def tsv(self) -> str:
        """The line format requests.lua reads."""
        return f"{self.method}\t{self.target}\t{self.auth}\t{self.pk}\t{self.rk}\n"


async def send_line(http: TableHttp, line: Line, date: str, frags: list[str]) -> Reply:
    """Send one pre-signed line exactly as the Lua script builds it."""
    shape = protocol.GET if line.method == "GET" else protocol.MERGE
    body = protocol.fill(frags, line.pk, line.rk).encode() if line.pk or line.rk else None
    return await http.send(shape, line.target, body, date=date, auth=line.auth)


def check_reply(line: Line, reply: Reply, expect_rows: int | None) -> str | None:
    """A failure message for an unexpected answer, else None."""
    want = 200 if line.method == "GET" else 204
    if reply.status != want:
        return f"{line.method} {line.target[:80]} -> HTTP {reply.status} (want {want}): {reply.body[:200]!r}"
    if line.method == "GET":
        document = json.loads(reply.body)
        if expect_rows is None:
            if document.get("RowKey") is None:
                return f"GET {line.target[:80]}: no RowKey in body"
        else:
            rows = len(document.get("value", []))
            if rows != expect_rows or reply.header("x-ms-continuation-NextPartitionKey"):
                return f"query {line.target[:80]}: {rows} rows (want {expect_rows}, one page)"
    return None


class Workload:
    """Base class: a named workload that prepares files for one wrk script."""

    name = ""
    title = ""
    script = ""
    service = "table"  # which service it drives ("queue" ones get a QueueHttp)
    ceiling = False  # whether the no-op ceiling app can answer it (reads of one entity only)

    async def prepare(self, ctx: Context, http: Any) -> Prepared:
        """Preload what is needed, write the data file, validate a sample."""
        raise NotImplementedError


class ListWorkload(Workload):
    """A workload replaying a list of pre-signed requests (requests.lua)."""

    script = "requests.lua"
    expect_rows: int | None = None

    def lines(self, ctx: Context, date: str) -> list[Line]:
        """The requests, one per distinct key."""
        raise NotImplementedError

    async def prepare(self, ctx: Context, http: TableHttp) -> Prepared:
        if ctx.target != "ceiling":  # the ceiling answers every read with the same entity
            await ctx.ensure_bench(http)
        date = http_date()
        lines = self.lines(ctx, date)
        lines_path = ctx.workdir / f"{self.name}.tsv"
        with lines_path.open("w") as out:
            out.writelines(line.tsv() for line in lines)
        frags = protocol.entity_fragments()
        data_file = write_data(
            ctx.workdir / f"{self.name}.lua",
            {
                "lines": str(lines_path),
                "frags": frags,
                "heads": {
                    "GET": protocol.header_block(protocol.GET, ctx.host, date),
                    "PATCH": protocol.header_block(protocol.MERGE, ctx.host, date),
                },
            },
        )
        step = max(1, len(lines) // SAMPLE)
        sample = lines[::step][:SAMPLE]
        failures = []
        for line in sample:
            reply = await send_line(http, line, date, frags)
            problem = check_reply(line, reply, self.expect_rows)
            if problem:
                failures.append(problem)
        opts = ctx.options
        return Prepared(
            self.script,
            data_file,
            opts.connections,
            opts.duration,
            opts.timeout,
            1.0,
            "req/s",
            len(sample),
            failures,
        )

    @staticmethod
    def random_keys(ctx: Context, count: int) -> list[tuple[str, str]]:
        """``count`` preloaded keys drawn at random (with replacement when count exceeds them)."""
        per = ctx.rows_per_partition
        total = PARTITIONS * per
        if count >= total:
            picks = list(range(total))
            ctx.rng.shuffle(picks)
        else:
            picks = ctx.rng.sample(range(total), count)
        return [(bench_pk(i // per), bench_rk(i % per)) for i in picks]


class PointRead(ListWorkload):
    """GET /t(PartitionKey='..',RowKey='..') of preloaded keys."""

    name = "read"
    title = "point read"
    ceiling = True

    def lines(self, ctx: Context, date: str) -> list[Line]:
        lines = []
        for pk, rk in self.random_keys(ctx, MAX_LIST):
            path = protocol.entity_path(BENCH_TABLE, pk, rk)
            lines.append(Line("GET", path, protocol.sign(protocol.GET, path, date)))
        return lines


class PointReadSas(ListWorkload):
    """GET /t(PartitionKey='..',RowKey='..')?<table SAS> of preloaded keys: one read-only table
    SAS (``sp=r``, four hours) for every request, as one client holding one token sends them."""

    name = "read-sas"
    title = "point read, SAS"
    ceiling = True

    def lines(self, ctx: Context, date: str) -> list[Line]:
        sas = table_sas(BENCH_TABLE, "r", protocol.API_VERSION)
        return [
            Line("GET", f"{protocol.entity_path(BENCH_TABLE, pk, rk)}?{sas}", "")
            for pk, rk in self.random_keys(ctx, MAX_LIST)
        ]


class InsertOrMerge(ListWorkload):
    """PATCH without If-Match: half on preloaded keys, half on new keys."""

    name = "upsert"
    title = "insert-or-merge"

    def lines(self, ctx: Context, date: str) -> list[Line]:
        half = MAX_LIST // 2
        keys = self.random_keys(ctx, half)
        keys += [(f"u{i % PARTITIONS:03d}", f"n{ctx.run_id}{i:07d}") for i in range(half)]
        ctx.rng.shuffle(keys)
        lines = []
        for pk, rk in keys:
            path = protocol.entity_path(BENCH_TABLE, pk, rk)
            lines.append(Line("PATCH", path, protocol.sign(protocol.MERGE, path, date), pk, rk))
        return lines


class RangeScan(ListWorkload):
    """GET /t()?$filter=PartitionKey eq 'p' and RowKey ge 'x' and RowKey lt 'y' (exactly 100 rows)."""

    name = "range"
    title = "range scan 100 rows"
    expect_rows = 100

    def lines(self, ctx: Context, date: str) -> list[Line]:
        per = ctx.rows_per_partition
        lines = []
        seen: set[tuple[int, int]] = set()
        limit = min(MAX_LIST // 10, PARTITIONS * (per - 99))
        while len(lines) < limit:
            partition, start = ctx.rng.randrange(PARTITIONS), ctx.rng.randrange(per - 99)
            if (partition, start) in seen:
                continue
            seen.add((partition, start))
            text = (
                f"PartitionKey eq '{bench_pk(partition)}' and RowKey ge '{bench_rk(start)}' "
                f"and RowKey lt '{bench_rk(start + 100)}'"
            )
            target = protocol.query_path(BENCH_TABLE, text)
            lines.append(Line("GET", target, protocol.sign(protocol.GET, target, date)))
        return lines


class Mix(ListWorkload):
    """80% point reads, 20% insert-or-merge, over preloaded keys in 100 partitions."""

    name = "mix"
    title = "80/20 read/write mix"

    def lines(self, ctx: Context, date: str) -> list[Line]:
        lines = []
        for pk, rk in self.random_keys(ctx, MAX_LIST):
            path = protocol.entity_path(BENCH_TABLE, pk, rk)
            if ctx.rng.random() < 0.8:
                lines.append(Line("GET", path, protocol.sign(protocol.GET, path, date)))
            else:
                lines.append(Line("PATCH", path, protocol.sign(protocol.MERGE, path, date), pk, rk))
        return lines


class PointInsert(Workload):
    """POST /t, each with a new key (insert.lua generates the keys)."""

    name = "insert"
    title = "point insert"
    script = "insert.lua"

    async def prepare(self, ctx: Context, http: TableHttp) -> Prepared:
        await ctx.ensure_tables(http)
        date = http_date()
        path = protocol.table_path(INSERT_TABLE)
        auth = protocol.sign(protocol.INSERT, path, date)
        frags = protocol.entity_fragments()
        data_file = write_data(
            ctx.workdir / "insert.lua",
            {
                "target": path,
                "head": protocol.header_block(protocol.INSERT, ctx.host, date),
                "auth": auth,
                "frags": frags,
                "prefix": f"w{ctx.run_id}-",
                "pk_prefix": "i",
                "partitions": PARTITIONS,
            },
        )
        failures = []
        for index in range(5):
            body = protocol.fill(frags, f"i{index:03d}", f"v{ctx.run_id}-{index}").encode()
            reply = await http.send(protocol.INSERT, path, body, date=date, auth=auth)
            if reply.status != 201:
                failures.append(f"POST {path} -> HTTP {reply.status}: {reply.body[:200]!r}")
        opts = ctx.options
        return Prepared(
            self.script, data_file, opts.connections, opts.duration, opts.timeout, 1.0, "req/s", 5, failures
        )


class BatchInsert(Workload):
    """POST /$batch of 100 inserts into a fresh partition; reported as entities/s."""

    name = "batch"
    title = "batch insert x100"
    script = "batch.lua"

    async def prepare(self, ctx: Context, http: TableHttp) -> Prepared:
        await ctx.ensure_tables(http)
        date = http_date()
        template = protocol.BatchTemplate.create(ctx.host, BATCH_TABLE, date)
        shape = protocol.batch_shape(template.boundary)
        path = f"/{protocol.ACCOUNT}/$batch"
        auth = protocol.sign(shape, path, date)
        frags = protocol.entity_fragments()
        size = ctx.options.batch_size
        data_file = write_data(
            ctx.workdir / "batch.lua",
            {
                "target": path,
                "head": protocol.header_block(shape, ctx.host, date),
                "auth": auth,
                "frags": frags,
                "prefix": f"b{ctx.run_id}-",
                "size": size,
                "template": {
                    "start": template.start,
                    "part_a": template.part_a,
                    "part_b": template.part_b,
                    "part_c": template.part_c,
                    "end": template.end,
                },
            },
        )
        pk = f"v{ctx.run_id}"
        body = template.body([protocol.fill(frags, pk, f"r{i:03d}") for i in range(size)])
        reply = await http.send(shape, path, body, date=date, auth=auth)
        failures = []
        if reply.status != 202 or count_batch_successes(reply.body) != size:
            failures.append(
                f"$batch -> HTTP {reply.status}, {count_batch_successes(reply.body)}/{size} parts ok: "
                f"{reply.body[:300]!r}"
            )
        opts = ctx.options
        return Prepared(
            self.script,
            data_file,
            opts.connections,
            opts.duration,
            opts.timeout,
            float(size),
            "entities/s",
            1,
            failures,
        )


class TableScan(Workload):
    """GET /scan()?$filter=tag eq 'needle' over N entities, all pages; reported as entities scanned/s."""

    name = "scan"
    title = "filtered table scan"
    script = "scan.lua"

    async def prepare(self, ctx: Context, http: TableHttp) -> Prepared:
        await ctx.ensure_scan(http)
        rows = ctx.scan_rows()
        date = http_date()
        target = protocol.query_path(SCAN_TABLE, "tag eq 'needle'")
        auth = protocol.sign(protocol.GET, target, date)
        data_file = write_data(
            ctx.workdir / "scan.lua",
            {
                "target": target,
                "head": protocol.header_block(protocol.GET, ctx.host, date),
                "auth": auth,
                "rows": rows,
            },
        )
        failures = []
        started = time.monotonic()
        matched, pages = await http.query_all(target)
        single = time.monotonic() - started
        want = expected_needles(rows)
        if matched != want:
            failures.append(f"scan matched {matched} entities (want {want})")
        opts = ctx.options
        connections = max(opts.threads, min(opts.scan_connections, opts.connections))
        # Enough time for about three full scans per connection, within the cap.
        duration = max(opts.duration, min(opts.scan_max_duration, 3 * single * connections))
        note = f"{rows:,} rows; one scan alone {single:.2f}s in {pages} page(s)"
        if rows < opts.scan_rows:
            note += f" (capped from {opts.scan_rows:,})"
        return Prepared(
            self.script,
            data_file,
            connections,
            duration,
            max(opts.timeout, 120.0),
            float(rows),
            "entities/s",
            1,
            failures,
            rows,
            note,
        )


class QueuePut(Workload):
    """POST /{queue}/messages with a 1 KiB message, answered once durable."""

    name = "queue-put"
    title = "queue put (durable)"
    script = "fixed.lua"
    service = "queue"

    async def prepare(self, ctx: Context, http: QueueHttp) -> Prepared:
        await http.create(queues.PUT_QUEUE)
        raw = queues.signed(
            ctx.queue_host, "POST", f"/{protocol.ACCOUNT}/{queues.PUT_QUEUE}/messages", body=queues.BODY
        )
        failures = []
        for _ in range(5):
            reply = await http.send(raw)
            if reply.status != 201:
                failures.append(f"put -> HTTP {reply.status}: {reply.body[:200]!r}")
        data_file = write_data(ctx.workdir / "queue-put.lua", {"request": raw.text()})
        opts = ctx.options
        return Prepared(
            self.script,
            data_file,
            opts.connections,
            opts.duration,
            opts.timeout,
            1.0,
            "messages/s",
            5,
            failures,
        )


class QueuePeek(Workload):
    """GET /{queue}/messages?peekonly=true on a queue of 1,000 messages: the front one, unchanged."""

    name = "queue-peek"
    title = "queue peek"
    script = "fixed.lua"
    service = "queue"

    async def prepare(self, ctx: Context, http: QueueHttp) -> Prepared:
        await http.create(queues.PEEK_QUEUE)
        have = await http.count(queues.PEEK_QUEUE)
        if have < queues.PEEK_MESSAGES:
            await http.fill(queues.PEEK_QUEUE, queues.PEEK_MESSAGES - have)
        path = f"/{protocol.ACCOUNT}/{queues.PEEK_QUEUE}/messages"
        raw = queues.signed(ctx.queue_host, "GET", path, queues.PEEK_QUERY)
        reply = await http.send(raw)
        failures = []
        if reply.status != 200 or queues.MESSAGE_TEXT.encode() not in reply.body:
            failures.append(f"peek -> HTTP {reply.status}: {reply.body[:200]!r}")
        data_file = write_data(ctx.workdir / "queue-peek.lua", {"request": raw.text()})
        opts = ctx.options
        return Prepared(
            self.script, data_file, opts.connections, opts.duration, opts.timeout, 1.0, "req/s", 1, failures
        )


class QueueGetDelete(Workload):
    """Get Messages (one, 60 s) then Delete Message with its receipt; reported as messages/s."""

    name = "queue-get-delete"
    title = "queue get+delete"
    script = "queue_getdelete.lua"
    service = "queue"

    async def prepare(self, ctx: Context, http: QueueHttp) -> Prepared:
        await http.create(queues.GET_DELETE_QUEUE)
        have = await http.count(queues.GET_DELETE_QUEUE)
        want = ctx.options.queue_messages
        if have < want:
            put, seconds = await http.fill(queues.GET_DELETE_QUEUE, want - have)
            rate = put / seconds if seconds else 0
            print(f"  put {put:,} messages into {queues.GET_DELETE_QUEUE} in {seconds:.1f}s ({rate:,.0f}/s)")
        path = f"/{protocol.ACCOUNT}/{queues.GET_DELETE_QUEUE}/messages"
        get = queues.signed(ctx.queue_host, "GET", path, queues.GET_QUERY)
        head = [(n, v) for n, v in get.headers if n in ("Host", "Accept", "x-ms-version", "x-ms-date")]
        sas = queues.queue_sas(queues.GET_DELETE_QUEUE, "p")
        failures = []
        reply = await http.send(get)
        message_id = queues.between(reply.body, b"<MessageId>", b"</MessageId>")
        receipt = queues.between(reply.body, b"<PopReceipt>", b"</PopReceipt>")
        if reply.status != 200 or not message_id:
            failures.append(f"get -> HTTP {reply.status}: {reply.body[:200]!r}")
        else:
            target = f"{path}/{message_id}?popreceipt={urllib.parse.quote(receipt, safe='')}&{sas}"
            deleted = await http.send(queues.Raw("DELETE", target, [*head, ("Content-Length", "0")]))
            if deleted.status != 204:
                failures.append(f"delete with SAS -> HTTP {deleted.status}: {deleted.body[:200]!r}")
        data_file = write_data(
            ctx.workdir / "queue-get-delete.lua",
            {
                "get": get.text(),
                "delete_prefix": path + "/",
                "delete_head": "".join(f"{n}: {v}\r\n" for n, v in [*head, ("Content-Length", "0")]),
                "sas": sas,
            },
        )
        opts = ctx.options
        return Prepared(
            self.script,
            data_file,
            opts.connections,
            opts.duration,
            opts.timeout,
            1.0,
            "messages/s",
            2,
            failures,
            rate_stat="deleted",
        )


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        PointInsert(), PointRead(), PointReadSas(), InsertOrMerge(), BatchInsert(), RangeScan(),
        TableScan(), Mix(), QueuePut(), QueuePeek(), QueueGetDelete(),
    )
}  # fmt: skip
