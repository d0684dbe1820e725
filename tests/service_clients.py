"""Fixtures for the integration tests: SDK clients and a raw HTTP client bound to the session server."""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.data.tables import TableClient, TableServiceClient
from azure.storage.blob import BlobServiceClient, ContainerClient

from tests.queue_clients import queue_service_client
from tests.queuehttp import QueueHttp
from tests.rawhttp import RawClient
from tests.serverproc import ServerProcess

_queue_names = itertools.count()
#: Delete Container's refusals while immutability protects what a container holds.
_KEPT_BY_IMMUTABILITY = frozenset(
    {
        "ContainerHasLegalHold",
        "ContainerImmutabilityPolicyLocked",
        "BlobImmutableDueToPolicy",
        "ContainerImmutableStorageWithVersioningEnabled",
    }
)


@pytest.fixture
def raw(server: ServerProcess) -> RawClient:
    """Raw HTTP, Shared Key signed, against the session server."""
    return RawClient(server.port)


@pytest.fixture
def service(server: ServerProcess) -> Iterator[TableServiceClient]:
    with TableServiceClient.from_connection_string(server.connection_string) as client:
        yield client


@pytest.fixture
def table(service: TableServiceClient, table_name: str) -> Iterator[TableClient]:
    """A freshly created table (deleted again afterwards)."""
    client = service.create_table(table_name)
    try:
        yield client
    finally:
        service.delete_table(table_name)
        client.close()


# ------------------------------------------------------------------------------------ queues


@pytest.fixture(params=["sync", "aio"])
def queue_service(request: pytest.FixtureRequest, server: ServerProcess) -> Iterator[Any]:
    """A QueueServiceClient of the sync SDK, and of the aio one (behind ``Synced``)."""
    with queue_service_client(request.param, server.connection_string) as client:
        yield client


@pytest.fixture
def queue_name() -> str:
    """A queue name unique within the session (queues outlive tests on the shared server)."""
    return f"q{os.getpid()}x{next(_queue_names)}"


@pytest.fixture
def queue(queue_service: Any, queue_name: str) -> Iterator[Any]:
    """A freshly created queue's client (deleted again afterwards)."""
    client = queue_service.create_queue(queue_name)
    try:
        yield client
    finally:
        with contextlib.suppress(ResourceNotFoundError):
            queue_service.delete_queue(queue_name)


@pytest.fixture
def queue_http(server: ServerProcess) -> QueueHttp:
    """Raw HTTP, Blob/Queue Shared Key signed, against the session server's Queue port."""
    return QueueHttp(server.queue_port)


# ------------------------------------------------------------------------------------ blobs


@pytest.fixture
def blob_service(server: ServerProcess) -> Iterator[BlobServiceClient]:
    with BlobServiceClient.from_connection_string(server.connection_string) as client:
        yield client


@pytest.fixture
def container(blob_service: BlobServiceClient, table_name: str) -> Iterator[ContainerClient]:
    """A freshly created container (deleted again afterwards)."""
    client = blob_service.create_container(f"c{table_name.lower()}")
    try:
        yield client
    finally:
        with contextlib.suppress(ResourceNotFoundError):
            try:
                client.delete_container()
            except HttpResponseError as error:  # a test that left protected blobs keeps them
                if error.error_code not in _KEPT_BY_IMMUTABILITY:
                    raise
        client.close()
