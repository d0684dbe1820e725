"""Account features (what Azure sets in its management plane): flags for every account, a config
file section per account, and ``/-/accounts`` / ``tabulae account show|set`` on a running server,
kept in the store (both stores), seen by every worker and after a restart; bad input refused."""

from __future__ import annotations

import base64
import hashlib
import hmac
import subprocess
import sys
import time
from collections.abc import Iterator
from email.utils import formatdate
from pathlib import Path
from typing import Any

import orjson
import pytest
import urllib3
from azure.storage.blob import BlobServiceClient

from tests.backends import backend_names
from tests.conftest import fresh_store
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess

OTHER, OTHER_KEY = "lakeaccount", base64.b64encode(b"lake-key-lake-key-lake-key-32b!!").decode()
FLAT = {
    "blob-versioning": True,
    "blob-change-feed": False,
    "container-soft-delete": 3,
    "last-access-tracking": False,
    "blob-permanent-delete": False,
    "version-level-immutability": False,
    "default-immutability-days": 0,
    "default-immutability-locked": False,
    "hns": False,
    "premium-page-blobs": False,
}


def _admin(
    server: ServerProcess,
    method: str,
    body: Any = None,
    *,
    account: str = DEV_ACCOUNT,
    key: str = DEV_KEY,
    port: int | None = None,
    raw: bytes | None = None,
) -> tuple[int, dict[str, Any]]:
    """A request to ``/-/accounts/{account}`` signed as the Table service's Shared Key."""
    path = f"/-/accounts/{account}"
    date = formatdate(usegmt=True)
    payload = raw if raw is not None else (orjson.dumps(body) if body is not None else None)
    content_type = "application/json" if payload is not None else ""
    to_sign = f"{method}\n\n{content_type}\n{date}\n/{account}{path}"
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
        method, f"http://127.0.0.1:{port or server.port}{path}", body=payload, headers=headers, timeout=30
    )
    return answer.status, orjson.loads(answer.data) if answer.data else {}


def _cli(server: ServerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tabulae", "account", *args, "--connection-string", server.connection_string],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture(scope="module", params=backend_names())
def featured(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """Two workers on one store, versioning and 3-day container soft delete for every account,
    and a second account with a hierarchical namespace."""
    extra = ["--workers", "2", "--blob-versioning", "--container-soft-delete", "3"]
    extra += ["--account", f"{DEV_ACCOUNT}:{DEV_KEY}", "--account", f"{OTHER}:{OTHER_KEY}", "--hns", OTHER]
    extra += fresh_store(request.param)
    process = ServerProcess(tmp_path_factory.mktemp("features"), extra_args=extra).start()
    yield process
    process.stop()


def test_flags_apply_to_every_account_and_hns_to_the_one_named(featured: ServerProcess) -> None:
    assert _admin(featured, "GET") == (200, FLAT)
    assert _admin(featured, "GET", account=OTHER, key=OTHER_KEY) == (200, {**FLAT, "hns": True})
    shown = _cli(featured, "show")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [
        "blob-versioning\ttrue",
        "blob-change-feed\tfalse",
        "container-soft-delete\t3",
        "last-access-tracking\tfalse",
        "blob-permanent-delete\tfalse",
        "version-level-immutability\tfalse",
        "default-immutability-days\t0",
        "default-immutability-locked\tfalse",
        "hns\tfalse",
        "premium-page-blobs\tfalse",
    ]
    # Every port serves it (the Blob port too, for a server without a Table service).
    assert _admin(featured, "GET", port=featured.blob_port) == (200, FLAT)
    # Get Account Information says which account has a hierarchical namespace.
    with BlobServiceClient(
        featured.blob_endpoint, credential={"account_name": DEV_ACCOUNT, "account_key": DEV_KEY}
    ) as flat:
        assert flat.get_account_information()["is_hns_enabled"] is False
    lake_url = f"http://127.0.0.1:{featured.blob_port}/{OTHER}"
    with BlobServiceClient(lake_url, credential={"account_name": OTHER, "account_key": OTHER_KEY}) as lake:
        assert lake.get_account_information()["is_hns_enabled"] is True


def test_changes_reach_every_worker_and_leave_other_accounts_alone(featured: ServerProcess) -> None:
    changed = _cli(featured, "set", "blob-change-feed=on", "container-soft-delete=7")
    assert changed.returncode == 0, changed.stderr
    assert "blob-change-feed\ttrue" in changed.stdout and "container-soft-delete\t7" in changed.stdout
    want = {**FLAT, "blob-change-feed": True, "container-soft-delete": 7}
    deadline = time.monotonic() + 30
    while True:  # each worker reads changes again within a second; new connections spread over both
        answers = [_admin(featured, "GET")[1] for _ in range(12)]
        if all(answer == want for answer in answers):
            break
        assert time.monotonic() < deadline, answers
        time.sleep(0.2)
    assert _admin(featured, "GET", account=OTHER, key=OTHER_KEY)[1] == {**FLAT, "hns": True}
    # A later change lays itself over the earlier one; off is off.
    status, answer = _admin(featured, "PUT", {"blob-versioning": False})
    assert status == 200 and answer == {**want, "blob-versioning": False}
    _admin(featured, "PUT", {"blob-versioning": True, "blob-change-feed": False, "container-soft-delete": 3})


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"blob-versionning": True}, "blob-versionning: not a feature"),
        ({"hns": True}, "hns: set when the server starts"),
        ({"premium-page-blobs": True}, "premium-page-blobs: set when the server starts"),
        ({"container-soft-delete": 366}, "container-soft-delete: expected 0 (off) or a number of days"),
        ({"container-soft-delete": True}, "container-soft-delete"),
        ({"blob-versioning": "yes"}, "blob-versioning: expected true or false"),
        ([1, 2], "expected an object of features"),
    ],
)
def test_bad_documents_are_refused_naming_the_feature(featured: ServerProcess, body: Any, named: str) -> None:
    status, answer = _admin(featured, "PUT", body)
    assert status == 400 and answer["odata.error"]["code"] == "InvalidInput"
    assert named in answer["odata.error"]["message"]["value"]
    assert _admin(featured, "GET") == (200, FLAT)  # nothing applied


def test_only_the_account_key_may_look_or_change(featured: ServerProcess) -> None:
    status, answer = _admin(featured, "PUT", raw=b"{not json")
    assert status == 400 and answer["odata.error"]["code"] == "InvalidInput"
    wrong = base64.b64encode(b"x" * 32).decode()
    assert _admin(featured, "PUT", {"blob-versioning": False}, key=wrong)[0] == 403
    assert _admin(featured, "GET", account=OTHER, key=DEV_KEY)[0] == 403  # another account's key
    answer = urllib3.request("GET", f"http://127.0.0.1:{featured.port}/-/accounts/{DEV_ACCOUNT}", timeout=30)
    assert answer.status == 401 and answer.headers["x-ms-error-code"] == "NoAuthenticationInformation"
    sas = "sv=2019-02-02&ss=b&srt=sco&sp=rwdlac&se=2099-01-01T00:00:00Z&sig=abc"
    answer = urllib3.request(
        "GET", f"http://127.0.0.1:{featured.port}/-/accounts/{DEV_ACCOUNT}?{sas}", timeout=30
    )
    assert answer.status == 401
    answer = urllib3.request(
        "DELETE", f"http://127.0.0.1:{featured.port}/-/accounts/{DEV_ACCOUNT}", timeout=30
    )
    assert answer.status in (401, 405)
    assert _admin(featured, "GET") == (200, FLAT)


def test_changes_survive_a_restart_and_the_config_file_sets_them_per_account(tmp_path: Path) -> None:
    config = tmp_path / "tabulae.toml"
    config.write_text(f"[account-features.{DEV_ACCOUNT}]\nlast-access-tracking = true\n")
    server = ServerProcess(tmp_path / "data", extra_args=["--config", str(config)]).start()
    try:
        want = {
            **dict.fromkeys(FLAT, False),
            "container-soft-delete": 0,
            "default-immutability-days": 0,
            "last-access-tracking": True,
        }
        assert _admin(server, "GET") == (200, want)
        assert _admin(server, "PUT", {"blob-versioning": True})[0] == 200
        server.stop()
        server.start()
        assert _admin(server, "GET") == (200, {**want, "blob-versioning": True})
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--container-soft-delete", "400"], "--container-soft-delete: expected 0 (off) or a number of days"),
        (["--hns", "nosuchaccount"], "account features for nosuchaccount, which the server does not serve"),
    ],
)
def test_bad_flags_stop_the_server_before_it_starts(tmp_path: Path, flags: list[str], says: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tabulae", "serve", "--data-dir", str(tmp_path), *flags],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and says in result.stderr


def test_a_bad_config_section_names_the_key(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(f"[account-features.{DEV_ACCOUNT}]\nblob-versioning = 1\n")
    result = subprocess.run(
        [sys.executable, "-m", "tabulae", "serve", "--config", str(config), "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert f"account-features.{DEV_ACCOUNT}.blob-versioning: expected true or false" in result.stderr
