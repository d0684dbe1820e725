"""adlfs (fsspec's Azure file system) against an HNS account, with a connection string.

adlfs speaks the Blob API only, also to an HNS account: ``mkdir`` below a container creates
nothing (directories come into being as a file's parents, as Azure makes them on Put Blob),
``mv`` is Copy Blob of every path (directories included, concurrently) followed by deletes, and
``rm(recursive=True)`` is Delete Blob of the files first and then of the directories, deepest
first, since Azure refuses to delete a non-empty directory through the Blob API. The tests check
that what it sees afterwards is what Azure gives."""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator

import fsspec
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from adlfs import AzureBlobFileSystem
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import BlobServiceClient
from azure.storage.filedatalake import DataLakeServiceClient

from tests.serverproc import ServerProcess


@pytest.fixture
def adl(lake: ServerProcess) -> Iterator[AzureBlobFileSystem]:
    # A fresh instance per test: fsspec caches file systems by their arguments, listings too.
    filesystem = AzureBlobFileSystem(connection_string=lake.connection_string, skip_instance_cache=True)
    yield filesystem


@pytest.fixture
def container(adl: AzureBlobFileSystem) -> Iterator[str]:
    name = "ad" + uuid.uuid4().hex[:12]
    adl.mkdir(name)
    yield name
    adl.rm(name, recursive=True)


def _tree(adl: AzureBlobFileSystem, base: str) -> dict[str, str]:
    """Every path below ``base`` with its type, as adlfs's recursive listing shows it."""
    found = adl.find(base, withdirs=True, detail=True)
    return {name[len(base) + 1 :]: info["type"] for name, info in found.items()}


def _lake_paths(lake: ServerProcess, container: str) -> list[tuple[str, bool]]:
    """The same tree through the DFS API: adlfs's Blob calls must leave real directories."""
    service = DataLakeServiceClient.from_connection_string(lake.connection_string)
    paths = service.get_file_system_client(container).get_paths(recursive=True)
    return sorted((path.name, bool(path.is_directory)) for path in paths)


def test_write_read_and_listing(adl: AzureBlobFileSystem, container: str, lake: ServerProcess) -> None:
    adl.makedirs(f"{container}/empty/deeper", exist_ok=True)
    assert not adl.exists(f"{container}/empty")  # a no-op below a container, as on Azure
    adl.pipe(f"{container}/a/b/piped.txt", b"piped")
    # Blocks of 1 MiB: aiohttp warns (an error here) about a bytes body any larger.
    with adl.open(f"{container}/a/opened.bin", "wb", block_size=2**20) as out:
        for _ in range(3):  # three blocks: Put Block each time the buffer fills, then Put Block List
            out.write(b"x" * 2**20)
    local = lake.data_dir.parent / f"{container}.put.txt"
    local.write_bytes(b"put from disk")
    adl.put(str(local), f"{container}/a/b/c/put.txt")

    assert _tree(adl, container) == {
        "a": "directory",
        "a/b": "directory",
        "a/b/c": "directory",
        "a/b/c/put.txt": "file",
        "a/b/piped.txt": "file",
        "a/opened.bin": "file",
    }
    assert _lake_paths(lake, container) == [
        ("a", True), ("a/b", True), ("a/b/c", True), ("a/b/c/put.txt", False),
        ("a/b/piped.txt", False), ("a/opened.bin", False),
    ]  # fmt: skip
    assert adl.ls(f"{container}/a", detail=False) == [f"{container}/a/b", f"{container}/a/opened.bin"]
    assert adl.ls(container, detail=False) == [f"{container}/a"]
    assert adl.isdir(f"{container}/a/b") and not adl.isfile(f"{container}/a/b")
    assert adl.isfile(f"{container}/a/b/piped.txt") and not adl.isdir(f"{container}/a/b/piped.txt")
    assert adl.exists(f"{container}/a/b/c") and not adl.exists(f"{container}/a/nothing")
    assert adl.info(f"{container}/a/b")["type"] == "directory"
    info = adl.info(f"{container}/a/opened.bin")
    assert (info["type"], info["size"]) == ("file", 3 * 2**20)

    assert adl.cat(f"{container}/a/b/piped.txt") == b"piped"
    assert adl.cat(f"{container}/a/b/c/put.txt") == b"put from disk"
    with adl.open(f"{container}/a/opened.bin", "rb") as stream:
        stream.seek(2**20 - 2)
        assert stream.read(4) == b"xxxx"
    assert adl.cat_file(f"{container}/a/b/piped.txt", start=1, end=4) == b"ipe"
    with pytest.raises(FileNotFoundError):
        adl.cat(f"{container}/a/missing.txt")


def test_mv_file_and_directory(adl: AzureBlobFileSystem, container: str, lake: ServerProcess) -> None:
    adl.pipe(f"{container}/src/one.txt", b"one")
    adl.pipe(f"{container}/src/sub/two.txt", b"two")
    adl.pipe(f"{container}/src/sub/deep/three.txt", b"three")
    adl.pipe(f"{container}/loose.txt", b"loose")

    adl.mv(f"{container}/loose.txt", f"{container}/src/sub/moved.txt")
    assert not adl.exists(f"{container}/loose.txt")
    assert adl.cat(f"{container}/src/sub/moved.txt") == b"loose"

    adl.mv(f"{container}/src", f"{container}/dst", recursive=True)
    assert _tree(adl, container) == {
        "dst": "directory",
        "dst/one.txt": "file",
        "dst/sub": "directory",
        "dst/sub/deep": "directory",
        "dst/sub/deep/three.txt": "file",
        "dst/sub/moved.txt": "file",
        "dst/sub/two.txt": "file",
    }
    assert _lake_paths(lake, container) == [
        ("dst", True), ("dst/one.txt", False), ("dst/sub", True), ("dst/sub/deep", True),
        ("dst/sub/deep/three.txt", False), ("dst/sub/moved.txt", False), ("dst/sub/two.txt", False),
    ]  # fmt: skip
    assert adl.cat(f"{container}/dst/sub/deep/three.txt") == b"three"
    assert adl.isdir(f"{container}/dst/sub/deep")


def test_rm_file_and_directory(adl: AzureBlobFileSystem, container: str, lake: ServerProcess) -> None:
    adl.pipe(f"{container}/keep/k.txt", b"k")
    adl.pipe(f"{container}/gone/a.txt", b"a")
    adl.pipe(f"{container}/gone/x/y/b.txt", b"b")
    adl.pipe(f"{container}/gone/x/c.txt", b"c")

    adl.rm(f"{container}/gone/a.txt")
    assert not adl.exists(f"{container}/gone/a.txt")
    assert adl.isdir(f"{container}/gone")  # a real directory stays when its last direct file goes

    adl.rm(f"{container}/gone", recursive=True)
    assert _tree(adl, container) == {"keep": "directory", "keep/k.txt": "file"}
    assert _lake_paths(lake, container) == [("keep", True), ("keep/k.txt", False)]
    assert not adl.exists(f"{container}/gone")


def test_rm_of_a_non_empty_directory_without_recursive_is_refused(
    adl: AzureBlobFileSystem, container: str
) -> None:
    adl.pipe(f"{container}/full/f.txt", b"f")
    with pytest.raises(RuntimeError, match="DirectoryIsNotEmpty"):
        adl.rm(f"{container}/full")  # Delete Blob of a directory with children: Azure's 409
    assert adl.cat(f"{container}/full/f.txt") == b"f"


def test_delete_blob_of_a_directory(lake: ServerProcess, container: str) -> None:
    """What adlfs's ``rm`` relies on, through the Blob SDK: Delete Blob of a non-empty directory
    is 409 ``DirectoryIsNotEmpty`` and deletes nothing; of an empty one, it deletes it."""
    blobs = BlobServiceClient.from_connection_string(lake.connection_string).get_container_client(container)
    blobs.upload_blob("d/e/f.txt", b"f")
    for directory in ("d", "d/e"):
        with pytest.raises(HttpResponseError) as caught:
            blobs.delete_blob(directory)
        assert (caught.value.status_code, caught.value.error_code) == (409, "DirectoryIsNotEmpty")
        assert "not permitted on a non-empty directory" in str(caught.value)
    assert _lake_paths(lake, container) == [("d", True), ("d/e", True), ("d/e/f.txt", False)]
    blobs.delete_blob("d/e/f.txt")
    blobs.delete_blob("d/e")
    assert _lake_paths(lake, container) == [("d", True)]
    blobs.delete_blob("d")
    assert _lake_paths(lake, container) == []


def test_fsspec_url_and_tabular_files(lake: ServerProcess, container: str) -> None:
    options = {"connection_string": lake.connection_string}
    with fsspec.open(f"abfs://{container}/urls/hello.txt", "wt", **options) as out:
        out.write("hello through a URL\n")
    with fsspec.open(f"abfs://{container}/urls/hello.txt", "rt", **options) as stream:
        assert stream.read() == "hello through a URL\n"

    filesystem, _ = fsspec.core.url_to_fs(f"abfs://{container}", **options)
    table = pa.table({"n": list(range(100)), "s": [f"row{i}" for i in range(100)]})
    pq.write_table(table, f"{container}/tables/t.parquet", filesystem=filesystem)
    assert pq.read_table(f"{container}/tables/t.parquet", filesystem=filesystem).equals(table)

    with filesystem.open(f"{container}/tables/t.csv", "wb") as out:
        pacsv.write_csv(table, out)
    with filesystem.open(f"{container}/tables/t.csv", "rb") as stream:
        assert pacsv.read_csv(io.BytesIO(stream.read())).equals(table)
    assert sorted(filesystem.ls(f"{container}/tables", detail=False)) == [
        f"{container}/tables/t.csv",
        f"{container}/tables/t.parquet",
    ]
