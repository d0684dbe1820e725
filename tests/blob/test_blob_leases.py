"""Blob leases: the five actions, what a lease means for writers, and two clients fighting over one
blob, through the SDK (sync and aio) on each store."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from azure.core.exceptions import HttpResponseError, ResourceExistsError
from azure.storage.blob import BlobClient, BlobLeaseClient, BlobServiceClient, ContainerClient
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

from tests.serverproc import ServerProcess


def two_clients(server: ServerProcess, container: str, name: str) -> tuple[BlobClient, BlobClient]:
    """Two independent clients (their own connections) on one blob."""
    one = BlobServiceClient.from_connection_string(server.connection_string)
    two = BlobServiceClient.from_connection_string(server.connection_string)
    return one.get_blob_client(container, name), two.get_blob_client(container, name)


def test_lease_actions_and_writes(container: ContainerClient) -> None:
    blob = container.get_blob_client("leased")
    etag = blob.upload_blob(b"v1")["etag"]
    lease = blob.acquire_lease(lease_duration=-1, lease_id="00000000-1111-2222-3333-444444444444")
    assert lease.id == "00000000-1111-2222-3333-444444444444"
    props = blob.get_blob_properties()
    assert (props.lease.status, props.lease.state, props.lease.duration) == ("locked", "leased", "infinite")
    assert props.etag == etag  # a lease is no write
    with pytest.raises(HttpResponseError) as missing:
        blob.upload_blob(b"v2", overwrite=True)
    assert missing.value.status_code == 412 and missing.value.error_code == "LeaseIdMissing"
    with pytest.raises(HttpResponseError) as mismatch:
        blob.set_blob_metadata({"a": "b"}, lease="99999999-1111-2222-3333-444444444444")
    assert mismatch.value.error_code == "LeaseIdMismatchWithBlobOperation"
    with pytest.raises(HttpResponseError) as deleting:
        blob.delete_blob()
    assert deleting.value.error_code == "LeaseIdMissing"
    assert blob.download_blob().readall() == b"v1"  # reads need no lease id
    blob.upload_blob(b"v2", overwrite=True, lease=lease)
    assert blob.get_blob_properties().lease.state == "leased"  # the lease survives the write
    lease.renew()
    lease.change("55555555-1111-2222-3333-444444444444")
    with pytest.raises(HttpResponseError) as old_id:
        blob.upload_blob(b"v3", overwrite=True, lease="00000000-1111-2222-3333-444444444444")
    assert old_id.value.error_code == "LeaseIdMismatchWithBlobOperation"
    released_id = lease.id
    lease.release()
    assert blob.get_blob_properties().lease.state == "available"
    with pytest.raises(HttpResponseError) as gone:
        blob.set_blob_metadata({}, lease=released_id)
    assert gone.value.error_code == "LeaseNotPresentWithBlobOperation"
    blob.delete_blob()


def test_invalid_lease_requests(container: ContainerClient) -> None:
    blob = container.get_blob_client("badlease")
    blob.upload_blob(b"x")
    for duration in (5, 61):
        with pytest.raises(HttpResponseError) as raised:
            blob.acquire_lease(lease_duration=duration)
        assert raised.value.status_code == 400 and raised.value.error_code == "InvalidHeaderValue"
    with pytest.raises(HttpResponseError) as raised:
        blob.acquire_lease(lease_id="not-a-guid")
    assert raised.value.error_code == "InvalidHeaderValue"
    missing = container.get_blob_client("nolease")
    with pytest.raises(HttpResponseError) as absent:
        missing.acquire_lease()
    assert absent.value.status_code == 404


def test_break_period_then_lease_lost(container: ContainerClient) -> None:
    blob = container.get_blob_client("breaking")
    blob.upload_blob(b"x")
    lease = blob.acquire_lease(lease_duration=60)
    assert lease.break_lease(lease_break_period=2) == 2
    props = blob.get_blob_properties()
    assert (props.lease.state, props.lease.status) == ("breaking", "locked")
    blob.set_blob_metadata({"during": "break"}, lease=lease)  # the holder may still write
    with pytest.raises(ResourceExistsError) as breaking:
        blob.acquire_lease()
    assert breaking.value.error_code == "LeaseIsBreakingAndCannotBeAcquired"
    time.sleep(2.5)
    assert blob.get_blob_properties().lease.state == "broken"
    with pytest.raises(HttpResponseError) as lost:
        blob.upload_blob(b"y", overwrite=True, lease=lease)
    assert lost.value.status_code == 412 and lost.value.error_code == "LeaseLost"
    blob.upload_blob(b"y", overwrite=True)  # nobody holds it now
    blob.acquire_lease()  # and a broken lease can be taken again


def test_two_clients_fight_for_a_lease(server: ServerProcess, container: ContainerClient) -> None:
    container.upload_blob("fought", b"start")
    one, two = two_clients(server, container.container_name, "fought")
    barrier = threading.Barrier(2)
    outcomes: dict[str, object] = {}

    def contend(name: str, client: BlobClient) -> None:
        barrier.wait()
        try:
            outcomes[name] = client.acquire_lease(lease_duration=30)
        except ResourceExistsError as error:
            outcomes[name] = error.error_code

    threads = [threading.Thread(target=contend, args=(n, c)) for n, c in (("one", one), ("two", two))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    codes = [v for v in outcomes.values() if isinstance(v, str)]
    winners = [v for v in outcomes.values() if not isinstance(v, str)]
    assert codes == ["LeaseAlreadyPresent"] and len(winners) == 1
    winner_name = next(n for n, v in outcomes.items() if not isinstance(v, str))
    winner, loser = (one, two) if winner_name == "one" else (two, one)
    lease = winners[0]
    with pytest.raises(HttpResponseError) as blocked:
        loser.upload_blob(b"loser", overwrite=True)
    assert blocked.value.error_code == "LeaseIdMissing"
    winner.upload_blob(b"winner", overwrite=True, lease=lease)
    # The loser breaks the lease (no id needed); from then on the winner's id is worth nothing.
    assert loser.get_blob_properties().lease.state == "leased"
    BlobLeaseClient(loser).break_lease(lease_break_period=0)
    with pytest.raises(HttpResponseError) as lost:
        winner.upload_blob(b"late", overwrite=True, lease=lease)
    assert lost.value.error_code == "LeaseLost"
    mine = loser.acquire_lease()
    loser.upload_blob(b"mine now", overwrite=True, lease=mine)
    assert winner.download_blob().readall() == b"mine now"


def test_lease_fight_aio(server: ServerProcess, container: ContainerClient) -> None:
    container.upload_blob("async-fought", b"x")

    async def run() -> list[str]:
        services = [AsyncBlobServiceClient.from_connection_string(server.connection_string) for _ in range(6)]
        try:
            clients = [s.get_blob_client(container.container_name, "async-fought") for s in services]

            async def contend(client: object) -> str:
                try:
                    await client.acquire_lease(lease_duration=15)  # type: ignore[attr-defined]
                except ResourceExistsError as error:
                    return str(error.error_code)
                return "won"

            return await asyncio.gather(*(contend(c) for c in clients))
        finally:
            for service in services:
                await service.close()

    results = asyncio.run(run())
    assert results.count("won") == 1
    assert results.count("LeaseAlreadyPresent") == 5
