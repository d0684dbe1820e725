"""A full data volume (issue 36): writes refused cleanly, deletes make room, no restart needed.

Each service is filled through Microsoft's SDK (no retries, so every refusal is seen) on a small
ext4 volume of its own, served by two workers with a 2 MiB reserve, until writes are refused.
Then, for each of tables, queues and blobs:

* every refusal is ``503 ServerBusy`` (what every Azure SDK retries with back-off; see README),
  and nothing refused is stored;
* every acknowledged write reads back, also after ``kill -9`` of the whole server while full and
  a restart on the still-full volume;
* deletes through the API (single ones, a batch (an entity group transaction, a Blob Batch),
  clearing, whole queues, tables and containers)
  succeed, and once they have made room writes are accepted again, without a restart;
* the log has one line for each change of state and no traceback, and a graceful stop leaves a
  store that passes ``PRAGMA integrity_check``.

A server asked to start on a volume without room for its store exits non-zero before it prints
its banner, with one or several workers, and leaves nothing that stops the next start.

The volume: a sparse image file, ``mkfs.ext4 -m 0`` (no blocks kept for root, who runs the tests:
it would write into them), mounted on a loop device, unmounted and removed afterwards; where loop
devices are not permitted, a size-limited tmpfs; where neither can be mounted (not root), the
tests are skipped, saying so.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from azure.core.exceptions import HttpResponseError
from azure.data.tables import TableServiceClient
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueServiceClient

from tests.serverproc import DEV_ACCOUNT, free_port
from tests.system.test_reliability_support import ROOT, IsolatedServer, integrity_check

MIB = 1024 * 1024
VOLUME_MIB = 32
RESERVE_MIB = 2
FILL_LIMIT = 1000  # writes at most while filling (a 32 MiB volume takes far fewer)
REFUSALS = 6  # writes tried after the first refusal, each of which must be refused too


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


@contextlib.contextmanager
def small_volume(tmp_path: Path, size_mib: int) -> Iterator[Path]:
    """A file system of ``size_mib`` MiB mounted on a new directory; removed afterwards."""
    mountpoint = tmp_path / "volume"
    mountpoint.mkdir()
    image = tmp_path / "volume.img"
    with open(image, "wb") as handle:
        handle.truncate(size_mib * MIB)
    mounted = _run("mkfs.ext4", "-q", "-F", "-m", "0", str(image)).returncode == 0 and (
        _run("mount", "-o", "loop", str(image), str(mountpoint)).returncode == 0
    )
    if not mounted:
        tmpfs = _run("mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "tmpfs", str(mountpoint))
        if tmpfs.returncode != 0:
            image.unlink()
            pytest.skip(f"cannot mount a small volume here (needs root): {tmpfs.stderr.strip()}")
    try:
        yield mountpoint
    finally:
        if _run("umount", str(mountpoint)).returncode != 0:
            _run("umount", "-l", str(mountpoint))
        image.unlink(missing_ok=True)


def free_bytes(path: Path) -> int:
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize


def fill_with_file(directory: Path) -> Path:
    """A file written until the volume has no block left."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (MIB, 64 * 1024, 4096, 512):
            block = b"\0" * size
            with contextlib.suppress(OSError):
                while os.write(fd, block) == size:
                    pass
    finally:
        os.close(fd)
    return filler


# --------------------------------------------------------------------------------------------
# Each service: how to write one item, read them all back, and delete them in each way it has
# --------------------------------------------------------------------------------------------


class Tables:
    """Entities of about 180 KB; deletes: a batch, single ones, and a whole table."""

    def __init__(self, server: IsolatedServer, state: dict[str, str]) -> None:
        self.client = TableServiceClient.from_connection_string(server.connection_string, retry_total=0)
        self.table = self.client.get_table_client("full")

    def setup(self) -> None:
        self.client.create_table("full")
        spare = self.client.create_table("spare")
        for i in range(5):
            spare.create_entity({"PartitionKey": "s", "RowKey": str(i), "pad": "s" * 30000})

    def write(self, i: int) -> str:
        key = f"{i:05d}"
        entity = {"PartitionKey": "p", "RowKey": key, **{f"c{n}": chr(97 + n) * 30000 for n in range(6)}}
        self.table.create_entity(entity)
        return key

    def read_all(self) -> set[str]:
        return {entity["RowKey"] for entity in self.table.list_entities(select=["RowKey"])}

    def refused_while_full(self) -> None:
        """A batch runs while full only if it deletes and nothing else: a delete with an insert
        is refused whole, and its delete is not applied."""
        key = sorted(self.read_all())[0]
        with pytest.raises(HttpResponseError) as refused:
            self.table.submit_transaction(
                [
                    ("delete", {"PartitionKey": "p", "RowKey": key}),
                    ("create", {"PartitionKey": "p", "RowKey": "new"}),
                ]
            )
        assert _refusal(refused.value) == (503, "ServerBusy")
        assert key in self.read_all()

    def delete(self, keys: list[str]) -> list[str]:
        batch, single = keys[:20], keys[20:]
        self.table.submit_transaction([("delete", {"PartitionKey": "p", "RowKey": key}) for key in batch])
        for key in single:
            self.table.delete_entity("p", key)
        self.client.delete_table("spare")
        return keys

    def close(self) -> None:
        self.client.close()


class Queues:
    """Messages of 48 KB; deletes: single messages, clearing a queue, and a whole queue."""

    VISIBLE_AGAIN = 5  # seconds a check's receive hides a message

    def __init__(self, server: IsolatedServer, state: dict[str, str]) -> None:
        self.client = QueueServiceClient.from_connection_string(server.connection_string, retry_total=0)
        self.queue = self.client.get_queue_client("full")

    def setup(self) -> None:
        self.client.create_queue("full")
        for name in ("spare", "cleared"):
            queue = self.client.create_queue(name)
            for i in range(5):
                queue.send_message(f"{name}{i}" + "s" * 30000)

    def write(self, i: int) -> str:
        key = f"m{i:05d}"
        self.queue.send_message(key + "x" * 48000)
        return key

    def read_all(self) -> set[str]:
        """Every message, received (receiving is a write a full volume allows: it is how a
        queue is drained) and visible again shortly after."""
        found: set[str] = set()
        for _ in range(200):
            keys = [
                message.content[:6]
                for message in self.queue.receive_messages(
                    messages_per_page=32, max_messages=32, visibility_timeout=self.VISIBLE_AGAIN
                )
            ]
            if not keys or found.intersection(keys):  # all seen: the first ones are visible again
                found.update(keys)
                break
            found.update(keys)
        # Until they are visible again, a request every second: the server closes a connection
        # idle for its keep-alive (5 s), and the next request sent on it as it does so is reset
        # (an SDK would retry that; these clients retry nothing, so every refusal is seen).
        visible = time.monotonic() + self.VISIBLE_AGAIN + 1
        while time.monotonic() < visible:
            time.sleep(1)
            self.queue.peek_messages(max_messages=1)
        return found

    def delete(self, keys: list[str]) -> list[str]:
        """At least ``len(keys)`` messages, whichever come first; returns theirs."""
        deleted: list[str] = []
        for _ in range(100):
            if len(deleted) >= len(keys):
                break
            for message in self.queue.receive_messages(
                messages_per_page=32, max_messages=32, visibility_timeout=60
            ):
                self.queue.delete_message(message)
                deleted.append(message.content[:6])
        self.client.get_queue_client("cleared").clear_messages()
        self.client.delete_queue("spare")
        return deleted

    def close(self) -> None:
        self.client.close()


class Blobs:
    """Blobs of 1 MiB (content files); deletes: single blobs and a whole container."""

    def __init__(self, server: IsolatedServer, state: dict[str, str]) -> None:
        self.client = BlobServiceClient.from_connection_string(server.connection_string, retry_total=0)
        self.container = self.client.get_container_client("full")
        self.digests = state  # blob name -> SHA-256 of what was sent, kept across restarts

    def setup(self) -> None:
        self.client.create_container("full")
        spare = self.client.create_container("spare")
        for i in range(2):
            spare.upload_blob(f"s{i}", os.urandom(MIB))

    def write(self, i: int) -> str:
        key = f"b{i:05d}"
        data = os.urandom(MIB)
        self.digests[key] = hashlib.sha256(data).hexdigest()
        self.container.upload_blob(key, data)
        return key

    def read_all(self) -> set[str]:
        found: set[str] = set()
        for blob in self.container.list_blobs():
            data = self.container.download_blob(blob.name).readall()
            assert hashlib.sha256(data).hexdigest() == self.digests[blob.name], blob.name
            found.add(blob.name)
        return found

    def refused_while_full(self) -> None:
        """A Blob Batch runs while full (its Delete Blob sub-requests make room), each of its
        sub-requests judged on its own: Set Blob Tier, a write, is refused in its part."""
        key = sorted(self.read_all())[0]
        parts = list(self.container.set_standard_blob_tier_blobs("Cool", key, raise_on_any_failure=False))
        assert [part.status_code for part in parts] == [503], parts
        assert parts[0].headers.get("x-ms-error-code") == "ServerBusy"

    def delete(self, keys: list[str]) -> list[str]:
        """A Blob Batch of Delete Blob for the first few, single deletes for the rest."""
        batch, single = keys[:5], keys[5:]
        parts = list(self.container.delete_blobs(*batch))
        assert [part.status_code for part in parts] == [202] * len(batch), parts
        for key in single:
            self.container.delete_blob(key)
        self.client.delete_container("spare")
        return keys

    def close(self) -> None:
        self.client.close()


Service = Tables | Queues | Blobs
SERVICES: dict[str, Callable[[IsolatedServer, dict[str, str]], Service]] = {
    "table": Tables,
    "queue": Queues,
    "blob": Blobs,
}


def _server(data_dir: Path, log_path: Path, workers: int = 2) -> IsolatedServer:
    server = IsolatedServer(data_dir, log_path=log_path)
    server.extra_args = [
        "--services", "table,queue,blob",
        "--queue-port", str(server.queue_port), "--blob-port", str(server.blob_port),
        "--workers", str(workers), "--disk-reserve", str(RESERVE_MIB), "--disk-warn", "8",
        "--no-console",
    ]  # fmt: skip
    return server


def _wait_answering(server: IsolatedServer, timeout: float = 60.0) -> None:
    """Until every service's port has answered an HTTP request. ``start`` returns once the
    supervisor's sockets accept connections, before its workers run: these clients retry
    nothing, and a connection made that early was seen reset now and then."""
    deadline = time.monotonic() + timeout
    for port in (server.port, server.queue_port, server.blob_port):
        while True:
            try:
                _get(port, "/-/ready")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)


def _get(port: int, path: str) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def _metric(server: IsolatedServer, name: str) -> int:
    """A gauge of the data volume on ``/metrics`` (open on loopback)."""
    status, body = _get(server.port, "/metrics")
    assert status == 200, body
    found = re.search(rf'^{name}{{path="[^"]+"}} (\d+)$', body.decode(), re.MULTILINE)
    assert found is not None, body.decode()[-2000:]
    return int(found.group(1))


def _refusal(exc: HttpResponseError) -> tuple[int | None, str | None]:
    """The status and Azure error code of a refused request (as the service sent the code)."""
    response = exc.response
    return exc.status_code, response.headers.get("x-ms-error-code") if response is not None else None


def _fill(service: Service, first: int = 0) -> tuple[list[str], list[tuple[int | None, str | None]]]:
    """Write until refused, then a few more times; what was acknowledged, and the refusals."""
    acked: list[str] = []
    refusals: list[tuple[int | None, str | None]] = []
    for i in range(first, FILL_LIMIT):
        try:
            acked.append(service.write(i))
        except HttpResponseError as exc:
            refusals.append(_refusal(exc))
            if len(refusals) > REFUSALS:
                break
        else:
            assert not refusals, f"a write was accepted after {refusals} on a full volume"
    return acked, refusals


def _write_when_accepted(service: Service, first: int, timeout: float = 60.0) -> str:
    """The first write accepted again, tried every half second for ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return service.write(first)
        except HttpResponseError as exc:
            assert _refusal(exc) == (503, "ServerBusy"), exc
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


# --------------------------------------------------------------------------------------------
# The scenario, once per service
# --------------------------------------------------------------------------------------------


@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", list(SERVICES))
def test_full_volume_refuses_writes_keeps_data_and_recovers_by_deleting(tmp_path: Path, kind: str) -> None:
    log_path = tmp_path / "server.log"
    state: dict[str, str] = {}
    with small_volume(tmp_path, VOLUME_MIB) as volume:
        server = _server(volume / "data", log_path)
        server.start()
        service = SERVICES[kind](server, state)
        try:
            service.setup()
            started = time.monotonic()
            acked, refusals = _fill(service)
            filled_in = time.monotonic() - started
            assert refusals, "the volume never filled"
            assert set(refusals) == {(503, "ServerBusy")}, refusals
            assert server.alive(), server.log_tail()
            status, body = _get(server.port, "/-/ready")
            assert status == 200 and b'"volume":"full"' in body, body
            assert _metric(server, "tabulae_volume_full") == 1
            # What a full volume has free by now depends on how much the worker has handed back
            # since (a truncated log, freed pages): less than the volume, never nothing known.
            assert 0 <= _metric(server, "tabulae_volume_free_bytes") < VOLUME_MIB * MIB

            # Reads work and hold exactly what was acknowledged: nothing refused was stored.
            assert service.read_all() == set(acked)
            if isinstance(service, Tables | Blobs):
                service.refused_while_full()

            # A crash while full, and a restart on the still-full volume: nothing is lost.
            server.kill()
            full_free = free_bytes(volume)
            server.start()
            _wait_answering(server)
            service.close()
            service = SERVICES[kind](server, state)
            assert service.read_all() == set(acked)
            # Its start-up may have found room again (SQLite gives back the log of a store it
            # closes last): full again before anything is deleted.
            more, refusals = _fill(service, len(acked))
            assert set(refusals) == {(503, "ServerBusy")}, refusals
            acked += more

            # Deletes through the API succeed and make room: writes are accepted again.
            deleted = service.delete(acked[: len(acked) // 2])
            deleted_at = time.monotonic()
            new = [_write_when_accepted(service, FILL_LIMIT + 1)]  # numbered past any fill
            recovered_in = time.monotonic() - deleted_at
            new += [service.write(FILL_LIMIT + 2 + i) for i in range(3)]
            recovered_free = free_bytes(volume)
            assert service.read_all() == (set(acked) - set(deleted)) | set(new)
            status, body = _get(server.port, "/-/ready")
            assert status == 200 and b"full" not in body, body
            assert _metric(server, "tabulae_volume_full") == 0
            assert _metric(server, "tabulae_volume_reserve_bytes") == RESERVE_MIB * MIB
            print(
                f"\n{kind}: {len(acked)} writes filled the volume in {filled_in:.1f} s; "
                f"free when full {full_free // 1024} KiB; {len(deleted)} deleted; writes accepted "
                f"{recovered_in:.1f} s after the deletes; free then {recovered_free // 1024} KiB"
            )
        finally:
            service.close()
            server.stop()
            server.kill()
        assert integrity_check(volume / "data" / "tabulae.db") == "ok"
    log = log_path.read_text()
    assert "Traceback" not in log, log
    assert "data volume full: writes refused" in log, log
    # Once after the deletes; a restart on the full volume may have found room once before.
    assert 1 <= log.count("space available again") <= 2, log
    assert "failed" not in log, log


@pytest.mark.timeout(180)
def test_start_on_a_full_volume_exits_non_zero_before_its_banner(tmp_path: Path) -> None:
    with small_volume(tmp_path, 16) as volume:
        data = volume / "data"
        data.mkdir()
        filler = fill_with_file(volume)
        for workers in (1, 2):
            result = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "tabulae",
                    "serve",
                    "--data-dir",
                    str(data),
                    "--workers",
                    str(workers),
                    "--port",
                    str(free_port()),
                    "--queue-port",
                    str(free_port()),
                    "--blob-port",
                    str(free_port()),
                ],
                capture_output=True,
                text=True,
                timeout=120,
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                check=False,
            )
            assert result.returncode != 0, result
            assert "Tabulae" not in result.stdout, result.stdout  # no banner: nothing was served
            assert re.fullmatch(r"tabulae: VolumeFull: .*free space on its volume\n", result.stderr), result
            assert not (data / "tabulae.db").exists()
        filler.unlink()
        server = _server(data, tmp_path / "server.log")
        server.start()
        try:
            client = TableServiceClient.from_connection_string(server.connection_string, retry_total=0)
            client.create_table("after").create_entity({"PartitionKey": "p", "RowKey": "r"})
            client.close()
        finally:
            server.stop()
            server.kill()


@pytest.mark.timeout(180)
def test_deleted_blob_content_comes_back_promptly_while_low_and_a_download_in_flight_completes(
    tmp_path: Path,
) -> None:
    """On a volume low on space (here below --disk-warn from the start, not full), a deleted blob's
    content is collected within seconds, not after the usual grace of minutes; a download under
    way when its blob is deleted still completes intact, from the file it holds open (whose
    blocks come back when it is closed)."""
    read_size, gone_size = 12 * MIB, 4 * MIB
    with small_volume(tmp_path, VOLUME_MIB) as volume:
        server = _server(volume / "data", tmp_path / "server.log", workers=1)
        server.extra_args[server.extra_args.index("--disk-warn") + 1] = str(2 * VOLUME_MIB)
        server.start()
        client = BlobServiceClient.from_connection_string(server.connection_string, retry_total=0)
        reader = socket.socket()
        try:
            container = client.create_container("low", public_access="blob")
            data = os.urandom(read_size)
            container.upload_blob("read", data)
            container.upload_blob("gone", os.urandom(gone_size))
            reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)  # the server waits on us
            reader.connect(("127.0.0.1", server.blob_port))
            reader.sendall(f"GET /{DEV_ACCOUNT}/low/read HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            received = reader.recv(64 * 1024)
            before = free_bytes(volume)
            container.delete_blobs("read", "gone")
            deleted_at = time.monotonic()
            while free_bytes(volume) < before + gone_size - MIB and time.monotonic() < deleted_at + 60:
                time.sleep(0.5)
            freed_in = time.monotonic() - deleted_at
            assert free_bytes(volume) >= before + gone_size - MIB, "deleted content not collected in 60 s"
            assert free_bytes(volume) < before + read_size, "the download's file went before it was read"
            reader.settimeout(60)
            head, _, body = received.partition(b"\r\n\r\n")
            while len(body) < read_size and (piece := reader.recv(MIB)):
                body += piece
            reader.close()
            assert head.startswith(b"HTTP/1.1 200"), head
            assert hashlib.sha256(body).digest() == hashlib.sha256(data).digest()
            deadline = time.monotonic() + 30  # closed by the server once sent: its blocks come back
            while free_bytes(volume) < before + read_size + gone_size - MIB and time.monotonic() < deadline:
                time.sleep(0.5)
            assert free_bytes(volume) >= before + read_size + gone_size - MIB
            print(f"\ncontent of a deleted blob collected {freed_in:.1f} s after the delete")
        finally:
            reader.close()
            client.close()
            server.stop()
            server.kill()
    assert "Traceback" not in (tmp_path / "server.log").read_text()
