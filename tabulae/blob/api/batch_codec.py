r"""Parse and render Blob batch (``comp=batch``) bodies, with no I/O ("Blob Batch").

A Blob batch is one ``multipart/mixed`` body of up to 256 ``application/http`` parts, each a
complete Delete Blob or Set Blob Tier request with its own headers, ``Authorization`` or SAS
query included, since every sub-request is authorized on its own. Unlike a Table ``$batch``
there is no changeset level. The parts' shared grammar and parsing are
:mod:`tabulae.http.multipart`; this module adds the Blob rules::

    batch         = preamble 1*256( delimiter(B) EOL operation ) [ close(B) epilogue ]
    operation     = ; as in tabulae.http.multipart: application/http MIME headers with an
                    ; optional Content-ID, an empty line, then the sub-request
    sub-request   = ( "DELETE" / "PUT" ) SP target SP "HTTP/1.1" EOL headers EOL [ body ]
    target        = path [ "?" query ]          ; origin form, as the SDKs write it

What Azure answers (REST reference "Blob Batch"; error codes as the live tests of the .NET and
C++ SDKs expect them, and as Azurite reproduces them):

- no ``Content-Type``: 400 ``MissingRequiredHeader``; not ``multipart/mixed`` with a boundary:
  400 ``InvalidHeaderValue`` naming ``Content-Type``;
- a body that does not parse, or that holds no sub-request: 400 ``InvalidInput``;
- more than 256 sub-requests: 400 ``ExceedsMaxBatchRequestCount``;
- sub-requests of different operations: 400 ``AllBatchSubRequestsShouldBeSameApi``;
- anything but Delete Blob and Set Blob Tier: 400 ``InvalidInput`` (assumed code).

A well-formed batch is answered 202 with one response part per sub-request, in order, each with
the sub-request's ``Content-ID``. A batch Azure refuses as a whole is also answered 202 with a
single part, without a ``Content-ID``, carrying the error: the .NET SDK's batch client reads "one
response, a 400" as the service failing the whole batch, and Azurite answers so too
(:func:`render_batch_error`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import parse_qsl, urlsplit

from tabulae.http.errors import UTF8_BOM, error_xml
from tabulae.http.multipart import (
    CRLF,
    Headers,
    SubRequest,
    delimiter,
    multipart_type,
    parse_media_type,
    parse_operation_at,
    part_spans,
    reason,
    render_fields,
)
from tabulae.model.errors import ServiceError

__all__ = [
    "MAX_BODY",
    "MAX_SUBREQUESTS",
    "BatchPart",
    "BlobBatch",
    "SubRequest",
    "check_body_length",
    "error_part",
    "parse_blob_batch",
    "render_batch_error",
    "render_blob_batch_response",
    "subrequest_kind",
    "target_parts",
]

#: "Each batch request supports a maximum of 256 subrequests."
MAX_SUBREQUESTS = 256
#: "The size of the body for a batch request cannot exceed 4MB."
MAX_BODY = 4 * 1024 * 1024
#: Parts parsed before counting: enough to tell a batch of 257 from garbage, bounded all the same.
_PARSE_CAP = 64 * MAX_SUBREQUESTS

DELETE, SET_TIER = "Delete Blob", "Set Blob Tier"


@dataclass(frozen=True, slots=True)
class BlobBatch:
    """A parsed batch: its boundary, its sub-requests in order, and their one operation."""

    boundary: str
    subrequests: tuple[SubRequest, ...]
    kind: str


@dataclass(frozen=True, slots=True)
class BatchPart:
    """One sub-response. ``headers`` are written verbatim, in order; ``reason`` defaults to the
    standard phrase (Azure writes an error's message there)."""

    status: int
    headers: Headers
    body: bytes = b""
    content_id: str | None = None
    reason: str | None = None


def check_body_length(length: int) -> None:
    """A batch body over 4 MiB is refused before it is read: 413 RequestBodyTooLarge (assumed
    code: the reference states the limit only)."""
    if length > MAX_BODY:
        raise ServiceError("RequestBodyTooLarge")


def _bad_content_type(value: str) -> ServiceError:
    return ServiceError("InvalidHeaderValue", fields=(("HeaderName", "Content-Type"), ("HeaderValue", value)))


def parse_blob_batch(content_type: str | None, body: bytes) -> BlobBatch:
    """Parse a ``comp=batch`` request body, or raise the error Azure answers for the whole batch."""
    if not content_type:
        raise ServiceError("MissingRequiredHeader", fields=(("HeaderName", "Content-Type"),))
    media, params = parse_media_type(content_type)
    boundary = params.get("boundary", "")
    if media != "multipart/mixed" or not boundary or len(boundary) > 200 or not boundary.isprintable():
        raise _bad_content_type(content_type)
    spans = part_spans(bytes(body), boundary, _PARSE_CAP)
    if not spans:
        raise ServiceError("InvalidInput", detail="Malformed batch body: no sub-request.")
    if len(spans) > MAX_SUBREQUESTS:
        raise ServiceError("ExceedsMaxBatchRequestCount")
    subrequests = tuple(parse_operation_at(body, start, end) for start, end in spans)
    kinds = {subrequest_kind(sub) for sub in subrequests}
    if len(kinds) > 1:
        raise ServiceError("AllBatchSubRequestsShouldBeSameApi")
    return BlobBatch(boundary, subrequests, kinds.pop())


def target_parts(target: str) -> tuple[str, dict[str, str]]:
    """A sub-request target's path (still percent-encoded) and its query (decoded, first wins)."""
    split = urlsplit(target)
    query: dict[str, str] = {}
    for name, value in parse_qsl(split.query, keep_blank_values=True):
        query.setdefault(name, value)
    return split.path, query


def subrequest_kind(subrequest: SubRequest) -> str:
    """Delete Blob (``DELETE``) or Set Blob Tier (``PUT ...?comp=tier``); anything else is 400."""
    _, query = target_parts(subrequest.target)
    if subrequest.method == "DELETE" and "comp" not in query:
        return DELETE
    if subrequest.method == "PUT" and query.get("comp") == "tier":
        return SET_TIER
    raise ServiceError("InvalidInput", detail="A batch may only hold Delete Blob or Set Blob Tier requests.")


# ---------------------------------------------------------------------------- rendering

_PART_HEADER = b"Content-Type: application/http\r\n"


@lru_cache(maxsize=64)
def _status_line(status: int, phrase: str | None) -> bytes:
    return f"HTTP/1.1 {status} {reason(status) if phrase is None else phrase}\r\n".encode()


def render_blob_batch_response(parts: Sequence[BatchPart], boundary: str | None = None) -> tuple[str, bytes]:
    """The 202 body: one part per sub-response, as Azure writes it ("Blob Batch" sample); return
    (Content-Type, body). A part's body, when it has one, follows an empty line."""
    name = boundary or f"batchresponse_{uuid.uuid4()}"
    opening = delimiter(name)
    pieces: list[bytes] = []
    for part in parts:
        pieces += (opening, _PART_HEADER)
        if part.content_id is not None:
            pieces.append(f"Content-ID: {part.content_id}\r\n".encode())
        pieces += (CRLF, _status_line(part.status, part.reason), render_fields(part.headers), CRLF)
        if part.body:
            pieces += (part.body, CRLF)
    pieces.append(f"--{name}--\r\n".encode())
    return multipart_type(name), b"".join(pieces)


def error_part(
    error: ServiceError,
    request_id: str,
    time_text: str,
    version: str,
    content_id: str | None = None,
) -> BatchPart:
    """A sub-response for a failed sub-request: Azure's XML error body and headers, the
    message as the reason phrase. The body starts with a byte order mark and has a line break
    after the XML declaration, as Azure wrote a sub-request's 404 ContainerNotFound for the .NET
    SDK (BlobBatchClientTests/Delete_OneFails.json, x-ms-version 2024-08-04, Content-Length 226)."""
    body = UTF8_BOM + error_xml(error, request_id, time_text, table_style=False, line_break=True)
    headers: Headers = (
        ("x-ms-error-code", error.code),
        ("x-ms-request-id", request_id),
        ("x-ms-version", version),
        ("Content-Length", str(len(body))),
        ("Content-Type", "application/xml"),
    )
    return BatchPart(error.status, headers, body, content_id, error.message)


def render_batch_error(
    error: ServiceError, request_id: str, time_text: str, version: str
) -> tuple[str, bytes]:
    """The 202 answer to a batch refused as a whole: one part, no Content-ID, the error."""
    return render_blob_batch_response([error_part(error, request_id, time_text, version)])
