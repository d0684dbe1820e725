"""Graceful shutdown (issue #7): SIGTERM and SIGINT drain in-flight requests, finish or roll back
batches, and exit with code 0; everything acknowledged is there after a restart.

Before the signal, requests are put in flight deliberately: their headers and half of their body
are sent, and the server's ``100 Continue`` shows that the app is already reading them (three
inserts, one ``$batch`` of five inserts, and one more batch whose client will hang up instead of
finishing), while four clients insert rows as fast as they can. After the
signal the slow clients send the rest of their bodies. Then:

* every slow request gets a complete response: 201 for the inserts, 202 with five 201 parts for
  the batch (a cut-short response, a 5xx or a hang fails the test);
* every loader request gets a complete 201, or no response at all because its connection was
  refused or closed before the server read the request (then it may or may not be applied);
* a request opened after the signal is refused, closed unanswered, or answered in full;
* the supervisor exits with code 0, leaves no process behind and logs no traceback;
* after a restart, every acknowledged row is there with its acknowledged ETag, and no row of the
  abandoned batch exists (a batch whose body never arrived is rolled back as a whole).

Cases: SIGTERM and SIGINT to the supervisor with one worker and with two, and SIGINT to the whole
process group with two workers (what Ctrl-C in a terminal does).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

from tests.rawhttp import RawClient, RawResponse
from tests.system.test_reliability_support import (
    BatchOp,
    IsolatedServer,
    batch_request,
    entity_map,
    parse_batch_response,
    query_all,
    read_response,
    signed_request,
    wait_for_workers,
)

TABLE = "drain"
SLOW_INSERTS = 3
BATCH_ROWS = 5
LOADERS = 4


class SlowUpload:
    """A request in flight: its headers are read and the app is reading its body, which the
    client holds back after the first half.

    ``Expect: 100-continue`` makes the server say ``100 Continue`` at the moment the app starts
    reading the body, so "in flight" is observed, not guessed from a sleep.
    """

    def __init__(self, port: int, method: str, target: str, body: bytes, content_type: str) -> None:
        self.method = method
        expect = [("Expect", "100-continue")]
        self.head, self.body = signed_request(port, method, target, body, content_type, expect)
        self.half = len(self.body) // 2
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.sock.sendall(self.head)
        interim = b""
        while not interim.endswith(b"\r\n\r\n"):
            chunk = self.sock.recv(1)
            assert chunk, f"connection closed before 100 Continue: {interim!r}"
            interim += chunk
        assert interim.startswith(b"HTTP/1.1 100"), interim
        self.sock.sendall(self.body[: self.half])

    def finish(self) -> RawResponse:
        try:
            self.sock.sendall(self.body[self.half :])
            return read_response(self.sock, self.method)
        finally:
            self.sock.close()

    def abandon(self) -> None:
        self.sock.close()


class Loader(threading.Thread):
    """Inserts rows of its own partition back to back until the server stops answering."""

    def __init__(self, port: int, index: int) -> None:
        super().__init__(name=f"loader-{index}", daemon=True)
        self.client = RawClient(port)
        self.partition = f"load{index}"
        self.acked: dict[tuple[str, str], str] = {}
        self.anomalies: list[str] = []
        self.unanswered = 0

    def run(self) -> None:
        for sequence in range(1_000_000):
            key = (self.partition, f"{sequence:07d}")
            try:
                response = self.client.insert(
                    TABLE, {"PartitionKey": key[0], "RowKey": key[1], "n": sequence}
                )
            except http.client.IncompleteRead as exc:
                self.anomalies.append(f"{key}: response cut short: {exc!r}")
                return
            except (OSError, http.client.HTTPException):
                self.unanswered += 1  # refused or closed before the request was read
                return
            etag = response.header("etag")
            if response.status != 201 or not etag:
                self.anomalies.append(f"{key}: {response!r}")
                return
            self.acked[key] = etag


class Probe(threading.Thread):
    """A request opened after the signal: refused, closed unanswered, or answered completely."""

    def __init__(self, port: int) -> None:
        super().__init__(name="probe", daemon=True)
        self.client = RawClient(port)
        self.outcome = "not run"
        self.problem: str | None = None

    def run(self) -> None:
        try:
            response = self.client.insert(TABLE, {"PartitionKey": "probe", "RowKey": "late"}, headers=None)
        except http.client.IncompleteRead as exc:
            self.problem = f"response cut short: {exc!r}"
        except TimeoutError:
            self.problem = "no answer and no refusal within the timeout (hung)"
        except (OSError, http.client.HTTPException) as exc:
            self.outcome = f"not served ({type(exc).__name__})"
        else:
            self.outcome = f"served {response.status}"
            if response.status != 201:
                self.problem = f"answered {response!r}"


CASES = [
    pytest.param(signal.SIGTERM, 1, False, id="SIGTERM-1-worker"),
    pytest.param(signal.SIGINT, 1, False, id="SIGINT-1-worker"),
    pytest.param(signal.SIGTERM, 2, False, id="SIGTERM-2-workers"),
    pytest.param(signal.SIGINT, 2, True, id="ctrl-c-to-group-2-workers"),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("sig", "workers", "to_group"), CASES)
def test_signal_drains_in_flight_requests_and_exits_cleanly(
    tmp_path: Path, sig: signal.Signals, workers: int, to_group: bool
) -> None:
    server = IsolatedServer(tmp_path / "data", ["--workers", str(workers)], log_path=tmp_path / "server.log")
    server.start()
    try:
        raw = server.raw()
        assert raw.create_table(TABLE).status == 201
        wait_for_workers(server, workers)

        inserts = [
            SlowUpload(
                server.port,
                "POST",
                TABLE,
                json.dumps({"PartitionKey": "slow", "RowKey": f"r{i}", "n": i, "pad": "s" * 2000}).encode(),
                "application/json",
            )
            for i in range(SLOW_INSERTS)
        ]
        content_type, body = batch_request(
            raw.endpoint,
            [
                BatchOp("POST", TABLE, {}, {"PartitionKey": "batch", "RowKey": f"r{i}", "n": i})
                for i in range(5)
            ],
        )
        batch = SlowUpload(server.port, "POST", "$batch", body, content_type)
        content_type, body = batch_request(
            raw.endpoint,
            [
                BatchOp("POST", TABLE, {}, {"PartitionKey": "gone", "RowKey": f"r{i}", "n": i})
                for i in range(5)
            ],
        )
        abandoned = SlowUpload(server.port, "POST", "$batch", body, content_type)
        loaders = [Loader(server.port, index) for index in range(LOADERS)]
        for loader in loaders:
            loader.start()
        time.sleep(0.3)  # let the loaders get going

        assert server.process is not None and server.pgid is not None
        if to_group:
            os.killpg(server.pgid, sig)
        else:
            os.kill(server.process.pid, sig)
        time.sleep(0.5)  # the signal is handled: the server is draining
        probe = Probe(server.port)
        probe.start()
        time.sleep(0.2)

        abandoned.abandon()
        insert_responses = [upload.finish() for upload in inserts]
        batch_response = batch.finish()
        for thread in [*loaders, probe]:
            thread.join(30)
            assert not thread.is_alive(), f"{thread.name} hung during the shutdown"
        code = server.wait_exit(30)
        leftovers = list(server.leftovers)
        log = server.log_text()

        # In-flight requests got complete responses.
        for response in insert_responses:
            assert response.status == 201 and response.header("etag"), response
        parts = parse_batch_response(batch_response)
        assert [part.status for part in parts] == [201] * BATCH_ROWS, batch_response
        for loader in loaders:
            assert loader.anomalies == [], loader.anomalies
        assert probe.problem is None, f"{probe.outcome}: {probe.problem}"
        acked_load = {key: etag for loader in loaders for key, etag in loader.acked.items()}
        assert acked_load, "the loaders never got a write acknowledged before the signal"

        # Everything acknowledged is there after a restart; the abandoned batch is not.
        server.extra_args = ["--workers", "1"]
        server.start()
        found = entity_map(query_all(server.raw(), TABLE))
        for i, response in enumerate(insert_responses):
            assert found[("slow", f"r{i}")][0] == response.header("etag")
        for i, part in enumerate(parts):
            assert found[("batch", f"r{i}")][0] == part.headers["etag"]
        assert [key for key in found if key[0] == "gone"] == [], (
            "a batch whose body never arrived was applied"
        )
        lost = {key: etag for key, etag in acked_load.items() if found.get(key, ("",))[0] != etag}
        assert lost == {}, f"{len(lost)} of {len(acked_load)} acknowledged inserts lost or changed"
        server.stop()

        # A clean exit.
        assert code == 0, f"exit code {code} after {sig.name}; server log:\n{log[-2000:]}"
        assert leftovers == [], f"processes outlived the server: {leftovers}"
        assert "Traceback" not in log, log[-3000:]
    finally:
        server.kill()


# --------------------------------------------------------------------------------------------
# How soon: a container runtime sends SIGTERM and kills 10 s later
# --------------------------------------------------------------------------------------------


def _sigterm(server: IsolatedServer) -> float:
    """Send SIGTERM to the supervisor; the moment it was sent."""
    assert server.process is not None
    sent = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    return sent


def _kept_alive(port: int) -> socket.socket:
    """A connection that has had its answer and stays open (keep-alive), idle."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert read_response(sock).status == 200
    return sock


@pytest.mark.timeout(60)
@pytest.mark.parametrize("workers", [1, 2], ids=["1-worker", "2-workers"])
def test_an_idle_server_exits_at_once_despite_kept_alive_connections(tmp_path: Path, workers: int) -> None:
    server = IsolatedServer(tmp_path / "data", ["--workers", str(workers)], log_path=tmp_path / "server.log")
    server.start()
    idle: list[socket.socket] = []
    try:
        wait_for_workers(server, workers)
        idle = [_kept_alive(server.port) for _ in range(8)]
        sent = _sigterm(server)
        code = server.wait_exit(30)
        took = time.monotonic() - sent
        assert code == 0, server.log_tail()
        assert took < 5.0, f"{took:.1f} s to exit"  # about a second; far from the runtime's 10 s
        for sock in idle:  # closed by the server, not left hanging
            sock.settimeout(5)
            with contextlib.suppress(ConnectionResetError):
                assert sock.recv(1) == b""
        assert "Traceback" not in server.log_text(), server.log_tail()
    finally:
        for sock in idle:
            sock.close()
        server.kill()


@pytest.mark.timeout(90)
@pytest.mark.parametrize("workers", [1, 2], ids=["1-worker", "2-workers"])
def test_in_flight_requests_finish_and_stalled_ones_are_cut_at_the_shutdown_timeout(
    tmp_path: Path, workers: int
) -> None:
    """One request in flight finishes its body after the signal and gets its whole answer;
    another never finishes its body and is cut when ``--shutdown-timeout`` (2 s here) runs out;
    the server then exits 0, long before a container runtime would kill it."""
    args = ["--workers", str(workers), "--shutdown-timeout", "2"]
    server = IsolatedServer(tmp_path / "data", args, log_path=tmp_path / "server.log")
    server.start()
    try:
        raw = server.raw()
        assert raw.create_table(TABLE).status == 201
        wait_for_workers(server, workers)
        body = json.dumps({"PartitionKey": "p", "RowKey": "slow", "pad": "s" * 4000}).encode()
        slow = SlowUpload(server.port, "POST", TABLE, body, "application/json")
        stalled = SlowUpload(server.port, "POST", TABLE, body, "application/json")
        sent = _sigterm(server)
        time.sleep(0.5)  # the server is stopping: the slow client takes its time
        answer = slow.finish()
        assert answer.status == 201 and answer.header("etag"), answer
        code = server.wait_exit(30)
        took = time.monotonic() - sent
        assert code == 0, server.log_tail()
        assert took < 8.0, f"{took:.1f} s to exit"  # 2 s for the stalled request, then out
        stalled.sock.settimeout(5)
        with contextlib.suppress(ConnectionResetError):
            assert stalled.sock.recv(1) == b""  # cut, never answered
        stalled.abandon()
        assert "Traceback" not in server.log_text(), server.log_tail()
    finally:
        server.kill()
