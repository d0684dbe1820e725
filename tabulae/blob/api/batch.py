"""Blob Batch (``POST ?comp=batch``, ``POST /{container}?restype=container&comp=batch``): the body
read and parsed (:mod:`.batch_codec`), each sub-request run through the front-end's own pipeline,
the answers written back as one ``multipart/mixed`` body.

A sub-request is an ordinary request in every way but its transport: it is routed, admitted,
resolved, authenticated (its own ``Authorization`` header, or the SAS on its own URL) and handled
by :meth:`BlobApp.respond <tabulae.http.frontend.Frontend.respond>` exactly as if it had come on
its own connection, so no rule of Delete Blob or Set Blob Tier is written twice. What a batch
adds is only what the REST reference ("Blob Batch") says of it:

- every sub-request addresses a blob of the batch's account, and of the batch's container when
  the batch names one (``restype=container``); a body breaking this is refused as a whole
  (400 ``InvalidInput``, as for a body that does not parse: assumed code, Azurite's);
- only Delete Blob and Set Blob Tier run (``BATCHABLE``, checked on the operation the pipeline
  resolved, so a ``DELETE`` of a container is refused however its URL is spelt);
- sub-requests carry no ``x-ms-version``: they run with the batch's (:func:`adopt_version`, once
  authenticated, since the SDKs sign sub-requests without the header);
- a sub-request's path is relative to the host, which on Azure names the account: against a
  path-style endpoint (``http://127.0.0.1:10000/devstoreaccount1``) azure-storage-blob before
  12.23 (and the legacy 2.x ``batch_delete_blobs``) still writes ``DELETE /{container}/{blob}``,
  signed as ``/{account}/{container}/{blob}``, where later versions write
  ``/{account}/{container}/{blob}``. A path that does not name the batch's account is read under
  the batch's endpoint (:func:`anchor`), its signature checked over the path as sent.

Sub-requests run side by side (Azure promises no order of execution), up to ``CONCURRENCY`` at
once. The answer is 202 with one part per sub-request, in order, each with its ``Content-ID``, status
line, headers, and Azure's XML error body when it failed; a batch refused as a whole is 202 too,
with one part carrying the error (:func:`~.batch_codec.render_batch_error`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from urllib.parse import urlsplit

from tabulae.blob.api.batch_codec import (
    MAX_BODY,
    BatchPart,
    SubRequest,
    check_body_length,
    error_part,
    parse_blob_batch,
    render_batch_error,
    render_blob_batch_response,
)
from tabulae.blob.api.call import Call
from tabulae.blob.api.routing import Kind, Route
from tabulae.http.exchange import read_body
from tabulae.http.messages import Request, Response, error_time
from tabulae.http.versions import DEFAULT_VERSION
from tabulae.model.errors import ServiceError

#: What a batch may hold ("Blob Batch": Set Blob Tier for block blobs, and Delete Blob), by the
#: operations' REST names.
BATCHABLE = frozenset({"DeleteBlob", "SetBlobTier"})

#: Sub-requests of one batch under way at once (a bound on what one batch asks of the store).
CONCURRENCY = 32
#: Runs one sub-request through the front-end: its request id and its response.
RunPart = Callable[[Request], Awaitable[tuple[str, Response]]]
#: Routes a sub-request as the front-end would (raises for a URL the service lacks).
RoutePart = Callable[[Request], Route]


@dataclass(frozen=True, slots=True)
class BatchScope:
    """What a batch's sub-requests are held to: its account, its container when the batch URL
    names one, and the version they all run with."""

    account: str
    container: str | None
    version: str
    signed_path: str | None = None  # the path as sent, when :func:`anchor` moved it under the endpoint


@dataclass(slots=True)
class FailedPart(Response):
    """A sub-request's error, kept whole so its part is written as Azure writes one (the message
    as the status line's reason phrase)."""

    error: ServiceError = field(default_factory=lambda: ServiceError("InternalError"))


def check_operation(request: Request, operation: str) -> None:
    """Refuse, in a sub-request, an operation a batch may not hold (400 ``InvalidInput``)."""
    if request.batch is not None and operation not in BATCHABLE:
        raise ServiceError(
            "InvalidInput", detail="A batch may only hold Delete Blob or Set Blob Tier requests."
        )


def adopt_version(request: Request) -> None:
    """Give an authenticated sub-request the batch's ``x-ms-version`` unless it names one."""
    scope = request.batch
    if isinstance(scope, BatchScope):
        request.headers.setdefault("x-ms-version", scope.version)


def sub_request(parent: Request, sub: SubRequest, scope: BatchScope) -> Request:
    """A sub-request as a :class:`Request` of its own: its method, path, query, headers and body,
    the batch's host, scheme and client address."""
    target = sub.target
    if target.startswith("/"):
        path, _, query = target.partition("?")
    else:  # an absolute URL: only its path and query address anything
        split = urlsplit(target)
        path, query = split.path or "/", split.query
    headers: dict[str, str] = {}
    for name, value in sub.headers:
        headers[name] = f"{headers[name]},{value}" if name in headers else value
    headers.setdefault("host", parent.headers.get("host", ""))
    return Request(
        method=sub.method,
        raw_path=path,
        query_string=query,
        headers=headers,
        scheme=parent.scheme,
        client_ip=parent.client_ip,
        body=sub.body,
        body_read=True,
        batch=scope,
    )


def _routes_to(request: Request, account: str, route_part: RoutePart) -> bool:
    """Whether the sub-request, routed as the front-end would, addresses ``account`` (a path
    that does not route at all does not)."""
    try:
        return route_part(request).account == account
    except ServiceError:
        return False


def anchor(request: Request, scope: BatchScope, base_path: str, route_part: RoutePart) -> Request:
    """The sub-request read under the batch's path-style endpoint (``base_path``, the account
    segment) when its own path names no blob of the batch's account but would under that
    endpoint: the form Azure's host-style URLs make ordinary, which older Python SDKs send to
    emulators too. Its signature stays checked over the path it was sent with."""
    if not base_path or not request.raw_path.startswith("/"):
        return request
    if _routes_to(request, scope.account, route_part):
        return request
    anchored = replace(
        request, raw_path=base_path + request.raw_path, batch=replace(scope, signed_path=request.raw_path)
    )
    return anchored if _routes_to(anchored, scope.account, route_part) else request


def _check_scope(request: Request, scope: BatchScope, route_part: RoutePart) -> None:
    """A sub-request must name a blob of the batch's account (and container, when scoped). A URL
    that does not route at all is left to fail in its own part."""
    try:
        route = route_part(request)
    except ServiceError:
        return
    if route.account != scope.account or route.kind is not Kind.BLOB:
        raise ServiceError("InvalidInput", detail="A sub-request addresses no blob of this account.")
    if scope.container is not None and route.container != scope.container:
        raise ServiceError("InvalidInput", detail="A sub-request addresses another container.")


def _part(
    request: Request, response: Response, request_id: str, content_id: str | None, version: str
) -> BatchPart:
    if isinstance(response, FailedPart):
        return error_part(response.error, request_id, error_time(), version, content_id)
    headers = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in response.headers]
    headers += [("x-ms-request-id", request_id), ("x-ms-version", version)]
    client_id = request.headers.get("x-ms-client-request-id")
    if client_id is not None:
        headers.append(("x-ms-client-request-id", client_id))
    if response.body:
        headers.append(("Content-Length", str(len(response.body))))
    return BatchPart(response.status, tuple(headers), response.body, content_id)


def _multipart(content_type: str, body: bytes) -> Response:
    return Response(202, [(b"content-type", content_type.encode())], body)


async def submit_batch(call: Call, request_id: str, run: RunPart, route_part: RoutePart) -> Response:
    """Answer a Blob Batch: parse it, run each sub-request through ``run``, write the parts."""
    request, route = call.request, call.route
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit():
        check_body_length(int(declared))
    await read_body(request, call.receive, MAX_BODY, call.options.body_timeout)
    scope = BatchScope(
        route.account,
        route.container if route.kind is Kind.CONTAINER else None,
        request.headers.get("x-ms-version", DEFAULT_VERSION),
    )
    try:
        batch = parse_blob_batch(request.headers.get("content-type"), request.body)
        base_path = urlsplit(route.base).path  # "/{account}" on a path-style endpoint, else ""
        requests = [
            anchor(sub_request(request, sub, scope), scope, base_path, route_part)
            for sub in batch.subrequests
        ]
        for sub in requests:
            _check_scope(sub, scope, route_part)
    except ServiceError as error:
        return _multipart(*render_batch_error(error, request_id, error_time(), scope.version))
    answers = await _run_all(requests, run)
    parts = [
        _part(sub, response, part_id, parsed.content_id, scope.version)
        for sub, parsed, (part_id, response) in zip(requests, batch.subrequests, answers, strict=True)
    ]
    return _multipart(*render_blob_batch_response(parts))


async def _run_all(requests: list[Request], run: RunPart) -> list[tuple[str, Response]]:
    """Run the sub-requests side by side, at most :data:`CONCURRENCY` at a time, answers in
    order. Azure promises no order of execution, and writes under way together share a commit
    (SQLite's group commit), where one after another would each wait for their own."""
    if len(requests) == 1:
        return [await run(requests[0])]
    limit = asyncio.Semaphore(CONCURRENCY)

    async def one(request: Request) -> tuple[str, Response]:
        async with limit:
            return await run(request)

    return list(await asyncio.gather(*(one(request) for request in requests)))
