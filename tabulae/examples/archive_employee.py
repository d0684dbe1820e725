"""The design guide's eventually consistent transaction: archive an employee through a queue.

Current employees live in one table, former ones in another, and an entity group transaction
cannot span two tables. So archiving is two steps a crash could split: copy the entity to the
archive, then delete it from the current table. The guide's pattern makes the pair converge:

1. a client asks for the archive by putting a message on a queue;
2. a worker takes the message, which stays in the queue, invisible, while the worker works;
3. the worker reads the employee from the current table,
4. writes it to the archive table with Insert Or Replace (doing it twice is harmless),
5. deletes it from the current table, treating "already gone" as done (idempotent again),
6. and only then deletes the message.

A worker that dies anywhere before step 6 leaves the message in the queue: it becomes visible
again when its visibility timeout ends, and the next worker repeats the steps, which end in the
same state however far the first one got. A message that keeps failing (dequeued more than
``MAX_ATTEMPTS`` times) is moved to a poison queue for a person to look at.

Run it against a server (``tabulae serve``, or Azure)::

    python -m tabulae.examples.archive_employee --connection-string "UseDevelopmentStorage=true"

``run`` is the whole story in one process, with one worker failing halfway on purpose; ``worker``
is the worker alone, as a process to run (and kill) beside it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.data.tables import TableClient, TableServiceClient, UpdateMode
from azure.storage.queue import QueueClient, QueueMessage

CURRENT_TABLE = "ExampleCurrentEmployees"
ARCHIVE_TABLE = "ExampleArchivedEmployees"
QUEUE = "example-archive-requests"
POISON_QUEUE = QUEUE + "-poison"
MAX_ATTEMPTS = 5
VISIBILITY_TIMEOUT = 2  # seconds a worker holds a request: long enough for the steps, short for a demo


@dataclass
class Clients:
    current: TableClient
    archive: TableClient
    queue: QueueClient
    poison: QueueClient

    @classmethod
    def connect(
        cls,
        connection_string: str,
        *,
        current: str = CURRENT_TABLE,
        archive: str = ARCHIVE_TABLE,
        queue: str = QUEUE,
    ) -> Clients:
        """Clients of the two tables and two queues (the poison queue is the queue's name +
        ``-poison``); other names let several runs share a server without meeting."""
        tables = TableServiceClient.from_connection_string(connection_string)
        return cls(
            tables.get_table_client(current),
            tables.get_table_client(archive),
            QueueClient.from_connection_string(connection_string, queue),
            QueueClient.from_connection_string(connection_string, queue + "-poison"),
        )

    def create(self) -> None:
        """The two tables and two queues, if they are not there yet."""
        for table in (self.current, self.archive):
            with contextlib.suppress(ResourceExistsError):
                table.create_table()
        for queue in (self.queue, self.poison):
            with contextlib.suppress(ResourceExistsError):
                queue.create_queue()


def hire(clients: Clients, department: str, employees: dict[str, str]) -> None:
    """Add employees (id -> name) to the current table."""
    for employee_id, name in employees.items():
        clients.current.upsert_entity({"PartitionKey": department, "RowKey": employee_id, "Name": name})


def request_archive(clients: Clients, department: str, employee_id: str) -> None:
    """Step 1: ask for an employee to be archived."""
    clients.queue.send_message(json.dumps({"department": department, "employee": employee_id}))


def archive_one(
    clients: Clients,
    *,
    visibility_timeout: int = VISIBILITY_TIMEOUT,
    after_copy: Callable[[], None] | None = None,
    log: Callable[[str], None] = print,
) -> bool:
    """Steps 2-6 for one request; False when there was none to take. ``after_copy`` runs between
    steps 4 and 5 (where a crash leaves the employee in both tables)."""
    message: QueueMessage | None = clients.queue.receive_message(visibility_timeout=visibility_timeout)
    if message is None:
        return False
    if (message.dequeue_count or 0) > MAX_ATTEMPTS:
        clients.poison.send_message(message.content)
        clients.queue.delete_message(message)
        log(f"request {message.content} failed {MAX_ATTEMPTS} times: moved to {clients.poison.queue_name}")
        return True
    request = json.loads(message.content)
    department, employee_id = request["department"], request["employee"]
    try:
        employee = clients.current.get_entity(department, employee_id)  # step 3
    except ResourceNotFoundError:
        employee = None  # a previous attempt got past step 5 already
    if employee is not None:
        clients.archive.upsert_entity(dict(employee), mode=UpdateMode.REPLACE)  # step 4
        log(f"copied {department}/{employee_id} to the archive (attempt {message.dequeue_count})")
    if after_copy is not None:
        after_copy()
    with contextlib.suppress(ResourceNotFoundError):
        clients.current.delete_entity(department, employee_id)  # step 5, "delete if exists"
    clients.queue.delete_message(message)  # step 6
    log(f"archived {department}/{employee_id}")
    return True


def work(
    clients: Clients,
    *,
    idle_seconds: float = 3.0,
    visibility_timeout: int = VISIBILITY_TIMEOUT,
    pause_after_copy: float = 0.0,
    log: Callable[[str], None] = print,
) -> int:
    """A worker: process requests until none has come for ``idle_seconds``; returns how many."""
    done = 0
    idle_since = time.monotonic()
    after_copy = (lambda: time.sleep(pause_after_copy)) if pause_after_copy else None
    while time.monotonic() - idle_since < idle_seconds:
        if archive_one(clients, visibility_timeout=visibility_timeout, after_copy=after_copy, log=log):
            done += 1
            idle_since = time.monotonic()
        else:
            time.sleep(0.2)
    return done


def converged(clients: Clients, department: str, archived: set[str], kept: set[str]) -> bool:
    """Every archived employee is in the archive only, every kept one in the current table only."""
    current = {
        e["RowKey"]
        for e in clients.current.query_entities("PartitionKey eq @d", parameters={"d": department})
    }
    archive = {
        e["RowKey"]
        for e in clients.archive.query_entities("PartitionKey eq @d", parameters={"d": department})
    }
    return current == kept and archive == archived


class _Crash(Exception):
    """The simulated failure of ``run``'s first worker, between steps 4 and 5."""


def run(connection_string: str, *, log: Callable[[str], None] = print) -> None:
    """The whole pattern: hire three employees, archive two, let the first worker die halfway
    through one of them, and watch a second worker finish the work once the request reappears."""
    clients = Clients.connect(connection_string)
    clients.create()
    department = f"sales-{uuid.uuid4().hex[:8]}"  # a fresh partition per run
    hire(clients, department, {"456": "Ada", "457": "Grace", "458": "Edsger"})
    for employee_id in ("456", "457"):
        request_archive(clients, department, employee_id)
    log(f"asked to archive {department}/456 and {department}/457")

    def crash() -> None:
        raise _Crash

    try:
        archive_one(clients, after_copy=crash, log=log)
    except _Crash:
        log("the worker died between copying and deleting: the employee is in both tables for now")
    processed = work(clients, idle_seconds=VISIBILITY_TIMEOUT + 2, log=log)
    if not converged(clients, department, {"456", "457"}, {"458"}):
        raise RuntimeError("the tables did not converge")
    log(f"converged after {processed} more request(s): 456 and 457 archived, 458 still current")
    for table, ids in ((clients.archive, ("456", "457")), (clients.current, ("458",))):
        for employee_id in ids:
            table.delete_entity(department, employee_id)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--connection-string",
        default=os.environ.get("AZURE_STORAGE_CONNECTION_STRING", "UseDevelopmentStorage=true"),
        help="the storage account (default: $AZURE_STORAGE_CONNECTION_STRING, else the development account)",
    )
    parser.add_argument("command", nargs="?", choices=["run", "worker"], default="run")
    parser.add_argument(
        "--idle-seconds", type=float, default=3.0, help="worker: stop after this long without work"
    )
    parser.add_argument(
        "--visibility-timeout", type=int, default=VISIBILITY_TIMEOUT, help="worker: seconds to hold a request"
    )
    parser.add_argument(
        "--pause-after-copy", type=float, default=0.0, help="worker: sleep between steps 4 and 5"
    )
    parser.add_argument("--current-table", default=CURRENT_TABLE, help="the current employees' table")
    parser.add_argument("--archive-table", default=ARCHIVE_TABLE, help="the archived employees' table")
    parser.add_argument("--queue", default=QUEUE, help="the queue of archive requests")
    args = parser.parse_args(argv)

    def log(line: str) -> None:
        print(line, flush=True)

    if args.command == "run":
        run(args.connection_string, log=log)
        return 0
    clients = Clients.connect(
        args.connection_string, current=args.current_table, archive=args.archive_table, queue=args.queue
    )
    clients.create()
    work(
        clients,
        idle_seconds=args.idle_seconds,
        visibility_timeout=args.visibility_timeout,
        pause_after_copy=args.pause_after_copy,
        log=log,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
