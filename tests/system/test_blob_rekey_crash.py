"""Turning an account's hierarchical namespace on (or off) between starts re-keys its blob rows
before the server serves (``storage/postgres/rekeying.py``), and a ``kill -9`` in the middle of
that leaves a store the next start finishes, whichever way the setting then points.

A store written while the development account was flat is served again with ``--hns``; the
test holds a row lock on one blob of the second container, so the re-keying moves the first
container, commits, and waits inside the second one's batch. There the whole server is killed
with SIGKILL. The next start (with ``--hns`` again, or flat again) settles the account, and
every blob reads back byte-exact through the Blob API and, with the namespace on, the Data
Lake API, including after a directory rename; flat again, it all still reads.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from azure.storage.blob import BlobServiceClient
from azure.storage.filedatalake import DataLakeServiceClient

from tabulae.storage.postgres.blob_keys import blob_dkey, container_dkey
from tests.backends import database_backends
from tests.conftest import fresh_store
from tests.serverproc import DEV_ACCOUNT, ServerProcess

CONTAINERS = ("alpha", "beta")
DIRECTORIES = ("dir", "dir/sub")
FOLDER = {"hdi_isfolder": "true"}


@pytest.fixture(params=database_backends())
def store_args(request: pytest.FixtureRequest) -> Iterator[tuple[str, list[str]]]:
    yield request.param, fresh_store(request.param)


def launch(server: ServerProcess) -> subprocess.Popen[bytes]:
    """Start ``server`` without waiting for it to listen (it is held before it does)."""
    command = [
        sys.executable, "-m", "tabulae", "serve",
        "--port", str(server.port), "--queue-port", str(server.queue_port),
        "--blob-port", str(server.blob_port), "--data-dir", str(server.data_dir), *server.extra_args,
    ]  # fmt: skip
    with server.log_path.open("ab") as log:
        server.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True
        )
    return server.process


def keys(url: str, container: str) -> set[int]:
    with psycopg.connect(url) as conn:
        found = conn.execute(
            "SELECT DISTINCT b.dkey FROM blobs b JOIN blob_containers c ON c.id = b.container_id"
            " WHERE c.account = %s AND c.name = %s",
            (DEV_ACCOUNT, container),
        ).fetchall()
    return {int(row[0]) for row in found}


def mode(url: str) -> tuple[bool, bool] | None:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT colocated, settled FROM blob_key_modes WHERE account = %s", (DEV_ACCOUNT,)
        ).fetchone()
    return (bool(row[0]), bool(row[1])) if row else None


def write(server: ServerProcess) -> dict[tuple[str, str], bytes]:
    service = BlobServiceClient.from_connection_string(server.connection_string)
    written: dict[tuple[str, str], bytes] = {}
    for container in CONTAINERS:
        client = service.create_container(container)
        for directory in DIRECTORIES:  # directories as a Data Lake client would see them
            client.upload_blob(directory, b"", metadata=FOLDER)
        for index in range(40):
            size = 5 * 1024 * 1024 + 7 if index == 0 else 100 + index * 37
            data = os.urandom(size)
            name = f"dir/sub/f{index:02d}" if index % 2 else f"dir/f{index:02d}"
            client.upload_blob(name, data)
            written[(container, name)] = data
    return written


def read_blobs(
    server: ServerProcess, written: dict[tuple[str, str], bytes], moved: tuple[str, ...] = ()
) -> None:
    """Every blob byte-exact, and each container's listing (with its directories: those of
    the containers in ``moved`` renamed ``moved``) exactly what was written."""
    service = BlobServiceClient.from_connection_string(server.connection_string)
    for (container, name), data in written.items():
        assert service.get_blob_client(container, name).download_blob().readall() == data, name
    for container in CONTAINERS:
        listed = {blob.name for blob in service.get_container_client(container).list_blobs()}
        directories = {"moved", "moved/sub"} if container in moved else set(DIRECTORIES)
        assert listed == {name for c, name in written if c == container} | directories


def read_paths(server: ServerProcess, written: dict[tuple[str, str], bytes]) -> None:
    lake = DataLakeServiceClient.from_connection_string(server.connection_string)
    for (container, name), data in written.items():
        file = lake.get_file_system_client(container).get_file_client(name)
        assert file.download_file().readall() == data, name


@pytest.mark.parametrize("then", ["hns", "flat"])
def test_a_kill_during_the_rekeying_is_finished_by_the_next_start(
    tmp_path: Path, store_args: tuple[str, list[str]], then: str
) -> None:
    backend, args = store_args
    url = args[1]
    flat = ServerProcess(tmp_path / "data", extra_args=args, backend=backend).start()
    try:
        written = write(flat)
    finally:
        flat.stop()
    assert mode(url) is None  # never re-keyed: spread blob by blob

    held = "dir/f10"
    lake = ServerProcess(tmp_path / "data", extra_args=[*args, "--hns", DEV_ACCOUNT], backend=backend)
    with psycopg.connect(url) as blocker:
        blocker.execute(
            "SELECT 1 FROM blobs WHERE dkey = %s AND name = %s AND container_id ="
            " (SELECT id FROM blob_containers WHERE account = %s AND name = 'beta') FOR UPDATE",
            (blob_dkey(DEV_ACCOUNT, "beta", held), held, DEV_ACCOUNT),
        )
        process = launch(lake)
        try:
            deadline = time.monotonic() + 120
            while keys(url, "alpha") != {container_dkey(DEV_ACCOUNT, "alpha")}:
                assert process.poll() is None, lake.log_path.read_text(errors="replace")[-2000:]
                assert time.monotonic() < deadline, "the first container was never re-keyed"
                time.sleep(0.2)
            time.sleep(1.0)  # well inside the second container's batch, waiting for the lock
            assert process.poll() is None
        finally:
            lake.stop(9)  # SIGKILL, the workers (none yet) with it
        blocker.rollback()
    assert mode(url) == (True, False)  # the re-keying had begun and not finished
    assert keys(url, "alpha") == {container_dkey(DEV_ACCOUNT, "alpha")}
    assert container_dkey(DEV_ACCOUNT, "beta") not in keys(url, "beta")  # its batch rolled back

    if then == "flat":
        back = ServerProcess(tmp_path / "data", extra_args=args, backend=backend).start()
        try:
            read_blobs(back, written)
        finally:
            back.stop()
        assert mode(url) == (False, True)
        assert container_dkey(DEV_ACCOUNT, "alpha") not in keys(url, "alpha")
        return

    lake.start()
    try:
        assert mode(url) == (True, True)
        for container in CONTAINERS:
            assert keys(url, container) == {container_dkey(DEV_ACCOUNT, container)}
        read_blobs(lake, written)
        read_paths(lake, written)
        client = DataLakeServiceClient.from_connection_string(lake.connection_string)
        client.get_file_system_client("beta").get_directory_client("dir").rename_directory("beta/moved")
        written = {
            (c, "moved" + name[3:] if c == "beta" else name): data for (c, name), data in written.items()
        }
        read_paths(lake, written)
    finally:
        lake.stop()

    flat.start()  # the namespace off again: every row goes back to a key of its own
    try:
        read_blobs(flat, written, moved=("beta",))
    finally:
        flat.stop()
    assert mode(url) == (False, True)
    assert len(keys(url, "beta")) == len([1 for c, _ in written if c == "beta"]) + len(DIRECTORIES)
