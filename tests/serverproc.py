"""Start and stop real ``tabulae serve`` processes for tests."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

DEV_ACCOUNT = "devstoreaccount1"
DEV_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


_handed_out: set[int] = set()


def _worker_share() -> tuple[int, int]:
    """Which ports are this test process's when pytest-xdist runs several (``gw0``, ``gw1``…):
    those whose number halved, modulo the worker count, is the worker's index (Linux hands odd
    ports to ``bind`` and even ones to ``connect``, so the number itself would leave one worker
    none). A port one process has just seen free may be handed to another's bind the next
    moment; two workers starting servers at once would otherwise now and then pick the same one."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if not worker.startswith("gw") or count < 2:
        return 0, 1
    return int(worker[2:]) % count, count


def free_port() -> int:
    """A free port this test process has not handed out before, from its worker's share. The
    kernel may give the same ephemeral port to two binds in a row once the first socket is
    closed, and one server's three ports (or two servers of one test) must differ."""
    index, count = _worker_share()
    for attempt in itertools.count():
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if len(_handed_out) > 10_000 // count:  # the ephemeral range is ~28,000 ports; let it cycle
            _handed_out.clear()
        ours = (port >> 1) % count == index or attempt > 1_000  # a kernel that picks otherwise
        if ours and port not in _handed_out:
            _handed_out.add(port)
            return port
    raise AssertionError("unreachable")


def _kill_group(group: int, within: float = 0.0) -> None:
    """Kill every process of ``group``, and wait up to ``within`` seconds until none is left
    (its leader reaped first by the caller): a worker still dying holds its listening sockets,
    and a server started again on the same ports would meet them."""
    deadline = time.monotonic() + within
    with contextlib.suppress(ProcessLookupError):  # the whole group has already exited
        os.killpg(group, signal.SIGKILL)
    while _group_running(group) and time.monotonic() < deadline:
        time.sleep(0.01)


def _group_running(group: int) -> bool:
    """Whether a process of ``group`` still runs (a zombie has let go of everything; whether one
    is reaped depends on the system's init, so it does not count)."""
    with os.scandir("/proc") as entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat") as stat:
                    fields = stat.read().rpartition(")")[2].split()
            except OSError:
                continue
            if fields[2] == str(group) and fields[0] != "Z":
                return True
    return False


# The production default reserve is 64 MiB of preallocated space per data directory; hundreds of
# test servers holding that much filled a CI volume. Tests keep the reserve (its code runs) at
# 1 MiB; a test of the reserve itself names its own size, and the later flag wins.
TEST_RESERVE = ("--disk-reserve", "1")


@dataclass
class ServerProcess:
    """A running server: its port, data directory and extra flags, and how to restart it."""

    data_dir: Path
    extra_args: list[str] = field(default_factory=list)
    port: int = field(default_factory=free_port)  # the Table service's
    queue_port: int = field(default_factory=free_port)
    blob_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    env: dict[str, str] | None = None
    backend: str = "sqlite"  # which store of tests/backends.py the flags name

    @property
    def log_path(self) -> Path:
        """Where the server's standard error goes: beside (not inside) its data directory."""
        return self.data_dir.parent / f"{self.data_dir.name}.server.log"

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/{DEV_ACCOUNT}"

    @property
    def queue_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.queue_port}/{DEV_ACCOUNT}"

    @property
    def blob_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.blob_port}/{DEV_ACCOUNT}"

    @property
    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={DEV_ACCOUNT};AccountKey={DEV_KEY};"
            f"TableEndpoint={self.endpoint};QueueEndpoint={self.queue_endpoint};"
            f"BlobEndpoint={self.blob_endpoint};"
        )

    def start(self, timeout: float = 20.0) -> ServerProcess:
        command = [
            sys.executable, "-m", "tabulae", "serve",
            "--port", str(self.port), "--queue-port", str(self.queue_port),
            "--blob-port", str(self.blob_port), "--data-dir", str(self.data_dir),
            *TEST_RESERVE, *self.extra_args,
        ]  # fmt: skip
        env = dict(os.environ) if self.env is None else self.env
        # A session of its own, so that stop() can end the worker processes with their parent.
        # The server's log goes to a file beside its data, never to a pipe nobody drains: a server
        # that logs more than a pipe holds would block in its write and look like a hang.
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                command, stdout=subprocess.DEVNULL, stderr=log, env=env, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                err = self.log_path.read_text(errors="replace")[-4000:]
                raise RuntimeError(f"tabulae serve exited with {self.process.returncode}: {err}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("tabulae serve did not start listening in time")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int | None:
        if self.process is None:
            return None
        group = self.process.pid  # the session leader's pid is its process group's id
        if self.process.poll() is None:
            if sig == signal.SIGKILL:
                _kill_group(group)  # a crash takes the workers too, as a power cut would
            else:
                self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        _kill_group(group, within=10.0)  # no worker outlives its server, whatever happened to the parent
        code = self.process.returncode
        if self.process.stderr:  # a caller that started the process itself may have piped it
            self.process.stderr.close()
        self.process = None
        return code

    def restart(self) -> ServerProcess:
        self.stop()
        return self.start()
