r"""Parse and render OData ``$batch`` multipart bodies, with no I/O (REST reference: "Performing
entity group transactions").

An entity group transaction arrives as one ``multipart/mixed`` body wrapping a changeset, itself
``multipart/mixed``, whose parts are complete HTTP/1.1 requests. Every SDK writes this body a
little differently, so the parser follows RFC 2046 but tolerates what real clients send. The
renderer writes the exact bytes Azure answers with, because the SDKs parse them in fragile ways:
Python with ``email`` plus
``http.client``, JavaScript by splitting on the literal ``--changesetresponse_``.

The module is pure: bytes in, dataclasses out (and back). Every malformed input raises
``ServiceError("InvalidInput")`` and nothing else, so the HTTP layer can answer 400 without
guarding against stray exceptions. The 100-operation and same-partition rules are not checked
here; the table layer reports them with the index of the offending operation.

Grammar accepted by :func:`parse_batch` (ABNF-like; ``EOL = CRLF / LF``; ``B`` is the boundary
from the ``Content-Type`` parameter, ``C`` the changeset's)::

    content-type  = "multipart/mixed" *( ";" parameter )   ; case-insensitive, needs "boundary"
    parameter     = name "=" ( token / quoted-string )      ; unknown ones (charset) ignored
    batch-body    = preamble 1*( delimiter(B) EOL part(B) ) [ close(B) epilogue ]
    delimiter(X)  = ( start-of-body / EOL ) "--" X *WSP      ; the EOL belongs to the delimiter
    close(X)      = ( start-of-body / EOL ) "--" X "--" *WSP ( EOL / end-of-body )
    ; a body may stop without close(B); an empty last part (``--B EOL`` at the end) is dropped
    ; exactly one part(B) is allowed, and it is either a changeset or a bare GET:
    part(B)       = changeset / operation
    changeset     = headers(ct=multipart/mixed; boundary=C) EOL changeset-body
    changeset-body= preamble 1*( delimiter(C) EOL operation ) [ close(C) epilogue ]
    operation     = headers(ct=application/http) EOL http-request
    headers(...)  = *( field-name ":" value EOL *( WSP continuation EOL ) )
                    ; names case-insensitive; Content-ID optional;
                    ; Content-Transfer-Encoding absent, binary, 7bit or 8bit
    http-request  = *EOL method 1*WSP target 1*WSP "HTTP/1." DIGIT *WSP EOL
                    *( field-name ":" value EOL ) [ EOL body ]
    body          = *OCTET    ; leading/trailing SP, HTAB, CR and LF are stripped

Header bytes must be UTF-8. Operations inside a changeset must not be GET; a bare part must be
a GET. More than :data:`MAX_PARTS` parts at either level is refused, so parsing
stays linear in the size of the body.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from http import HTTPStatus

from tabulae.http.multipart import CRLF as _CRLF
from tabulae.http.multipart import HTTP_PART_HEADERS as _HTTP_PART_HEADERS
from tabulae.http.multipart import Headers, SubRequest, header_value
from tabulae.http.multipart import close as _close
from tabulae.http.multipart import content_id_line as _content_id_line
from tabulae.http.multipart import delimiter as _delimiter
from tabulae.http.multipart import invalid as _invalid
from tabulae.http.multipart import multipart_type as _multipart_type
from tabulae.http.multipart import parse_media_type as _parse_media_type
from tabulae.http.multipart import parse_operation as _parse_operation
from tabulae.http.multipart import parse_operation_at as _parse_operation_at
from tabulae.http.multipart import part_spans as _part_spans
from tabulae.http.multipart import reason as _reason
from tabulae.http.multipart import render_fields as _render_fields
from tabulae.http.multipart import require_boundary as _require_boundary
from tabulae.http.multipart import split_mime_part as _split_mime_part
from tabulae.http.multipart import split_multipart as _split_multipart

__all__ = [
    "MAX_PARTS",
    "BatchRequest",
    "SubRequest",
    "SubResponse",
    "parse_batch",
    "render_batch_request",
    "render_batch_response",
]

#: Parts allowed at one multipart level. Azure caps a changeset at 100 operations; the table
#: layer reports that with an index, so this cap only stops pathological bodies early.
MAX_PARTS = 1000


@dataclass(frozen=True, slots=True)
class BatchRequest:
    """A parsed ``$batch`` body: a changeset of writes, or a single bare GET.

    ``changeset_boundary`` is None exactly when the batch is one GET outside any changeset.
    """

    batch_boundary: str
    changeset_boundary: str | None
    operations: tuple[SubRequest, ...]


@dataclass(slots=True)
class SubResponse:
    """One operation's answer. ``headers`` are written verbatim (write ``ETag``, not ``etag``).

    ``tail`` holds the headers written after ``headers`` that differ from part to part (an
    inserted entity's ``Location``): ``headers`` is then the same tuple for many parts, and is
    rendered once for all of them.
    """

    status: int
    headers: Headers
    body: bytes
    content_id: str | None = None
    tail: Headers = ()


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------


def parse_batch(content_type: str, body: bytes) -> BatchRequest:
    """Parse a ``$batch`` request body into its operations.

    Raises ``ServiceError("InvalidInput")`` for anything that is not a well-formed batch of one
    changeset (of non-GET operations) or one bare GET.
    """
    media, params = _parse_media_type(content_type)
    batch_boundary = _require_boundary(media, params)
    parts = _split_multipart(bytes(body), batch_boundary, MAX_PARTS)
    if len(parts) != 1:
        raise _invalid("a batch must hold exactly one changeset or one GET")
    headers, payload = _split_mime_part(parts[0])
    media, params = _parse_media_type(header_value(headers, "content-type") or "")
    if media == "multipart/mixed":
        changeset_boundary = _require_boundary(media, params)
        operations = _parse_changeset(payload, changeset_boundary)
        return BatchRequest(batch_boundary, changeset_boundary, operations)
    operation = _parse_operation(headers, payload)
    if operation.method != "GET":
        raise _invalid("only a GET may appear outside a changeset")
    return BatchRequest(batch_boundary, None, (operation,))


def _parse_changeset(payload: bytes, boundary: str) -> tuple[SubRequest, ...]:
    """Parse a changeset's parts; each must be an ``application/http`` non-GET request.

    A changeset delimiter may follow a request's body on the same line: the C++ SDK
    (azure-data-tables-cpp 1.0.0-beta.5) writes ``{...}--changeset_...`` after every operation
    but the last, and Azure reads both operations, as its recordings TransactionCreateOK-key
    (202, two 204s) and TransactionCreateFail-key (InvalidDuplicateRow at index 1) show
    (x-ms-version 2019-02-02)."""
    spans = _part_spans(payload, boundary, MAX_PARTS, inline=True)
    if not spans:
        raise _invalid("the changeset is empty")
    operations = tuple([_parse_operation_at(payload, start, end) for start, end in spans])
    if any(op.method == "GET" for op in operations):
        raise _invalid("a GET cannot be part of a changeset")
    return operations


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------


def render_batch_request(batch: BatchRequest) -> tuple[str, bytes]:
    """Write a batch the way azure-data-tables does; return (Content-Type, body).

    Header names are written as stored, so a parsed request comes back lower-cased. Used by
    tests and tools that replay requests; ``parse_batch(*render_batch_request(b)) == b``.
    """
    outer = batch.batch_boundary
    if batch.changeset_boundary is None:
        parts = b"".join(_delimiter(outer) + _render_request_part(op) for op in batch.operations)
        return _multipart_type(outer), parts + _close(outer)
    inner = batch.changeset_boundary
    body = b"".join(
        [
            _delimiter(outer),
            _changeset_header(inner),
            *(_delimiter(inner) + _render_request_part(op) for op in batch.operations),
            _close(inner),
            _CRLF,
            _close(outer),
        ]
    )
    return _multipart_type(outer), body


def _render_request_part(op: SubRequest) -> bytes:
    """One operation's MIME part, from its headers to the CRLF that opens the next delimiter."""
    request_line = f"{op.method} {op.target} HTTP/1.1\r\n".encode()
    return (
        _HTTP_PART_HEADERS
        + _content_id_line(op.content_id)
        + _CRLF
        + request_line
        + _render_fields(op.headers)
        + _CRLF
        + op.body
        + _CRLF
    )


def render_batch_response(
    parts: Sequence[SubResponse],
    *,
    batch_boundary: str | None = None,
    changeset_boundary: str | None = None,
    in_changeset: bool | None = None,
) -> tuple[str, bytes]:
    """Write a batch response body as Azure does; return (Content-Type, body).

    Boundaries are full boundary strings; by default ``batchresponse_<uuid4>`` and
    ``changesetresponse_<uuid4>`` (the JS SDK splits on that prefix). Parts go inside a
    changeset, except when ``in_changeset`` is False or, by default, when the only part is a
    ``200`` answer (a bare GET batch, "Performing entity group transactions"): writes never answer 200. Pass
    ``in_changeset=False`` for a failed bare GET, whose status alone cannot tell it apart.
    """
    outer = batch_boundary or f"batchresponse_{uuid.uuid4()}"
    if in_changeset is None:
        in_changeset = not (len(parts) == 1 and parts[0].status == HTTPStatus.OK)
    pieces: list[bytes] = []
    if not in_changeset:
        _render_response_parts(parts, _delimiter(outer), pieces)
        pieces.append(_close(outer))
        return _multipart_type(outer), b"".join(pieces)
    inner = changeset_boundary or f"changesetresponse_{uuid.uuid4()}"
    pieces += (_delimiter(outer), _changeset_header(inner))
    _render_response_parts(parts, _delimiter(inner), pieces)
    pieces += (_close(inner), _close(outer))
    return _multipart_type(outer), b"".join(pieces)


@lru_cache(maxsize=64)
def _part_start(status: int) -> bytes:
    """A response part's MIME headers, the empty line and the status line."""
    return _HTTP_PART_HEADERS + _CRLF + f"HTTP/1.1 {status} {_reason(status)}\r\n".encode()


def _render_response_parts(parts: Sequence[SubResponse], delimiter: bytes, pieces: list[bytes]) -> None:
    """Append each part, after its delimiter, to ``pieces`` (joined once for the whole body):
    status line, ``Content-ID`` first, headers, body, final CRLF. A header tuple that many
    parts share is rendered once."""
    blocks: dict[int, bytes] = {}  # id() of a header tuple -> its lines; the parts keep it alive
    for part in parts:
        pieces += (delimiter, _part_start(part.status))
        if part.content_id is not None:
            pieces.append(f"Content-ID: {part.content_id}\r\n".encode())
        block = blocks.get(id(part.headers))
        if block is None:
            block = blocks[id(part.headers)] = _render_fields(part.headers)
        pieces.append(block)
        for name, value in part.tail:
            pieces.append(f"{name}: {value}\r\n".encode())
        pieces += (_CRLF, part.body, _CRLF)


def _changeset_header(boundary: str) -> bytes:
    """The header block of the batch part that wraps the changeset."""
    return f"Content-Type: {_multipart_type(boundary)}\r\n\r\n".encode()
