"""The pytest plugin: a Tabulae server for the test session and SDK clients bound to it.

Installed with Tabulae and registered under the ``pytest11`` entry point as ``tabulae``; it adds
command-line options and fixtures and does nothing else until a test asks for a fixture (so it
costs a suite that does not use it nothing; ``-p no:tabulae`` turns it off entirely).

Fixtures (every name starts with ``tabulae_``, so none shadows a suite's own):

- ``tabulae_server`` (session): a :class:`~tabulae.testing.TabulaeServer`; started on free ports
  over SQLite in a temporary directory (``--tabulae-in-memory``: in memory), one per xdist worker,
  or the server given by ``--tabulae-url`` / ``TABULAE_URL``.
- ``tabulae_connection_string`` (session).
- ``tabulae_name``: a name no other test uses, valid for a table, a queue and a container.
- ``tabulae_table_service``, ``tabulae_queue_service``, ``tabulae_blob_service``: the SDKs' sync
  service clients; ``…_aio`` the ``aio`` ones, not yet opened: ``async with`` them in the test.
- ``tabulae_table``, ``tabulae_queue``, ``tabulae_container``: a new table, queue or container
  under a fresh name, deleted after the test; tests share the server, never a resource.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tabulae.testing.server import TabulaeServer, serve

URL_ENV = "TABULAE_URL"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tabulae", "Tabulae (Azure Storage) test server")
    group.addoption(
        "--tabulae-url",
        default=None,
        metavar="URL",
        help=f"use a running server instead of starting one: a connection string, or http://HOST for the "
        f"emulator's ports (also ${URL_ENV})",
    )
    group.addoption(
        "--tabulae-in-memory",
        action="store_true",
        default=False,
        help="keep the started server's data in memory instead of SQLite in a temporary directory",
    )
    group.addoption(
        "--tabulae-arg",
        action="append",
        default=[],
        metavar="FLAG",
        help="a further `tabulae serve` flag for the started server (repeatable, e.g. "
        "--tabulae-arg=--faults=0.1)",
    )


@pytest.fixture(scope="session")
def tabulae_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TabulaeServer]:
    """The session's server: the one ``--tabulae-url`` names, else one started for this process."""
    url = request.config.getoption("tabulae_url") or os.environ.get(URL_ENV)
    if url:
        yield TabulaeServer.from_url(url)
        return
    in_memory = bool(request.config.getoption("tabulae_in_memory"))
    args = list(request.config.getoption("tabulae_arg"))
    with serve(tmp_path_factory.mktemp("tabulae"), in_memory=in_memory, args=args) as server:
        yield server


@pytest.fixture(scope="session")
def tabulae_connection_string(tabulae_server: TabulaeServer) -> str:
    return tabulae_server.connection_string


@pytest.fixture
def tabulae_name() -> str:
    """A fresh name: lower-case letters and digits, starting with a letter, 3-63 characters,
    so it is a valid table, queue and container name; unique across tests, workers and runs."""
    return "t" + uuid.uuid4().hex[:20]


@pytest.fixture
def tabulae_table_service(tabulae_connection_string: str) -> Iterator[Any]:
    from azure.data.tables import TableServiceClient

    with TableServiceClient.from_connection_string(tabulae_connection_string) as client:
        yield client


@pytest.fixture
def tabulae_queue_service(tabulae_connection_string: str) -> Iterator[Any]:
    from azure.storage.queue import QueueServiceClient

    with QueueServiceClient.from_connection_string(tabulae_connection_string) as client:
        yield client


@pytest.fixture
def tabulae_blob_service(tabulae_connection_string: str) -> Iterator[Any]:
    from azure.storage.blob import BlobServiceClient

    with BlobServiceClient.from_connection_string(tabulae_connection_string) as client:
        yield client


@pytest.fixture
def tabulae_table_service_aio(tabulae_connection_string: str) -> Any:
    """The ``aio`` client, unopened: ``async with tabulae_table_service_aio as client:`` in the test
    (its connections belong to the test's event loop, which a sync fixture cannot reach)."""
    from azure.data.tables.aio import TableServiceClient

    return TableServiceClient.from_connection_string(tabulae_connection_string)


@pytest.fixture
def tabulae_queue_service_aio(tabulae_connection_string: str) -> Any:
    """As ``tabulae_table_service_aio``, for queues."""
    from azure.storage.queue.aio import QueueServiceClient

    return QueueServiceClient.from_connection_string(tabulae_connection_string)


@pytest.fixture
def tabulae_blob_service_aio(tabulae_connection_string: str) -> Any:
    """As ``tabulae_table_service_aio``, for blobs."""
    from azure.storage.blob.aio import BlobServiceClient

    return BlobServiceClient.from_connection_string(tabulae_connection_string)


@pytest.fixture
def tabulae_table(tabulae_table_service: Any, tabulae_name: str) -> Iterator[Any]:
    """A ``TableClient`` of a new table, deleted after the test."""
    client = tabulae_table_service.create_table(tabulae_name)
    try:
        yield client
    finally:
        tabulae_table_service.delete_table(tabulae_name)
        client.close()


@pytest.fixture
def tabulae_queue(tabulae_queue_service: Any, tabulae_name: str) -> Iterator[Any]:
    """A ``QueueClient`` of a new queue, deleted after the test."""
    client = tabulae_queue_service.create_queue(tabulae_name)
    try:
        yield client
    finally:
        tabulae_queue_service.delete_queue(tabulae_name)
        client.close()


@pytest.fixture
def tabulae_container(tabulae_blob_service: Any, tabulae_name: str) -> Iterator[Any]:
    """A ``ContainerClient`` of a new container, deleted after the test."""
    client = tabulae_blob_service.create_container(tabulae_name)
    try:
        yield client
    finally:
        tabulae_blob_service.delete_container(tabulae_name)
        client.close()
