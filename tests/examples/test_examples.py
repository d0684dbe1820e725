"""``tabulae examples`` against real servers on each store: every pattern example passes.

The runner is run as a user runs it, a process of its own pointed at a server by a connection
string, and its closing line is checked. The examples that need a server flag run against a
server started with it: ``--targets azure`` (a low partition target, so a few hundred entities
show the throttling) for the hot partition, ``--faults`` for the retry advice; on a plain server
they say they are skipped and why.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.backends import backend_names, database_url
from tests.conftest import fresh_database
from tests.serverproc import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
NEEDS_FLAGS = {"hot-partition": ["--targets", "azure", "--partition-target", "100"],
               "retry": ["--faults", "0.1", "--faults-seed", "7"]}  # fmt: skip


def examples(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tabulae", "examples", *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=240)


def all_names() -> list[str]:
    listing = examples("--list")
    assert listing.returncode == 0, listing.stderr
    return [line.split()[0] for line in listing.stdout.splitlines()]


class Servers:
    """Starts servers of ``workers`` processes on one store, each on a fresh database (with two,
    the counters the examples read and the targets they meet must be the whole server's)."""

    def __init__(self, backend: str, tmp: pytest.TempPathFactory, workers: int = 1) -> None:
        self.backend = backend
        self.tmp = tmp
        self.workers = workers
        self.started: list[ServerProcess] = []

    def start(self, *flags: str) -> ServerProcess:
        extra = ["--workers", str(self.workers), *flags]
        if self.backend == "postgres":
            extra += ["--store", fresh_database(database_url("postgres"))]
        process = ServerProcess(self.tmp.mktemp("examples"), extra_args=extra).start()
        self.started.append(process)
        return process

    def stop(self) -> None:
        for process in self.started:
            process.stop()


@pytest.fixture(
    params=[(name, 1) for name in backend_names() if name != "citus"] + [("sqlite", 2)],
    ids=lambda param: f"{param[0]}-{param[1]}-workers",
)
def servers(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    started = Servers(*request.param[:1], tmp_path_factory, workers=request.param[1])
    yield started
    started.stop()


def closing_line(run: subprocess.CompletedProcess[str]) -> str:
    lines = run.stdout.strip().splitlines()
    assert lines, run.stderr
    return lines[-1]


def test_every_example_passes(servers: Servers, tmp_path: Path) -> None:
    names = all_names()
    assert set(NEEDS_FLAGS) <= set(names)
    page = tmp_path / "patterns.md"
    plain = [name for name in names if name not in NEEDS_FLAGS]
    server = servers.start()
    run = examples("--connection-string", server.connection_string, "--markdown", str(page), *plain)
    assert closing_line(run) == f"{len(plain)} passed, 0 failed", run.stdout + run.stderr
    assert run.returncode == 0
    # On a server without the flag an example says why it cannot run, and fails nothing (retry's
    # probe is 60 writes; hot-partition's would be three seconds' worth of its partition target).
    run = examples("--connection-string", server.connection_string, "--markdown", str(page), "retry")
    assert closing_line(run) == "0 passed, 0 failed, 1 skipped", run.stdout + run.stderr
    assert "--faults 0.1" in run.stdout and run.returncode == 0
    for name, flags in NEEDS_FLAGS.items():
        run = examples(
            "--connection-string", servers.start(*flags).connection_string, "--markdown", str(page), name
        )
        assert closing_line(run) == "1 passed, 0 failed", run.stdout + run.stderr
        assert run.returncode == 0
    # The page gathers the three runs: every example, passed, in the summary table.
    summary = [line for line in page.read_text().splitlines() if line.startswith("| [")]
    assert [line.split("]")[0][3:] for line in summary] == names
    assert all("| passed |" in line for line in summary), summary


def test_unknown_example_and_unreachable_server_are_refused_at_once() -> None:
    run = examples("--connection-string", "UseDevelopmentStorage=true", "no-such-pattern")
    assert run.returncode == 2
    assert run.stderr.startswith("tabulae: InvalidArguments: unknown example(s): no-such-pattern")
    nobody = ServerProcess(Path("unused"))  # free ports, never started
    run = examples("--connection-string", nobody.connection_string, "log-tail")
    assert run.returncode == 2
    assert run.stderr.startswith(
        f"tabulae: ConnectionRefused: cannot reach the Table endpoint {nobody.endpoint}"
    )
