"""pyarrow's ``AzureFileSystem`` against an HNS account: it detects the hierarchical namespace
(Get Access Control on a file system's root) and then uses the DFS API for directories, ``move``
(a rename with leases on both sides) and ``delete_dir``. Its C++ SDK builds rename URLs for
host-style endpoints only, so the account is addressed as ``devstoreaccount1.localhost``."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pyarrow.dataset as ds
from pyarrow import fs as pafs

from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess


def _files(filesystem: pafs.AzureFileSystem, base: str) -> list[tuple[str, pafs.FileType]]:
    infos = filesystem.get_file_info(pafs.FileSelector(base, recursive=True))
    return sorted((info.path, info.type) for info in infos)


def test_pyarrow_directories_move_and_datasets(lake: ServerProcess) -> None:
    authority = f".localhost:{lake.blob_port}"
    filesystem = pafs.AzureFileSystem(
        account_name=DEV_ACCOUNT, account_key=DEV_KEY, blob_storage_authority=authority,
        dfs_storage_authority=authority, blob_storage_scheme="http", dfs_storage_scheme="http",
    )  # fmt: skip
    base = "pa" + uuid.uuid4().hex[:10]
    filesystem.create_dir(base)  # the file system first: pyarrow detects the namespace in one
    filesystem.create_dir(f"{base}/a/b")
    with filesystem.open_output_stream(f"{base}/a/b/f.txt") as out:
        out.write(b"hello pyarrow")
    directory, file = pafs.FileType.Directory, pafs.FileType.File
    assert _files(filesystem, base) == [
        (f"{base}/a", directory),
        (f"{base}/a/b", directory),
        (f"{base}/a/b/f.txt", file),
    ]
    filesystem.move(f"{base}/a", f"{base}/z")
    assert _files(filesystem, base) == [
        (f"{base}/z", directory),
        (f"{base}/z/b", directory),
        (f"{base}/z/b/f.txt", file),
    ]
    with filesystem.open_input_stream(f"{base}/z/b/f.txt") as stream:
        assert stream.read() == b"hello pyarrow"
    filesystem.delete_dir(f"{base}/z")
    assert _files(filesystem, base) == []
    table = pa.table({"x": list(range(10)), "g": [i % 2 for i in range(10)]})
    ds.write_dataset(table, f"{base}/ds", filesystem=filesystem, format="parquet", partitioning=["g"])
    back = ds.dataset(f"{base}/ds", filesystem=filesystem, format="parquet", partitioning=["g"]).to_table()
    assert sorted(back.column("x").to_pylist()) == list(range(10))
