"""Data protection on each store, the parts of issue 32 that came last, through the official SDK
(sync and aio) and the signed admin endpoint (Tabulae's stand-in for Azure's management plane):

* Delete Container refused while immutability protects what the container holds: a container
  legal hold (409 ContainerHasLegalHold), a locked container policy over blobs (409
  ContainerImmutabilityPolicyLocked), an unlocked one over blobs (409 BlobImmutableDueToPolicy),
  a protected blob version, snapshot or previous version (409
  ContainerImmutableStorageWithVersioningEnabled), also with container soft delete on; nothing
  is deleted by a refused request, and the container goes once the protection does;
* Put Blob of a page or append blob under versioning makes a version, so a protected current
  page blob is overwritten into a previous version that keeps its pages and its protection;
* a locked container policy extended at most five times;
* the account's default version-level policy on each new blob version.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import itertools
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import formatdate
from pathlib import Path
from typing import Any

import orjson
import pytest
import urllib3
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import (
    BlobImmutabilityPolicyMode,
    BlobServiceClient,
    ContainerClient,
    ImmutabilityPolicy,
)
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

from tabulae.blob.worm_guard import CACHE_SECONDS
from tests.backends import backend_names
from tests.conftest import fresh_store
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess

_names = itertools.count()
VAULT, VAULT_KEY = "vaultaccount", base64.b64encode(b"vault-key-vault-key-vault-key-32").decode()


@pytest.fixture(scope="module", params=backend_names())
def guarded(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """Versioning in every account; a second account gets version-level immutability and a
    default policy at run time (by the test that needs it)."""
    extra = [
        "--blob-versioning",
        "--account",
        f"{DEV_ACCOUNT}:{DEV_KEY}",
        "--account",
        f"{VAULT}:{VAULT_KEY}",
    ]
    process = ServerProcess(
        tmp_path_factory.mktemp("guarded"),
        extra_args=[*extra, *fresh_store(request.param)],
        backend=request.param,
    )
    process.start()
    yield process
    process.stop()


@pytest.fixture
def box(guarded: ServerProcess) -> Iterator[ContainerClient]:
    with BlobServiceClient.from_connection_string(guarded.connection_string) as service:
        yield service.create_container(f"guard{next(_names)}")


def _admin(
    server: ServerProcess, path: str, method: str = "GET", body: Any = None, *, account: str = DEV_ACCOUNT
) -> tuple[int, dict[str, Any]]:
    """A request to ``/-/accounts/{account}{path}``, signed as the Table service's Shared Key."""
    key = VAULT_KEY if account == VAULT else DEV_KEY
    full = f"/-/accounts/{account}{path}"
    date = formatdate(usegmt=True)
    payload = orjson.dumps(body) if body is not None else None
    content_type = "application/json" if payload is not None else ""
    to_sign = f"{method}\n\n{content_type}\n{date}\n/{account}{full}"
    signature = base64.b64encode(
        hmac.digest(base64.b64decode(key), to_sign.encode(), hashlib.sha256)
    ).decode()
    headers = {
        "x-ms-date": date,
        "x-ms-version": "2019-02-02",
        "Authorization": f"SharedKey {account}:{signature}",
    }
    if payload is not None:
        headers["Content-Type"] = content_type
    answer = urllib3.request(
        method, f"http://127.0.0.1:{server.port}{full}", body=payload, headers=headers, timeout=30
    )
    return answer.status, orjson.loads(answer.data) if answer.data else {}


def _worm(server: ServerProcess, container: str, body: Any) -> dict[str, Any]:
    status, doc = _admin(server, f"/containers/{container}/immutability", "PUT", body)
    assert status == 200, doc
    time.sleep(CACHE_SECONDS + 0.5)  # every worker's cached policy has expired
    return doc


def _refused(call: Callable[[], Any]) -> str | None:
    try:
        call()
    except HttpResponseError as error:
        assert error.status_code == 409, error
        return error.error_code
    return None


def _policy(seconds: float = 3600, mode: str = "Unlocked") -> ImmutabilityPolicy:
    return ImmutabilityPolicy(
        expiry_time=datetime.now(UTC) + timedelta(seconds=seconds),
        policy_mode=BlobImmutabilityPolicyMode(mode),
    )


# ---------------------------------------------------------------------------- Delete Container


def test_a_container_legal_hold_refuses_delete_container_even_when_empty(
    guarded: ServerProcess, box: ContainerClient
) -> None:
    _worm(guarded, box.container_name, {"legal-hold-tags": ["case7"]})
    assert _refused(box.delete_container) == "ContainerHasLegalHold"
    assert box.exists()
    _worm(guarded, box.container_name, {"legal-hold-tags": []})
    box.delete_container()
    assert not box.exists()


def test_a_locked_policy_refuses_delete_container_while_blobs_remain(
    guarded: ServerProcess, box: ContainerClient
) -> None:
    box.upload_blob("kept", b"abc")
    _worm(guarded, box.container_name, {"immutability-period-days": 1, "locked": True})
    assert _refused(box.delete_container) == "ContainerImmutabilityPolicyLocked"
    assert box.get_blob_client("kept").download_blob().readall() == b"abc"  # nothing deleted
    empty = BlobServiceClient.from_connection_string(guarded.connection_string).create_container(
        f"guard{next(_names)}"
    )
    _worm(guarded, empty.container_name, {"immutability-period-days": 1, "locked": True})
    empty.delete_container()  # empty: the locked policy goes with it ("delete the container after
    assert not empty.exists()  # deleting all expired blobs inside")


def test_an_unlocked_policy_refuses_until_it_is_deleted(guarded: ServerProcess, box: ContainerClient) -> None:
    box.upload_blob("kept", b"abc")
    _worm(guarded, box.container_name, {"immutability-period-days": 1})
    assert _refused(box.delete_container) == "BlobImmutableDueToPolicy"
    _worm(guarded, box.container_name, {"immutability-period-days": 0})
    box.delete_container()
    assert not box.exists()


def test_protected_versions_snapshots_and_previous_versions_refuse_delete_container(
    box: ContainerClient,
) -> None:
    held = box.upload_blob("held", b"one")
    v1 = held.get_blob_properties().version_id
    held.set_legal_hold(True)
    held.upload_blob(b"two", overwrite=True)  # the held version is now a previous one
    assert _refused(box.delete_container) == "ContainerImmutableStorageWithVersioningEnabled"
    held.set_legal_hold(False, version_id=v1)
    snapped = box.upload_blob("snapped", b"s")
    snapshot = snapped.create_snapshot()
    box.get_blob_client("snapped", snapshot=snapshot["snapshot"]).set_immutability_policy(_policy())
    assert _refused(box.delete_container) == "ContainerImmutableStorageWithVersioningEnabled"
    assert held.download_blob(version_id=v1).readall() == b"one"  # nothing deleted
    box.get_blob_client("snapped", snapshot=snapshot["snapshot"]).delete_immutability_policy()
    expired = box.upload_blob("expired", b"e")
    expired.set_immutability_policy(_policy(seconds=2))
    time.sleep(3)  # a policy whose date has passed protects nothing
    box.delete_container()
    assert not box.exists()


def test_container_soft_delete_refuses_the_same(guarded: ServerProcess, box: ContainerClient) -> None:
    assert _admin(guarded, "", "PUT", {"container-soft-delete": 2})[0] == 200
    try:
        held = box.upload_blob("held", b"abc")
        held.set_legal_hold(True)
        assert _refused(box.delete_container) == "ContainerImmutableStorageWithVersioningEnabled"
        assert box.exists()
        held.set_legal_hold(False)
        box.delete_container()
        assert not box.exists()
    finally:
        _admin(guarded, "", "PUT", {"container-soft-delete": 0})


def test_delete_container_refused_with_the_async_client(guarded: ServerProcess) -> None:
    async def run() -> None:
        async with AsyncBlobServiceClient.from_connection_string(guarded.connection_string) as service:
            container = await service.create_container(f"aguard{next(_names)}")
            blob = await container.upload_blob("held", b"abc", immutability_policy=_policy(), legal_hold=True)
            with pytest.raises(HttpResponseError) as raised:
                await container.delete_container()
            assert (raised.value.status_code, raised.value.error_code) == (
                409,
                "ContainerImmutableStorageWithVersioningEnabled",
            )
            await blob.set_legal_hold(False)
            await blob.delete_immutability_policy()
            await container.delete_container()

    asyncio.run(run())


# ---------------------------------------------------------------------------- page and append blobs


def test_put_blob_of_a_page_blob_makes_a_version_and_keeps_a_protected_one(box: ContainerClient) -> None:
    disk = box.get_blob_client("disk")
    v1 = disk.create_page_blob(1024)["version_id"]
    assert v1 is not None
    disk.upload_page(b"\1" * 512, 0, 512)
    disk.set_legal_hold(True)
    v2 = disk.create_page_blob(2048)["version_id"]  # the held version is kept, pages and all
    assert v2 is not None and v2 > v1
    current = disk.get_blob_properties()
    assert (current.size, current.version_id, bool(current.has_legal_hold)) == (2048, v2, False)
    assert disk.download_blob().readall() == b"\0" * 2048
    kept = disk.get_blob_properties(version_id=v1)
    assert (kept.size, kept.has_legal_hold) == (1024, True)
    assert disk.download_blob(version_id=v1).readall() == b"\1" * 512 + b"\0" * 512
    assert _refused(lambda: disk.delete_blob(version_id=v1)) == "BlobImmutableDueToLegalHold"
    versions = [b.version_id for b in box.list_blobs(name_starts_with="disk", include=["versions"])]
    assert versions == [v1, v2]
    disk.set_legal_hold(False, version_id=v1)


def test_put_blob_of_an_append_blob_makes_a_version_too(box: ContainerClient) -> None:
    log = box.get_blob_client("log")
    v1 = log.create_append_blob(immutability_policy=_policy())["version_id"]
    log_v1 = log.get_blob_properties(version_id=v1)
    assert log_v1.immutability_policy.policy_mode == "unlocked"
    v2 = log.create_append_blob()["version_id"]
    assert v2 is not None and v2 > v1
    assert log.get_blob_properties().immutability_policy.policy_mode is None
    assert log.get_blob_properties(version_id=v1).immutability_policy.policy_mode == "unlocked"
    log.delete_immutability_policy(version_id=v1)


def test_page_blob_versions_with_the_async_client(guarded: ServerProcess, box: ContainerClient) -> None:
    async def run() -> None:
        async with AsyncBlobServiceClient.from_connection_string(guarded.connection_string) as service:
            disk = service.get_blob_client(box.container_name, "adisk")
            v1 = (await disk.create_page_blob(512))["version_id"]
            await disk.upload_page(b"\2" * 512, 0, 512)
            await disk.set_immutability_policy(_policy())
            v2 = (await disk.create_page_blob(512))["version_id"]
            assert v2 > v1
            assert await (await disk.download_blob(version_id=v1)).readall() == b"\2" * 512
            assert await (await disk.download_blob()).readall() == b"\0" * 512
            await disk.delete_immutability_policy(version_id=v1)

    asyncio.run(run())


# ---------------------------------------------------------------------------- five extensions


def test_a_locked_policy_is_extended_at_most_five_times(guarded: ServerProcess, box: ContainerClient) -> None:
    path = f"/containers/{box.container_name}/immutability"
    _worm(guarded, box.container_name, {"immutability-period-days": 1, "locked": True})
    for days in range(2, 7):
        status, doc = _admin(guarded, path, "PUT", {"immutability-period-days": days})
        assert (status, doc["immutability-period-days"]) == (200, days)
    assert _admin(guarded, path, "PUT", {"immutability-period-days": 6})[0] == 200  # no increase
    status, error = _admin(guarded, path, "PUT", {"immutability-period-days": 7})
    assert (status, error["odata.error"]["code"]) == (400, "InvalidInput")
    assert "at most 5 times" in error["odata.error"]["message"]["value"]
    assert _admin(guarded, path)[1]["immutability-period-days"] == 6  # nothing applied
    unlocked = f"/containers/{box.container_name}x/immutability"
    BlobServiceClient.from_connection_string(guarded.connection_string).create_container(
        f"{box.container_name}x"
    )
    for days in range(2, 10):  # an unlocked policy changes freely
        assert _admin(guarded, unlocked, "PUT", {"immutability-period-days": days})[0] == 200


# ---------------------------------------------------------------------------- account default policy


def test_the_account_default_policy_protects_each_new_version(guarded: ServerProcess) -> None:
    status, error = _admin(guarded, "", "PUT", {"default-immutability-days": 2}, account=VAULT)
    assert (status, error["odata.error"]["code"]) == (400, "InvalidInput")  # needs version-level support
    status, doc = _admin(
        guarded,
        "",
        "PUT",
        {"version-level-immutability": True, "default-immutability-days": 2},
        account=VAULT,
    )
    assert (
        status == 200
        and doc["default-immutability-days"] == 2
        and doc["default-immutability-locked"] is False
    )
    url = f"http://127.0.0.1:{guarded.blob_port}/{VAULT}"
    with BlobServiceClient(url, credential={"account_name": VAULT, "account_key": VAULT_KEY}) as service:
        box = service.create_container(f"vault{next(_names)}")
        before = datetime.now(UTC)
        blob = box.upload_blob("doc", b"abc")
        props = blob.get_blob_properties()
        assert props.immutability_policy.policy_mode == "unlocked"
        until = props.immutability_policy.expiry_time
        assert (
            before + timedelta(days=2) - timedelta(seconds=5)
            <= until
            <= datetime.now(UTC) + timedelta(days=2)
        )
        assert _refused(blob.delete_blob) == "BlobImmutableDueToPolicy"
        disk = box.get_blob_client("disk")
        disk.create_page_blob(512)
        assert disk.get_blob_properties().immutability_policy.policy_mode == "unlocked"
        own = box.get_blob_client("own")
        own.upload_blob(b"x", immutability_policy=_policy(seconds=600, mode="Locked"))
        mine = own.get_blob_properties().immutability_policy
        assert mine.policy_mode == "locked" and mine.expiry_time < datetime.now(UTC) + timedelta(hours=1)
        held = box.get_blob_client("held")
        held.upload_blob(b"x", legal_hold=True)  # a hold asked for, the default policy kept
        both = held.get_blob_properties()
        assert both.has_legal_hold and both.immutability_policy.policy_mode == "unlocked"
        # version-level immutability: a container holding any blob is not deleted
        assert _refused(box.delete_container) == "ContainerImmutableStorageWithVersioningEnabled"
        empty = service.create_container(f"vault{next(_names)}")
        empty.delete_container()
    status, doc = _admin(guarded, "", "PUT", {"default-immutability-locked": True}, account=VAULT)
    assert status == 200 and doc["default-immutability-locked"] is True
    for body in (
        {"default-immutability-locked": False},
        {"default-immutability-days": 1},
        {"default-immutability-days": 0},
        {"version-level-immutability": False},
        {"blob-versioning": False},
    ):
        status, error = _admin(guarded, "", "PUT", body, account=VAULT)
        assert (status, error["odata.error"]["code"]) == (400, "InvalidInput"), body
    assert (
        _admin(guarded, "", "PUT", {"default-immutability-days": 3}, account=VAULT)[1][
            "default-immutability-days"
        ]
        == 3
    )
    assert _admin(guarded, "")[1]["default-immutability-days"] == 0  # the other account keeps none


def test_the_default_policy_from_the_config_file_and_the_cli(tmp_path: Path) -> None:
    config = tmp_path / "tabulae.toml"
    config.write_text(
        f"[account-features.{DEV_ACCOUNT}]\nblob-versioning = true\nversion-level-immutability = true\n"
        "default-immutability-days = 5\n"
    )
    server = ServerProcess(tmp_path / "data", extra_args=["--config", str(config)]).start()
    try:
        with BlobServiceClient.from_connection_string(server.connection_string) as service:
            blob = service.create_container("configured").upload_blob("a", b"abc")
            until = blob.get_blob_properties().immutability_policy.expiry_time
            assert until > datetime.now(UTC) + timedelta(days=4)
        changed = subprocess.run(
            [sys.executable, "-m", "tabulae", "account", "set", "default-immutability-days=7",
             "--connection-string", server.connection_string],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert changed.returncode == 0, changed.stderr
        assert "default-immutability-days\t7" in changed.stdout.splitlines()
    finally:
        server.stop()
