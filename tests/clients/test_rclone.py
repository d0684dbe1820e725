"""rclone (its Go ``azureblob`` backend) copying, listing, checking, syncing, moving and purging
a tree in a container of Tabulae's, on each store.

rclone reaches a local account through a SAS URL: its ``endpoint`` option builds a host-style
URL, which a path-style address (``/devstoreaccount1``) does not fit. A file larger than its
upload cutoff goes up in blocks (Put Block, Put Block List); ``check`` compares the MD5 the
service keeps for each blob with the local file's.
"""

from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from azure.storage.blob import (
    AccountSasPermissions,
    BlobServiceClient,
    ContainerClient,
    ResourceTypes,
    generate_account_sas,
)

from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess

LARGE = 20 * 1024 * 1024  # above rclone's upload cutoff (4 MiB for azureblob): a block upload


@pytest.fixture
def rclone(server: ServerProcess, tmp_path: Path) -> _Rclone:
    path = shutil.which("rclone")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("rclone is needed for this test (scripts/check installs it with apt-get)")
        pytest.skip("rclone is not installed")
    return _Rclone(path, server, tmp_path)


def test_rclone_makes_and_removes_a_container(
    rclone: _Rclone, blob_service: BlobServiceClient, table_name: str
) -> None:
    name = f"r{table_name.lower()}"
    rclone("mkdir", f"tab:{name}")
    assert blob_service.get_container_client(name).exists()
    assert name in rclone("lsd", "tab:").split()
    rclone("rmdir", f"tab:{name}")
    assert not blob_service.get_container_client(name).exists()


def test_rclone_keeps_a_tree_in_a_container(
    rclone: _Rclone, container: ContainerClient, tmp_path: Path
) -> None:
    remote = f"tab:{container.container_name}"
    local = tmp_path / "local"
    (local / "docs" / "deep").mkdir(parents=True)
    (local / "docs" / "a.txt").write_text("alpha\n")
    (local / "docs" / "deep" / "b.txt").write_text("beta\n" * 1000)
    (local / "empty.bin").write_bytes(b"")
    (local / "big.bin").write_bytes(os.urandom(LARGE))
    (local / "gone.txt").write_text("deleted by the sync\n")

    rclone("copy", str(local), f"{remote}/tree")
    names = sorted(rclone("lsf", "-R", "--files-only", f"{remote}/tree").split())
    assert names == ["big.bin", "docs/a.txt", "docs/deep/b.txt", "empty.bin", "gone.txt"]
    sizes = dict(reversed(line.split()) for line in rclone("ls", f"{remote}/tree").splitlines())
    assert int(sizes["big.bin"]) == LARGE
    assert int(sizes["docs/deep/b.txt"]) == 5000
    big = container.get_blob_client("tree/big.bin").get_block_list("committed")[0]
    assert len(big) > 1  # rclone uploaded it in blocks
    rclone("check", str(local), f"{remote}/tree")  # exits non-zero on any difference

    (local / "gone.txt").unlink()
    rclone("sync", str(local), f"{remote}/tree")
    assert "gone.txt" not in rclone("lsf", "-R", f"{remote}/tree").split()
    assert not container.get_blob_client("tree/gone.txt").exists()

    rclone("moveto", f"{remote}/tree/docs/a.txt", f"{remote}/tree/moved/a.txt")
    listed = sorted(rclone("lsf", "-R", "--files-only", f"{remote}/tree").split())
    assert listed == ["big.bin", "docs/deep/b.txt", "empty.bin", "moved/a.txt"]
    (local / "docs" / "a.txt").rename(local / "moved.txt")
    (local / "moved").mkdir()
    (local / "moved.txt").rename(local / "moved" / "a.txt")

    back = tmp_path / "back"
    rclone("copy", f"{remote}/tree", str(back))
    compared = ["big.bin", "empty.bin", "docs/deep/b.txt", "moved/a.txt"]
    _, mismatch, errors = filecmp.cmpfiles(local, back, compared, shallow=False)
    assert (mismatch, errors) == ([], [])
    rclone("check", str(local), f"{remote}/tree")

    rclone("purge", f"{remote}/tree")
    assert list(container.list_blob_names()) == []


class _Rclone:
    """Runs rclone against the server with a config file of its own: a ``tab`` remote whose SAS
    URL names the account's path-style address. One retry at each level and a timeout, as
    rclone's default retries would wait minutes on an answer it does not like."""

    def __init__(self, path: str, server: ServerProcess, tmp_path: Path) -> None:
        self.path = path
        sas = generate_account_sas(
            DEV_ACCOUNT,
            DEV_KEY,
            ResourceTypes(service=True, container=True, object=True),
            AccountSasPermissions(read=True, write=True, delete=True, list=True, add=True, create=True),
            expiry=datetime.now(UTC) + timedelta(hours=2),
        )
        self.config = tmp_path / "rclone.conf"
        self.config.write_text(f"[tab]\ntype = azureblob\nsas_url = {server.blob_endpoint}?{sas}\n")

    def __call__(self, *args: str) -> str:
        command = [
            self.path,
            "--config",
            str(self.config),
            "--retries",
            "1",
            "--low-level-retries",
            "1",
            *args,
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, f"rclone {args[0]} exited {done.returncode}: {done.stderr[-3000:]}"
        return done.stdout
