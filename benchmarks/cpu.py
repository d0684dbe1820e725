"""Where a workload's CPU went: the server's processes, the load generator, and the machine.

A throughput figure alone cannot say whether a server waited (on a lock, on fsync) or ran out of
cores. These counters can: if the machine was nearly all busy, the workload was CPU-bound, and
the server's CPU per operation is what has to shrink. They come from ``/proc`` (Linux only) and
from ``getrusage`` for wrk, a reaped child of this process.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class CpuSnapshot:
    """Cumulative CPU seconds at one instant."""

    server_user: float
    server_system: float
    client: float  # reaped children of this process (wrk runs as one)
    machine_busy: float  # all cores, every state but idle and iowait
    machine_total: float
    database: dict[int, float] = field(default_factory=dict)  # a database server's processes, by pid


@dataclass(frozen=True)
class CpuUse:
    """CPU spent between two snapshots, in cores (CPU seconds per wall second) and per operation."""

    server_cores: float
    server_user_us: float  # server user CPU per operation, microseconds
    server_system_us: float  # server kernel CPU per operation, microseconds
    client_cores: float
    machine_busy: float  # fraction of all cores' time
    database_us: float | None = None  # the database server's CPU per operation, when counted

    @property
    def server_us(self) -> float:
        """Server CPU per operation, user and kernel together."""
        return self.server_user_us + self.server_system_us

    def describe(self, unit: str) -> str:
        """One line for the progress output."""
        database = "" if self.database_us is None else f"; database CPU {self.database_us:.1f} µs per {unit}"
        return (
            f"server CPU {self.server_cores:.2f} cores = {self.server_us:.1f} µs per {unit} "
            f"(user {self.server_user_us:.1f}, kernel {self.server_system_us:.1f}){database}; "
            f"wrk {self.client_cores:.2f} cores; machine {100 * self.machine_busy:.0f}% busy"
        )


def _process_seconds(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of one process, all its threads included."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0, 0.0  # it exited between listing and reading
    # Fields 14 and 15 of stat(5); the split starts at field 3 (the state).
    return int(fields[11]) / TICKS_PER_SECOND, int(fields[12]) / TICKS_PER_SECOND


def _machine_seconds() -> tuple[float, float]:
    """Busy and total CPU seconds of all cores since boot."""
    try:
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0.0, 0.0
    # user nice system idle iowait irq softirq steal (guest time is already in user)
    total = sum(values[:8])
    idle = values[3] + values[4]
    return (total - idle) / TICKS_PER_SECOND, total / TICKS_PER_SECOND


def snapshot(
    server_pids: Callable[[], list[int]], database: Callable[[], dict[int, float]] | None = None
) -> CpuSnapshot:
    """Read every counter now; ``server_pids`` lists the server's processes at this instant,
    ``database`` reads the CPU seconds of a database server's processes by pid (when it has one)."""
    user = system = 0.0
    for pid in server_pids():
        process_user, process_system = _process_seconds(pid)
        user += process_user
        system += process_system
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy, total = _machine_seconds()
    processes = database() if database is not None else {}
    return CpuSnapshot(user, system, children.ru_utime + children.ru_stime, busy, total, processes)


def between(before: CpuSnapshot, after: CpuSnapshot, seconds: float, operations: float) -> CpuUse:
    """CPU use over ``seconds`` of wall time in which ``operations`` completed.

    Only processes alive at both snapshots count fully (one that exits in between takes its
    counters with it); the benchmark's servers keep their processes for the whole run.
    """
    per_op = 1e6 / operations if operations > 0 else 0.0
    user = max(0.0, after.server_user - before.server_user)
    system = max(0.0, after.server_system - before.server_system)
    machine = after.machine_total - before.machine_total
    # Per process, as database connections come and go: one that closed in between takes only
    # its own counters away, one that opened counts all its CPU (all spent in between).
    database = sum(max(0.0, s - before.database.get(pid, 0.0)) for pid, s in after.database.items())
    return CpuUse(
        server_cores=(user + system) / seconds if seconds > 0 else 0.0,
        server_user_us=user * per_op,
        server_system_us=system * per_op,
        client_cores=(after.client - before.client) / seconds if seconds > 0 else 0.0,
        machine_busy=(after.machine_busy - before.machine_busy) / machine if machine > 0 else 0.0,
        database_us=database * per_op if after.database else None,
    )
