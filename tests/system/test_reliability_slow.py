"""Slow and idle clients (issue #7) do not starve the others.

One server with a single worker (one event loop: the harshest case) gets, all at once:

* 200 idle connections that never send a byte;
* 5 clients sending a request head one byte per second;
* 3 clients sending an insert body one byte per second (headers complete, Content-Length set);
* 2 clients that ask for a 4 MB query result and never read it.

While all of them are open, ordinary clients must get their answers: the Azure SDK (no retries,
so a failure cannot hide) creates a table, inserts, reads, queries, runs a batch, updates and
deletes; and 32 raw requests from 8 threads succeed. There is no timing assertion: a generous
pytest-timeout is the guard, and the SDK's own read timeout turns a stall into an error. At the
end the server is alive, the stalled insert bodies were never applied, and a fresh connection
still works after the stragglers hang up.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest
from azure.data.tables import TableServiceClient, TableTransactionError, UpdateMode

from tests.rawhttp import RawClient
from tests.system.test_reliability_support import (
    BatchOp,
    IsolatedServer,
    send_batch,
    signed_request,
)

IDLE = 200
SLOW_HEADS = 5
SLOW_BODIES = 3
NON_READERS = 2
BIG_TABLE = "bigresult"


class Dripper(threading.Thread):
    """Sends one more byte per second on each slow connection until stopped."""

    def __init__(self, streams: list[tuple[socket.socket, bytes]]) -> None:
        super().__init__(name="dripper", daemon=True)
        self.streams = streams
        self.stop = threading.Event()
        self.sent = 0
        self.rounds = 0

    def run(self) -> None:
        position = 0
        while not self.stop.wait(1.0):
            for sock, data in self.streams:
                if position < len(data) - 1:  # never the last byte: the request stays incomplete
                    try:
                        sock.sendall(data[position : position + 1])
                        self.sent += 1
                    except OSError:
                        pass
            position += 1
            self.rounds += 1


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    return sock


@pytest.mark.timeout(180)
def test_slow_and_idle_clients_do_not_starve_others(tmp_path: Path) -> None:
    server = IsolatedServer(tmp_path / "data", ["--workers", "1"], log_path=tmp_path / "server.log").start()
    sockets: list[socket.socket] = []
    dripper: Dripper | None = None
    try:
        raw = server.raw()
        assert raw.create_table(BIG_TABLE).status == 201
        for chunk in range(10):  # 1000 rows of 4 KB: a query page of about 4 MB
            ops = [
                BatchOp(
                    "POST",
                    BIG_TABLE,
                    {},
                    {"PartitionKey": "big", "RowKey": f"{chunk}-{i:03d}", "pad": "z" * 4000},
                )
                for i in range(100)
            ]
            response = send_batch(raw, ops)
            assert response.status == 202, response

        for _ in range(IDLE):
            sockets.append(_connect(server.port))
        streams: list[tuple[socket.socket, bytes]] = []
        for index in range(SLOW_HEADS):
            head, _ = signed_request(server.port, "GET", "Tables")
            sock = _connect(server.port)
            sock.sendall(head[: 3 + index])
            sockets.append(sock)
            streams.append((sock, head[3 + index :]))
        for index in range(SLOW_BODIES):
            body = json.dumps({"PartitionKey": "slow", "RowKey": f"r{index}", "pad": "s" * 100}).encode()
            head, body = signed_request(server.port, "POST", BIG_TABLE, body, "application/json")
            sock = _connect(server.port)
            sock.sendall(head + body[:1])
            sockets.append(sock)
            streams.append((sock, body[1:]))
        for _ in range(NON_READERS):
            head, _ = signed_request(server.port, "GET", f"{BIG_TABLE}()")
            sock = _connect(server.port)
            sock.sendall(head)  # and never read the answer
            sockets.append(sock)
        dripper = Dripper(streams)
        dripper.start()

        # Ordinary clients, while all of that is open: rounds of SDK work until the slow clients
        # have dripped for a few seconds.
        with TableServiceClient.from_connection_string(
            server.connection_string, retry_total=0, connection_timeout=20, read_timeout=30
        ) as service:
            table = service.create_table("normalwork")
            rounds = 0
            while rounds == 0 or dripper.rounds < 3:
                pk = f"n{rounds}"
                for i in range(10):
                    table.create_entity({"PartitionKey": pk, "RowKey": f"{i:02d}", "i": i})
                assert table.get_entity(pk, "05")["i"] == 5
                assert len(list(table.query_entities(f"PartitionKey eq '{pk}' and i ge 4"))) == 6
                table.submit_transaction(
                    [("upsert", {"PartitionKey": pk, "RowKey": f"b{i}"}) for i in range(5)]
                )
                with pytest.raises(TableTransactionError):
                    table.submit_transaction([("create", {"PartitionKey": pk, "RowKey": "00"})])
                table.update_entity({"PartitionKey": pk, "RowKey": "00", "i": -1}, mode=UpdateMode.MERGE)
                table.delete_entity(pk, "01")
                assert len(list(table.query_entities(f"PartitionKey eq '{pk}'"))) == 14
                assert "normalwork" in [t.name for t in service.list_tables()]
                rounds += 1
                assert rounds < 10_000

        answers: list[int] = []
        lock = threading.Lock()

        def burst(index: int) -> None:
            client = RawClient(server.port)
            for j in range(4):
                response = client.insert("normalwork", {"PartitionKey": "burst", "RowKey": f"{index}-{j}"})
                with lock:
                    answers.append(response.status)

        threads = [threading.Thread(target=burst, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert answers == [201] * 32

        assert server.alive()
        assert dripper.sent > 0, "the slow clients never sent anything: the test tested nothing"
        dripper.stop.set()
        dripper.join(5)
        for sock in sockets:
            sock.close()
        sockets.clear()

        # The stalled inserts never completed, so nothing of them was applied; the server is fine.
        for index in range(SLOW_BODIES):
            assert raw.get_entity(BIG_TABLE, "slow", f"r{index}").status == 404
        time.sleep(0.2)
        assert raw.request("GET", "Tables").status == 200
        assert server.alive()
        assert "Traceback" not in server.log_text(), server.log_tail()
    finally:
        if dripper is not None:
            dripper.stop.set()
        for sock in sockets:
            sock.close()
        server.stop()
