"""Large blob transfers beside the disk's own speed: a blob uploaded as blocks and committed
with Put Block List, as the SDKs upload anything larger than one Put Blob, and ranged
downloads of a blob made of blocks, as the SDKs download in chunks (``lua/blob_transfer.lua``).

``blob-put-blocks``: each wrk thread has one connection, so its requests go one after the other
as one SDK upload's do (``max_concurrency=1``, the Python SDK's default): 64 Put Blocks of 4 MiB
(the SDK's default block size), then the Put Block List of their ids, then the next blob.
Throughput counts the blocks' bytes over the whole time, commits included.

``blob-get-range``: 4 MiB ranges (the SDK's chunk size) of a 256 MiB blob preloaded as 4 MiB
blocks, at offsets of whole MiB, so most ranges span two blocks' extents.
"""

from __future__ import annotations

import base64
import random
import uuid

from blobs import CONTAINER, BlobHttp, BlobWorkload, head
from signing import ACCOUNT
from workloads import Context, Prepared, Workload, write_data

MIB = 1024 * 1024
BLOCK = 4 * MIB
BLOCKS_PER_BLOB = 64
RANGED_BLOB_MIB = 256
RANGE = 4 * MIB
RANGES = 512  # distinct ranges each wrk thread cycles through


def block_ids(count: int) -> list[str]:
    """Equal-length Base64 block ids, URL-safe as they stand (no '+', '/' or '=')."""
    return [base64.b64encode(f"block-{i:06d}".encode()).decode() for i in range(count)]


def block_list(ids: list[str]) -> str:
    latest = "".join(f"<Latest>{block_id}</Latest>" for block_id in ids)
    return f'<?xml version="1.0" encoding="utf-8"?><BlockList>{latest}</BlockList>'


async def upload_in_blocks(http: BlobHttp, name: str, ids: list[str], data: bytes) -> int:
    """Put ``data`` as a block under each of ``ids`` and commit them; the commit's status."""
    for block_id in ids:
        status, body = await http.request(
            "PUT", f"/{CONTAINER}/{name}", f"comp=block&blockid={block_id}", data
        )
        if status != 201:
            raise RuntimeError(f"Put Block: HTTP {status} {body[:200]!r}")
    status, _ = await http.request(
        "PUT", f"/{CONTAINER}/{name}", "comp=blocklist", block_list(ids).encode(),
        {"Content-Type": "application/xml"},
    )  # fmt: skip
    return status


class TransferWorkload(BlobWorkload):
    script = "blob_transfer.lua"
    unit = "MiB/s"

    def prepared(self, ctx: Context, http: BlobHttp, extra: dict[str, object], connections: int,
                 failures: list[str]) -> Prepared:  # fmt: skip
        data_file = write_data(
            ctx.workdir / f"{self.name}.lua",
            {"mode": self.mode, "size": self.size, "sas": http.sas, "account": ACCOUNT,
             "container": CONTAINER, "head": head(ctx), "prefix": f"{self.name}-{uuid.uuid4().hex[:6]}-",
             **extra},
        )  # fmt: skip
        opts = ctx.options
        return Prepared(
            self.script, data_file, connections, opts.duration, max(opts.timeout, 120.0), self.multiplier,
            self.unit, 5, failures,
        )  # fmt: skip


class PutBlocks(TransferWorkload):
    name, title, mode, size = "blob-put-blocks", "Put Block 4 MiB x64 + Put Block List", "blocks", BLOCK
    # wrk counts requests: 64 of every 65 carry a 4 MiB block
    multiplier = BLOCK / MIB * BLOCKS_PER_BLOB / (BLOCKS_PER_BLOB + 1)

    async def prepare(self, ctx: Context, http: object) -> Prepared:
        assert isinstance(http, BlobHttp)
        await http.ensure_container()
        ids = block_ids(BLOCKS_PER_BLOB)
        failures: list[str] = []
        piece = random.randbytes(BLOCK)
        status = await upload_in_blocks(http, "check-blocks", ids[:3], piece)
        got, body = await http.request("GET", f"/{CONTAINER}/check-blocks")
        if status != 201 or got != 200 or body != piece * 3:
            failures.append(f"blocks: commit {status}, GET {got} with {len(body)} bytes")
        extra = {"block_ids": ids, "block_list": block_list(ids)}
        return self.prepared(ctx, http, extra, ctx.options.threads, failures)


class GetRanges(TransferWorkload):
    name, title, mode, size = "blob-get-range", "Get Blob 4 MiB ranges of 256 MiB", "range", RANGE
    multiplier = RANGE / MIB

    async def prepare(self, ctx: Context, http: object) -> Prepared:
        assert isinstance(http, BlobHttp)
        await http.ensure_container()
        blocks = RANGED_BLOB_MIB * MIB // BLOCK
        piece = random.randbytes(BLOCK)
        status = await upload_in_blocks(http, "ranged", block_ids(blocks), piece)
        if status != 201:
            raise RuntimeError(f"preload of the ranged blob: commit {status}")
        whole = piece * blocks
        rng = random.Random(7)
        starts = [rng.randrange(0, RANGED_BLOB_MIB - RANGE // MIB + 1) * MIB for _ in range(RANGES)]
        ranges = [f"{start}-{start + RANGE - 1}" for start in starts]
        failures = []
        for start in starts[:5]:
            got, body = await http.request(
                "GET", f"/{CONTAINER}/ranged", headers={"x-ms-range": f"bytes={start}-{start + RANGE - 1}"}
            )
            if got != 206 or body != whole[start : start + RANGE]:
                failures.append(f"GET range at {start} -> {got}, {len(body)} bytes")
        connections = min(ctx.options.connections, 4)
        return self.prepared(ctx, http, {"name": "ranged", "ranges": ranges}, connections, failures)


TRANSFER_WORKLOADS: dict[str, Workload] = {w.name: w for w in (PutBlocks(), GetRanges())}

# Large transfers printed against the disk's speed: the workload and which dd figure (0: write).
AGAINST_DISK = {"blob-put-64m": 0, "blob-put-blocks": 0, "blob-get-64m": 1, "blob-get-range": 1}
