"""The ASGI application of a worker process: every service of the account behind one callable.

A worker listens on each service's port (Table 10002 and Queue 10001 by default) and this
gateway hands a request to the front-end of the port it arrived on. It also owns what is not any
one service's: the lifespan (the composition root's ``start`` opens the stores and builds the
front-ends, in the serving process, on its event loop), ``GET /metrics`` on the Table port (the
first service's when there is no Table service; ``table.api.metrics`` says who may read it), and the
apps under ``/-/`` (console, admin).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("tabulae")

AsgiApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


@dataclass(slots=True)
class Mounts:
    """What ``start`` built: a front-end per port, the metrics exporter, the apps under ``/-/``
    (not part of any Azure API; account names cannot contain ``-``, so ``/-/`` never clashes
    with an account) by path prefix, and how to close it all."""

    by_port: dict[int, AsgiApp]
    metrics: AsgiApp  # GET /metrics, on metrics_port only
    close: Callable[[], Awaitable[None]]
    extras: dict[str, AsgiApp] = field(default_factory=dict)  # e.g. "/-/console" -> the console
    metrics_port: int | None = None  # the Table port (else the first service's)
    volume: Any = None  # a storage.volume.Volume: /-/ready says when it is full


class Gateway:
    """Dispatch by local port; ``/metrics`` on one port."""

    def __init__(self, start: Callable[[], Awaitable[Mounts]]) -> None:
        self._start = start
        self.mounts: Mounts | None = None

    async def startup(self) -> None:
        if self.mounts is None:
            self.mounts = await self._start()

    async def shutdown(self) -> None:
        if self.mounts is not None:
            mounts, self.mounts = self.mounts, None
            await mounts.close()

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.startup()
                except Exception as exc:  # reported to uvicorn, which exits
                    log.error("start-up failed: %s", exc)
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await self._lifespan(receive, send)
            return
        mounts = self.mounts
        if kind != "http":
            return
        path = scope["path"]
        if path in _PROBES:
            full = mounts is not None and mounts.volume is not None and mounts.volume.still_full(probe=True)
            await _probe(path, mounts is not None, scope, send, full=full)
            return
        if mounts is None:
            return
        if path.startswith("/-/"):
            await self._extra(mounts, scope, receive, send)
            return
        server = scope.get("server")
        port = server[1] if server else None
        app = mounts.by_port.get(port) if port is not None else None
        if app is None:  # a socket handed over without a known port (tests, unix sockets)
            app = next(iter(mounts.by_port.values()))
            port = mounts.metrics_port
        if path == "/metrics" and scope["method"] == "GET" and port == mounts.metrics_port:
            app = mounts.metrics
        await app(scope, receive, send)

    @staticmethod
    async def _extra(mounts: Mounts, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """A request under ``/-/``: the app whose prefix it falls under, else 404."""
        path = scope["path"]
        for prefix, app in mounts.extras.items():
            if path == prefix or path.startswith(prefix + "/"):
                await app(scope, receive, send)
                return
        body = b"Not found"
        headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", b"9")]
        await send({"type": "http.response.start", "status": 404, "headers": headers})
        await send({"type": "http.response.body", "body": body})


# Orchestrators' probes, unauthenticated and answered before anything else on every port: alive
# (the process answers) and ready (the stores are open and their schema migrated, which is what
# the worker's start-up does before it serves). A full data volume is reported by ready, still
# with 200: the server answers reads and the deletes that make room, and an orchestrator that
# took it out of service would leave no way to make any.
_PROBES = ("/-/health", "/-/ready")
_FULL = b'{"status":"ok","volume":"full","writes":"refused until space is freed"}'


async def _probe(path: str, ready: bool, scope: dict[str, Any], send: Any, *, full: bool = False) -> None:
    ok = ready or path == "/-/health"
    body = b'{"status":"ok"}' if ok else b'{"status":"starting"}'
    if full and ok and path == "/-/ready":
        body = _FULL
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
    ]
    await send({"type": "http.response.start", "status": 200 if ok else 503, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})
