"""The SQLite store's upload path without the network: bodies fed to ``ContentFiles.stage`` as
fast as it takes them, in the 256 KiB chunks the server receives, into a durable content
directory under ``--dir``. Prints, per body, the median time from the first chunk to the synced
file, the *tail* (from the last chunk to the synced file: what a client waits for after sending)
and the process's CPU per MiB.

Run it once per checkout to compare two versions of the path in one sitting, alternating::

    PYTHONPATH=/path/to/checkout .venv/bin/python benchmarks/staging.py --digest crc64
    PYTHONPATH=/path/to/checkout .venv/bin/python benchmarks/staging.py --digest md5

``crc64`` is what a Put Block checks (no Content-MD5 sent), ``md5`` what a Put Blob computes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

from tabulae.blob.rules.checksums import Checksums
from tabulae.storage.sqlite.blob_files import ContentFiles

CHUNK = 256 * 1024
MIB = 1024 * 1024


async def feed(chunks: list[bytes], ended: list[float]) -> AsyncIterator[bytes]:
    """``chunks``, then the time the last one was taken appended to ``ended``."""
    for chunk in chunks:
        yield chunk
    ended.append(time.perf_counter())


async def run(bodies: int, size: int, md5: bool, directory: Path) -> str:
    data = os.urandom(size)
    chunks = [data[i : i + CHUNK] for i in range(0, size, CHUNK)]
    files = ContentFiles(directory, durable=True)
    totals: list[float] = []
    tails: list[float] = []
    before = resource.getrusage(resource.RUSAGE_SELF)
    try:
        for _ in range(bodies):
            ended: list[float] = []
            started = time.perf_counter()
            staged = await files.stage(feed(chunks, ended), Checksums(md5=md5, crc64=True))
            synced = time.perf_counter()
            staged.release(remove=True)
            totals.append(synced - started)
            tails.append(synced - ended[0])
    finally:
        files.close()
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    tail = 1000 * statistics.median(tails)
    return (
        f"body p50 {1000 * statistics.median(totals):.2f} ms, tail p50 {tail:.2f} ms "
        f"(mean {1000 * statistics.mean(tails):.2f}), CPU {cpu / (bodies * size / MIB) * 1e6:,.0f} µs "
        f"per MiB, load average {os.getloadavg()[0]:.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bodies", type=int, default=48, help="bodies staged (default 48)")
    parser.add_argument("--mib", type=int, default=4, help="size of each body in MiB (default 4)")
    parser.add_argument("--digest", choices=["crc64", "md5"], default="crc64")
    parser.add_argument("--dir", type=Path, default=None, help="where the content directory goes")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-staging-", dir=args.dir) as scratch:
        print(asyncio.run(run(args.bodies, args.mib * MIB, args.digest == "md5", Path(scratch))))


if __name__ == "__main__":
    main()
