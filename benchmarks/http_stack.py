"""Which HTTP server should carry Tabulae: uvicorn with our protocol, or granian (ASGI)?

Runs the same workloads on the real app under each stack, alternating the stacks round after
round in one run (the machine's load drifts; alternating spreads the drift over both), and on
the no-op ceiling app under uvicorn, granian ASGI and granian RSGI, so that the part of the
difference owed to the server alone is visible beside the part that reaches the real app:

    .venv/bin/python benchmarks/http_stack.py --rounds 3 --duration 5 --workloads read,read-sas,insert

Needs granian (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable

from compare import Outcome, run_server
from servers import CeilingServer, Server, TabulaeGranianServer, TabulaeServer, tabulae_workers
from workloads import Options
from wrk_runner import ensure_wrk


def stacks(workers: int) -> dict[str, tuple[str, Callable[[], Server]]]:
    """Name → (target label, server factory)."""
    return {
        "tabulae uvicorn": (
            "tabulae",
            lambda: TabulaeServer(["--services", "table", "--workers", str(workers)]),
        ),
        "tabulae granian-asgi": ("tabulae", lambda: TabulaeGranianServer(workers)),
        "ceiling uvicorn": ("ceiling", lambda: CeilingServer(workers, "uvicorn")),
        "ceiling granian-asgi": ("ceiling", lambda: CeilingServer(workers, "granian-asgi")),
        "ceiling granian-rsgi": ("ceiling", lambda: CeilingServer(workers, "granian-rsgi")),
    }


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--preload-rows", type=int, default=20_000)
    parser.add_argument("--workers", default="", help="worker count (default: one per core)")
    parser.add_argument("--workloads", default="read,read-sas,insert")
    parser.add_argument("--no-ceiling", action="store_true", help="the real app only")
    args = parser.parse_args(argv)
    ensure_wrk()
    workers = tabulae_workers(f"--workers {args.workers}" if args.workers else "")
    options = Options(duration=args.duration, connections=args.connections, preload_rows=args.preload_rows)
    names = [n.strip() for n in args.workloads.split(",") if n.strip()]
    results: dict[tuple[str, str], list[Outcome]] = defaultdict(list)
    for round_number in range(args.rounds):
        print(f"#### round {round_number + 1} of {args.rounds}", flush=True)
        for label, (target, make) in stacks(workers).items():
            if args.no_ceiling and target == "ceiling":
                continue
            server: Server = make()
            wanted = names if target == "tabulae" else [n for n in names if n.startswith("read")]
            for outcome in run_server(server, target, wanted, options):
                results[(label, outcome.workload)].append(outcome)
    print()
    print(
        f"{workers} workers, {args.connections} connections, {args.duration:.0f}s per run, "
        f"{args.rounds} rounds"
    )
    print(
        f"{'stack':22s} {'workload':10s} {'median/s':>10s} {'runs/s':30s} {'CPU µs/op':>10s} "
        f"{'p99 ms':>7s} flags"
    )
    for (label, workload), outcomes in results.items():
        rates = [o.throughput for o in outcomes]
        cpu = statistics.median(o.cpu_use.server_us for o in outcomes if o.cpu_use is not None)
        p99 = statistics.median(o.p99_ms for o in outcomes)
        flags = sum(1 for o in outcomes if o.flagged)
        runs = ", ".join(f"{r:,.0f}" for r in rates)
        print(
            f"{label:22s} {workload:10s} {statistics.median(rates):>10,.0f} {runs:30s} {cpu:>10.1f} "
            f"{p99:>7.2f} {flags or ''}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
