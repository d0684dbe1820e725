"""The Data Lake (DFS) API's costs that grow with a tree: rename of a directory with N files,
List Paths recursive (paths/s), and append+flush throughput beside ``dd`` on the same disk.

    .venv/bin/python benchmarks/dfs.py --files 1000,10000 [--store postgresql://...] [--file-bytes N]

Files are made through the DFS API (16 threads, 100 per sub-directory; empty, or of
``--file-bytes`` each); each rename moves the whole tree to a new name and is timed alone, as is
one recursive listing of it.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from azure.storage.filedatalake import DataLakeServiceClient, FileSystemClient
from servers import TabulaeBlobServer
from signing import ACCOUNT, ACCOUNT_KEY

MIB = 1024 * 1024


def connect(server: TabulaeBlobServer) -> DataLakeServiceClient:
    return DataLakeServiceClient.from_connection_string(
        f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};"
        f"BlobEndpoint=http://{server.blob_host}/{ACCOUNT};"
    )


def seed(fs: FileSystemClient, root: str, files: int, size: int = 0) -> None:
    for index in range(0, files, 100):
        fs.create_directory(f"{root}/d{index // 100:05d}")
    content = b"\x5a" * size

    def make(index: int) -> None:
        file = fs.get_file_client(f"{root}/d{index // 100:05d}/f{index:07d}")
        file.create_file()
        if content:
            file.append_data(content, 0, len(content))
            file.flush_data(len(content))

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(make, range(files)))


def rename_and_list(fs: FileSystemClient, files: int, size: int = 0) -> None:
    root = f"tree{files}"
    started = time.perf_counter()
    seed(fs, root, files, size)
    print(f"  seeded {files} files in {time.perf_counter() - started:.1f} s")
    timings = []
    name = root
    for turn in range(3):
        target = f"{root}-moved{turn}"
        started = time.perf_counter()
        fs.get_directory_client(name).rename_directory(f"{fs.file_system_name}/{target}")
        timings.append(time.perf_counter() - started)
        name = target
    print(f"  rename of a directory with {files} files: " + ", ".join(f"{t * 1000:.0f} ms" for t in timings))
    started = time.perf_counter()
    listed = sum(1 for _ in fs.get_paths(path=name, recursive=True))
    spent = time.perf_counter() - started
    print(f"  list paths recursive: {listed} paths in {spent:.2f} s = {listed / spent:.0f} paths/s")


def append_flush(fs: FileSystemClient, total_mib: int, chunk_mib: int) -> None:
    file = fs.create_file("throughput.bin")
    chunk = b"\xa5" * (chunk_mib * MIB)
    started = time.perf_counter()
    position = 0
    for _ in range(total_mib // chunk_mib):
        file.append_data(chunk, position, len(chunk))
        position += len(chunk)
    file.flush_data(position)
    spent = time.perf_counter() - started
    print(f"  append+flush {total_mib} MiB in {chunk_mib} MiB appends: {total_mib / spent:.0f} MiB/s")
    with tempfile.TemporaryDirectory() as directory:
        started = time.perf_counter()
        subprocess.run(
            ["dd", "if=/dev/zero", f"of={directory}/dd.bin", f"bs={chunk_mib}M",
             f"count={total_mib // chunk_mib}", "conv=fsync"],
            check=True, capture_output=True,
        )  # fmt: skip
        spent = time.perf_counter() - started
        print(f"  dd (same disk, conv=fsync): {total_mib / spent:.0f} MiB/s")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", default="1000,10000", help="tree sizes, comma-separated")
    parser.add_argument("--store", default=None, help="a PostgreSQL URL (default: SQLite)")
    parser.add_argument("--mib", type=int, default=256, help="append+flush volume")
    parser.add_argument("--file-bytes", type=int, default=0, help="each file's size (default: empty)")
    args = parser.parse_args()
    extra = ["--hns", ACCOUNT] + (["--store", args.store] if args.store else [])
    server = TabulaeBlobServer(extra)
    server.start()
    try:
        service = connect(server)
        fs = service.create_file_system("bench" + uuid.uuid4().hex[:8])
        print(f"Tabulae DFS on {'PostgreSQL' if args.store else 'SQLite'}")
        for files in (int(text) for text in args.files.split(",")):
            rename_and_list(fs, files, args.file_bytes)
        append_flush(fs, args.mib, 4)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
