"""The ceiling: a no-op app that answers every request with one fixed 1 KiB entity.

No routing, no authentication, no storage: what is left is the HTTP server and the smallest
possible application call, so its rate is the most any Python request path can reach on this
machine with the same server stack, workers and client. compare.py runs it in the same run as
Tabulae and prints Tabulae / ceiling for the read workloads.

The answer carries the headers a point read of Tabulae carries (content type, ETag, request id,
version, OData headers) and the entity body Tabulae renders for the benchmark's entities, so the
bytes on the wire are the same size.

Run as ``python benchmarks/ceiling.py --server granian-rsgi --workers 2 --port N``; ``--server``
is ``granian-rsgi``, ``granian-asgi`` or ``uvicorn`` (uvloop and httptools, as Tabulae runs).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

SERVERS = ("granian-rsgi", "granian-asgi", "uvicorn")


def _entity() -> bytes:
    """A point read's body: the benchmark's 1 KiB entity in minimal metadata, with its timestamp."""
    payload = {
        "odata.metadata": "http://127.0.0.1:10002/devstoreaccount1/$metadata#bench/@Element",
        "odata.etag": "W/\"datetime'2026-11-26T17%3A00%3A00.1234567Z'\"",
        "PartitionKey": "p000",
        "RowKey": "r000000",
        "Timestamp": "2026-11-26T17:00:00.1234567Z",
        "tag": "hay",
        "n": 7,
        "ratio": 0.5,
        "flag": True,
        "payload": "x" * 770,
    }
    return json.dumps(payload, separators=(",", ":")).encode()


BODY = _entity()
HEADERS = [
    ("content-type", "application/json;odata=minimalmetadata;streaming=true;charset=utf-8"),
    ("content-length", str(len(BODY))),
    ("etag", "W/\"datetime'2026-11-26T17%3A00%3A00.1234567Z'\""),
    ("x-ms-request-id", "00000000-0000-0000-0000-000000000000"),
    ("x-ms-version", "2019-02-02"),
    ("x-content-type-options", "nosniff"),
    ("cache-control", "no-cache"),
    ("date", "Thu, 26 Nov 2026 17:00:00 GMT"),
]
_ASGI_START = {
    "type": "http.response.start",
    "status": 200,
    "headers": [(k.encode(), v.encode()) for k, v in HEADERS],
}
_ASGI_BODY = {"type": "http.response.body", "body": BODY}


async def asgi_app(scope: dict[str, Any], receive: Callable[[], Awaitable[Any]], send: Any) -> None:
    """The ASGI form (uvicorn, granian's ASGI interface); lifespan events are acknowledged."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    await send(_ASGI_START)
    await send(_ASGI_BODY)


async def rsgi_app(scope: Any, protocol: Any) -> None:
    """The RSGI form (granian's own interface): one call answers with headers and body."""
    protocol.response_bytes(200, HEADERS, BODY)


def main(argv: list[str] | None = None) -> None:
    """Serve the ceiling app until SIGTERM."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--server", choices=SERVERS, default="granian-rsgi")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    if args.server == "uvicorn":
        import uvicorn

        uvicorn.run(
            "ceiling:asgi_app", host=args.host, port=args.port, workers=args.workers, loop="uvloop",
            http="httptools", access_log=False, log_level="warning", server_header=False,
            date_header=False, lifespan="on",
        )  # fmt: skip
        return
    from granian.constants import Interfaces
    from granian.server import Server

    rsgi = args.server == "granian-rsgi"
    Server(
        "ceiling:rsgi_app" if rsgi else "ceiling:asgi_app",
        address=args.host,
        port=args.port,
        interface=Interfaces.RSGI if rsgi else Interfaces.ASGI,
        workers=args.workers,
        loop="uvloop",
        log_enabled=False,
    ).serve()


def best_available() -> str:
    """The fastest stack installed here: granian's RSGI interface when granian is, else uvicorn."""
    try:
        import granian  # noqa: F401
    except ImportError:
        return "uvicorn"
    return "granian-rsgi"


if __name__ == "__main__":
    main()
