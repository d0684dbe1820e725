"""Conditional headers on blobs (If-Match, If-None-Match, If-Modified-Since, If-Unmodified-Since):
304 and 412 where Azure answers them, and conditional writes racing across two worker
processes, which must never lose an update, on each store."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError, ResourceModifiedError
from azure.storage.blob import BlobServiceClient, ContainerClient
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

from tests.backends import backend_names
from tests.conftest import fresh_store
from tests.serverproc import ServerProcess

THREADS = 8
INCREMENTS = 5


def test_read_conditions(container: ContainerClient) -> None:
    blob = container.get_blob_client("read")
    etag = blob.upload_blob(b"x")["etag"]
    past = datetime.now(UTC) - timedelta(hours=1)
    future = datetime.now(UTC) + timedelta(hours=1)
    assert blob.download_blob(etag=etag, match_condition=MatchConditions.IfNotModified).readall() == b"x"
    # Azure answers an unmet If-None-Match / If-Modified-Since on a read with 304 and the code
    # ConditionNotMet in a header (the SDK turns that code into ResourceModifiedError) ...
    with pytest.raises(ResourceModifiedError) as not_modified:
        blob.download_blob(etag=etag, match_condition=MatchConditions.IfModified)
    assert not_modified.value.status_code == 304
    with pytest.raises(ResourceModifiedError) as head:
        blob.get_blob_properties(if_modified_since=future)
    assert head.value.status_code == 304
    # ... and an unmet If-Match / If-Unmodified-Since with 412.
    with pytest.raises(ResourceModifiedError) as failed:
        blob.download_blob(etag='"0x1"', match_condition=MatchConditions.IfNotModified)
    assert failed.value.status_code == 412
    assert blob.get_blob_properties(if_modified_since=past).size == 1
    with pytest.raises(ResourceModifiedError) as unmodified:
        blob.get_blob_properties(if_unmodified_since=past)
    assert unmodified.value.status_code == 412


def test_write_conditions(container: ContainerClient) -> None:
    blob = container.get_blob_client("write")
    etag = blob.upload_blob(b"v1")["etag"]
    past = datetime.now(UTC) - timedelta(hours=1)
    for write in (
        lambda: blob.upload_blob(
            b"v2", overwrite=True, etag='"0x1"', match_condition=MatchConditions.IfNotModified
        ),
        lambda: blob.set_blob_metadata({"a": "b"}, if_unmodified_since=past),
        lambda: blob.set_http_headers(if_modified_since=datetime.now(UTC) + timedelta(hours=1)),
        lambda: blob.delete_blob(etag='"0x1"', match_condition=MatchConditions.IfNotModified),
        lambda: blob.create_snapshot(if_unmodified_since=past),
    ):
        with pytest.raises(HttpResponseError) as raised:
            write()
        assert raised.value.status_code == 412 and raised.value.error_code == "ConditionNotMet"
    new = blob.upload_blob(b"v2", overwrite=True, etag=etag, match_condition=MatchConditions.IfNotModified)
    assert new["etag"] != etag
    # Put Blob with If-None-Match: * refuses an existing blob with 409.
    with pytest.raises(HttpResponseError) as exists:
        blob.upload_blob(b"v3", match_condition=MatchConditions.IfMissing)
    assert exists.value.status_code == 409 and exists.value.error_code == "BlobAlreadyExists"
    assert blob.download_blob().readall() == b"v2"


@pytest.fixture(scope="module", params=backend_names())
def two_workers(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server of two worker processes on one store, both seen answering."""
    extra = ["--workers", "2"]
    extra += fresh_store(request.param)
    process = ServerProcess(tmp_path_factory.mktemp("race"), extra_args=extra).start()
    service = BlobServiceClient.from_connection_string(process.connection_string)
    seen: set[str] = set()
    for _ in range(200):
        fresh = BlobServiceClient.from_connection_string(process.connection_string)
        seen.add(fresh.get_account_information()["request_id"][:13])
        if len(seen) == 2:
            break
    assert len(seen) == 2, "both workers should answer"
    service.create_container("race")
    yield process
    process.stop()


def test_conditional_writes_race_across_workers(two_workers: ServerProcess) -> None:
    """Read-increment-write with If-Match from many clients: no update is ever lost."""
    setup = BlobServiceClient.from_connection_string(two_workers.connection_string)
    setup.get_blob_client("race", "counter").upload_blob(b"0", overwrite=True)
    barrier = threading.Barrier(THREADS)
    written: list[int] = []
    etags: list[str] = []
    errors: list[str] = []
    lock = threading.Lock()

    def client() -> None:
        service = BlobServiceClient.from_connection_string(two_workers.connection_string)
        blob = service.get_blob_client("race", "counter")
        barrier.wait()
        done = 0
        while done < INCREMENTS:
            stream = blob.download_blob()
            value = int(stream.readall())
            try:
                result = blob.upload_blob(
                    str(value + 1).encode(),
                    overwrite=True,
                    etag=stream.properties.etag,
                    match_condition=MatchConditions.IfNotModified,
                )
            except ResourceModifiedError:
                continue  # someone else won this round: read again
            except Exception as error:  # anything else is a failure of the test
                with lock:
                    errors.append(repr(error))
                return
            with lock:
                written.append(value + 1)
                etags.append(result["etag"])
            done += 1

    threads = [threading.Thread(target=client) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    total = THREADS * INCREMENTS
    assert sorted(written) == list(range(1, total + 1))  # every value written once: nothing lost
    assert len(set(etags)) == total
    assert int(setup.get_blob_client("race", "counter").download_blob().readall()) == total


def test_append_position_race_across_workers(two_workers: ServerProcess) -> None:
    """Appends conditioned on the position they read: each position is taken by one client."""
    setup = BlobServiceClient.from_connection_string(two_workers.connection_string)
    log = setup.get_blob_client("race", "log")
    log.create_append_blob()

    async def run() -> list[int]:
        services = [
            AsyncBlobServiceClient.from_connection_string(two_workers.connection_string)
            for _ in range(THREADS)
        ]
        try:

            async def writer(index: int, service: AsyncBlobServiceClient) -> list[int]:
                blob = service.get_blob_client("race", "log")
                mine: list[int] = []
                while len(mine) < INCREMENTS:
                    size = (await blob.get_blob_properties()).size
                    try:
                        await blob.append_block(f"{index}".encode() * 4, appendpos_condition=size)
                    except HttpResponseError as error:
                        assert error.error_code == "AppendPositionConditionNotMet", error
                        continue
                    mine.append(size)
                return mine

            results = await asyncio.gather(*(writer(i, s) for i, s in enumerate(services)))
        finally:
            for service in services:
                await service.close()
        return [position for positions in results for position in positions]

    positions = asyncio.run(run())
    total = THREADS * INCREMENTS
    assert sorted(positions) == [4 * i for i in range(total)]
    content = log.download_blob().readall()
    assert len(content) == 4 * total
    assert all(content[i : i + 4] == content[i : i + 1] * 4 for i in range(0, len(content), 4))
    print(f"{total} appends raced without a torn or lost block", file=sys.stderr)
