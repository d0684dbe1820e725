"""``--scale``: point reads and memory of Tabulae at 100,000 and at 10,000,000 entities.

Loads one table with batches up to the baseline size, measures point reads (wrk, the same script
as the ``read`` workload) and the server's RSS, then keeps loading to the full size and measures
again, so the two rows differ only in the table's size.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shlex
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import protocol
from client import TableHttp, open_session, preload
from servers import TabulaeServer
from signing import http_date
from workloads import MAX_LIST, SAMPLE, Line, Options, check_reply, send_line, write_data
from wrk_runner import run_wrk

SCALE_TABLE = "scale"
PARTITION_ROWS = 1000


def scale_key(index: int) -> tuple[str, str]:
    """Keys of entity ``index``: 1000 rows per partition."""
    return f"s{index // PARTITION_ROWS:05d}", f"r{index % PARTITION_ROWS:04d}"


async def load(host: str, start: int, stop: int) -> float:
    """Insert entities [start, stop) with batches of 100; returns seconds taken."""
    frags = protocol.entity_fragments()
    reported = [time.monotonic()]

    def batches() -> Iterator[tuple[str, list[str]]]:
        for first in range(start, stop, 100):
            pk, _ = scale_key(first)
            bodies = [protocol.fill(frags, *scale_key(i)) for i in range(first, min(stop, first + 100))]
            yield pk, bodies

    def progress(done: int) -> None:
        now = time.monotonic()
        if now - reported[0] > 30:
            reported[0] = now
            print(f"    ... {start + done:,} / {stop:,}", flush=True)

    async with open_session() as session:
        http = TableHttp(host, session)
        await http.create_table(SCALE_TABLE)
        _, seconds = await preload(http, SCALE_TABLE, batches(), concurrency=4, progress=progress)
    return seconds


async def write_reads(host: str, rows: int, workdir: Path, rng: random.Random) -> tuple[Path, list[str]]:
    """Data file of MAX_LIST point reads over random loaded keys; validates a sample."""
    date = http_date()
    picks = rng.sample(range(rows), min(rows, MAX_LIST))
    lines = []
    for index in picks:
        path = protocol.entity_path(SCALE_TABLE, *scale_key(index))
        lines.append(Line("GET", path, protocol.sign(protocol.GET, path, date)))
    lines_path = workdir / f"scale-{rows}.tsv"
    with lines_path.open("w") as out:
        out.writelines(line.tsv() for line in lines)
    frags = protocol.entity_fragments()
    data = write_data(
        workdir / f"scale-{rows}.lua",
        {
            "lines": str(lines_path),
            "frags": frags,
            "heads": {"GET": protocol.header_block(protocol.GET, host, date)},
        },
    )
    failures = []
    async with open_session() as session:
        http = TableHttp(host, session)
        for line in lines[:: max(1, len(lines) // SAMPLE)][:SAMPLE]:
            problem = check_reply(line, await send_line(http, line, date, frags), None)
            if problem:
                failures.append(problem)
    return data, failures


def dirty_mib() -> float:
    """Data written but not yet on disk, system-wide (``Dirty`` in /proc/meminfo), in MiB."""
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("Dirty:"):
                return int(line.split()[1]) / 1024
    return 0.0


def settle_reads() -> None:
    """Let the kernel finish writing the load back before reads are timed.

    Loading 10M entities leaves gigabytes of dirty pages that the kernel writes back for minutes
    afterwards, taking CPU and disk from whatever runs then; at 100,000 entities there is next
    to nothing to write. Timing reads in that storm would measure the write-back, not the reads
    at that size, so both sizes are measured after ``sync`` (its duration is printed).
    """
    started = time.monotonic()
    dirty = dirty_mib()
    os.sync()
    print(f"  sync: {dirty:,.0f} MiB dirty, written back in {time.monotonic() - started:.1f}s", flush=True)


def disk_mib(directory: Path) -> float:
    """Size of the server's data directory in MiB."""
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file()) / 2**20


def run_scale(args: argparse.Namespace, options: Options) -> int:
    """Run the scale test and print its table; returns a process exit code."""
    stages = sorted({min(args.scale_base_rows, args.scale_rows), args.scale_rows})
    rows_out: list[list[str]] = []
    rng = random.Random(7)
    flagged = False
    server = TabulaeServer(shlex.split(args.tabulae_args))
    print(f"== tabulae scale test on {server.host} (data in {server.data_dir})", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        try:
            server.start()
            loaded = 0
            for stage in stages:
                print(f"  loading {loaded:,} -> {stage:,} entities", flush=True)
                seconds = asyncio.run(load(server.host, loaded, stage))
                rate = (stage - loaded) / seconds if seconds else 0
                loaded = stage
                settle_reads()
                data, failures = asyncio.run(write_reads(server.host, stage, Path(tmp), rng))
                for failure in failures:
                    print(f"  ! validation: {failure}", flush=True)
                result = run_wrk(
                    "requests.lua",
                    server.host,
                    data,
                    threads=options.threads,
                    connections=options.connections,
                    duration=options.duration,
                    timeout=options.timeout,
                )
                rss = server.rss_mib() or 0
                errors = result.status_errors + result.socket_errors + result.timeouts
                flagged = flagged or bool(failures) or errors > 0
                rows_out.append(
                    [
                        f"{stage:,}",
                        f"{rate:,.0f}",
                        f"{result.rps:,.0f}",
                        f"{result.p50_ms:.2f}",
                        f"{result.p99_ms:.2f}",
                        f"{rss:,.0f}",
                        f"{disk_mib(server.data_dir):,.0f}",
                        str(errors + len(failures)),
                    ]
                )
                print("    " + " | ".join(rows_out[-1]), flush=True)
        finally:
            server.stop()
    headers = ["entities", "load ent/s", "read req/s", "p50 ms", "p99 ms", "RSS MiB", "disk MiB", "errors"]
    widths = [
        max(len(h), *(len(r[i]) for r in rows_out)) if rows_out else len(h) for i, h in enumerate(headers)
    ]
    print()
    print(f"Tabulae point reads, {options.connections} connections, {options.duration:.0f}s per size:")
    print(" | ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True)))
    print("-+-".join("-" * w for w in widths))
    for row in rows_out:
        print(" | ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
    return 1 if flagged else 0
