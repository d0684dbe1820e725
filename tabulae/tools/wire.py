"""Table requests sent through the official SDK's pipeline, with payloads the tools build themselves.

The data tools use Microsoft's ``azure-data-tables`` for what makes them work against real Azure:
endpoints, connection strings, Shared Key and SAS signing, the transport. Its entity layer is not
used for bulk data (``benchmarks/datatools.py`` measures why): ``submit_transaction`` builds and
parses each multipart batch with the standard library's e-mail package, and ``list_entities``
converts every property into Python objects and back, each far below the tools' targets. So
the requests of the bulk paths, Query Entities pages and ``$batch`` bodies, are written here and
sent with the SDK client's own ``send_request``, the request builder its batches use too: its
policies sign them as they sign the SDK's own requests.

Entities travel in the service's JSON form (see :mod:`tabulae.tools.formats`), which is exact
for every Edm type: they are never converted to Python values on the way through.
"""

from __future__ import annotations

import random
import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote

import orjson
from azure.core.exceptions import HttpResponseError, ServiceRequestError, ServiceResponseError
from azure.core.rest import HttpRequest, HttpResponse
from azure.data.tables import TableClient

from tabulae.tools.failures import Failure

T = TypeVar("T")
ACCEPT = "application/json;odata=minimalmetadata"
BATCH_OPERATIONS = 100  # an entity group transaction holds at most 100 operations
BATCH_BYTES = 4 * 1024 * 1024 - 64 * 1024  # its body at most 4 MiB (with room for the framing)
MAX_PAGE = 1000
RETRIES = 10
BACKOFF_FIRST = 0.25  # seconds before the second try, doubling up to BACKOFF_CAP, with jitter
BACKOFF_CAP = 20.0

_STATUS_LINE = re.compile(rb"HTTP/1\.1 (\d{3})")
_INDEX = re.compile(r"^(\d+):")


class RefusedRequest(Failure):
    """A request the service refused: HTTP status, Azure error code and message (and, for a
    batch, the index of the operation that failed). ``transient`` errors are worth retrying."""

    def __init__(self, status: int, code: str, message: str, index: int | None = None) -> None:
        super().__init__(code or f"Http{status}", message)
        self.http_status = status  # (``status`` is the exit status of a Failure)
        self.index = index

    @property
    def transient(self) -> bool:
        """500 and 503 (``ServerBusy``, ``OperationTimedOut``, ``InternalError``) pass; so may 408/429."""
        return self.http_status in (408, 429, 500, 502, 503, 504)


def transient(error: Exception) -> bool:
    """Worth trying again: no answer at all, or a status the service uses for passing trouble."""
    if isinstance(error, (ServiceRequestError, ServiceResponseError)):
        return True
    if isinstance(error, RefusedRequest):
        return error.transient
    return isinstance(error, HttpResponseError) and error.status_code in (408, 429, 500, 502, 503, 504)


def with_retries(
    call: Callable[[], T],
    on_retry: Callable[[], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    reached: Callable[[], bool] = lambda: True,
) -> T:
    """``call()``, tried again after a transient failure with exponential back-off and jitter
    (0.25 s doubling to 20 s, ``RETRIES`` tries in all). Only for idempotent work: reads, upserts.

    A connection that cannot be made is tried again only once the server has answered in this
    run (``reached``): one that was never reached is most likely not there at all (a wrong port,
    not started), and a command should say so at once rather than after a minute of back-off."""
    for attempt in range(RETRIES):
        try:
            return call()
        except Exception as error:
            unreached = isinstance(error, ServiceRequestError) and not reached()
            if unreached or not transient(error) or attempt == RETRIES - 1:
                raise
        if on_retry is not None:
            on_retry()
        sleep(min(BACKOFF_CAP, BACKOFF_FIRST * 2**attempt) * random.uniform(0.5, 1.0))
    raise AssertionError("unreachable")


def _error(status: int, body: bytes) -> RefusedRequest:
    """The error of a JSON (or XML) error body, as Azure writes them."""
    code, message = "", body[:200].decode("utf-8", "replace")
    try:
        data = orjson.loads(body)
        error = data.get("odata.error") or {}
        code = error.get("code", "")
        message = (error.get("message") or {}).get("value", "")
    except (orjson.JSONDecodeError, AttributeError):
        found = re.search(rb"<Code>([^<]*)</Code>", body)
        if found:
            code = found.group(1).decode("utf-8", "replace")
    index = None
    head = _INDEX.match(message)
    if head:
        index = int(head.group(1))
    return RefusedRequest(status, code, message.split("\n", 1)[0], index)


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.~-]*")  # what percent-encoding leaves as it is


def _key(value: str) -> str:
    """A key inside ``(PartitionKey='…',RowKey='…')``: quotes doubled, then percent-encoded
    (most keys need neither, and ``quote`` costs more than the rest of an operation's framing)."""
    if _PLAIN_KEY.fullmatch(value):
        return value
    return quote(value.replace("'", "''"), safe="")


@dataclass(slots=True)
class Page:
    entities: list[dict[str, Any]]
    next_keys: tuple[str, str] | None  # the continuation (NextPartitionKey, NextRowKey)


class TableWire:
    """One table, reached through a :class:`TableClient`'s pipeline."""

    def __init__(self, client: TableClient, on_retry: Callable[[], None] | None = None) -> None:
        self.client = client
        self.on_retry = on_retry  # told of every retried read
        self.table = client.table_name
        self.account_url = client.url.split("?", 1)[0].rstrip("/")
        self._version = client.api_version
        self.reached = False  # whether the server has answered yet (see with_retries)

    def _send(
        self, method: str, path: str, *, headers: dict[str, str] | None = None, body: bytes | None = None
    ) -> HttpResponse:
        """One request through the SDK client's pipeline (its signing, transport and headers).

        ``TableClient._client`` is the generated client the SDK's own batches are sent with; it is
        private to the SDK, so the tests exercise this path against a real server.
        """
        request = HttpRequest(
            method,
            f"{self.account_url}/{path}",
            headers={
                "x-ms-version": self._version,
                "DataServiceVersion": "3.0",
                "Accept": ACCEPT,
                **(headers or {}),
            },
            content=body,
        )
        response: HttpResponse = self.client._client.send_request(request, stream=True)
        self.reached = True
        response.read()
        return response

    def retrying(self, call: Callable[[], T]) -> T:
        """``call()`` through :func:`with_retries`, told whether this table's server has answered."""
        return with_retries(call, self.on_retry, reached=lambda: self.reached)

    def _entity_path(self, pk: str, rk: str) -> str:
        return f"{quote(self.table)}(PartitionKey='{_key(pk)}',RowKey='{_key(rk)}')"

    def _check(self, response: HttpResponse, *expected: int) -> None:
        if response.status_code not in expected:
            raise _error(response.status_code, response.content)

    # --------------------------------------------------------------------------------- reads

    def pages(
        self,
        filter_text: str | None = None,
        select: str | None = None,
        top: int | None = None,
        start: tuple[str, str] | None = None,
    ) -> Iterator[Page]:
        """Query Entities, page by page from ``start`` (a continuation), at most ``top`` in all."""
        remaining = top
        keys = start
        while True:
            params = [f"$top={min(MAX_PAGE, remaining) if remaining is not None else MAX_PAGE}"]
            if filter_text:
                params.append("$filter=" + quote(filter_text, safe=""))
            if select:
                params.append("$select=" + quote(select, safe=","))
            if keys is not None:
                params.append("NextPartitionKey=" + quote(keys[0], safe=""))
                params.append("NextRowKey=" + quote(keys[1], safe=""))
            path = f"{quote(self.table)}()?" + "&".join(params)
            response = self.retrying(lambda path=path: self._read(path))  # type: ignore[misc]
            entities = orjson.loads(response.content)["value"]
            next_pk = response.headers.get("x-ms-continuation-NextPartitionKey")
            next_rk = response.headers.get("x-ms-continuation-NextRowKey")
            keys = (next_pk, next_rk) if next_pk and next_rk else None
            if remaining is not None:
                entities = entities[:remaining]
                remaining -= len(entities)
                if remaining <= 0:
                    keys = None
            yield Page(entities, keys)
            if keys is None:
                return

    def _read(self, path: str) -> HttpResponse:
        response = self._send("GET", path)
        self._check(response, 200)
        return response

    def get(self, pk: str, rk: str) -> dict[str, Any]:
        response = self.retrying(lambda: self._read(self._entity_path(pk, rk)))
        entity: dict[str, Any] = orjson.loads(response.content)
        return entity

    # -------------------------------------------------------------------------------- writes

    def write(self, entity: dict[str, Any], mode: str, etag: str | None = None) -> str:
        """Insert (``insert``), Insert Or Replace / Update (``replace``), Insert Or Merge / Merge
        (``merge``); with ``etag``, only if the stored entity still has it. Returns the new ETag."""
        body = orjson.dumps(entity)
        headers = {"Content-Type": "application/json", "Prefer": "return-no-content"}
        if mode == "insert":
            response = self._send("POST", quote(self.table), headers=headers, body=body)
            self._check(response, 201, 204)
        else:
            if etag:
                headers["If-Match"] = etag
            method = "MERGE" if mode == "merge" else "PUT"
            path = self._entity_path(entity["PartitionKey"], entity["RowKey"])
            response = self._send(method, path, headers=headers, body=body)
            self._check(response, 204)
        return str(response.headers.get("etag", ""))

    def delete(self, pk: str, rk: str, etag: str = "*") -> None:
        self._check(self._send("DELETE", self._entity_path(pk, rk), headers={"If-Match": etag}), 204)

    def upsert_batch(self, bodies: list[tuple[str, str, bytes]]) -> None:
        """One entity group transaction of Insert Or Replace operations: ``(pk, rk, json body)``
        of one partition, at most 100. All are applied or none; a failure raises
        :class:`RefusedRequest` with the index of the operation the service refused."""
        batch = f"batch_{uuid.uuid4()}"
        changeset = f"changeset_{uuid.uuid4()}"
        head = f"--{batch}\r\nContent-Type: multipart/mixed; boundary={changeset}\r\n\r\n".encode()
        parts = [head]
        prefix = f"{self.account_url}/{quote(self.table)}"
        opening = (
            f"--{changeset}\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"
        )
        for pk, rk, body in bodies:
            parts.append(
                (
                    f"{opening}PUT {prefix}(PartitionKey='{_key(pk)}',RowKey='{_key(rk)}') HTTP/1.1\r\n"
                    f"Content-Type: application/json\r\nAccept: {ACCEPT}\r\nPrefer: return-no-content\r\n"
                    f"DataServiceVersion: 3.0;\r\nContent-Length: {len(body)}\r\n\r\n"
                ).encode()
            )
            parts.append(body)
            parts.append(b"\r\n")
        parts.append(f"--{changeset}--\r\n--{batch}--\r\n".encode())
        response = self._send(
            "POST",
            "$batch",
            headers={
                "Content-Type": f"multipart/mixed; boundary={batch}",
                "MaxDataServiceVersion": "3.0;NetFx",
            },
            body=b"".join(parts),
        )
        self._check(response, 202)
        content = response.content
        statuses = _STATUS_LINE.findall(content)
        failed = next((int(s) for s in statuses if not 200 <= int(s) < 300), None)
        if failed is not None or not statuses:
            start = content.find(b"{")
            error = _error(failed or 500, content[start : content.rfind(b"}") + 1] if start >= 0 else content)
            raise error
