"""Durable acknowledgements, seen in the system calls: the WAL is fsynced before a write is answered.

The SQLite store commits with ``synchronous=NORMAL`` (the commit writes the WAL without syncing
it) and fsyncs the WAL itself, outside the cross-process write lock, before answering. A crash test
cannot tell that apart from not syncing at all (a killed process loses nothing the kernel holds),
so this test watches the server under ``strace``: for every answered write, the WAL frames written
before the answer must have been followed by an fsync of the WAL before the answer left.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from azure.data.tables import TableServiceClient

from tests.serverproc import DEV_ACCOUNT, DEV_KEY, free_port

pytestmark = pytest.mark.timeout(120)

WAL = "tabulae.db-wal"
# strace -f -y: "PID  syscall(fd</path>, ...) = result"; sockets show as socket:[inode] or TCP:[...]
_CALL_RE = re.compile(r"^\d+\s+(\w+)\((\d+)<([^>]*)>(.*)$")


def _start_traced(data_dir: Path, trace: Path, port: int, service: str = "table") -> subprocess.Popen[bytes]:
    """A one-worker server of ``service`` under strace, once it listens on ``port``."""
    port_flag = "--port" if service == "table" else "--blob-port"
    strace = shutil.which("strace")
    assert strace is not None, "strace is required (scripts/check installs it)"
    command = [
        strace, "-f", "-y", "-qq", "-s", "64", "-o", str(trace),
        "-e", "trace=openat,fsync,fdatasync,pwrite64,write,writev,sendto,sendmsg",
        sys.executable, "-m", "tabulae", "serve", port_flag, str(port), "--data-dir", str(data_dir),
        "--workers", "1", "--services", service,
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return process
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("traced server did not start")


def _stop_traced(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server itself (strace exits with its tracee), and flush the trace."""
    children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
    for child in children:
        os.kill(int(child), signal.SIGTERM)
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise


def _events(trace: Path) -> list[tuple[str, str]]:
    """The trace as (kind, detail): "wal-write", "wal-sync" and "answer" (the status line)."""
    events: list[tuple[str, str]] = []
    for line in trace.read_text(errors="replace").splitlines():
        match = _CALL_RE.match(line)
        if match is None:
            continue
        call, _fd, target, rest = match.groups()
        if target.endswith(WAL):
            if call in ("fsync", "fdatasync"):
                events.append(("wal-sync", line))
            elif call in ("pwrite64", "write", "writev"):
                events.append(("wal-write", line))
        elif ("socket:" in target or "TCP" in target) and '"HTTP/1.1 ' in rest:
            status = rest.split('"HTTP/1.1 ', 1)[1][:3]
            events.append(("answer", status))
    return events


def test_every_acknowledged_write_follows_an_fsync_of_its_wal_frames(tmp_path: Path) -> None:
    trace = tmp_path / "trace.txt"
    port = free_port()
    process = _start_traced(tmp_path / "data", trace, port)
    try:
        endpoint = f"http://127.0.0.1:{port}/{DEV_ACCOUNT}"
        connection = (
            f"DefaultEndpointsProtocol=http;AccountName={DEV_ACCOUNT};AccountKey={DEV_KEY};"
            f"TableEndpoint={endpoint};"
        )
        with TableServiceClient.from_connection_string(connection) as service:
            table = service.create_table("durability")
            for index in range(5):
                table.create_entity({"PartitionKey": "p", "RowKey": f"r{index}", "n": index})
            table.upsert_entity({"PartitionKey": "p", "RowKey": "r0", "n": 99})
            table.submit_transaction([("create", {"PartitionKey": "q", "RowKey": f"b{i}"}) for i in range(3)])
            assert table.get_entity("p", "r0")["n"] == 99
    finally:
        _stop_traced(process)
    events = _events(trace)
    writes_answered = 0
    unsynced = False  # WAL frames written and not yet fsynced
    for kind, detail in events:
        if kind == "wal-write":
            unsynced = True
        elif kind == "wal-sync":
            unsynced = False
        elif kind == "answer" and detail in ("201", "202", "204"):
            writes_answered += 1
            assert not unsynced, "a write was answered while WAL frames written before it were not synced"
    # create table, five inserts, the upsert and the batch: every one of them was checked above
    assert writes_answered == 8, events
    assert any(kind == "wal-sync" for kind, _ in events)
