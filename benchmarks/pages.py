"""Page blob workloads: Put Page of 4 KiB at random page-aligned offsets of 1 GiB page blobs.

Each wrk thread writes to one of ``PAGE_BLOBS`` blobs (created before timing), so writes to one
blob queue behind each other as a disk's would, and writes to different blobs do not. Requests
carry the account SAS of ``blobs.py``; ``lua/pages.lua`` builds them. Before timing, one write
goes through aiohttp and is read back.
"""

from __future__ import annotations

import os
from dataclasses import replace

from blobs import CONTAINER, BlobHttp, BlobWorkload
from workloads import Context, Prepared, Workload

PAGE_SIZE = 4096
PAGE_BLOB_BYTES = 1024**3
PAGE_BLOBS = 4


class PutPage(BlobWorkload):
    name, title, mode, size = "blob-put-page", "Put Page 4 KiB, random offsets", "page", PAGE_SIZE
    script = "pages.lua"

    async def prepare(self, ctx: Context, http: object) -> Prepared:
        """As the other blob workloads, but every connection: a 4 KiB write is a small request."""
        return replace(await super().prepare(ctx, http), connections=ctx.options.connections)

    async def setup(self, ctx: Context, http: BlobHttp) -> tuple[dict[str, object], list[str]]:
        names = [f"disk-{i}" for i in range(PAGE_BLOBS)]
        for name in names:
            status, body = await http.request(
                "PUT", f"/{CONTAINER}/{name}",
                headers={"x-ms-blob-type": "PageBlob", "x-ms-blob-content-length": str(PAGE_BLOB_BYTES)},
            )  # fmt: skip
            if status != 201:
                raise RuntimeError(f"create page blob {name}: HTTP {status} {body[:200]!r}")
        data = os.urandom(PAGE_SIZE)
        offset = 12345 * PAGE_SIZE
        span = {"x-ms-range": f"bytes={offset}-{offset + PAGE_SIZE - 1}"}
        status, _ = await http.request(
            "PUT", f"/{CONTAINER}/{names[0]}", "comp=page", data, {"x-ms-page-write": "update", **span}
        )
        failures = [] if status == 201 else [f"Put Page -> {status}"]
        status, body = await http.request("GET", f"/{CONTAINER}/{names[0]}", headers=span)
        if status != 206 or body != data:
            failures.append(f"read back -> {status}, {len(body)} bytes")
        return {"names": names, "pages": PAGE_BLOB_BYTES // PAGE_SIZE}, failures


PAGE_WORKLOADS: dict[str, Workload] = {w.name: w for w in (PutPage(),)}
