"""Celery with Azure Storage as both its broker (kombu's ``azurestoragequeues`` transport, over
Tabulae's Queue service) and its result backend (``azureblockblob``, over the Blob service), on
each store: a worker in a process of its own takes a task from a queue, and its result, or the
exception a failing task raised, comes back through a blob."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.storage.blob import BlobServiceClient, ContainerClient
from azure.storage.queue import QueueServiceClient

from tests.clients.celery_app import configure
from tests.serverproc import DEV_KEY, ServerProcess

RESULT_TIMEOUT = 90.0  # a worker's start and the polls of a loaded machine, never a measure


@pytest.fixture
def celery_env(server: ServerProcess, table_name: str) -> Iterator[dict[str, str]]:
    """The broker and backend URLs of the session's server, and a name of the test's own; the
    queues and the container Celery made under that name are deleted afterwards.

    kombu reads the part before ``@`` as the account key when the URL names the development
    account (the key is not URL-quoted); the result backend takes a connection string."""
    prefix = f"cel{table_name.lower()}"
    yield {
        "TABULAE_CELERY_BROKER": f"azurestoragequeues://{DEV_KEY}@{server.queue_endpoint}",
        "TABULAE_CELERY_BACKEND": f"azureblockblob://{server.connection_string}",
        "TABULAE_CELERY_PREFIX": prefix,
    }
    with QueueServiceClient.from_connection_string(server.connection_string) as queues:
        for queue in queues.list_queues(name_starts_with=prefix):
            queues.delete_queue(queue.name)
    with BlobServiceClient.from_connection_string(server.connection_string) as blobs:
        if blobs.get_container_client(prefix).exists():
            blobs.delete_container(prefix)


@pytest.fixture
def worker(celery_env: dict[str, str], tmp_path: Path) -> Iterator[Path]:
    """A Celery worker (one process, ``--pool=solo``) in a session of its own, ended with its
    whole group whatever the test did; yields the path of its log."""
    log = tmp_path / "worker.log"
    command = [
        sys.executable, "-m", "celery", "-A", "tests.clients.celery_app", "worker", "--pool=solo",
        "--without-mingle", "--without-gossip", "--without-heartbeat", "--loglevel=INFO",
    ]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(
            command,
            env={**os.environ, **celery_env},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield log
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)


def test_a_celery_worker_runs_tasks_over_queues_and_blobs(
    celery_env: dict[str, str], worker: Path, server: ServerProcess
) -> None:
    prefix = celery_env["TABULAE_CELERY_PREFIX"]
    app = configure(celery_env["TABULAE_CELERY_BROKER"], celery_env["TABULAE_CELERY_BACKEND"], prefix)
    try:
        done = app.send_task("tabulae.add", args=(2, 40))
        assert done.get(timeout=RESULT_TIMEOUT) == 42, worker.read_text(errors="replace")[-3000:]
        assert done.state == "SUCCESS"

        failed = app.send_task("tabulae.fail", args=("no such invoice",))
        with pytest.raises(ValueError, match="no such invoice"):
            failed.get(timeout=RESULT_TIMEOUT)
        assert failed.state == "FAILURE"
        assert "ValueError" in (failed.traceback or "")

        many = [app.send_task("tabulae.add", args=(n, n)) for n in range(10)]
        assert [result.get(timeout=RESULT_TIMEOUT) for result in many] == [2 * n for n in range(10)]
    finally:
        app.close()

    with ContainerClient.from_connection_string(server.connection_string, prefix) as results:
        keys = set(results.list_blob_names())
    assert f"celery-task-meta-{done.id}" in keys
    assert f"celery-task-meta-{failed.id}" in keys
    assert len(keys) == 12  # one result blob per task
    with QueueServiceClient.from_connection_string(server.connection_string) as queues:
        assert f"{prefix}-work" in {queue.name for queue in queues.list_queues(name_starts_with=prefix)}
