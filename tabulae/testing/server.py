"""A Tabulae server for a test suite or a script: started as a process on free ports, stopped at
the end, or a server that already runs, described by its URL or connection string.

The server runs as ``python -m tabulae serve`` in a process of its own (never in the test's
process: the tests then talk to it over HTTP exactly as the application will talk to Azure).
Free ports are picked by the system; when another process takes one between the pick and the
bind (parallel test workers do), the start is retried on fresh ports.
"""

from __future__ import annotations

import contextlib
import ctypes
import http.client
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from tabulae.config import DEV_ACCOUNT, DEV_KEY

SERVICES = ("table", "queue", "blob")
EMULATOR_PORTS = {"table": 10002, "queue": 10001, "blob": 10000}
_ENDPOINT_KEYS = {"table": "TableEndpoint", "queue": "QueueEndpoint", "blob": "BlobEndpoint"}
_PORT_FLAGS = {"table": "--port", "queue": "--queue-port", "blob": "--blob-port"}
_BIND_ATTEMPTS = 5
# A throw-away server keeps 1 MiB of disk in reserve, not the production 64 MiB: a test suite that
# starts hundreds of them should not fill its volume with preallocated files. ``args`` may name
# another size; the later flag wins.
_TEST_RESERVE = ("--disk-reserve", "1")


class ServerError(RuntimeError):
    """The server could not be started, or a URL does not describe one."""


@dataclass
class TabulaeServer:
    """Where a server's services are and the account to use: what a test needs to connect."""

    endpoints: dict[str, str]  # service -> endpoint URL, account included (http://h:p/account)
    account: str = DEV_ACCOUNT
    key: str = DEV_KEY
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    data_dir: Path | None = None

    @property
    def connection_string(self) -> str:
        scheme = urlsplit(next(iter(self.endpoints.values()))).scheme or "http"
        parts = [
            f"DefaultEndpointsProtocol={scheme}",
            f"AccountName={self.account}",
            f"AccountKey={self.key}",
        ]
        parts += [f"{_ENDPOINT_KEYS[service]}={url}" for service, url in self.endpoints.items()]
        return ";".join(parts) + ";"

    @property
    def table_endpoint(self) -> str:
        return self.endpoints["table"]

    @property
    def queue_endpoint(self) -> str:
        return self.endpoints["queue"]

    @property
    def blob_endpoint(self) -> str:
        return self.endpoints["blob"]

    def port(self, service: str) -> int:
        return urlsplit(self.endpoints[service]).port or 0

    @classmethod
    def from_url(cls, text: str) -> TabulaeServer:
        """A running server, from a connection string (``AccountName=…;TableEndpoint=…``,
        ``UseDevelopmentStorage=true``) or a base URL (``http://HOST``: the emulator's ports,
        Table 10002, Queue 10001, Blob 10000, and the development account)."""
        text = text.strip()
        if text.lower().replace(" ", "") in ("usedevelopmentstorage=true", "usedevelopmentstorage=true;"):
            text = "http://127.0.0.1"
        if "=" not in text:
            parts = urlsplit(text)
            if (
                parts.scheme not in ("http", "https")
                or not parts.hostname
                or parts.port
                or parts.path.strip("/")
            ):
                raise ServerError(f"expected http://HOST or a connection string, not {text!r}")
            base = f"{parts.scheme}://{parts.netloc}"
            return cls({s: f"{base}:{EMULATOR_PORTS[s]}/{DEV_ACCOUNT}" for s in SERVICES})
        pairs = dict(part.split("=", 1) for part in text.split(";") if "=" in part)
        account = pairs.get("AccountName", DEV_ACCOUNT)
        endpoints = {s: pairs[key].rstrip("/") for s, key in _ENDPOINT_KEYS.items() if key in pairs}
        if not endpoints or "AccountKey" not in pairs:
            raise ServerError("the connection string needs AccountKey and at least one *Endpoint")
        return cls(endpoints, account, pairs["AccountKey"])


def _free_ports(count: int) -> list[int]:
    """Distinct free ports: all sockets stay bound until the last is taken, because the kernel may
    hand the same ephemeral port to two binds in a row once the first socket is closed."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]


def _ready(port: int) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/-/ready")
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM and wait (the server finishes what it is doing), then make sure no worker is left."""
    if process.poll() is None:
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(20)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # its session: the workers go with it
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(5)
    if process.stderr:
        process.stderr.close()


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> Callable[[], None] | None:
    """What the server's process runs before ``tabulae serve`` (Linux): ask the kernel to send it
    SIGTERM when the process that started it dies, so a test run or a migration killed outright
    (SIGKILL: no chance to stop it) leaves no server behind. (The kernel watches the starting
    thread: start servers from a thread that outlives them, as the fixtures and the migration do.)"""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here, not in the child
    except (OSError, AttributeError):
        return None

    def arm() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)

    return arm


def start(
    data_dir: Path,
    *,
    in_memory: bool = False,
    args: Sequence[str] = (),
    timeout: float = 60.0,
) -> TabulaeServer:
    """Start ``tabulae serve`` on free ports over ``data_dir`` and wait until it is ready."""
    for _attempt in range(_BIND_ATTEMPTS):
        ports = dict(zip(SERVICES, _free_ports(len(SERVICES)), strict=True))
        command = [sys.executable, "-m", "tabulae", "serve", "--workers", "1", "--data-dir", str(data_dir)]
        for service, port in ports.items():
            command += [_PORT_FLAGS[service], str(port)]
        if in_memory:
            command.append("--in-memory")
        command += [*_TEST_RESERVE, *args]
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_die_with_parent(),
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                break
            if _ready(ports["table"]):
                endpoints = {s: f"http://127.0.0.1:{p}/{DEV_ACCOUNT}" for s, p in ports.items()}
                return TabulaeServer(endpoints, process=process, data_dir=data_dir)
            time.sleep(0.05)
        else:
            _stop(process)
            raise ServerError(f"tabulae serve was not ready within {timeout:.0f} s")
        error = process.stderr.read().decode(errors="replace") if process.stderr else ""
        _stop(process)
        if "cannot listen" not in error:  # anything but a port taken in the meantime is final
            raise ServerError(f"tabulae serve exited with status {process.returncode}: {error.strip()}")
    raise ServerError(f"no free ports after {_BIND_ATTEMPTS} attempts")


@contextlib.contextmanager
def serve(
    data_dir: str | Path | None = None,
    *,
    in_memory: bool = False,
    args: Sequence[str] = (),
    timeout: float = 60.0,
) -> Iterator[TabulaeServer]:
    """A Tabulae server for the duration of a ``with`` block (unittest, scripts, notebooks)::

        with tabulae.testing.serve() as server:
            client = TableServiceClient.from_connection_string(server.connection_string)

    Data go to ``data_dir`` (kept), else a temporary directory removed afterwards; with
    ``in_memory=True`` nothing is written to disk. ``args`` are further ``tabulae serve`` flags.
    """
    own = data_dir is None
    folder = Path(tempfile.mkdtemp(prefix="tabulae-test-")) if own else Path(data_dir)  # type: ignore[arg-type]
    server = None
    try:
        server = start(folder, in_memory=in_memory, args=args, timeout=timeout)
        yield server
    finally:
        if server is not None and server.process is not None:
            _stop(server.process)
        if own:
            shutil.rmtree(folder, ignore_errors=True)
