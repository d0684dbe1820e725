"""How fast the data tools move entities between a local Tabulae and a file: ``tabulae import``
and ``tabulae export`` run as a user runs them, on 1 KiB entities, with the CPU each side used.

    .venv/bin/python benchmarks/datatools.py                 # 100,000 entities, 1 KiB each
    .venv/bin/python benchmarks/datatools.py --entities 20000 --sdk   # and the SDK's own paths
    .venv/bin/python benchmarks/datatools.py --profile       # where the tools' own CPU goes

It prints entities/s, the cores the tool and the server used (so a figure can be read as
"the server was the limit" or "the client was"), and the machine's load before the run: the
development machine is shared, and a busy neighbour halves every figure.
"""

from __future__ import annotations

import argparse
import base64
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import orjson
from cpu import between, snapshot
from servers import TabulaeServer

DEV_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def entity(number: int, partitions: int) -> dict[str, object]:
    """About 1 KiB on the wire: keys, ten typed properties, and text to make up the size."""
    return {
        "PartitionKey": f"customer{number % partitions:04d}",
        "RowKey": f"order{number:09d}",
        "status": "shipped",
        "quantity": number % 17,
        "total@odata.type": "Edm.Double",
        "total": number * 1.25,
        "serial@odata.type": "Edm.Int64",
        "serial": str(number * 7_000_000_001),
        "placed@odata.type": "Edm.DateTime",
        "placed": f"2024-{1 + number % 12:02d}-{1 + number % 28:02d}T10:20:30.1234567Z",
        "id@odata.type": "Edm.Guid",
        "id": str(uuid.UUID(int=number)),
        "gift": number % 3 == 0,
        "token@odata.type": "Edm.Binary",
        "token": base64.b64encode(number.to_bytes(8, "big") * 4).decode(),
        "address": "12 Long Street, Springfield, 4000 " * 4,
        "notes": "n" * 600,
    }


def write_source(path: Path, count: int, partitions: int) -> float:
    """Write the input file; returns the mean entity size in bytes."""
    with path.open("wb") as out:
        for number in range(count):
            out.write(orjson.dumps(entity(number, partitions), option=orjson.OPT_APPEND_NEWLINE))
    return path.stat().st_size / count


def run_tool(server: TabulaeServer, args: list[str], count: int, label: str, profile: bool) -> None:
    env = {
        **os.environ,
        "AZURE_STORAGE_CONNECTION_STRING": (
            f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={DEV_KEY};"
            f"TableEndpoint=http://{server.host}/devstoreaccount1;"
        ),
    }
    command = [sys.executable, "-m", "tabulae", *args]
    if profile:
        command = [sys.executable, "-m", "cProfile", "-s", "tottime", "-m", "tabulae", *args]
    before = snapshot(server.pids)
    started = time.monotonic()
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - started
    after = snapshot(server.pids)
    if result.returncode != 0:
        raise SystemExit(f"{label} failed: {result.stderr}")
    use = between(before, after, seconds, count)
    print(
        f"{label}: {count:,} entities in {seconds:.2f} s = {count / seconds:,.0f} entities/s "
        f"(process start included); tool {use.client_cores:.2f} cores, server {use.server_cores:.2f} cores "
        f"= {use.server_us:.0f} µs per entity; machine {100 * use.machine_busy:.0f}% busy",
        flush=True,
    )
    print(f"  the tool said: {result.stderr.strip().splitlines()[-1]}", flush=True)
    if profile:
        print("\n".join(result.stdout.splitlines()[:32]), flush=True)


def sdk_paths(server: TabulaeServer, count: int, partitions: int) -> None:
    """The official SDK's own batch and query paths on the same entities, for comparison."""
    from azure.core.credentials import AzureNamedKeyCredential
    from azure.data.tables import EdmType, EntityProperty, TableClient

    client = TableClient(
        f"http://{server.host}/devstoreaccount1",
        "sdkpaths",
        credential=AzureNamedKeyCredential("devstoreaccount1", DEV_KEY),
    )
    client.create_table()
    rows = []
    for number in range(count):
        raw = entity(number, partitions)
        row = {k: v for k, v in raw.items() if "@" not in k and k not in ("serial", "placed", "token", "id")}
        row["serial"] = EntityProperty(int(str(raw["serial"])), EdmType.INT64)
        rows.append(row)
    started = time.monotonic()
    by_partition: dict[str, list[dict[str, object]]] = {}
    for row in rows:
        by_partition.setdefault(str(row["PartitionKey"]), []).append(row)
    for group in by_partition.values():
        for start in range(0, len(group), 100):
            client.submit_transaction([("upsert", r) for r in group[start : start + 100]])
    seconds = time.monotonic() - started
    print(
        f"SDK submit_transaction: {count:,} entities in {seconds:.2f} s = {count / seconds:,.0f} entities/s",
        flush=True,
    )
    started = time.monotonic()
    read = sum(1 for _ in client.list_entities(results_per_page=1000))
    seconds = time.monotonic() - started
    print(
        f"SDK list_entities: {read:,} entities in {seconds:.2f} s = {read / seconds:,.0f} entities/s",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--entities", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--tabulae-args", default="", help="extra `tabulae serve` arguments")
    parser.add_argument("--concurrency", type=int, default=4, help="import's batches in flight")
    parser.add_argument("--sdk", action="store_true", help="also time the SDK's own batch and query paths")
    parser.add_argument("--profile", action="store_true", help="run the tools under cProfile")
    args = parser.parse_args()

    print(
        f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} (1 min) before the run",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="bench-datatools-") as scratch:
        source = Path(scratch) / "source.jsonl"
        size = write_source(source, args.entities, args.partitions)
        print(f"input: {args.entities:,} entities, {size:,.0f} bytes each on average", flush=True)
        server = TabulaeServer(args.tabulae_args.split())
        with server:
            run_tool(
                server,
                ["import", str(source), "bench", "--concurrency", str(args.concurrency)],
                args.entities,
                "import",
                args.profile,
            )
            target = Path(scratch) / "exported.jsonl"
            run_tool(server, ["export", "bench", str(target)], args.entities, "export", args.profile)
            if args.sdk:
                sdk_paths(server, min(args.entities, 20_000), args.partitions)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = children.ru_utime + children.ru_stime
    print(f"load average {os.getloadavg()[0]:.1f} after; tools' CPU {used:.1f} s")


if __name__ == "__main__":
    main()
