"""Fixtures for the integration tests: SDK clients and a raw HTTP client bound to the session server."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import TableClient, TableServiceClient
from azure.storage.blob import BlobServiceClient, ContainerClient

from tests.integration.rawhttp import RawClient
from tests.serverproc import ServerProcess


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


@pytest.fixture
def blob_service(server: ServerProcess) -> Iterator[BlobServiceClient]:
    with BlobServiceClient.from_connection_string(server.blob_connection_string) as client:
        yield client


@pytest.fixture
def container(blob_service: BlobServiceClient, table_name: str) -> Iterator[ContainerClient]:
    """A freshly created container (deleted again afterwards)."""
    client = blob_service.create_container(f"c{table_name.lower()}")
    try:
        yield client
    finally:
        with contextlib.suppress(ResourceNotFoundError):
            client.delete_container()
        client.close()
