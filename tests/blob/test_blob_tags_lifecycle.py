"""Blob index tags through soft delete, on each store: a soft-deleted blob is not found by its
tags and an undeleted one is found again, with its tags; a soft-deleted container's blobs are
not found on the account until the container is restored, and a deleted container's are gone."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import BlobServiceClient, RetentionPolicy

from tests.backends import backend_names
from tests.blob.test_blob_soft_delete import start
from tests.serverproc import ServerProcess


@pytest.fixture(scope="module", params=backend_names())
def kept(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server whose account keeps deleted blobs and containers for 2 days."""
    process, _clock = start(tmp_path_factory.mktemp("tagsoft"), request.param, "--container-soft-delete", "2")
    with BlobServiceClient.from_connection_string(process.connection_string) as service:
        service.set_service_properties(delete_retention_policy=RetentionPolicy(enabled=True, days=2))
    yield process
    process.stop()


@pytest.fixture
def service(kept: ServerProcess) -> Iterator[BlobServiceClient]:
    with BlobServiceClient.from_connection_string(kept.connection_string) as client:
        yield client


def _found(service: BlobServiceClient, value: str) -> list[tuple[str, str]]:
    return sorted((b.container_name, b.name) for b in service.find_blobs_by_tags(f"\"k\" = '{value}'"))


def test_an_undeleted_blob_is_found_by_its_tags_again(service: BlobServiceClient) -> None:
    value = uuid.uuid4().hex
    container = service.create_container("c" + uuid.uuid4().hex[:12])
    blob = container.upload_blob("doc", b"x", tags={"k": value})
    blob.delete_blob()
    assert _found(service, value) == []
    blob.undelete_blob()
    assert _found(service, value) == [(container.container_name, "doc")]
    assert blob.get_blob_tags() == {"k": value}
    assert [b.name for b in container.find_blobs_by_tags(f"\"k\" = '{value}'")] == ["doc"]


def test_a_soft_deleted_container_is_found_only_once_restored(service: BlobServiceClient) -> None:
    value = uuid.uuid4().hex
    name = "c" + uuid.uuid4().hex[:12]
    service.create_container(name).upload_blob("doc", b"x", tags={"k": value})
    service.delete_container(name)
    assert _found(service, value) == []
    version = next(c.version for c in service.list_containers(include_deleted=True) if c.name == name)
    restored = None
    for _ in range(60):  # a deleted name may be restored once its deletion has finished
        try:
            restored = service.undelete_container(name, version)
            break
        except HttpResponseError:  # retried while the deletion is still under way
            time.sleep(0.5)
    assert restored is not None
    assert _found(service, value) == [(name, "doc")]
    assert restored.get_blob_client("doc").get_blob_tags() == {"k": value}
