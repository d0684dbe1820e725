"""Blob workloads: put and get of 1 KiB and 64 MiB blobs, and a listing of 5,000 blobs.

Requests carry an account SAS (one query string for every request, so wrk needs no per-request
signing and both servers verify the same kind of credential); ``lua/blob.lua`` builds them: new
names for puts (run id, thread id and a counter), preloaded names for gets. Before timing, the
same requests go through aiohttp and their answers are checked (status, size, listing length).
``disk_speed`` measures the disk with ``dd`` in the same run, as the yardstick for large transfers.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
from azure.storage.blob import AccountSasPermissions, ResourceTypes, generate_account_sas
from signing import ACCOUNT, ACCOUNT_KEY
from workloads import Context, Prepared, Workload, write_data

CONTAINER = "bench"
SMALL = 1024
LARGE = 64 * 1024 * 1024
LIST_BLOBS = 5000
SMALL_PRELOAD = 2000
VERSION = "2026-10-06"


def account_sas() -> str:
    return generate_account_sas(
        ACCOUNT,
        ACCOUNT_KEY,
        ResourceTypes(service=True, container=True, object=True),
        AccountSasPermissions(read=True, write=True, list=True, create=True, delete=True),
        expiry=datetime.now(UTC) + timedelta(hours=6),
    )


class BlobHttp:
    """SAS-authorised requests for setup and validation (aiohttp, not timed)."""

    def __init__(self, host: str, session: aiohttp.ClientSession) -> None:
        self.host = host
        self.session = session
        self.sas = account_sas()

    def url(self, path: str, query: str = "") -> str:
        return f"http://{self.host}/{ACCOUNT}{path}?{query + '&' if query else ''}{self.sas}"

    async def request(self, method: str, path: str, query: str = "", data: bytes | None = None,
                      headers: dict[str, str] | None = None) -> tuple[int, bytes]:  # fmt: skip
        all_headers = {"x-ms-version": VERSION, **(headers or {})}
        async with self.session.request(
            method, self.url(path, query), data=data, headers=all_headers
        ) as response:
            return response.status, await response.read()

    async def put(self, name: str, data: bytes) -> int:
        status, _ = await self.request(
            "PUT", f"/{CONTAINER}/{name}", data=data, headers={"x-ms-blob-type": "BlockBlob"}
        )
        return status

    async def ensure_container(self) -> None:
        status, body = await self.request("PUT", f"/{CONTAINER}", "restype=container")
        if status not in (201, 409):
            raise RuntimeError(f"create container: HTTP {status} {body[:200]!r}")

    async def ready(self) -> bool:
        status, _ = await self.request("GET", "/", "comp=list&maxresults=1")
        return status == 200


def head(ctx: Context) -> str:
    return f"Host: {ctx.blob_host}\r\nx-ms-version: {VERSION}\r\n"


class BlobWorkload(Workload):
    """A blob workload: ``mode`` and ``size`` go to blob.lua; ``unit`` says how it is counted."""

    service = "blob"
    script = "blob.lua"
    mode = ""
    size = 0
    unit = "req/s"
    multiplier = 1.0

    async def setup(self, ctx: Context, http: BlobHttp) -> tuple[dict[str, object], list[str]]:
        """Preload; return extra data for the Lua side and any validation failures."""
        return {}, []

    async def prepare(self, ctx: Context, http: object) -> Prepared:
        assert isinstance(http, BlobHttp)
        await http.ensure_container()
        extra, failures = await self.setup(ctx, http)
        data_file = write_data(
            ctx.workdir / f"{self.name}.lua",
            {
                "mode": self.mode,
                "size": self.size,
                "sas": http.sas,
                "account": ACCOUNT,
                "container": CONTAINER,
                "head": head(ctx),
                "prefix": f"{self.name}-{uuid.uuid4().hex[:6]}-",
                **extra,
            },
        )
        opts = ctx.options
        connections = opts.connections if self.size <= SMALL else min(opts.connections, 4)
        return Prepared(
            self.script, data_file, connections, opts.duration, max(opts.timeout, 120.0), self.multiplier,
            self.unit, 5, failures,
        )  # fmt: skip


class PutSmall(BlobWorkload):
    name, title, mode, size = "blob-put", "Put Blob 1 KiB", "put", SMALL

    async def setup(self, ctx: Context, http: BlobHttp) -> tuple[dict[str, object], list[str]]:
        failures = [
            f"PUT -> {s}" for s in [await http.put(f"check-{i}", b"x" * SMALL) for i in range(5)] if s != 201
        ]
        return {}, failures


async def preload(http: BlobHttp, container: str, names: list[str], data: bytes) -> None:
    """Put ``names`` with ``data``, 16 at a time; raise unless every put answers 201."""
    headers = {"x-ms-blob-type": "BlockBlob"}
    for start in range(0, len(names), 16):
        answers = await asyncio.gather(
            *(
                http.request("PUT", f"/{container}/{name}", data=data, headers=headers)
                for name in names[start : start + 16]
            )
        )
        if any(status != 201 for status, _ in answers):
            raise RuntimeError(f"preload of {container}: {[status for status, _ in answers]}")


class GetSmall(BlobWorkload):
    name, title, mode, size = "blob-get", "Get Blob 1 KiB", "get", SMALL

    async def setup(self, ctx: Context, http: BlobHttp) -> tuple[dict[str, object], list[str]]:
        names = [f"small-{i:05d}" for i in range(SMALL_PRELOAD)]
        await preload(http, CONTAINER, names, b"s" * SMALL)
        failures = []
        for name in names[:5]:
            status, body = await http.request("GET", f"/{CONTAINER}/{name}")
            if status != 200 or len(body) != SMALL:
                failures.append(f"GET {name} -> {status}, {len(body)} bytes")
        return {"names": names}, failures


class PutLarge(BlobWorkload):
    name, title, mode, size = "blob-put-64m", "Put Blob 64 MiB", "put", LARGE
    unit, multiplier = "MiB/s", 64.0

    async def setup(self, ctx: Context, http: BlobHttp) -> tuple[dict[str, object], list[str]]:
        status = await http.put("check-large", b"L" * LARGE)
        return {}, [] if status == 201 else [f"PUT 64 MiB -> {status}"]


class GetLarge(BlobWorkload):
    name, title, mode, size = "blob-get-64m", "Get Blob 64 MiB", "get", LARGE
    unit, multiplier = "MiB/s", 64.0

    async def setup(self, ctx: Context, http: BlobHttp) -> tuple[dict[str, object], list[str]]:
        if await http.put("large-0", b"G" * LARGE) != 201:
            raise RuntimeError("preload of the 64 MiB blob failed")
        status, body = await http.request("GET", f"/{CONTAINER}/large-0")
        failures = (
            [] if status == 200 and len(body) == LARGE else [f"GET 64 MiB -> {status}, {len(body)} bytes"]
        )
        return {"names": ["large-0"]}, failures


class ListBlobs(BlobWorkload):
    name, title, mode = "blob-list", "List Blobs (5,000)", "list"
    unit = "lists/s"

    async def setup(self, ctx: Context, http: BlobHttp) -> tuple[dict[str, object], list[str]]:
        status, _ = await http.request("PUT", "/listing", "restype=container")
        if status not in (201, 409):
            raise RuntimeError(f"create listing container: {status}")
        await preload(http, "listing", [f"item-{i:05d}" for i in range(LIST_BLOBS)], b"")
        status, body = await http.request("GET", "/listing", "restype=container&comp=list")
        listed = len(re.findall(rb"<Blob>", body))
        failures = [] if status == 200 and listed == LIST_BLOBS else [f"list -> {status}, {listed} blobs"]
        return {"list_container": "listing"}, failures


BLOB_WORKLOADS: dict[str, Workload] = {
    w.name: w for w in (PutSmall(), GetSmall(), PutLarge(), GetLarge(), ListBlobs())
}


def disk_speed(directory: Path, mib: int = 1024) -> tuple[float, float]:
    """Sequential write (synced) and read (direct) speed of ``directory``'s disk, MiB/s, by dd."""
    target = directory / "dd.bin"
    try:
        started = time.monotonic()
        subprocess.run(
            ["dd", "if=/dev/zero", f"of={target}", "bs=1M", f"count={mib}", "conv=fdatasync"],
            check=True, capture_output=True,
        )  # fmt: skip
        write = mib / (time.monotonic() - started)
        started = time.monotonic()
        subprocess.run(
            ["dd", f"if={target}", "of=/dev/null", "bs=1M", "iflag=direct"], check=True, capture_output=True
        )
        read = mib / (time.monotonic() - started)
    finally:
        target.unlink(missing_ok=True)
    return write, read
