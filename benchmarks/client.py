"""A small signed HTTP client (aiohttp) for setup work: tables, batch preloads, validation, scans.

It is not used for timing; wrk does that. It sends the same header set as the Lua side (built by
:mod:`protocol`) and keeps paths byte-exact (``encoded=True``) so that signatures match.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import aiohttp
import protocol
from protocol import Shape
from signing import ACCOUNT, http_date
from yarl import URL


@dataclass
class Reply:
    """Status, headers and body of one response."""

    status: int
    headers: dict[str, str]
    body: bytes
    retried: bool = False  # sent again after the connection dropped

    def header(self, name: str) -> str | None:
        """Case-insensitive header lookup."""
        wanted = name.lower()
        for key, value in self.headers.items():
            if key.lower() == wanted:
                return value
        return None


class TableHttp:
    """Signed requests against one server at ``http://host``."""

    def __init__(self, host: str, session: aiohttp.ClientSession) -> None:
        self.host = host
        self.session = session

    async def send(
        self,
        shape: Shape,
        target: str,
        body: bytes | None = None,
        date: str | None = None,
        auth: str | None = None,
    ) -> Reply:
        """Send one request; ``target`` is the raw path plus optional query string. ``auth`` None
        signs it with Shared Key; ``""`` sends no Authorization (a SAS in ``target`` signs it)."""
        date = date or http_date()
        headers = dict(protocol.header_lines(shape, self.host, date))
        if auth != "":
            headers["Authorization"] = auth or protocol.sign(shape, target, date)
        url = URL(f"http://{self.host}{target}", encoded=True)
        # Azurite closes idle keep-alive sockets (5 s) and may do so while its event loop was
        # blocked, so a pooled connection can be reset under a request: retry on a new one.
        for attempt in range(3):
            try:
                async with self.session.request(shape.method, url, headers=headers, data=body) as response:
                    payload = await response.read()
                    return Reply(response.status, dict(response.headers), payload, attempt > 0)
            except (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError):
                if attempt == 2:
                    raise
                await asyncio.sleep(0.5)
        raise AssertionError("unreachable")

    async def create_table(self, name: str) -> None:
        """Create a table (201 or 204); an existing one (409) is fine."""
        shape = protocol.INSERT
        body = json.dumps({"TableName": name}).encode()
        reply = await self.send(shape, f"/{ACCOUNT}/Tables", body)
        if reply.status not in (201, 204, 409):
            raise RuntimeError(f"create table {name}: HTTP {reply.status} {reply.body[:300]!r}")

    async def list_tables(self) -> Reply:
        """Query Tables: the readiness probe."""
        return await self.send(protocol.GET, f"/{ACCOUNT}/Tables")

    async def batch_insert(self, table: str, bodies: list[str]) -> int:
        """Insert up to 100 entities of one partition in one ``$batch``; returns how many failed.

        The outer status is 202 even when the changeset fails, so the parts are inspected: a
        success has one ``HTTP/1.1 201`` (or 204) part per operation.
        """
        date = http_date()
        template = protocol.BatchTemplate.create(self.host, table, date)
        reply = await self.send(
            protocol.batch_shape(template.boundary), f"/{ACCOUNT}/$batch", template.body(bodies), date
        )
        if reply.status != 202:
            raise RuntimeError(f"$batch: HTTP {reply.status} {reply.body[:300]!r}")
        failed = len(bodies) - count_batch_successes(reply.body)
        if failed and reply.retried and b"EntityAlreadyExists" in reply.body:
            return 0  # the first attempt was applied before its connection dropped
        return failed

    async def query_all(self, target: str) -> tuple[int, int]:
        """Run a query to its end, following continuation tokens; returns (entities, pages)."""
        entities = pages = 0
        next_target = target
        while True:
            reply = await self.send(protocol.GET, next_target)
            if reply.status != 200:
                raise RuntimeError(f"query: HTTP {reply.status} {reply.body[:300]!r}")
            pages += 1
            entities += len(json.loads(reply.body)["value"])
            next_pk = reply.header("x-ms-continuation-NextPartitionKey")
            next_rk = reply.header("x-ms-continuation-NextRowKey")
            if not next_pk:
                return entities, pages
            next_target = f"{target}&NextPartitionKey={quote(next_pk)}&NextRowKey={quote(next_rk or '')}"


def quote(token: str) -> str:
    """Percent-encode a continuation token for a query string (the Lua side does the same)."""
    return urllib.parse.quote(token, safe="")


def count_batch_successes(body: bytes) -> int:
    """Number of successful sub-responses in a ``$batch`` response body."""
    return body.count(b"HTTP/1.1 201") + body.count(b"HTTP/1.1 204")


def open_session(limit: int = 64) -> aiohttp.ClientSession:
    """A session with a bounded pool and generous timeouts (scans may take a while)."""
    connector = aiohttp.TCPConnector(limit=limit, force_close=False)
    return aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=600))


async def preload(
    http: TableHttp,
    table: str,
    batches: Iterable[tuple[str, list[str]]],
    concurrency: int = 4,
    progress: Callable[[int], None] | None = None,
) -> tuple[int, float]:
    """Load ``(partition, [entity json])`` batches with ``concurrency`` in flight.

    Returns (entities loaded, seconds). Raises if any batch fails.
    """
    iterator = iter(batches)
    lock = asyncio.Lock()
    loaded = 0
    started = time.monotonic()

    async def worker() -> None:
        nonlocal loaded
        while True:
            async with lock:
                item = next(iterator, None)
            if item is None:
                return
            _partition, bodies = item
            failed = await http.batch_insert(table, bodies)
            if failed:
                raise RuntimeError(f"preload of {table}: {failed} of {len(bodies)} inserts failed")
            loaded += len(bodies)
            if progress is not None:
                progress(loaded)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return loaded, time.monotonic() - started
