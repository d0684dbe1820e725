"""An account with a hierarchical namespace has no change feed, as on Azure ("Change feed support
in Azure Blob Storage": such accounts are not supported): ``--blob-change-feed`` turns it on for
every other account, ``/-/accounts`` refuses to turn it on there, and a config file section that
asks for both stops the server before it starts. So DFS renames and recursive deletes, for which
Azure's change feed has no events, never leave a feed without them."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.blob.test_account_features import OTHER, OTHER_KEY, _admin
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    extra = [
        "--blob-change-feed",
        "--account",
        f"{DEV_ACCOUNT}:{DEV_KEY}",
        "--account",
        f"{OTHER}:{OTHER_KEY}",
    ]
    extra += ["--hns", OTHER]
    process = ServerProcess(tmp_path_factory.mktemp("lakefeed"), extra_args=extra).start()
    yield process
    process.stop()


def test_the_flag_feeds_every_account_but_the_lake(lake: ServerProcess) -> None:
    assert _admin(lake, "GET")[1]["blob-change-feed"] is True
    status, features = _admin(lake, "GET", account=OTHER, key=OTHER_KEY)
    assert status == 200 and features["hns"] is True and features["blob-change-feed"] is False


def test_the_endpoint_refuses_a_change_feed_on_the_lake(lake: ServerProcess) -> None:
    status, error = _admin(lake, "PUT", {"blob-change-feed": True}, account=OTHER, key=OTHER_KEY)
    assert (status, error["odata.error"]["code"]) == (400, "InvalidInput")
    assert "hierarchical namespace" in error["odata.error"]["message"]["value"]
    assert _admin(lake, "GET", account=OTHER, key=OTHER_KEY)[1]["blob-change-feed"] is False
    assert _admin(lake, "PUT", {"last-access-tracking": True}, account=OTHER, key=OTHER_KEY)[0] == 200
    assert _admin(lake, "PUT", {"blob-change-feed": False}, account=OTHER, key=OTHER_KEY)[0] == 200


def test_a_config_section_asking_for_both_stops_the_server(tmp_path: Path) -> None:
    config = tmp_path / "lake.toml"
    config.write_text(f"[account-features.{DEV_ACCOUNT}]\nblob-change-feed = true\n")
    result = subprocess.run(
        [sys.executable, "-m", "tabulae", "serve", "--config", str(config), "--hns", DEV_ACCOUNT,
         "--data-dir", str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    assert (
        "blob-change-feed: Azure has no change feed on an account with a hierarchical namespace"
        in result.stderr
    )
