"""The CPU of the PostgreSQL (or Citus) processes serving a benchmark's store.

A store's cost per operation is Tabulae's CPU plus the database's: on SQLite both run inside
Tabulae's processes, on PostgreSQL the database's share runs in the server's backends, so
counting Tabulae alone makes the client-server stores look cheaper than they are. This reads,
from ``/proc`` (Linux; the database on this machine), the CPU of every process descending from
the cluster's postmaster (its backends and background processes: WAL writer, checkpointer...),
and on Citus of the coordinator's and every worker's postmaster. Backends connected to another
database of the same cluster are left out, so other users of a shared server count less; on
Citus the store is a schema of the coordinator's database, so everything in that database counts.
"""

from __future__ import annotations

import os
from pathlib import Path

TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")

# The pids of backends connected to a database other than ``{database}``, comma-separated.
FOREIGN_BACKENDS = (
    "SELECT coalesce(string_agg(pid::text, ','), '') FROM pg_stat_activity "
    "WHERE datname IS NOT NULL AND datname <> '{database}'"
)


def _stat(pid: int) -> tuple[int, float] | None:
    """Parent pid and user+system CPU seconds of one process; None once it has exited."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # Fields 4, 14 and 15 of stat(5); the split starts at field 3 (the state).
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICKS_PER_SECOND


class DatabaseCpu:
    """Per-process CPU seconds of one store's database processes, read on demand.

    ``admin_url`` is a connection that is not to the store's own database when there is one
    (``--pg``'s database), so the listing's own backend is not counted; ``database`` is the
    store's database name (``admin_url``'s when None: a Citus store is a schema in it).
    """

    def __init__(self, admin_url: str, database: str | None, citus: bool) -> None:
        import psycopg

        self.admin_url = admin_url
        self.citus = citus
        with psycopg.connect(admin_url, autocommit=True) as conn:
            self.database = database or str(conn.execute("SELECT current_database()").fetchone()[0])  # type: ignore[index]
            backends = [conn.execute("SELECT pg_backend_pid()").fetchone()[0]]  # type: ignore[index]
            if citus:
                rows = conn.execute(
                    "SELECT result FROM run_command_on_workers('SELECT pg_backend_pid()') WHERE success"
                ).fetchall()
                backends += [int(row[0]) for row in rows]
        # A backend's parent is its cluster's postmaster; a worker on another machine has no
        # such process here, and its CPU is not counted.
        self.postmasters = sorted({stat[0] for pid in backends if (stat := _stat(pid)) is not None})

    def describe(self) -> str:
        """What the CPU figures cover, for the report."""
        pids = ", ".join(map(str, self.postmasters))
        return f"{len(self.postmasters)} PostgreSQL cluster(s) on this machine (postmaster pids {pids})"

    def _foreign(self) -> set[int]:
        """Backends of other databases of the same clusters, right now."""
        import psycopg

        query = FOREIGN_BACKENDS.format(database=self.database.replace("'", "''"))
        results: list[str] = []
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            results.append(conn.execute(query).fetchone()[0])  # type: ignore[index]
            if self.citus:
                rows = conn.execute(
                    "SELECT result FROM run_command_on_workers(%s) WHERE success", [query]
                ).fetchall()
                results += [row[0] for row in rows]
        return {int(pid) for text in results for pid in text.split(",") if pid}

    def seconds(self) -> dict[int, float]:
        """CPU seconds so far of every process of the clusters serving the store, by pid."""
        foreign = self._foreign()
        parents: dict[int, list[int]] = {}
        cpu: dict[int, float] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
                parents.setdefault(stat[0], []).append(int(entry.name))
                cpu[int(entry.name)] = stat[1]
        found: dict[int, float] = {}
        pending = list(self.postmasters)
        while pending:
            pid = pending.pop()
            if pid in cpu and pid not in foreign:
                found[pid] = cpu[pid]
            pending.extend(parents.get(pid, []))
        return found
