"""Run the same wrk workloads against Tabulae and Azurite and print a comparison table.

Usage (from the repository root)::

    .venv/bin/python benchmarks/compare.py                     # everything: Tabulae, Azurite, ceiling
    .venv/bin/python benchmarks/compare.py --duration 5 --scan-rows 200000
    .venv/bin/python benchmarks/compare.py --target tabulae --workloads read,insert
    .venv/bin/python benchmarks/compare.py --scale               # 10M-entity point reads + RSS

See benchmarks/README.md for what each workload does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import ceiling
import cpu
from blobs import BLOB_WORKLOADS, BlobHttp, disk_speed
from client import TableHttp, open_session
from pages import PAGE_WORKLOADS
from queues import QueueHttp
from servers import Server, ensure_azurite, make_server
from workloads import WORKLOADS as TABLE_WORKLOADS
from workloads import Context, Options, Prepared
from wrk_runner import WrkResult, ensure_wrk, run_wrk

WORKLOADS = {**TABLE_WORKLOADS, **BLOB_WORKLOADS, **PAGE_WORKLOADS}

TARGETS = ("tabulae", "azurite", "ceiling")


@dataclass
class Outcome:
    """One workload on one server: wrk's numbers, our derived throughput, validation."""

    workload: str
    target: str
    throughput: float  # in ``unit``
    unit: str
    rps: float
    p50_ms: float
    p99_ms: float
    non_2xx: int
    other_errors: int
    validation_failures: list[str]
    rss_mib: float | None
    seconds: float
    rss_file_mib: float | None = None  # the file-backed part of rss_mib (mapped database pages)
    note: str = ""
    load_avg: float = 0.0  # 1-minute load average at the end (other processes share the CPU)
    cpu_use: cpu.CpuUse | None = None  # where the CPU went while wrk ran

    @property
    def flagged(self) -> bool:
        """Whether anything went wrong (validation, non-2xx, socket errors, or nothing measured)."""
        return bool(self.validation_failures or self.non_2xx or self.other_errors or self.throughput <= 0)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--target",
        choices=[*TARGETS, "both", "all"],
        default="all",
        help="'both' is Tabulae and Azurite; 'all' (the default) adds the ceiling, a no-op app "
        "answering the read workloads with a fixed 1 KiB entity",
    )
    parser.add_argument(
        "--ceiling-server",
        choices=ceiling.SERVERS,
        default=ceiling.best_available(),
        help="the ceiling's server stack (default: the fastest installed, granian's RSGI when "
        "granian is installed, else uvicorn); it runs with Tabulae's worker count",
    )
    parser.add_argument(
        "--workloads",
        default=",".join(TABLE_WORKLOADS),
        help=f"comma-separated, from: {', '.join(WORKLOADS)}; 'blob' for every blob workload "
        "(default: the table workloads)",
    )
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per workload (default 10)")
    parser.add_argument("--connections", type=int, default=32, help="concurrent connections (default 32)")
    parser.add_argument("--threads", type=int, default=2, help="wrk threads (default 2)")
    parser.add_argument(
        "--preload-rows", type=int, default=100_000, help="entities preloaded for read/upsert/range/mix"
    )
    parser.add_argument("--scan-rows", type=int, default=1_000_000, help="entities in the scan table")
    parser.add_argument(
        "--azurite-scan-rows",
        type=int,
        default=200_000,
        help="cap on the scan table for Azurite, which keeps everything in the V8 heap (default 200,000)",
    )
    parser.add_argument(
        "--scan-connections",
        type=int,
        default=2,
        help="connections for the scan workload: each holds a whole multi-second scan (default 2)",
    )
    parser.add_argument("--scan-max-duration", type=float, default=120.0, help="cap on the scan run, seconds")
    parser.add_argument(
        "--queue-messages",
        type=int,
        default=50_000,
        help="messages in the get+delete queue before it runs, on both servers (default 50,000; "
        "it must not run dry)",
    )
    parser.add_argument("--tabulae-args", default="", help='extra arguments for "tabulae serve"')
    parser.add_argument(
        "--azurite-args", default="", help="extra arguments for azurite-table and azurite-queue"
    )
    parser.add_argument("--json", type=Path, help="also write all results to this JSON file")
    parser.add_argument("--scale", action="store_true", help="the 10M-entity scale test of Tabulae instead")
    parser.add_argument("--scale-rows", type=int, default=10_000_000, help="entities for --scale")
    parser.add_argument("--scale-base-rows", type=int, default=100_000, help="baseline entities for --scale")
    parser.add_argument(
        "--blob-memory",
        action="store_true",
        help="measure Tabulae's RSS while a 1 GiB blob is uploaded and downloaded, instead",
    )
    parser.add_argument("--blob-memory-mib", type=int, default=1024, help="blob size for --blob-memory")
    return parser.parse_args(argv)


def options_from(args: argparse.Namespace) -> Options:
    """Workload options from the command line."""
    return Options(
        duration=args.duration,
        connections=args.connections,
        threads=args.threads,
        preload_rows=args.preload_rows,
        scan_rows=args.scan_rows,
        azurite_scan_rows=args.azurite_scan_rows,
        scan_connections=args.scan_connections,
        scan_max_duration=args.scan_max_duration,
        queue_messages=args.queue_messages,
    )


def load_average() -> float:
    """The machine's 1-minute load average: a busy neighbour skews both servers' numbers."""
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0


async def prepare(ctx: Context, name: str) -> Prepared:
    """Preload, write data files and validate, with one client session."""
    workload = WORKLOADS[name]
    async with open_session() as session:
        if workload.service == "queue":
            return await workload.prepare(ctx, QueueHttp(ctx.queue_host, session))
        if workload.service == "blob":
            return await workload.prepare(ctx, BlobHttp(ctx.blob_host, session))  # type: ignore[arg-type]
        return await workload.prepare(ctx, TableHttp(ctx.host, session))


def measure(server: Server, ctx: Context, name: str) -> Outcome:
    """Prepare, validate and time one workload on a running server."""
    prepared = asyncio.run(prepare(ctx, name))
    for failure in prepared.failures:
        print(f"  ! validation: {failure}", flush=True)
    print(
        f"  {name}: wrk {prepared.connections} connections, {prepared.duration:.0f}s"
        + (f" [{prepared.note}]" if prepared.note else ""),
        flush=True,
    )
    cpu_before = cpu.snapshot(server.pids, server.database_cpu)
    started = time.monotonic()
    result: WrkResult = run_wrk(
        prepared.script,
        ctx.service_host(WORKLOADS[name].service),
        prepared.data_file,
        threads=ctx.options.threads,
        connections=prepared.connections,
        duration=prepared.duration,
        timeout=prepared.timeout,
    )
    wall = time.monotonic() - started
    cpu_after = cpu.snapshot(server.pids, server.database_cpu)
    sub_errors = int(result.extra.get("sub_errors", 0))
    # A scan is many pages: its rate is counted by scan.lua from completed scans.
    scanning = name == "scan"
    throughput = result.extra.get("scan_rate", 0.0) if scanning else result.rps * prepared.multiplier
    if prepared.rate_stat:  # counted by the script (messages deleted), not requests
        throughput = result.extra.get(prepared.rate_stat, 0.0) / result.seconds if result.seconds else 0.0
        if result.extra.get("empty_gets"):
            prepared.note += f"{int(result.extra['empty_gets'])} Get Messages found the queue empty"
    note = "; ".join(part for part in (server.describe(), prepared.note) if part)
    if name == "scan":
        note = f"{int(result.extra.get('scans', 0))} scans; " + note
    usage = cpu.between(cpu_before, cpu_after, wall, throughput * result.seconds)
    outcome = Outcome(
        workload=name,
        target=ctx.target,
        throughput=throughput,
        unit=prepared.unit,
        rps=result.rps,
        p50_ms=result.p50_ms,
        p99_ms=result.p99_ms,
        non_2xx=result.status_errors + sub_errors,
        other_errors=result.socket_errors + result.timeouts,
        validation_failures=prepared.failures,
        rss_mib=server.rss_mib(),
        rss_file_mib=server.rss_file_mib(),
        seconds=result.seconds,
        note=note,
        load_avg=load_average(),
        cpu_use=usage,
    )
    print(
        f"    {throughput:,.0f} {prepared.unit}  p50 {result.p50_ms:.2f} ms  p99 {result.p99_ms:.2f} ms  "
        f"non-2xx {outcome.non_2xx}  socket errors/timeouts {outcome.other_errors}  "
        f"RSS {outcome.rss_mib or 0:.0f} MiB ({outcome.rss_file_mib or 0:.0f} file-backed)  "
        f"load avg {outcome.load_avg:.1f}",
        flush=True,
    )
    print(f"    {usage.describe(operation_name(prepared.unit))}", flush=True)
    return outcome


def operation_name(unit: str) -> str:
    """What one counted operation is, from a rate unit: ``entities/s`` counts entities."""
    if unit.startswith("entities"):
        return "entity"
    if unit.startswith("MiB"):
        return "MiB"
    if unit.startswith("lists"):
        return "list"
    return "message" if unit.startswith("messages") else "request"


def run_target(target: str, names: list[str], args: argparse.Namespace, options: Options) -> list[Outcome]:
    """Run the workloads on ``target``: Tabulae serves every service from one process; Azurite's
    services are separate programs, each started (fresh data) for its own workloads."""
    if target == "tabulae":
        groups = [("table", names)]
    elif target == "ceiling":
        groups = [("table", [n for n in names if WORKLOADS[n].ceiling])]
    else:
        groups = [
            (service, [n for n in names if WORKLOADS[n].service == service])
            for service in ("table", "queue", "blob")
        ]
    outcomes: list[Outcome] = []
    for service, group in groups:
        if group:
            server = make_server(target, args.tabulae_args, args.azurite_args, service, args.ceiling_server)
            outcomes.extend(run_server(server, target, group, options))
    return outcomes


def run_server(server: Server, target: str, names: list[str], options: Options) -> list[Outcome]:
    """Start one server with a fresh data directory, run the workloads, stop it."""
    print(f"== {server.name}: starting on {server.host} (data in {server.data_dir})", flush=True)
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix=f"bench-data-{target}-") as workdir:
        try:
            server.start()
            ctx = Context(
                target,
                server.host,
                options,
                Path(workdir),
                queue_host=server.queue_host,
                blob_host=server.blob_host,
            )
            for name in names:
                try:
                    outcomes.append(measure(server, ctx, name))
                except Exception as exc:
                    print(f"  ! {name} failed: {exc}", flush=True)
                    if server.process is not None and server.process.poll() is not None:
                        print(f"  ! {target} exited:\n{server.log_tail()}", flush=True)
                        break
        finally:
            server.stop()
    return outcomes


def fmt_rate(value: float | None) -> str:
    """Throughput with a thousands separator, or '-'."""
    return "-" if value is None else f"{value:,.0f}"


def fmt_ms(value: float | None) -> str:
    """Milliseconds, or '-'."""
    return "-" if value is None else f"{value:.2f}"


def fmt_percent(part: Outcome | None, whole: Outcome | None) -> str:
    """``part``'s throughput as a percentage of ``whole``'s, or '-'."""
    if part is None or whole is None or whole.throughput <= 0:
        return "-"
    return f"{100 * part.throughput / whole.throughput:.0f}%"


def fmt_ratio(a: float | None, b: float | None) -> str:
    """a/b as '1.23x', or '-'."""
    if a is None or b is None or b == 0:
        return "-"
    return f"{a / b:.2f}x"


def print_table(names: list[str], results: dict[str, dict[str, Outcome]], options: Options) -> None:
    """The comparison table, one row per workload; with the ceiling's columns when it ran."""
    with_ceiling = bool(results.get("ceiling"))
    headers = [
        "workload",
        "unit",
        "Tabulae",
        "p50 ms",
        "p99 ms",
        "Azurite",
        "p50 ms",
        "p99 ms",
        "T/A tput",
        "T/A p99",
    ]
    if with_ceiling:
        headers += ["ceiling", "T/ceiling"]
    headers.append("flags")
    rows: list[list[str]] = []
    for name in names:
        t = results.get("tabulae", {}).get(name)
        a = results.get("azurite", {}).get(name)
        c = results.get("ceiling", {}).get(name)
        unit = (t or a).unit if (t or a) else WORKLOADS[name].title
        flags = []
        for outcome in (t, a, c):
            if outcome is not None and outcome.flagged:
                parts = []
                if outcome.validation_failures:
                    parts.append(f"{len(outcome.validation_failures)} failed checks")
                if outcome.non_2xx:
                    parts.append(f"{outcome.non_2xx} non-2xx")
                if outcome.other_errors:
                    parts.append(f"{outcome.other_errors} socket/timeout")
                if outcome.throughput <= 0:
                    parts.append("nothing completed")
                flags.append(f"{outcome.target}: " + ", ".join(parts))
        row = [
            f"{name} ({WORKLOADS[name].title})",
            unit,
            fmt_rate(t.throughput if t else None),
            fmt_ms(t.p50_ms if t else None),
            fmt_ms(t.p99_ms if t else None),
            fmt_rate(a.throughput if a else None),
            fmt_ms(a.p50_ms if a else None),
            fmt_ms(a.p99_ms if a else None),
            fmt_ratio(t.throughput if t else None, a.throughput if a else None),
            fmt_ratio(t.p99_ms if t else None, a.p99_ms if a else None),
        ]
        if with_ceiling:
            row += [fmt_rate(c.throughput if c else None), fmt_percent(t, c)]
        row.append("; ".join(flags) or "ok")
        rows.append(row)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    right = set(range(2, len(headers) - 1))

    def render(cells: list[str]) -> str:
        return " | ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    print()
    print(
        f"Same wrk client and settings for every server: {options.connections} connections, "
        f"{options.threads} threads, {options.duration:.0f}s per workload "
        f"(scan: {options.scan_connections} connections, adaptive duration)."
    )
    print(render(headers))
    print("-+-".join("-" * w for w in widths))
    for row in rows:
        print(render(row))
    notes = [
        f"  {o.target} {o.workload}: {o.note}" for per in results.values() for o in per.values() if o.note
    ]
    if notes:
        print("notes:")
        print("\n".join(notes))
    rss = [
        f"{target} {max((o.rss_mib or 0) for o in per.values()):.0f} MiB"
        for target, per in results.items()
        if per
    ]
    if rss:
        print("peak server RSS seen after a workload: " + ", ".join(rss))
    loads = [f"{o.target} {o.workload} {o.load_avg:.1f}" for per in results.values() for o in per.values()]
    if loads:
        print("1-min load average after each workload (2 cores): " + ", ".join(loads))
    print_cpu(results)
    print("ratios: T/A tput > 1 means Tabulae is faster; T/A p99 < 1 means Tabulae's p99 latency is lower.")
    if with_ceiling:
        stack = next(iter(results["ceiling"].values())).note
        print(
            "T/ceiling: Tabulae's rate as a share of the ceiling's, a no-op app answering the same "
            f"requests with a fixed 1 KiB entity ({stack}), same workers and wrk settings."
        )


def print_cpu(results: dict[str, dict[str, Outcome]]) -> None:
    """Where the CPU went while wrk ran: near 100% busy means the workload ran out of cores,
    and then only less CPU per operation (the server's column) makes it faster."""
    lines = [
        f"  {o.target:8s} {o.workload:16s} {o.cpu_use.describe(operation_name(o.unit))}"
        for per in results.values()
        for o in per.values()
        if o.cpu_use is not None
    ]
    if lines:
        print("CPU while wrk ran (server = all its processes; machine = all cores):")
        print("\n".join(lines))


def print_disk_ratio(results: dict[str, dict[str, Outcome]], disk: tuple[float, float]) -> None:
    """Large transfers against the disk's own sequential speed (the goal: within 2x of it)."""
    for target, per in results.items():
        for name, speed in (("blob-put-64m", disk[0]), ("blob-get-64m", disk[1])):
            outcome = per.get(name)
            if outcome is not None and outcome.throughput > 0:
                kind = "write" if "put" in name else "read"
                ratio = speed / outcome.throughput
                relation = f"{ratio:.2f}x below" if ratio >= 1 else f"{1 / ratio:.2f}x above (page cache)"
                print(
                    f"{target} {name}: {outcome.throughput:,.0f} MiB/s = {relation} "
                    f"the disk's {kind} speed ({speed:,.0f} MiB/s)"
                )


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    args = parse_args(argv)
    options = options_from(args)
    ensure_wrk()
    if args.scale:
        from scale import run_scale

        return run_scale(args, options)
    if args.blob_memory:
        from blob_memory import run_blob_memory

        return run_blob_memory(args.blob_memory_mib, args.tabulae_args)
    names = [n.strip() for n in args.workloads.split(",") if n.strip()]
    if "blob" in names:
        names = [n for n in names if n != "blob"] + list(BLOB_WORKLOADS) + list(PAGE_WORKLOADS)
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        print(
            f"unknown workloads: {', '.join(unknown)} (choose from {', '.join(WORKLOADS)})", file=sys.stderr
        )
        return 2
    targets = {"all": list(TARGETS), "both": ["tabulae", "azurite"]}.get(args.target, [args.target])
    if "azurite" in targets:
        ensure_azurite()
    started = time.monotonic()
    disk: tuple[float, float] | None = None
    if any(n in BLOB_WORKLOADS for n in names):
        with tempfile.TemporaryDirectory(prefix="bench-dd-") as scratch:
            disk = disk_speed(Path(scratch))
        print(f"disk (dd, 1 GiB, where the servers keep data): write {disk[0]:,.0f} MiB/s synced, "
              f"read {disk[1]:,.0f} MiB/s direct", flush=True)  # fmt: skip
    results: dict[str, dict[str, Outcome]] = {}
    for target in targets:
        results[target] = {o.workload: o for o in run_target(target, names, args, options)}
    print_table(names, results, options)
    if disk is not None:
        print_disk_ratio(results, disk)
    print(f"total time {time.monotonic() - started:.0f}s")
    if args.json:
        payload = {t: {n: asdict(o) for n, o in per.items()} for t, per in results.items()}
        args.json.write_text(json.dumps(payload, indent=2))
    flagged = any(o.flagged for per in results.values() for o in per.values())
    return 1 if flagged else 0


if __name__ == "__main__":
    sys.exit(main())
