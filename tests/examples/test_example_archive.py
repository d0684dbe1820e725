"""The worked example (``tabulae.examples.archive_employee``) runs against a real server and
converges when its worker is killed halfway through and started again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tabulae.examples import archive_employee as example
from tests.serverproc import ServerProcess

ROOT = Path(__file__).resolve().parents[2]


def test_run_converges(server: ServerProcess) -> None:
    lines: list[str] = []
    example.run(server.connection_string, log=lines.append)
    assert any("died between copying and deleting" in line for line in lines), lines
    assert lines[-1].startswith("converged"), lines


def worker(connection_string: str, *flags: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "tabulae.examples.archive_employee", "worker", *flags]
    env = {**os.environ, "AZURE_STORAGE_CONNECTION_STRING": connection_string}
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)


def test_a_worker_killed_halfway_is_finished_by_the_next(fresh_server: ServerProcess) -> None:
    clients = example.Clients.connect(fresh_server.connection_string)
    clients.create()
    employees = {"456": "Ada", "457": "Grace", "458": "Edsger", "459": "Barbara"}
    example.hire(clients, "sales", employees)
    for employee_id in ("456", "457", "458"):
        example.request_archive(clients, "sales", employee_id)

    # The first worker stops for a minute between copying an employee and deleting the original.
    first = worker(fresh_server.connection_string, "--pause-after-copy", "60", "--visibility-timeout", "2")
    assert first.stdout is not None
    line = first.stdout.readline()
    assert line.startswith("copied sales/456"), line
    in_current = {e["RowKey"] for e in clients.current.list_entities()}
    in_archive = {e["RowKey"] for e in clients.archive.list_entities()}
    assert "456" in in_current and "456" in in_archive  # halfway: in both tables
    first.send_signal(signal.SIGKILL)
    first.wait()
    first.stdout.close()

    # A new worker finds the request again once its visibility timeout is over, and the others.
    second = worker(fresh_server.connection_string, "--idle-seconds", "4")
    output, _ = second.communicate(timeout=60)
    assert second.returncode == 0, output
    assert "copied sales/456 to the archive (attempt 2)" in output, output
    assert example.converged(clients, "sales", {"456", "457", "458"}, {"459"})
    assert clients.queue.peek_messages() == []
    archived = {e["RowKey"]: e["Name"] for e in clients.archive.list_entities()}
    assert archived == {"456": "Ada", "457": "Grace", "458": "Edsger"}


def test_a_request_that_keeps_failing_goes_to_the_poison_queue(fresh_server: ServerProcess) -> None:
    clients = example.Clients.connect(fresh_server.connection_string)
    clients.create()
    clients.queue.send_message("not json")
    failures = 0
    deadline = time.monotonic() + 60
    while clients.poison.peek_messages() == [] and time.monotonic() < deadline:
        try:
            example.archive_one(clients, visibility_timeout=1, log=lambda line: None)
        except ValueError:
            failures += 1  # the worker dies on the request; it comes back a second later
        time.sleep(0.3)
    assert failures == example.MAX_ATTEMPTS
    assert [m.content for m in clients.poison.peek_messages()] == ["not json"]
    assert clients.queue.peek_messages() == []
