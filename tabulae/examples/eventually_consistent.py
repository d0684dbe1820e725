"""Eventually consistent transactions: change two tables through a queue and an idempotent worker.

The problem: an entity group transaction covers one partition of one table. Archiving an
employee moves an entity from the current table to the archive table: two operations that a
crash can split, leaving the employee in both tables or (done in the other order) in neither.

The design (the worked example of ``tabulae.examples.archive_employee``): put the request on a
queue; a worker takes it (the message stays, invisible, while the worker works), copies the
employee with Insert Or Replace, deletes the original treating "not found" as done, and only
then deletes the message. A worker killed at any point leaves the message, which reappears
when its visibility timeout ends; the next worker repeats the steps, and since each step is
idempotent the tables converge. Here the first worker is a real process, killed (SIGKILL)
between the copy and the delete, and a second one is started afterwards.

The trade-off: between the steps readers can see the employee in both tables (or the index
out of date); the result is consistent eventually, not at once. Work must be idempotent, and a
request that keeps failing needs a poison queue.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from tabulae.examples import archive_employee
from tabulae.examples.harness import Example

TITLE = "Eventually consistent transactions: a queue, a worker killed halfway, a second one converging"


def _worker(ex: Example, names: dict[str, str], *flags: str) -> subprocess.Popen[str]:
    command = [
        sys.executable, "-m", "tabulae.examples.archive_employee", "worker",
        "--current-table", names["current"], "--archive-table", names["archive"], "--queue", names["queue"],
        *flags,
    ]  # fmt: skip
    env = {**os.environ, "AZURE_STORAGE_CONNECTION_STRING": ex.connection_string}
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def run(ex: Example) -> None:
    current, archive = ex.table("current"), ex.table("archive")
    queue, poison = ex.queue("archive"), ex.queue("archive-poison")
    clients = archive_employee.Clients(current, archive, queue, poison)
    names = {"current": current.table_name, "archive": archive.table_name, "queue": queue.queue_name}
    with ex.operation("hire 3 employees"):
        archive_employee.hire(clients, "Sales", {"456": "Ada", "457": "Grace", "458": "Edsger"})
    with ex.operation("ask for 456 and 457 to be archived (2 queue messages)") as op:
        for employee_id in ("456", "457"):
            archive_employee.request_archive(clients, "Sales", employee_id)
    ex.claim(op.requests == 2, "a request is one message: the client's part is one put each")

    first = _worker(ex, names, "--pause-after-copy", "60", "--visibility-timeout", "2")
    try:
        assert first.stdout is not None
        line = first.stdout.readline()
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate()
    ex.claim(line.startswith("copied Sales/456"), f"the first worker copied 456 ({line.strip()!r}) ...")
    with ex.operation("look at both tables after the kill") as op:
        in_current = {e["RowKey"] for e in current.list_entities()}
        in_archive = {e["RowKey"] for e in archive.list_entities()}
    ex.claim(
        "456" in in_current and "456" in in_archive,
        "... and was killed (SIGKILL) before deleting it: 456 is in both tables for now",
    )

    second = _worker(ex, names, "--idle-seconds", "3")
    output, errors = second.communicate(timeout=60)
    ended = second.returncode == 0
    ex.claim(
        ended, "a second worker, started afterwards, ran to the end" + ("" if ended else f": {errors[-300:]}")
    )
    ex.claim(
        "copied Sales/456 to the archive (attempt 2)" in output,
        "the request for 456 reappeared after its visibility timeout and was done again (attempt 2)",
    )
    with ex.operation("check convergence: both tables, the queue") as op:
        done = archive_employee.converged(clients, "Sales", {"456", "457"}, {"458"})
        left = queue.peek_messages()
    ex.claim(done and left == [], "converged: 456 and 457 only in the archive, 458 only current, queue empty")
    figures = ex.table_figures(archive.table_name)
    ex.claim(
        figures["written"] == 3,
        "the server counted 3 writes to the archive: 456 twice (the replay is harmless) and 457 once",
    )
