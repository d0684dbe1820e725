"""The queue workloads: put (durable), get+delete, peek, against Tabulae's and Azurite's Queue service.

Requests have the Python SDK's shape (azure-storage-queue 12.18: ``Accept: application/xml``,
``x-ms-version: 2026-10-06``, ``x-ms-date``, the SDK's ``<QueueMessage>`` body). The Blob/Queue
Shared Key signs the path, every query parameter and Content-Length but not the body, so:

* ``queue-put`` replays one pre-signed POST whose 1 KiB message text has a fixed length;
* ``queue-peek`` replays one pre-signed GET (``peekonly=true``);
* ``queue-get-delete`` alternates a pre-signed Get Messages (one message, 60 s) with a Delete
  Message of what it got: the id and receipt differ every time, so the delete carries a queue
  SAS (``sp=p``, made here) instead of a Shared Key, which covers neither. Its rate is messages
  deleted per second (two requests each).

The get+delete queue of its own is filled first with ``--queue-messages`` messages, the same
backlog on both servers (a queue's backlog matters to how fast it can be taken from), and must
not run dry during the run: Get Messages answers that find it empty are counted and noted.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import time
import urllib.parse
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import aiohttp
from client import Reply
from signing import ACCOUNT, ACCOUNT_KEY, http_date
from yarl import URL

API_VERSION = "2026-10-06"
PUT_QUEUE = "bench-put"
GET_DELETE_QUEUE = "bench-get-delete"  # filled with exactly --queue-messages, for both servers alike
PEEK_QUEUE = "bench-peek"
PEEK_MESSAGES = 1000  # the peeked queue's backlog, the same on both servers
MESSAGE_TEXT = "m" * 1024
BODY = (
    "<?xml version='1.0' encoding='utf-8'?>\n"
    f"<QueueMessage><MessageText>{MESSAGE_TEXT}</MessageText></QueueMessage>"
).encode()
GET_QUERY = "numofmessages=1&visibilitytimeout=60"
PEEK_QUERY = "peekonly=true&numofmessages=1"
_KEY = base64.b64decode(ACCOUNT_KEY)
_SIGNED = ("content-encoding", "content-language", "content-length", "content-md5", "content-type", "date",
           "if-modified-since", "if-match", "if-none-match", "if-unmodified-since", "range")  # fmt: skip


def _sign(text: str) -> str:
    return base64.b64encode(hmac.new(_KEY, text.encode(), hashlib.sha256).digest()).decode()


def shared_key(method: str, path: str, query: str, headers: dict[str, str]) -> str:
    """The Blob/Queue Shared Key ``Authorization`` of a request ("Authorize with Shared Key")."""
    lower = {k.lower(): v for k, v in headers.items()}
    values = []
    for name in _SIGNED:
        value = "" if name == "date" and "x-ms-date" in lower else lower.get(name, "")
        values.append("" if name == "content-length" and value == "0" else value)
    x_ms = "".join(f"{k}:{lower[k]}\n" for k in sorted(k for k in lower if k.startswith("x-ms-")))
    grouped: dict[str, list[str]] = {}
    for name, value in urllib.parse.parse_qsl(query, keep_blank_values=True):
        grouped.setdefault(name.lower(), []).append(value)
    params = "".join(f"\n{k}:{','.join(sorted(v))}" for k, v in sorted(grouped.items()))
    text = f"{method}\n" + "\n".join(values) + "\n" + x_ms + f"/{ACCOUNT}{path}" + params
    return f"SharedKey {ACCOUNT}:{_sign(text)}"


def queue_sas(queue: str, permissions: str, hours: float = 4.0) -> str:
    """A queue SAS query string ("Create a service SAS", version 2015-04-05 and later)."""
    expiry = (datetime.now(UTC) + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ")
    text = "\n".join((permissions, "", expiry, f"/queue/{ACCOUNT}/{queue}", "", "", "", API_VERSION))
    fields = {"sv": API_VERSION, "se": expiry, "sp": permissions, "sig": _sign(text)}
    return urllib.parse.urlencode(fields)


def _check_signer() -> None:
    """The worked example azure-storage-queue 12.18 signed (a Put Message); raises on drift."""
    headers = {
        "Content-Length": "121",
        "Content-Type": "application/xml",
        "x-ms-version": "2026-10-06",
        "x-ms-date": "Tue, 24 Nov 2026 21:05:36 GMT",
        "x-ms-client-request-id": "cba4dfca-e84a-11f1-8cc1-02fc00000001",
    }
    got = shared_key("POST", f"/{ACCOUNT}/myqueue/messages", "visibilitytimeout=5&messagettl=-1", headers)
    if got != f"SharedKey {ACCOUNT}:4mFdUnDbZ/GpS37lar3DejbLEGtoI2ECLaO0uZXoCao=":
        raise AssertionError("the queue Shared Key signer does not reproduce the SDK's signature")


_check_signer()


@dataclass(frozen=True)
class Raw:
    """One complete raw request (head and body), as wrk replays it."""

    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes = b""

    def text(self) -> str:
        lines = "".join(f"{name}: {value}\r\n" for name, value in self.headers)
        return f"{self.method} {self.target} HTTP/1.1\r\n{lines}\r\n" + self.body.decode()


def signed(
    host: str, method: str, path: str, query: str = "", body: bytes = b"", date: str | None = None
) -> Raw:
    """A Shared Key signed request with the SDK's headers."""
    headers = [("Host", host), ("Accept", "application/xml"), ("x-ms-version", API_VERSION)]
    headers.append(("x-ms-date", date or http_date()))
    if body:
        headers.append(("Content-Type", "application/xml"))
    headers.append(("Content-Length", str(len(body))))
    headers.append(("Authorization", shared_key(method, path, query, dict(headers))))
    return Raw(method, path + (f"?{query}" if query else ""), headers, body)


class QueueHttp:
    """Signed requests against one Queue service at ``http://host`` (setup and validation only)."""

    def __init__(self, host: str, session: aiohttp.ClientSession) -> None:
        self.host = host
        self.session = session

    async def send(self, raw: Raw) -> Reply:
        url = URL(f"http://{self.host}{raw.target}", encoded=True)
        headers = [(n, v) for n, v in raw.headers if n not in ("Host", "Content-Length")]
        for attempt in range(3):
            try:
                async with self.session.request(
                    raw.method,
                    url,
                    headers=headers,
                    data=raw.body or None,
                    skip_auto_headers=("Content-Type",),
                ) as reply:
                    return Reply(reply.status, dict(reply.headers), await reply.read(), attempt > 0)
            except (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError):
                if attempt == 2:
                    raise
                await asyncio.sleep(0.5)
        raise AssertionError("unreachable")

    async def request(self, method: str, path: str, query: str = "", body: bytes = b"") -> Reply:
        return await self.send(signed(self.host, method, f"/{ACCOUNT}{path}", query, body))

    async def create(self, queue: str) -> None:
        reply = await self.request("PUT", f"/{queue}")
        if reply.status not in (201, 204):
            raise RuntimeError(f"create queue {queue}: HTTP {reply.status} {reply.body[:300]!r}")

    async def count(self, queue: str) -> int:
        reply = await self.request("GET", f"/{queue}", "comp=metadata")
        return int(reply.header("x-ms-approximate-messages-count") or 0)

    async def fill(self, queue: str, messages: int, concurrency: int = 16) -> tuple[int, float]:
        """Put ``messages`` messages, ``concurrency`` in flight; returns (put, seconds)."""
        remaining = messages
        started = time.monotonic()

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                reply = await self.request("POST", f"/{queue}/messages", body=BODY)
                if reply.status != 201:
                    raise RuntimeError(f"put: HTTP {reply.status} {reply.body[:300]!r}")

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return messages, time.monotonic() - started

    async def ready(self) -> bool:
        reply = await self.request("GET", "/", "comp=list")
        return reply.status == 200


def between(text: bytes, start: bytes, end: bytes) -> str:
    head = text.find(start)
    if head < 0:
        return ""
    head += len(start)
    return text[head : text.find(end, head)].decode()
