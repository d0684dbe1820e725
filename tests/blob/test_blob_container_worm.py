"""Container-level WORM policies and legal holds on each store: set through the signed admin
endpoint (``/-/accounts/{account}/containers/{container}/immutability``, Tabulae's stand-in for
Azure's management plane), seen and enforced through the Blob API with the official SDK (sync and
aio): ``has_immutability_policy`` / ``has_legal_hold``, the writes and deletes refused with
Azure's codes, new blobs still created, protected append writes, locked and unlocked states."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import itertools
import time
from collections.abc import Callable, Iterator
from email.utils import formatdate
from typing import Any

import orjson
import pytest
import urllib3
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import BlobServiceClient, ContainerClient, ContentSettings
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

from tabulae.blob.worm_guard import CACHE_SECONDS
from tests.backends import backend_names
from tests.conftest import fresh_store
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess

_names = itertools.count()


@pytest.fixture(scope="module", params=backend_names())
def worm_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    process = ServerProcess(
        tmp_path_factory.mktemp("worm"), extra_args=fresh_store(request.param), backend=request.param
    )
    process.start()
    yield process
    process.stop()


@pytest.fixture
def box(worm_server: ServerProcess) -> Iterator[ContainerClient]:
    with BlobServiceClient.from_connection_string(worm_server.connection_string) as service:
        yield service.create_container(f"worm{next(_names)}")


def _policy(
    server: ServerProcess, container: str, method: str = "GET", body: Any = None, *, key: str = DEV_KEY
) -> tuple[int, dict[str, Any]]:
    """A request to the container's immutability document, signed as the Table service's Shared Key."""
    path = f"/-/accounts/{DEV_ACCOUNT}/containers/{container}/immutability"
    date = formatdate(usegmt=True)
    payload = orjson.dumps(body) if body is not None else None
    content_type = "application/json" if payload is not None else ""
    to_sign = f"{method}\n\n{content_type}\n{date}\n/{DEV_ACCOUNT}{path}"
    signature = base64.b64encode(
        hmac.digest(base64.b64decode(key), to_sign.encode(), hashlib.sha256)
    ).decode()
    headers = {
        "x-ms-date": date,
        "x-ms-version": "2019-02-02",
        "Authorization": f"SharedKey {DEV_ACCOUNT}:{signature}",
    }
    if payload is not None:
        headers["Content-Type"] = content_type
    answer = urllib3.request(
        method, f"http://127.0.0.1:{server.port}{path}", body=payload, headers=headers, timeout=30
    )
    return answer.status, orjson.loads(answer.data) if answer.data else {}


def _code(call: Callable[[], Any]) -> str | None:
    try:
        call()
    except HttpResponseError as error:
        assert error.status_code == 409, error
        return error.response.headers.get("x-ms-error-code")
    return None


def _settle() -> None:
    """Let every worker's cached policy expire (a worker reads it again a second after it last
    did), so the next request is judged by the change just made, whichever worker takes it."""
    time.sleep(CACHE_SECONDS + 0.5)


def test_a_time_based_policy_refuses_changes_and_deletes_but_not_new_blobs(
    worm_server: ServerProcess, box: ContainerClient
) -> None:
    name = box.container_name
    assert _policy(worm_server, name) == (
        200,
        {
            "immutability-period-days": 0,
            "state": None,
            "allow-protected-append-writes": False,
            "allow-protected-append-writes-all": False,
            "legal-hold-tags": [],
        },
    )
    blob = box.upload_blob("kept", b"abc")
    etag = box.get_container_properties().etag
    status, doc = _policy(worm_server, name, "PUT", {"immutability-period-days": 7})
    assert (status, doc["immutability-period-days"], doc["state"]) == (200, 7, "Unlocked")
    props = box.get_container_properties()
    assert props.has_immutability_policy and not props.has_legal_hold and props.etag == etag
    listed = [
        c
        for c in BlobServiceClient.from_connection_string(worm_server.connection_string).list_containers()
        if c.name == name
    ]
    assert listed[0].has_immutability_policy and not listed[0].has_legal_hold
    _settle()
    assert _code(blob.delete_blob) == "BlobImmutableDueToPolicy"
    assert _code(lambda: blob.upload_blob(b"new", overwrite=True)) == "BlobImmutableDueToPolicy"
    assert _code(lambda: blob.set_blob_metadata({"a": "b"})) == "BlobImmutableDueToPolicy"
    assert (
        _code(lambda: blob.set_http_headers(ContentSettings(content_type="text/plain")))
        == "BlobImmutableDueToPolicy"
    )
    assert _code(blob.create_snapshot) == "BlobImmutableDueToPolicy"
    assert (
        _code(lambda: box.get_blob_client("kept").start_copy_from_url(blob.url)) == "BlobImmutableDueToPolicy"
    )
    blob.set_standard_blob_tier("Cool")  # tiers, tags and leases stay free
    blob.set_blob_tags({"k": "v"})
    blob.acquire_lease().release()
    box.upload_blob("fresh", b"new blobs may be created")
    assert (
        _code(lambda: box.get_blob_client("fresh").upload_blob(b"again", overwrite=True))
        == "BlobImmutableDueToPolicy"
    )
    log = box.get_blob_client("log")
    log.create_append_blob()
    assert _code(lambda: log.append_block(b"line")) == "BlobImmutableDueToPolicy"
    assert blob.download_blob().readall() == b"abc"
    assert _policy(worm_server, name, "PUT", {"immutability-period-days": 0})[1]["state"] is None
    assert not box.get_container_properties().has_immutability_policy
    _settle()
    assert _code(blob.delete_blob) is None


def test_protected_append_writes_lock_and_extend(worm_server: ServerProcess, box: ContainerClient) -> None:
    name = box.container_name
    log = box.get_blob_client("log")
    log.create_append_blob()
    doc = _policy(
        worm_server, name, "PUT", {"immutability-period-days": 3, "allow-protected-append-writes": True}
    )[1]
    assert doc["allow-protected-append-writes"] is True
    _settle()
    assert _code(log.delete_blob) == "BlobImmutableDueToPolicy"
    log.append_block(b"one ")
    log.append_block(b"two")
    assert log.download_blob().readall() == b"one two"
    assert _code(lambda: log.set_blob_metadata({"a": "b"})) == "BlobImmutableDueToPolicy"
    status, doc = _policy(worm_server, name, "PUT", {"locked": True})
    assert (status, doc["state"]) == (200, "Locked")
    refused = [
        {"locked": False},
        {"immutability-period-days": 2},
        {"immutability-period-days": 0},
        {"allow-protected-append-writes": False},
    ]
    for body in refused:
        status, error = _policy(worm_server, name, "PUT", body)
        assert (status, error["odata.error"]["code"]) == (400, "InvalidInput"), body
    assert (
        _policy(worm_server, name, "PUT", {"immutability-period-days": 30})[1]["immutability-period-days"]
        == 30
    )
    assert _policy(worm_server, name)[1]["state"] == "Locked"


def test_a_legal_hold_refuses_deletes_until_its_tags_are_cleared(
    worm_server: ServerProcess, box: ContainerClient
) -> None:
    name = box.container_name
    blob = box.upload_blob("held", b"abc")
    status, doc = _policy(worm_server, name, "PUT", {"legal-hold-tags": ["Case42", "audit2026"]})
    assert (status, doc["legal-hold-tags"]) == (200, ["case42", "audit2026"])
    props = box.get_container_properties()
    assert props.has_legal_hold and not props.has_immutability_policy
    _settle()
    assert _code(blob.delete_blob) == "BlobImmutableDueToLegalHold"
    assert _code(lambda: blob.upload_blob(b"x", overwrite=True)) == "BlobImmutableDueToLegalHold"
    log = box.get_blob_client("log")
    log.create_append_blob()
    assert _code(lambda: log.append_block(b"x")) == "BlobImmutableDueToLegalHold"
    _policy(worm_server, name, "PUT", {"allow-protected-append-writes-all": True})
    _settle()
    assert _code(lambda: log.append_block(b"x")) is None
    assert _policy(worm_server, name, "PUT", {"legal-hold-tags": []})[1]["legal-hold-tags"] == []
    _settle()
    assert _code(blob.delete_blob) is None


def test_bad_documents_and_who_may_ask(worm_server: ServerProcess, box: ContainerClient) -> None:
    name = box.container_name
    bad = [
        {"immutability-period-days": -1},
        {"immutability-period-days": 146_001},
        {"immutability-period-days": "7"},
        {"legal-hold-tags": ["ab"]},
        {"legal-hold-tags": ["has space"]},
        {"legal-hold-tags": [f"tag{n:03d}" for n in range(11)]},
        {"allow-protected-append-writes": True, "allow-protected-append-writes-all": True},
        {"locked": True},  # no policy to lock
        {"state": "Locked"},
        [1, 2],
    ]
    for body in bad:
        status, error = _policy(worm_server, name, "PUT", body)
        assert (status, error["odata.error"]["code"]) == (400, "InvalidInput"), body
    assert _policy(worm_server, name)[1]["immutability-period-days"] == 0  # nothing half-applied
    status, error = _policy(worm_server, "nosuchcontainer", "PUT", {"immutability-period-days": 1})
    assert (status, error["odata.error"]["code"]) == (404, "ContainerNotFound")
    other_key = base64.b64encode(b"not-the-key-not-the-key-32bytes!").decode()
    status, error = _policy(worm_server, name, key=other_key)
    assert (status, error["odata.error"]["code"]) == (403, "AuthenticationFailed")


def test_container_worm_with_the_async_client(worm_server: ServerProcess, box: ContainerClient) -> None:
    box.upload_blob("a", b"abc")
    _policy(worm_server, box.container_name, "PUT", {"immutability-period-days": 1})

    async def run() -> None:
        async with AsyncBlobServiceClient.from_connection_string(worm_server.connection_string) as service:
            container = service.get_container_client(box.container_name)
            assert (await container.get_container_properties()).has_immutability_policy
            await asyncio.sleep(CACHE_SECONDS + 0.5)
            with pytest.raises(HttpResponseError) as raised:
                await container.delete_blob("a")
            assert raised.value.error_code == "BlobImmutableDueToPolicy"
            await container.upload_blob("b", b"new")

    asyncio.run(run())
