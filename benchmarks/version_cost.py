"""What blob versions cost on disk, and how soon a purge gives the space back.

Usage (from the repository root)::

    .venv/bin/python benchmarks/version_cost.py                      # SQLite, 1 GiB x 10
    .venv/bin/python benchmarks/version_cost.py --store postgresql://user@host/db --size 256

For each store (SQLite in a fresh data directory; PostgreSQL too, in a new database created on
the server of ``--store`` or ``$TABULAE_TEST_PG_URL`` and dropped afterwards) it starts
``tabulae serve`` twice, with ``--blob-versioning`` and without, and through the
azure-storage-blob SDK overwrites one block blob ``--overwrites`` times with ``--size`` MiB of
distinct content (one random buffer, a fresh leading chunk per overwrite, streamed: the SDK
uploads it as 4 MiB blocks and a Put Block List). After each overwrite it measures the space the
store uses: the data directory's allocated blocks for SQLite (database, log, content files and
the volume reserve), ``pg_database_size`` and the content table's ``pg_total_relation_size``
for PostgreSQL. Then it deletes the blob and every version and polls until the space is back
to where it started (within 1% of what it held, plus 16 MiB or a quarter of the blob), for at
most ``--wait`` seconds.

Content no record names is kept for a grace period (a download may still be reading it) and
collected every two minutes, or as often as the grace when it is shorter (``--grace``, the
servers' ``--blob-garbage-grace``). On SQLite the server runs with ``--disk-warn`` above the volume's
size (unless ``--default-grace``): a volume below the warning is collected every few seconds with
a short grace, the state a server is in when space matters. PostgreSQL has no volume to watch, so
its full grace applies, and its files shrink only when autovacuum next truncates the content
table: the purge takes minutes, which ``--wait`` covers.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from servers import TabulaeBlobServer
from signing import ACCOUNT, ACCOUNT_KEY
from stores import postgres_store

MIB = 1024 * 1024
GIB = 1024 * MIB
LEAD = MIB  # the leading chunk that makes each overwrite's content distinct
CONTAINER = "versions"
BLOB = "big.bin"
Buffer = bytearray | memoryview


class VariedContent(io.RawIOBase):
    """``lead`` then ``body`` past its length: one overwrite's content, read without a copy of the
    whole (the SDK reads it 4 MiB at a time)."""

    def __init__(self, lead: bytes, body: memoryview) -> None:
        self._lead = lead
        self._body = body
        self._position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: len(self._body)}[whence]
        self._position = max(0, base + offset)
        return self._position

    def readinto(self, buffer: Buffer) -> int:  # type: ignore[override]
        out = memoryview(buffer).cast("B")
        start, end = self._position, min(len(self._body), self._position + len(out))
        if start >= end:
            return 0
        cut = min(end, len(self._lead))
        if start < cut:
            out[: cut - start] = self._lead[start:cut]
        if end > max(start, cut):
            low = max(start, cut)
            out[low - start : end - start] = self._body[low:end]
        self._position = end
        return end - start


def disk_bytes(directory: Path) -> int:
    """Bytes allocated to every file under ``directory`` (what ``du`` counts)."""
    total = 0
    for root, _dirs, files in os.walk(directory):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return total


@dataclass
class Sizes:
    used: int  # what the store occupies: the data directory, or the database
    content: int | None = None  # PostgreSQL: the content table with its TOAST and indexes


@dataclass
class Run:
    store: str
    versioning: bool
    baseline: Sizes
    after: list[Sizes] = field(default_factory=list)  # right after each overwrite
    settled: list[Sizes] = field(default_factory=list)  # --settle seconds later
    upload_seconds: list[float] = field(default_factory=list)
    after_delete: Sizes | None = None
    returned: Sizes | None = None
    return_seconds: float | None = None


def measure_for(store: str, server: TabulaeBlobServer, url: str | None) -> Callable[[], Sizes]:
    if store == "sqlite":
        return lambda: Sizes(disk_bytes(server.data_dir))
    import psycopg

    def measure() -> Sizes:
        with psycopg.connect(url or "", autocommit=True) as conn:
            row = conn.execute(
                "SELECT pg_database_size(current_database()), pg_total_relation_size('blob_chunks')"
            ).fetchone()
        assert row is not None
        return Sizes(int(row[0]), int(row[1]))

    return measure


def run_one(store: str, versioning: bool, flags: list[str], url: str | None, args: argparse.Namespace,
            body: memoryview) -> Run:  # fmt: skip
    from azure.storage.blob import BlobServiceClient

    extra = [*flags, "--blob-versioning"] if versioning else list(flags)
    server = TabulaeBlobServer(extra)
    with server:
        measure = measure_for(store, server, url)
        service = BlobServiceClient(
            f"http://{server.host}/{ACCOUNT}",
            credential={"account_name": ACCOUNT, "account_key": ACCOUNT_KEY},
        )
        container = service.create_container(CONTAINER)
        blob = container.get_blob_client(BLOB)
        time.sleep(2)  # the server's first collection and checkpoint, before the baseline
        result = Run(store, versioning, measure())
        label = f"{store}, versioning {'on' if versioning else 'off'}"
        print(f"{label}: baseline {result.baseline}", flush=True)
        for number in range(1, args.overwrites + 1):
            started = time.perf_counter()
            blob.upload_blob(VariedContent(os.urandom(LEAD), body), length=len(body), overwrite=True)
            result.upload_seconds.append(time.perf_counter() - started)
            result.after.append(measure())
            if args.settle:
                time.sleep(args.settle)
                result.settled.append(measure())
            print(
                f"{label}: overwrite {number} in {result.upload_seconds[-1]:.1f}s, {result.after[-1]}"
                + (f", settled {result.settled[-1]}" if result.settled else ""),
                flush=True,
            )
        versions = [item.version_id for item in container.list_blobs(include=["versions"]) if item.version_id]
        if versioning and len(versions) != args.overwrites:
            print(f"{label}: {len(versions)} versions listed, expected {args.overwrites}")
        deleted = time.monotonic()
        blob.delete_blob()
        for item in container.list_blobs(include=["versions"]):
            if item.version_id:
                container.get_blob_client(item.name, version_id=item.version_id).delete_blob()
        left = list(container.list_blobs(include=["versions", "deleted"]))
        if left:
            print(f"{label}: {len(left)} records left after the purge")
        result.after_delete = measure()
        # within 1% of what it held, plus 16 MiB (a quarter blob if less): on PostgreSQL the
        # content table keeps some of its pages (free for its reuse) when vacuum truncates it
        held = result.after_delete.used - result.baseline.used
        target = result.baseline.used + held // 100 + min(16 * MIB, len(body) // 4)
        while time.monotonic() - deleted < args.wait:
            sizes = measure()
            if sizes.used <= target:
                result.returned, result.return_seconds = sizes, time.monotonic() - deleted
                break
            time.sleep(args.poll)
        else:
            result.returned = measure()
        back = "not back" if result.return_seconds is None else f"back after {result.return_seconds:.0f}s"
        print(f"{label}: after delete {result.after_delete}, then {result.returned} ({back})", flush=True)
        if args.keep_log:
            print(server.log_tail(10))
    return result


@contextlib.contextmanager
def store_flags(store: str, args: argparse.Namespace) -> Iterator[tuple[list[str], str | None]]:
    """The ``serve`` flags of a fresh store of the kind ``store``, and its URL (PostgreSQL)."""
    grace = [] if args.grace is None else ["--blob-garbage-grace", str(args.grace)]
    if store == "sqlite":
        if args.default_grace:
            yield grace, None
            return
        volume = os.statvfs(Path(os.environ.get("TMPDIR", "/tmp")))
        above = volume.f_blocks * volume.f_frsize // MIB * 2  # twice the volume: always below it
        yield ["--disk-warn", str(above), *grace], None
    else:
        with postgres_store(args.store) as url:
            yield ["--store", url, *grace], url


def mib(value: int | None) -> str:
    return "" if value is None else f"{value / MIB:,.0f}"


def print_table(runs: list[Run], size: int, wait: float) -> None:
    """One row per overwrite: the space above the baseline, in MiB, with and without versioning."""
    for store in dict.fromkeys(run.store for run in runs):
        on = next((r for r in runs if r.store == store and r.versioning), None)
        off = next((r for r in runs if r.store == store and not r.versioning), None)
        pair = [r for r in (on, off) if r is not None]
        print(f"\n{store}: MiB above the empty store's {mib(pair[0].baseline.used)} MiB "
              f"(blob of {mib(size)} MiB); 'settled' is after --settle")  # fmt: skip
        header = "| overwrite |" + "".join(
            f" versioning {'on' if r.versioning else 'off'} | settled |"
            + (" content table |" if store != "sqlite" else "")
            for r in pair
        )
        print(header)
        print("|---:|" + "---:|" * (header.count("|") - 2))
        for index in range(len(pair[0].after)):
            cells = [str(index + 1)]
            for run in pair:
                cells.append(mib(run.after[index].used - run.baseline.used))
                cells.append(mib(run.settled[index].used - run.baseline.used) if run.settled else "")
                if store != "sqlite":
                    cells.append(mib(run.after[index].content))
            print("| " + " | ".join(cells) + " |")
        for name, pick in (("after delete", lambda r: r.after_delete), ("after purge", lambda r: r.returned)):
            cells = [name]
            for run in pair:
                sizes = pick(run)
                cells.append(mib(sizes.used - run.baseline.used) if sizes else "")
                cells.append("")
                if store != "sqlite":
                    cells.append(mib(sizes.content) if sizes else "")
            print("| " + " | ".join(cells) + " |")
        cells = ["seconds to return"]
        for run in pair:
            cells += [f"{run.return_seconds:.0f}" if run.return_seconds is not None else f"> {wait:.0f}", ""]
            if store != "sqlite":
                cells.append("")
        print("| " + " | ".join(cells) + " |")
        for run in pair:
            rate = len(run.upload_seconds) * size / sum(run.upload_seconds) / MIB
            print(f"versioning {'on' if run.versioning else 'off'}: uploads at {rate:.0f} MiB/s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--size", type=int, default=1024, help="the blob's size in MiB (default 1024)")
    add("--overwrites", type=int, default=10, help="how many times it is written (10)")
    add("--store", default=os.environ.get("TABULAE_TEST_PG_URL"), help="a PostgreSQL server (a new "
        "database is made on it and dropped afterwards); default $TABULAE_TEST_PG_URL")  # fmt: skip
    add("--no-sqlite", action="store_true", help="PostgreSQL only")
    add("--no-pg", action="store_true", help="SQLite only")
    add("--default-grace", action="store_true", help="SQLite with the default --disk-warn: the full grace")
    add("--grace", type=float, default=None, help="the servers' --blob-garbage-grace (seconds; default: "
        "theirs, 300)")  # fmt: skip
    add("--settle", type=float, default=None, help="seconds to wait after each overwrite before measuring "
        "again (default 16 with the short grace on SQLite, else 0)")  # fmt: skip
    add("--wait", type=float, default=900.0, help="longest wait for the space to return (900 s)")
    add("--poll", type=float, default=2.0, help="seconds between measurements while waiting")
    add("--versioning", choices=("both", "on", "off"), default="both", help="which runs (both)")
    add("--keep-log", action="store_true", help="print the end of each server's log")
    args = parser.parse_args(argv)

    stores = [s for s in ("sqlite", "postgres") if not (s == "sqlite" and args.no_sqlite)]
    if args.no_pg or not args.store:
        stores = [s for s in stores if s != "postgres"]
    size = args.size * MIB
    print(f"making {size / GIB:.2f} GiB of random content...", flush=True)
    body = memoryview(os.urandom(size))
    runs: list[Run] = []
    settle_given = args.settle
    for store in stores:
        args.settle = settle_given if settle_given is not None else (
            16.0 if store == "sqlite" and not args.default_grace else 0.0
        )  # fmt: skip
        for versioning in {"both": (True, False), "on": (True,), "off": (False,)}[args.versioning]:
            with store_flags(store, args) as (flags, url):
                runs.append(run_one(store, versioning, flags, url, args, body))
    print_table(runs, size, args.wait)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
