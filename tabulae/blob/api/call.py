"""One Blob request as its handler sees it: the service, the parsed request and route, the
SAS grant, and the body (read whole when it is a small document, streamed when it is content)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

from tabulae.blob.api.headers import bad_header, conditions
from tabulae.blob.api.routing import Route
from tabulae.blob.api.sas import BlobGrant
from tabulae.blob.rules import structured
from tabulae.blob.rules.checksums import decode_digest
from tabulae.blob.rules.conditions import Conditions
from tabulae.blob.rules.leases import parse_lease_id
from tabulae.blob.service import BlobService, Upload
from tabulae.http.exchange import read_body
from tabulae.http.frontend import Call as FrontendCall
from tabulae.http.options import FrontendOptions
from tabulae.http.streaming import body_chunks
from tabulae.http.versions import DEFAULT_VERSION
from tabulae.model.blobs import BlobKey
from tabulae.model.errors import ServiceError


@dataclass(slots=True)
class Call(FrontendCall[BlobService, Route]):
    """Every handler's :class:`~tabulae.http.frontend.Call`, with what Blob handlers need besides:
    the body's channel (content is streamed from it), the front-end's limits and the SAS grant."""

    receive: Any
    options: FrontendOptions
    grant: BlobGrant | None = None
    echo: tuple[tuple[bytes, bytes], ...] = ()  # x-ms-structured-body of a structured upload, answered back

    @property
    def key(self) -> BlobKey:
        return BlobKey(self.route.account, self.route.container, self.route.blob)

    def create_conditions(self) -> Conditions:
        """The request's conditions for a write that makes the blob anew (Put Blob, Put Block
        List, a copy onto it, Put Blob From URL): a SAS that may create blobs but not write them
        ("c" without "w") may not replace one (``create_only``: 403 UnauthorizedBlobOverwrite)."""
        found = conditions(self.request.headers)
        if self.grant is not None and self.grant.create_only:
            return replace(found, create_only=True)
        return found

    @property
    def version(self) -> str:
        return self.request.headers.get("x-ms-version", DEFAULT_VERSION)

    @property
    def lease_id(self) -> str | None:
        return parse_lease_id(self.request.headers.get("x-ms-lease-id"), "x-ms-lease-id")

    async def document(self) -> bytes:
        """A body that is a small document (block list, ACL, properties): read whole, capped."""
        await read_body(self.request, self.receive, self.options.max_body_bytes, self.options.body_timeout)
        return self.request.body

    def upload(self, limit: int) -> Upload:
        """The body as content to stream: its length is required (411 without one) and capped at
        ``limit`` (413 past it); Content-MD5 and x-ms-content-crc64 come along to be checked. A
        structured body (``x-ms-structured-body``) is taken apart as it streams, and ``limit``
        is its content's (blob/rules/structured.py)."""
        headers = self.request.headers
        declared = headers.get("content-length")
        if declared is None:
            raise ServiceError("MissingContentLengthHeader")
        if not declared.isdigit():
            raise bad_header("Content-Length", declared)
        length = content = int(declared)
        framing = headers.get(structured.HEADER_NAME)
        if framing is not None and structured.wanted(framing, self.version):
            content = structured.content_length(headers.get(structured.LENGTH_HEADER_NAME), length)
        else:
            framing = None
        if content > limit:
            raise ServiceError(
                "RequestBodyTooLarge",
                "The request body is too large and exceeds the maximum permissible limit.",
                fields=(("MaxLimit", str(limit)),),
            )
        md5 = decode_digest(headers.get("content-md5"), 16, "Content-MD5")
        crc = decode_digest(headers.get("x-ms-content-crc64"), 8, "x-ms-content-crc64")
        if md5 is not None and crc is not None:
            raise ServiceError("BothCrc64AndMd5HeaderPresent")
        chunks = body_chunks(self.request, self.receive, self.options.body_timeout) if length else _empty()
        if framing is None:
            return Upload(chunks, length, md5, crc)
        self.echo = ((structured.HEADER_NAME.encode(), framing.encode()),)
        return Upload(structured.deframe(chunks, length, content), content, md5, crc)


async def _empty() -> AsyncIterator[bytes]:
    return
    yield b""  # an async generator that yields nothing
