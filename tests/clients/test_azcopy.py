"""AzCopy, the transfer tool behind every upload and download of Azure Storage Explorer, driven
as its users run it: ``make``, ``copy`` (uploads of a tree in blocks with ``--put-md5``,
downloads with ``--check-md5``, page and append blobs, metadata and tags, ``--overwrite
ifSourceNewer``, server-to-server copies between containers and between accounts), ``sync`` both
ways, ``list`` and ``remove --recursive``; and on an account with a hierarchical namespace, where
AzCopy speaks the DFS API (directories, append and flush, ACLs, recursive delete). Every check
reads back what landed in storage with the Python SDKs, not only AzCopy's exit status.

The test installs the Linux build Microsoft publishes on npm (``@azure-tools/azcopy-linux``,
once, into ``$TABULAE_TEST_CACHE``, default ``~/.cache/tabulae-test``). Without node and npm, or
off x86-64 Linux, it is skipped locally and fails under CI, like the JavaScript SDK tests.

How an emulator's user addresses AzCopy, which the test does too:

* An IP host tells AzCopy nothing of the service, so every command names it: ``--from-to
  LocalBlob``, ``BlobFSLocal``, ``BlobTrash``…, ``list --location Blob``.
* ``make`` refuses a URL whose path has more than one segment, so a path-style URL
  (``/devstoreaccount1/name``) cannot name a container. It takes the host-style name
  (``devstoreaccount1.blob.localhost``), sent through ``HTTP_PROXY`` pointing at the Blob port:
  Go does not resolve ``*.localhost``, and the server takes the proxy form of the request and
  finds the account in its Host.
* On an HNS account the paths are reached with a file system SAS, whose ``o`` and ``p``
  letters let AzCopy set owners and ACLs (an account SAS's letters say nothing of either: its
  ``p`` is the Queue service's process).

Each AzCopy job lasts at least two seconds (the tick of its progress report), so the test runs
on one SQLite server for the module with as few jobs as cover the commands: what AzCopy exercises
is the wire, which the SDK suites check on every store.
"""

from __future__ import annotations

import base64
import filecmp
import hashlib
import json
import os
import platform
import shutil
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from azure.storage.blob import (
    AccountSasPermissions,
    BlobServiceClient,
    BlobType,
    ContainerClient,
    ResourceTypes,
    generate_account_sas,
)
from azure.storage.filedatalake import (
    DataLakeServiceClient,
    FileSystemSasPermissions,
    generate_file_system_sas,
)

from tests.npm_cache import installed
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess
from tests.tls import TENANT, SelfSignedCert, make_jwt, make_self_signed_cert

VERSION = "10.32.2"
PACKAGE = f"@azure-tools/azcopy-linux@{VERSION}"
LAKE = "lakeaccount1"  # the account with a hierarchical namespace
LAKE_KEY = base64.b64encode(hashlib.sha512(b"tabulae azcopy lake").digest()).decode()
MIB = 1024 * 1024
OID = "5a8f4c21-7d3e-4b6a-9c1f-2e0d8b7a6f45"  # the signed-in user of the bearer token test


@pytest.fixture(scope="module")
def azcopy_binary() -> Path:
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the published AzCopy build is for x86-64 Linux")
    modules = installed(f"azcopy-{VERSION}", PACKAGE, "@azure-tools/azcopy-linux/package.json")
    binary = modules / "@azure-tools" / "azcopy-linux" / "dist" / "bin" / "azcopy_linux_amd64"
    binary.chmod(0o755)  # npm unpacks it without its execute bit
    return binary


@pytest.fixture(scope="module")
def azserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """The development account, flat, and ``lakeaccount1`` with a hierarchical namespace."""
    accounts = ["--account", f"{DEV_ACCOUNT}:{DEV_KEY}", "--account", f"{LAKE}:{LAKE_KEY}", "--hns", LAKE]
    process = ServerProcess(tmp_path_factory.mktemp("azcopy"), extra_args=accounts).start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def signed_in(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, SelfSignedCert]]:
    """HTTPS and ``--oauth basic``, with the Storage Blob Data Contributor role for ``OID``."""
    cert = make_self_signed_cert(tmp_path_factory.mktemp("tls"))
    tls = ["--cert", str(cert.cert), "--key", str(cert.key)]
    args = [*tls, "--oauth", "basic", "--oauth-role", f"{OID}=contributor"]
    process = ServerProcess(tmp_path_factory.mktemp("signed"), extra_args=args).start()
    yield process, cert
    process.stop()


@pytest.fixture
def azcopy(azcopy_binary: Path, azserver: ServerProcess, tmp_path: Path) -> AzCopy:
    return AzCopy(azcopy_binary, azserver, tmp_path)


@pytest.fixture
def flat(azserver: ServerProcess) -> Iterator[BlobServiceClient]:
    with BlobServiceClient(azserver.blob_endpoint, credential=_key(DEV_ACCOUNT, DEV_KEY)) as client:
        yield client


@pytest.fixture
def lake(azserver: ServerProcess) -> Iterator[DataLakeServiceClient]:
    url = f"http://127.0.0.1:{azserver.blob_port}/{LAKE}"
    with DataLakeServiceClient(url, credential=_key(LAKE, LAKE_KEY)) as client:
        yield client


def test_upload_download_sync_list_and_remove_a_tree(
    azcopy: AzCopy, flat: BlobServiceClient, tmp_path: Path
) -> None:
    azcopy.make(DEV_ACCOUNT, "tree")
    assert flat.get_container_client("tree").exists()
    assert "the container already exists" in azcopy.make(DEV_ACCOUNT, "tree", ok=False)
    local = _tree(tmp_path / "local")
    remote = azcopy.url(DEV_ACCOUNT, "tree/up")

    # Files of 1 MiB or less go up whole (Put Blob); big.bin in five 1 MiB blocks.
    azcopy(
        "copy", str(local), remote, "--recursive", "--from-to", "LocalBlob", "--block-size-mb", "1",
        "--put-md5", "--metadata", "team=storage;stage=test", "--blob-tags", "kind=tree&owner=azcopy",
    )  # fmt: skip
    container = flat.get_container_client("tree")
    names = sorted(container.list_blob_names())
    assert names == [f"up/local/{name}" for name in ("big.bin", "docs/a.txt", "docs/deep/b.txt", "empty.bin")]
    big = container.get_blob_client("up/local/big.bin")
    assert len(big.get_block_list("committed")[0]) == 5
    properties = big.get_blob_properties()
    assert properties.content_settings.content_md5 == hashlib.md5((local / "big.bin").read_bytes()).digest()
    assert properties.metadata == {"team": "storage", "stage": "test"}
    assert big.get_blob_tags() == {"kind": "tree", "owner": "azcopy"}
    assert container.download_blob("up/local/docs/a.txt").readall() == b"alpha\n"

    listed = azcopy("list", azcopy.url(DEV_ACCOUNT, "tree"), "--location", "Blob", "--machine-readable")
    assert "up/local/big.bin; Content Length: 5242880" in listed.splitlines()

    back = tmp_path / "back"
    azcopy(
        "copy", remote, str(back), "--recursive", "--from-to", "BlobLocal",
        "--check-md5", "FailIfDifferentOrMissing",
    )  # fmt: skip
    _same_tree(local, back / "up" / "local")

    # sync up: a changed file goes up, a file gone locally is deleted remotely.
    (local / "docs" / "a.txt").write_text("alpha, changed\n")
    (local / "empty.bin").unlink()
    (local / "new.txt").write_text("new\n")
    up = azcopy.url(DEV_ACCOUNT, "tree/up/local")
    azcopy("sync", str(local), up, "--from-to", "LocalBlob", "--delete-destination", "true", "--put-md5")
    assert not container.get_blob_client("up/local/empty.bin").exists()
    assert container.download_blob("up/local/docs/a.txt").readall() == b"alpha, changed\n"
    assert container.download_blob("up/local/new.txt").readall() == b"new\n"

    # sync down: into a stale copy, which ends up as the container holds it.
    mirror = back / "up" / "local"
    (mirror / "stale.txt").write_text("not in the container\n")
    azcopy("sync", up, str(mirror), "--from-to", "BlobLocal", "--delete-destination", "true")
    _same_tree(local, mirror)

    azcopy("remove", azcopy.url(DEV_ACCOUNT, "tree/up"), "--recursive", "--from-to", "BlobTrash")
    assert list(container.list_blob_names()) == []


def test_overwrite_if_source_newer(azcopy: AzCopy, flat: BlobServiceClient, tmp_path: Path) -> None:
    container = flat.create_container("newer")
    container.upload_blob("dir/old.txt", b"remote")
    container.upload_blob("dir/new.txt", b"remote")
    local = tmp_path / "dir"
    local.mkdir()
    (local / "old.txt").write_text("local, older than the blob")
    (local / "new.txt").write_text("local, newer than the blob")
    os.utime(local / "old.txt", (time.time() - 86400, time.time() - 86400))
    os.utime(local / "new.txt", (time.time() + 3600, time.time() + 3600))
    out = azcopy(
        "copy", str(local), azcopy.url(DEV_ACCOUNT, "newer"), "--recursive", "--from-to", "LocalBlob",
        "--overwrite", "ifSourceNewer", status="CompletedWithSkipped",
    )  # fmt: skip
    assert "Number of File Transfers Skipped: 1\n" in out
    assert container.download_blob("dir/old.txt").readall() == b"remote"
    assert container.download_blob("dir/new.txt").readall() == b"local, newer than the blob"


def test_page_and_append_blobs_and_copies_between_containers_and_accounts(
    azcopy: AzCopy, flat: BlobServiceClient, lake: DataLakeServiceClient, tmp_path: Path
) -> None:
    azcopy.make(DEV_ACCOUNT, "kinds")
    local = tmp_path / "kinds"
    local.mkdir()
    # AzCopy sends no page chunk that is all zeros: with 1 MiB chunks the middle MiB stays a hole.
    page = os.urandom(MIB) + bytes(MIB) + os.urandom(MIB)
    (local / "disk.vhd").write_bytes(page)
    (local / "log.txt").write_bytes(b"line\n" * 2000)
    (local / "blocks").mkdir()
    (local / "blocks" / "big.bin").write_bytes(os.urandom(3 * MIB))
    (local / "blocks" / "small.txt").write_text("small\n")
    kinds = azcopy.url(DEV_ACCOUNT, "kinds")
    azcopy(
        "copy", str(local / "disk.vhd"), kinds, "--from-to", "LocalBlob", "--blob-type", "PageBlob",
        "--block-size-mb", "1",
    )  # fmt: skip
    azcopy(
        "copy", str(local / "log.txt"), kinds, "--from-to", "LocalBlob", "--blob-type", "AppendBlob",
        "--metadata", "source=azcopy", "--blob-tags", "kind=log",
    )  # fmt: skip
    azcopy(
        "copy", str(local / "blocks"), kinds, "--recursive", "--from-to", "LocalBlob", "--block-size-mb", "1"
    )
    source = flat.get_container_client("kinds")
    disk = source.get_blob_client("disk.vhd")
    assert disk.get_blob_properties().blob_type == BlobType.PAGEBLOB
    assert disk.get_page_ranges()[0] == [{"start": 0, "end": MIB - 1}, {"start": 2 * MIB, "end": 3 * MIB - 1}]
    assert disk.download_blob().readall() == page
    log = source.get_blob_client("log.txt")
    assert log.get_blob_properties().blob_type == BlobType.APPENDBLOB
    assert log.get_blob_tags() == {"kind": "log"}

    # Server to server within the account (container to container, so without the source's name):
    # Put Blob From URL for small.txt, Put Block From URL for big.bin, Get Page Ranges and Put
    # Page From URL for the page blob, Append Block From URL for the append blob.
    azcopy(
        "copy", kinds, azcopy.url(DEV_ACCOUNT, "copies"), "--recursive", "--from-to", "BlobBlob",
        "--block-size-mb", "1", "--s2s-preserve-blob-tags",
    )  # fmt: skip
    copies = flat.get_container_client("copies")
    _same_blobs(source, copies)
    assert len(copies.get_blob_client("blocks/big.bin").get_block_list("committed")[0]) == 3
    assert copies.get_blob_client("disk.vhd").get_page_ranges()[0] == disk.get_page_ranges()[0]
    copied_log = copies.get_blob_client("log.txt")
    assert copied_log.get_blob_properties().metadata == {"source": "azcopy"}
    assert copied_log.get_blob_tags() == {"kind": "log"}

    # ...and to a container of another account, the one with a hierarchical namespace (block blobs
    # only: as on Azure, it refuses page blobs with FeatureNotYetSupportedForHierarchicalNamespaceAccounts).
    azcopy.make(LAKE, "fromflat")
    blocks = azcopy.url(DEV_ACCOUNT, "kinds/blocks")
    azcopy(
        "copy", blocks, azcopy.url(LAKE, "fromflat"), "--recursive", "--from-to", "BlobBlob",
        "--block-size-mb", "1",
    )  # fmt: skip
    other = lake.get_file_system_client("fromflat")
    for name in ("big.bin", "small.txt"):
        copied = other.get_file_client(f"blocks/{name}").download_file().readall()
        assert copied == (local / "blocks" / name).read_bytes()
    paths = [(path.name, path.is_directory) for path in other.get_paths()]
    assert paths == [("blocks", True), ("blocks/big.bin", False), ("blocks/small.txt", False)]

    azcopy("remove", azcopy.url(DEV_ACCOUNT, "copies"), "--recursive", "--from-to", "BlobTrash")
    assert list(copies.list_blob_names()) == []


def test_a_tree_on_an_account_with_a_hierarchical_namespace(
    azcopy: AzCopy, lake: DataLakeServiceClient, tmp_path: Path
) -> None:
    azcopy.make(LAKE, "lakefs", service="dfs")
    local = _tree(tmp_path / "local")
    fs = lake.get_file_system_client("lakefs")
    # Directories made with Create Path, files written with append and flush (MD5 on the flush).
    azcopy(
        "copy", str(local), azcopy.dfs_url("lakefs", "in"), "--recursive", "--from-to", "LocalBlobFS",
        "--block-size-mb", "1", "--put-md5",
    )  # fmt: skip
    paths = {p.name: p.is_directory for p in fs.get_paths("in", recursive=True)}
    assert paths == {
        "in/local": True, "in/local/docs": True, "in/local/docs/deep": True, "in/local/big.bin": False,
        "in/local/docs/a.txt": False, "in/local/docs/deep/b.txt": False, "in/local/empty.bin": False,
    }  # fmt: skip
    big = fs.get_file_client("in/local/big.bin").get_file_properties()
    assert big.content_settings.content_md5 == hashlib.md5((local / "big.bin").read_bytes()).digest()

    back = tmp_path / "back"
    azcopy(
        "copy", azcopy.dfs_url("lakefs", "in"), str(back), "--recursive", "--from-to", "BlobFSLocal",
        "--check-md5", "FailIfDifferentOrMissing",
    )  # fmt: skip
    _same_tree(local, back / "in" / "local")

    # An ACL travels with --preserve-permissions (Get and Set Access Control).
    acl = "user::rw-,user:11111111-2222-3333-4444-555555555555:r--,group::r--,mask::r--,other::---"
    fs.get_file_client("in/local/docs/a.txt").set_access_control(acl=acl)
    fs.get_directory_client("in/local/docs").set_access_control(permissions="rwxr-x--x")
    azcopy(
        "copy", azcopy.dfs_url("lakefs", "in/local"), azcopy.dfs_url("lakefs", "acl"), "--recursive",
        "--from-to", "BlobFSBlobFS", "--preserve-permissions",
    )  # fmt: skip
    assert fs.get_file_client("acl/local/docs/a.txt").get_access_control()["acl"] == acl
    assert fs.get_directory_client("acl/local/docs").get_access_control()["permissions"] == "rwxr-x--x"
    assert (
        fs.get_file_client("acl/local/big.bin").download_file().readall() == (local / "big.bin").read_bytes()
    )

    # sync deletes what is gone locally; remove deletes a directory with Delete Path recursive.
    shutil.rmtree(local / "docs" / "deep")
    azcopy(
        "sync", str(local), azcopy.dfs_url("lakefs", "in/local"), "--from-to", "LocalBlobFS",
        "--delete-destination", "true",
    )  # fmt: skip
    assert not fs.get_file_client("in/local/docs/deep/b.txt").exists()
    azcopy("remove", azcopy.dfs_url("lakefs", "acl/local/docs"), "--recursive", "--from-to", "BlobFSTrash")
    remaining = sorted(p.name for p in fs.get_paths("acl", recursive=True))
    assert remaining == ["acl/local", "acl/local/big.bin", "acl/local/empty.bin"]
    listed = azcopy("list", azcopy.dfs_url("lakefs", "in"), "--location", "BlobFS", "--machine-readable")
    assert "local/docs/a.txt; Content Length: 6" in listed.splitlines()


def test_an_azure_ad_sign_in_over_https(
    azcopy_binary: Path, signed_in: tuple[ServerProcess, SelfSignedCert], tmp_path: Path
) -> None:
    """AzCopy with a bearer token instead of a SAS. Its ``AZCLI`` auto-login asks ``az account
    get-access-token`` for one; a stand-in ``az`` on ``PATH`` answers with a token that ``--oauth
    basic`` takes. AzCopy sends tokens over HTTPS only, and only to the hosts that
    ``--trusted-microsoft-suffixes`` adds to Azure's."""
    server, cert = signed_in
    tools = tmp_path / "bin"
    tools.mkdir()
    expires = int(time.time()) + 3600
    reply = {
        "accessToken": make_jwt(exp=expires, extra={"oid": OID}),
        "expiresOn": datetime.fromtimestamp(expires).strftime("%Y-%m-%d %H:%M:%S.%f"),
        "expires_on": expires,
        "tenant": TENANT,
        "tokenType": "Bearer",
    }
    (tools / "az").write_text(f"#!/bin/sh\ncat <<'EOF'\n{json.dumps(reply)}\nEOF\n")
    (tools / "az").chmod(0o755)
    azcopy = AzCopy(azcopy_binary, server, tmp_path)
    azcopy.env.update(
        PATH=f"{tools}{os.pathsep}{os.environ.get('PATH', '')}",
        SSL_CERT_FILE=str(cert.cert),
        AZCOPY_AUTO_LOGIN_TYPE="AZCLI",
    )
    endpoint = f"https://127.0.0.1:{server.blob_port}/{DEV_ACCOUNT}"
    key = _key(DEV_ACCOUNT, DEV_KEY)
    with BlobServiceClient(endpoint, credential=key, connection_verify=str(cert.cert)) as service:
        container = service.create_container("signed")
        local = _tree(tmp_path / "local")
        remote = f"{endpoint}/signed/up"
        trust = ("--trusted-microsoft-suffixes", f"127.0.0.1:{server.blob_port}")
        azcopy("copy", str(local), remote, "--recursive", "--from-to", "LocalBlob", *trust)
        uploaded = container.download_blob("up/local/big.bin").readall()
        assert uploaded == (local / "big.bin").read_bytes()
        back = tmp_path / "back"
        azcopy("copy", remote, str(back), "--recursive", "--from-to", "BlobLocal", *trust)
        _same_tree(local, back / "up" / "local")


class AzCopy:
    """Runs AzCopy against the server with SAS URLs, its logs and job plans in the test's folder
    (``HOME`` too, so nothing lands in the user's ``~/.azcopy``)."""

    def __init__(self, binary: Path, server: ServerProcess, tmp_path: Path) -> None:
        self.binary = binary
        self.port = server.blob_port
        self.logs = tmp_path / "azcopy-logs"
        self.env = {
            **os.environ,
            "HOME": str(tmp_path),
            "AZCOPY_LOG_LOCATION": str(self.logs),
            "AZCOPY_JOB_PLAN_LOCATION": str(tmp_path / "azcopy-plans"),
            "AZCOPY_CONCURRENCY_VALUE": "16",
            "AZCOPY_BUFFER_GB": "0.5",
        }
        expiry = datetime.now(UTC) + timedelta(hours=2)
        everything = AccountSasPermissions(
            read=True, write=True, delete=True, list=True, add=True, create=True, update=True, tag=True
        )
        kinds = ResourceTypes(service=True, container=True, object=True)
        self.sas = {
            DEV_ACCOUNT: generate_account_sas(DEV_ACCOUNT, DEV_KEY, kinds, everything, expiry),
            LAKE: generate_account_sas(LAKE, LAKE_KEY, kinds, everything, expiry),
        }
        self.fs_permissions = FileSystemSasPermissions(
            read=True, write=True, delete=True, list=True, add=True, create=True, move=True,
            execute=True, manage_ownership=True, manage_access_control=True,
        )  # fmt: skip
        self.expiry = expiry

    def url(self, account: str, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{account}/{path}?{self.sas[account]}"

    def dfs_url(self, filesystem: str, path: str) -> str:
        """A path of the lake account, with a SAS for its file system that may set ACLs."""
        sas = generate_file_system_sas(LAKE, filesystem, LAKE_KEY, self.fs_permissions, self.expiry)
        return f"http://127.0.0.1:{self.port}/{LAKE}/{filesystem}/{path}?{sas}"

    def make(self, account: str, name: str, service: str = "blob", ok: bool = True) -> str:
        """``azcopy make`` of a container by its host-style URL, through the server as a proxy."""
        proxy = f"http://127.0.0.1:{self.port}"
        env = {"HTTP_PROXY": proxy, "http_proxy": proxy, "NO_PROXY": "", "no_proxy": ""}
        url = f"http://{account}.{service}.localhost:{self.port}/{name}?{self.sas[account]}"
        return self.run(["make", url], env, ok)

    def __call__(self, *args: str, status: str = "Completed") -> str:
        out = self.run(list(args), {}, True)
        if args[0] in ("copy", "sync", "remove"):
            assert f"Final Job Status: {status}\n" in out, self._explain(args, out)
        return out

    def run(self, args: list[str], env: dict[str, str], ok: bool) -> str:
        done = subprocess.run(
            [str(self.binary), *args], capture_output=True, text=True, timeout=120, env={**self.env, **env}
        )
        out = done.stdout + done.stderr
        assert (done.returncode == 0) == ok, self._explain(args, out)
        return out

    def _explain(self, args: tuple[str, ...] | list[str], out: str) -> str:
        """AzCopy's output and the failures its job logs recorded (requests and answers)."""
        failures = []
        for log in sorted(self.logs.glob("*.log")) if self.logs.exists() else []:
            lines = log.read_text(errors="replace").splitlines()
            for index, line in enumerate(lines):
                if " ERR: " in line or "RESPONSE STATUS CODE ERROR" in line:
                    failures.extend(lines[index : index + 12])
        return f"azcopy {args[0]}: {out[-3000:]}\n" + "\n".join(failures[-120:])


def _key(account: str, key: str) -> dict[str, str]:
    return {"account_name": account, "account_key": key}


def _tree(root: Path) -> Path:
    """Small files in nested folders, an empty one and one of 5 MiB (five 1 MiB blocks)."""
    (root / "docs" / "deep").mkdir(parents=True)
    (root / "docs" / "a.txt").write_text("alpha\n")
    (root / "docs" / "deep" / "b.txt").write_text("beta\n" * 1000)
    (root / "empty.bin").write_bytes(b"")
    (root / "big.bin").write_bytes(os.urandom(5 * MIB))
    return root


def _same_tree(expected: Path, actual: Path) -> None:
    """The two folders hold the same files with the same bytes."""
    want = sorted(str(p.relative_to(expected)) for p in expected.rglob("*") if p.is_file())
    have = sorted(str(p.relative_to(actual)) for p in actual.rglob("*") if p.is_file())
    assert have == want
    _, mismatch, errors = filecmp.cmpfiles(expected, actual, want, shallow=False)
    assert (mismatch, errors) == ([], [])


def _same_blobs(source: ContainerClient, target: ContainerClient) -> None:
    """``target`` holds the blobs of ``source``, of the same types and bytes."""
    assert sorted(target.list_blob_names()) == sorted(source.list_blob_names())
    for blob in source.list_blobs():
        copy = target.get_blob_client(blob.name)
        assert copy.get_blob_properties().blob_type == blob.blob_type, blob.name
        assert copy.download_blob().readall() == source.download_blob(blob.name).readall(), blob.name
