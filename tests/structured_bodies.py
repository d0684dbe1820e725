"""Structured message bodies (``x-ms-structured-body``) for the Blob and DFS tests: bodies framed
by the SDK's own encoder, the request headers that name them, and hooks that record whether each
of the SDK's requests and answers was framed."""

from __future__ import annotations

from io import BytesIO
from typing import Any

from azure.storage.blob._shared.streams import StructuredMessageEncodeStream, StructuredMessageProperties

STRUCTURED = "XSM/1.0; properties=crc64"
MIB = 1024 * 1024


def framed(content: bytes, segment: int = 4 * MIB) -> bytes:
    """``content`` as the SDK frames it."""
    stream = StructuredMessageEncodeStream(
        BytesIO(content), len(content), StructuredMessageProperties.CRC64, segment_size=segment
    )
    return stream.read()


def structured_headers(content_length: int, **extra: str) -> dict[str, str]:
    return {
        "x-ms-structured-body": STRUCTURED,
        "x-ms-structured-content-length": str(content_length),
        **extra,
    }


class Exchanges:
    """The SDK's requests and responses seen by its hooks: whether each was structured."""

    def __init__(self) -> None:
        self.sent: list[str | None] = []
        self.answered: list[str | None] = []

    def request(self, request: Any) -> None:
        self.sent.append(request.http_request.headers.get("x-ms-structured-body"))

    def response(self, response: Any) -> None:
        self.answered.append(response.http_response.headers.get("x-ms-structured-body"))

    def hooks(self) -> dict[str, Any]:
        return {"raw_request_hook": self.request, "raw_response_hook": self.response}
