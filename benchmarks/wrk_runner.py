"""Run wrk with one of the Lua scripts and parse the JSON line its ``done()`` hook prints."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

LUA_DIR = Path(__file__).resolve().parent / "lua"


def ensure_wrk() -> str:
    """Path of ``wrk``; installs the Debian package when running as root and it is missing."""
    found = shutil.which("wrk")
    if found:
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        print("installing wrk (apt-get install wrk)...", flush=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", "wrk"], check=False)
        found = shutil.which("wrk")
        if found:
            return found
    raise SystemExit("wrk is required: apt-get install wrk")


@dataclass
class WrkResult:
    """Numbers from one wrk run (latencies in milliseconds)."""

    requests: int
    seconds: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    mean_ms: float
    max_ms: float
    status_errors: int
    socket_errors: int
    timeouts: int
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def rps(self) -> float:
        """Completed requests per second."""
        return self.requests / self.seconds if self.seconds else 0.0


def run_wrk(
    script: str,
    host: str,
    data_file: Path,
    *,
    threads: int,
    connections: int,
    duration: float,
    timeout: float,
) -> WrkResult:
    """Run ``wrk`` for ``duration`` seconds and return its parsed summary."""
    threads = max(1, min(threads, connections))
    command = [
        ensure_wrk(),
        "-t",
        str(threads),
        "-c",
        str(connections),
        "-d",
        f"{max(1, round(duration))}s",
        "--timeout",
        f"{max(1, round(timeout))}s",
        "-s",
        str(LUA_DIR / script),
        f"http://{host}/",
    ]
    env = dict(os.environ)
    env.update(BENCH_DATA=str(data_file), BENCH_LUA_DIR=str(LUA_DIR), BENCH_THREADS=str(threads))
    # The scripts build each large request (a 64 MiB Put Blob) as a new Lua string. With glibc's
    # defaults every one is a fresh mmap that faults in and zeroes each page, and the client then
    # spends more CPU than some servers do on the same machine. Keeping freed memory in the heap
    # makes the client's cost the copy alone, the same for every server measured.
    env.update(MALLOC_MMAP_MAX_="0", MALLOC_TRIM_THRESHOLD_=str(1 << 30))
    completed = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    line = next(
        (x for x in completed.stdout.splitlines() if x.startswith("BENCH_JSON ")),
        None,
    )
    if completed.returncode != 0 or line is None:
        raise RuntimeError(
            f"wrk failed (exit {completed.returncode}):\n"
            f"{completed.stdout[-2000:]}\n{completed.stderr[-2000:]}"
        )
    raw: dict[str, float] = json.loads(line[len("BENCH_JSON ") :])
    known = {
        "requests",
        "duration_us",
        "bytes",
        "status_errors",
        "connect_errors",
        "read_errors",
        "write_errors",
        "timeouts",
        "p50_us",
        "p90_us",
        "p99_us",
        "mean_us",
        "max_us",
    }
    return WrkResult(
        requests=int(raw["requests"]),
        seconds=raw["duration_us"] / 1e6,
        p50_ms=raw["p50_us"] / 1000,
        p90_ms=raw["p90_us"] / 1000,
        p99_ms=raw["p99_us"] / 1000,
        mean_ms=raw["mean_us"] / 1000,
        max_ms=raw["max_us"] / 1000,
        status_errors=int(raw["status_errors"]),
        socket_errors=int(raw["connect_errors"] + raw["read_errors"] + raw["write_errors"]),
        timeouts=int(raw["timeouts"]),
        extra={k: v for k, v in raw.items() if k not in known},
    )
