"""Start and stop the two servers under test, each on a free port with a fresh data directory."""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import aiohttp
from blobs import BlobHttp
from client import TableHttp, open_session
from queues import QueueHttp

REPO = Path(__file__).resolve().parent.parent
CACHE_DIR = Path(os.environ.get("TABULAE_BENCH_CACHE", Path.home() / ".cache" / "tabulae-bench"))
AZURITE_DIR = CACHE_DIR / "azurite"
AZURITE_BIN = AZURITE_DIR / "node_modules" / ".bin" / "azurite-table"
AZURITE_QUEUE_BIN = AZURITE_DIR / "node_modules" / ".bin" / "azurite-queue"
AZURITE_BLOB_BIN = AZURITE_DIR / "node_modules" / ".bin" / "azurite-blob"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ensure_azurite() -> Path:
    """Install Azurite with npm into the cache directory (once); returns the ``azurite-table`` path."""
    if AZURITE_BIN.exists():
        return AZURITE_BIN
    if shutil.which("npm") is None:
        raise SystemExit("npm is needed to install Azurite (apt-get install npm)")
    AZURITE_DIR.mkdir(parents=True, exist_ok=True)
    package = AZURITE_DIR / "package.json"
    if not package.exists():
        package.write_text('{"name": "tabulae-bench-azurite", "private": true}\n')
    print(f"installing Azurite into {AZURITE_DIR} (npm install azurite)...", flush=True)
    subprocess.run(["npm", "install", "--no-audit", "--no-fund", "azurite"], cwd=AZURITE_DIR, check=True)
    return AZURITE_BIN


class Server:
    """A server process in its own session, with a private data directory removed on stop."""

    name = "server"
    probe = "table"  # which service answers the readiness probe

    def __init__(self, extra_args: list[str] | None = None) -> None:
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.queue_host = self.host  # where its Queue service listens, when it has one
        self.blob_host = self.host  # and its Blob service
        self.extra_args = extra_args or []
        self.data_dir = Path(tempfile.mkdtemp(prefix=f"bench-{self.name}-"))
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.log"
        # CPU seconds by pid of the database server's processes, when the store has one.
        self.database_cpu: Callable[[], dict[int, float]] | None = None

    def command(self) -> list[str]:
        """The command line that starts the server."""
        raise NotImplementedError

    def environment(self) -> dict[str, str]:
        """Environment of the server process."""
        return dict(os.environ)

    def describe(self) -> str:
        """What the result table's notes should say about this server ("" for nothing)."""
        return ""

    def start(self, timeout: float = 90.0) -> None:
        """Start the process and wait until it answers a signed Query Tables with 200."""
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=REPO,
                env=self.environment(),
                start_new_session=True,
            )
        asyncio.run(self._wait_ready(timeout))

    async def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        async with open_session(limit=1) as session:
            http = TableHttp(self.host, session)
            queue = QueueHttp(self.queue_host, session)
            blob = BlobHttp(self.blob_host, session)
            while True:
                if self.process is not None and self.process.poll() is not None:
                    raise RuntimeError(f"{self.name} exited early:\n{self.log_tail()}")
                try:
                    if self.probe == "queue":
                        if await queue.ready():
                            return
                    elif self.probe == "blob":
                        if await blob.ready():
                            return
                    elif (await http.list_tables()).status == 200:
                        return
                except (TimeoutError, OSError, aiohttp.ClientError):
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.name} not ready after {timeout:.0f}s:\n{self.log_tail()}")
                await asyncio.sleep(0.25)

    def log_tail(self, lines: int = 30) -> str:
        """The end of the server's log, for error messages."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def pids(self) -> list[int]:
        """The server process and all its descendants (workers), as they are now."""
        if self.process is None:
            return []
        return [self.process.pid, *self._children(self.process.pid)]

    def rss_mib(self) -> float | None:
        """Resident set size of the server process and its children, in MiB (from /proc)."""
        return self._status_mib("VmRSS:")

    def rss_file_mib(self) -> float | None:
        """The file-backed part of :meth:`rss_mib`: mapped database pages, which are the
        operating system's page cache (shared between workers, dropped under memory pressure)."""
        return self._status_mib("RssFile:")

    def _status_mib(self, field: str) -> float | None:
        if self.process is None:
            return None
        total = 0
        for pid in self.pids():
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith(field):
                        total += int(line.split()[1])
            except OSError:
                continue
        return total / 1024

    @staticmethod
    def _children(pid: int) -> list[int]:
        found: list[int] = []
        try:
            for task in Path(f"/proc/{pid}/task").iterdir():
                children = (task / "children").read_text().split()
                for child in children:
                    found.append(int(child))
                    found.extend(Server._children(int(child)))
        except OSError:
            pass
        return found

    def stop(self) -> None:
        """Stop the process group (SIGTERM, then SIGKILL); remove the data directory and the log."""
        if self.process is not None and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.data_dir, ignore_errors=True)
        self.log_path.unlink(missing_ok=True)

    def __enter__(self) -> Server:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class TabulaeServer(Server):
    """``python -m tabulae serve`` from this repository, with a fresh ``--data-dir``: the Table,
    Queue and Blob services of one process, each on a free port, and the request-date check off:
    wrk replays requests signed once, for as long as a workload runs."""

    name = "tabulae"

    def __init__(self, extra_args: list[str] | None = None) -> None:
        super().__init__(extra_args)
        self.queue_port = free_port()
        self.queue_host = f"127.0.0.1:{self.queue_port}"
        self.blob_port = free_port()
        self.blob_host = f"127.0.0.1:{self.blob_port}"

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "tabulae",
            "serve",
            "--services",
            "table,queue,blob",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--queue-port",
            str(self.queue_port),
            "--blob-port",
            str(self.blob_port),
            "--data-dir",
            str(self.data_dir),
            "--clock-skew",
            "0",
            *self.extra_args,
        ]


class AzuriteServer(Server):
    """Azurite's table service from the npm cache, persisting into a fresh ``--location``."""

    name = "azurite"

    def command(self) -> list[str]:
        return [
            str(ensure_azurite()),
            "--tableHost",
            "127.0.0.1",
            "--tablePort",
            str(self.port),
            "--location",
            str(self.data_dir),
            "--skipApiVersionCheck",
            "--disableProductStyleUrl",
            "--disableTelemetry",
            "--silent",
            *self.extra_args,
        ]

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        # Azurite keeps every entity in the V8 heap; give it room for the larger preloads.
        env.setdefault("NODE_OPTIONS", "--max-old-space-size=8192")
        return env


class AzuriteQueueServer(AzuriteServer):
    """Azurite's queue service (``azurite-queue``, same npm package), in a fresh ``--location``."""

    name = "azurite-queue"
    probe = "queue"

    def command(self) -> list[str]:
        ensure_azurite()
        return [
            str(AZURITE_QUEUE_BIN),
            "--queueHost",
            "127.0.0.1",
            "--queuePort",
            str(self.port),
            "--location",
            str(self.data_dir),
            "--skipApiVersionCheck",
            "--disableProductStyleUrl",
            "--disableTelemetry",
            "--silent",
            *self.extra_args,
        ]


class TabulaeBlobServer(TabulaeServer):
    """Tabulae serving only its Blob service (on ``port``): the memory benchmark's server, whose
    resident size is then the Blob service's alone."""

    probe = "blob"

    def __init__(self, extra_args: list[str] | None = None) -> None:
        super().__init__(extra_args)
        self.blob_port, self.blob_host = self.port, self.host

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "tabulae", "serve", "--services", "blob", "--host", "127.0.0.1",
            "--blob-port", str(self.port), "--data-dir", str(self.data_dir), "--clock-skew", "0",
            *self.extra_args,
        ]  # fmt: skip


class AzuriteBlobServer(AzuriteServer):
    """Azurite's blob service (``azurite-blob``, same npm package), in a fresh ``--location``."""

    name = "azurite-blob"
    probe = "blob"

    def command(self) -> list[str]:
        ensure_azurite()
        return [
            str(AZURITE_BLOB_BIN), "--blobHost", "127.0.0.1", "--blobPort", str(self.port),
            "--location", str(self.data_dir), "--skipApiVersionCheck", "--disableProductStyleUrl",
            "--disableTelemetry", "--silent", *self.extra_args,
        ]  # fmt: skip


class CeilingServer(Server):
    """The no-op app of ``ceiling.py`` (a fixed 1 KiB entity for every request) on the fastest
    server stack installed, with as many workers as Tabulae runs."""

    name = "ceiling"

    def __init__(self, workers: int, stack: str) -> None:
        super().__init__()
        self.workers = workers
        self.stack = stack

    def command(self) -> list[str]:
        return [
            sys.executable, str(REPO / "benchmarks" / "ceiling.py"), "--server", self.stack,
            "--workers", str(self.workers), "--host", "127.0.0.1", "--port", str(self.port),
        ]  # fmt: skip

    def describe(self) -> str:
        return f"{self.stack}, {self.workers} workers"


def tabulae_workers(tabulae_args: str) -> int:
    """The worker count Tabulae runs with: its ``--workers`` if given, else one per core."""
    words = shlex.split(tabulae_args)
    for index, word in enumerate(words):
        if word == "--workers" and index + 1 < len(words):
            return int(words[index + 1])
        if word.startswith("--workers="):
            return int(word.split("=", 1)[1])
    return os.cpu_count() or 1


def make_server(
    target: str,
    tabulae_args: str = "",
    azurite_args: str = "",
    service: str = "table",
    ceiling_stack: str = "granian-rsgi",
) -> Server:
    """A (not yet started) server for ``target``; Azurite runs each service as its own program."""
    if target == "ceiling":
        return CeilingServer(tabulae_workers(tabulae_args), ceiling_stack)
    if target == "tabulae":
        return TabulaeServer(shlex.split(tabulae_args))
    if target == "azurite":
        if service == "queue":
            return AzuriteQueueServer(shlex.split(azurite_args))
        if service == "blob":
            return AzuriteBlobServer(shlex.split(azurite_args))
        return AzuriteServer(shlex.split(azurite_args))
    raise ValueError(f"unknown target {target!r}")


class TabulaeGranianServer(TabulaeServer):
    """Tabulae's Table service under granian's ASGI interface instead of uvicorn, for the HTTP
    server comparison (``http_stack.py``): the same app (``tabulae.compose:create_app``, the
    worker factory), the same settings, without our protocol's caps, timeouts and coalesced
    writes, which granian does not have."""

    name = "tabulae-granian"

    def __init__(self, workers: int) -> None:
        super().__init__()
        self.workers = workers
        self.queue_host = self.blob_host = self.host

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "granian", "--interface", "asgi", "--factory", "--workers",
            str(self.workers), "--loop", "uvloop", "--host", "127.0.0.1", "--port", str(self.port),
            "--no-ws", "--log-level", "warning", "tabulae.compose:create_app",
        ]  # fmt: skip

    def environment(self) -> dict[str, str]:
        sys.path.insert(0, str(REPO))
        from tabulae.config import SETTINGS_ENV, Settings

        settings = Settings(
            services=("table",), host="127.0.0.1", port=self.port, data_dir=self.data_dir, clock_skew=0
        )
        return {**os.environ, SETTINGS_ENV: settings.to_json()}

    def describe(self) -> str:
        return f"granian-asgi, {self.workers} workers"
