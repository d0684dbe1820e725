r"""Parse and render OData ``$batch`` multipart bodies, with no I/O (REST reference: "Performing
entity group transactions").

An entity group transaction arrives as one ``multipart/mixed`` body wrapping a changeset, itself
``multipart/mixed``, whose parts are complete HTTP/1.1 requests. Every SDK writes this body a
little differently, so the parser follows RFC 2046 but tolerates what real clients send. The
renderer writes the exact bytes Azure answers with, because the SDKs parse them in fragile ways:
Python with ``email`` plus
``http.client``, JavaScript by splitting on the literal ``--changesetresponse_``.

The module is pure: bytes in, dataclasses out (and back). Every malformed input raises
``TableError("InvalidInput")`` and nothing else, so the HTTP layer can answer 400 without
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

import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from http import HTTPStatus

from tabulae.model.errors import TableError

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

#: RFC 2046 limits boundaries to 70 characters; accept more, but not unbounded.
_MAX_BOUNDARY = 200

Headers = tuple[tuple[str, str], ...]


@dataclass(slots=True)
class SubRequest:
    """One operation of a batch: an HTTP request carried inside a MIME part.

    ``target`` is the request-line target exactly as sent (absolute URL or origin-form path);
    resolving it is the router's job. Header names are lower-cased and values stripped so that
    lookups do not depend on the client's spelling. ``content_id`` is the MIME part's
    ``Content-ID``, echoed in the response part when present.
    """

    method: str
    target: str
    headers: Headers
    body: bytes
    content_id: str | None


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

_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_TOKEN_RE = re.compile(_TOKEN)
_REQUEST_LINE_RE = re.compile(rf"({_TOKEN})[ \t]+(\S+)[ \t]+HTTP/1\.[0-9][ \t]*")
_LINE_SPLIT_RE = re.compile(r"\r?\n")
# Control characters (tab aside) anywhere in a header block, but for the CRLF or LF line breaks.
_FORBIDDEN_HEAD_CHARS_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\r(?!\n)")
_BODY_WHITESPACE = b" \t\r\n"
_EOL_BYTES = b"\r\n"
_CR = ord("\r")
_BINARY_ENCODINGS = frozenset({"binary", "7bit", "8bit"})


def _invalid(reason: str) -> TableError:
    """Build the one error this module raises; ``reason`` only helps whoever reads the logs."""
    return TableError("InvalidInput", detail=f"Malformed batch body: {reason}.")


def parse_batch(content_type: str, body: bytes) -> BatchRequest:
    """Parse a ``$batch`` request body into its operations.

    Raises ``TableError("InvalidInput")`` for anything that is not a well-formed batch of one
    changeset (of non-GET operations) or one bare GET.
    """
    media, params = _parse_media_type(content_type)
    batch_boundary = _require_boundary(media, params)
    parts = _split_multipart(bytes(body), batch_boundary)
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
    """Parse a changeset's parts; each must be an ``application/http`` non-GET request."""
    spans = _part_spans(payload, boundary)
    if not spans:
        raise _invalid("the changeset is empty")
    operations = tuple([_parse_operation_at(payload, start, end) for start, end in spans])
    if any(op.method == "GET" for op in operations):
        raise _invalid("a GET cannot be part of a changeset")
    return operations


def _crlf_block_end(body: bytes, start: int, end: int) -> int:
    """Where the header block at ``body[start:end]`` ends (the ``\n`` before its blank line), when
    it has the usual shape: it starts with a line, every line ends in CRLF up to a blank CRLF
    line. Else -1, and the caller parses the part the general way."""
    block_end = body.find(b"\n\r\n", start, end)
    if (
        block_end > start
        and body[start] not in _EOL_BYTES
        and body[block_end - 1] == _CR
        and body.find(b"\n\n", start, block_end) < 0
    ):
        return block_end
    return -1


def _parse_operation_at(body: bytes, start: int, end: int) -> SubRequest:
    """Parse the operation part ``body[start:end]`` as :func:`_parse_operation_part` does.

    The usual part (CRLF lines, no blank line before the request line) is cut by index over the
    whole body, with the two header blocks looked up in their caches; any other shape goes the
    general way, so both give the same answer for every input.
    """
    mime_end = _crlf_block_end(body, start, end)
    if mime_end > 0:
        request_start = mime_end + 3
        request_end = _crlf_block_end(body, request_start, end)
        if request_end > 0:
            content_id = _operation_part_head(body[start : mime_end - 1])
            method, target, fields = _parse_request_head(body[request_start : request_end - 1])
            request_body = body[request_end + 3 : end].strip(_BODY_WHITESPACE)
            return SubRequest(method, target, fields, request_body, content_id)
    return _parse_operation_part(body[start:end])


def _parse_operation_part(part: bytes) -> SubRequest:
    """:func:`_parse_operation` of a whole MIME part, with the part's header block checked once
    for every part that repeats it (the parts of a batch differ in Content-ID only)."""
    head, payload = _split_head(part)
    content_id = _operation_part_head(head)
    method, target, request_headers, request_body = _parse_http_request(payload)
    return SubRequest(method, target, request_headers, request_body, content_id)


def _parse_operation(headers: Headers, payload: bytes) -> SubRequest:
    """Turn one ``application/http`` MIME part into a :class:`SubRequest`."""
    content_id = _operation_headers(headers)
    method, target, request_headers, request_body = _parse_http_request(payload)
    return SubRequest(method, target, request_headers, request_body, content_id)


def _operation_headers(headers: Headers) -> str | None:
    """Check an operation part's MIME headers; return its ``Content-ID``."""
    media, _ = _parse_media_type(header_value(headers, "content-type") or "")
    if media != "application/http":
        raise _invalid("an operation part is not application/http")
    encoding = header_value(headers, "content-transfer-encoding")
    if encoding is not None and encoding.lower() not in _BINARY_ENCODINGS:
        raise _invalid("unsupported Content-Transfer-Encoding")
    return header_value(headers, "content-id")


def _parse_http_request(message: bytes) -> tuple[str, str, Headers, bytes]:
    """Split an embedded HTTP/1.x request into method, target, headers and stripped body.

    Blank lines before the request line are skipped (RFC 9112 §2.2; JS writes extra CRLFs).
    """
    head, body = _split_head(message.lstrip(b"\r\n"))
    method, target, fields = _parse_request_head(head)
    return method, target, fields, body.strip(_BODY_WHITESPACE)


# The parts of one batch repeat their header blocks (a MIME block differs only in Content-ID, a
# request block only in Content-Length), and a client's next batch repeats them again, so parsed
# blocks are kept. Errors are not cached: a bad block raises every time.
_HEAD_CACHE_SIZE = 1024


@lru_cache(maxsize=_HEAD_CACHE_SIZE)
def _parse_request_head(head: bytes) -> tuple[str, str, Headers]:
    """The request line (method, target) and header fields of an embedded request.

    Inserts repeat whole heads. The operations that address entities by URL (updates, upserts,
    deletes) differ in their request lines but repeat their header blocks, so the two are
    cached apart as well. The head is cut after the request line's LF (a CR before it belongs
    to the line break); a character either side of that byte is checked as in the whole head.
    """
    line_end = head.find(b"\n")
    if line_end < 0:
        return (*_parse_request_line(head), ())
    line = head[: line_end - 1] if line_end > 0 and head[line_end - 1] == _CR else head[:line_end]
    method, target = _parse_request_line(line)
    block = head[line_end + 1 :]
    if not block:
        raise _invalid("bad header line")  # an empty line ends no head: it was cut off before it
    return method, target, _parse_head(block)


@lru_cache(maxsize=_HEAD_CACHE_SIZE)
def _parse_request_line(line: bytes) -> tuple[str, str]:
    """An embedded request's method and target."""
    lines = _decode_head(line)
    match = _REQUEST_LINE_RE.fullmatch(lines[0]) if len(lines) == 1 else None
    if match is None:
        raise _invalid("bad request line")
    return match[1], match[2]


@lru_cache(maxsize=_HEAD_CACHE_SIZE)
def _operation_part_head(head: bytes) -> str | None:
    """The ``Content-ID`` of an operation part's header block, once the block is checked."""
    return _operation_headers(_parse_fields(_decode_head(head)))


@lru_cache(maxsize=_HEAD_CACHE_SIZE)
def _parse_head(head: bytes) -> Headers:
    """The header fields of a MIME part's header block."""
    return _parse_fields(_decode_head(head))


def _split_mime_part(part: bytes) -> tuple[Headers, bytes]:
    """Split a MIME part into its (lower-cased) header fields and its payload."""
    head, payload = _split_head(part)
    return _parse_head(head), payload


def _split_head(data: bytes) -> tuple[bytes, bytes]:
    """Cut ``data`` at the first empty line; a missing empty line means "headers only".

    The empty line is the first LF followed by LF or CRLF (a CR before that LF belongs to it):
    two ``bytes.find`` scans in C instead of a regular expression run over the part.
    """
    if data[:1] == b"\n" or data[:2] == b"\r\n":
        return b"", data[1 if data[:1] == b"\n" else 2 :]
    crlf = data.find(b"\n\r\n")
    bare = data.find(b"\n\n", 0, len(data) if crlf < 0 else crlf + 1)  # only one starting before it counts
    if bare < 0 and crlf < 0:
        return data.removesuffix(b"\n").removesuffix(b"\r"), b""
    if crlf < 0 or 0 <= bare < crlf:
        first_lf, end = bare, bare + 2
    else:
        first_lf, end = crlf, crlf + 3
    start = first_lf - 1 if first_lf > 0 and data[first_lf - 1 : first_lf] == b"\r" else first_lf
    return data[:start], data[end:]


def _decode_head(head: bytes) -> list[str]:
    """Decode a header block as UTF-8 and split it into lines (CRLF or bare LF)."""
    if not head:
        return []
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        raise _invalid("header bytes are not UTF-8") from None
    if _FORBIDDEN_HEAD_CHARS_RE.search(text):
        raise _invalid("control character in a header")
    return _LINE_SPLIT_RE.split(text)


def _parse_fields(lines: Sequence[str]) -> Headers:
    """Parse ``name: value`` lines, unfolding obsolete continuation lines into the value.

    Pieces are collected in lists and joined once, so a flood of continuation lines stays linear.
    Blocks without continuation lines (all real clients) take a direct path.
    """
    simple: list[tuple[str, str]] = []
    for line in lines:
        name, colon, value = line.partition(":")
        if not colon or _TOKEN_RE.fullmatch(name) is None:
            break  # a continuation line, or an error the general path reports
        simple.append((name.lower(), value.strip()))
    else:
        return tuple(simple)
    fields: list[tuple[str, list[str]]] = []
    for line in lines:
        if line[:1] in (" ", "\t") and fields:
            fields[-1][1].append(line.strip())
            continue
        name, colon, value = line.partition(":")
        if not colon or _TOKEN_RE.fullmatch(name) is None:
            raise _invalid("bad header line")
        fields.append((name.lower(), [value.strip()]))
    return tuple((name, " ".join(piece for piece in pieces if piece)) for name, pieces in fields)


def header_value(headers: Headers, name: str) -> str | None:
    """Return the first value of the lower-case header ``name``, if any."""
    for key, value in headers:
        if key == name:
            return value
    return None


@lru_cache(maxsize=256)  # every part of a batch names the same one or two types
def _parse_media_type(value: str) -> tuple[str, dict[str, str]]:
    """Split a Content-Type into its lower-cased media type and parameters (a shared, cached
    dict: callers only read it).

    Parameter names are lower-cased, quoted values unquoted; segments without ``=`` (such as a
    trailing ``;``) are ignored rather than refused, as real clients are sloppy here.
    """
    media, *segments = _split_unquoted(value, ";")
    params: dict[str, str] = {}
    for segment in segments:
        name, equals, raw = segment.partition("=")
        if equals:
            params.setdefault(name.strip().lower(), _unquote(raw.strip()))
    return media.strip().lower(), params


def _split_unquoted(value: str, separator: str) -> list[str]:
    """Split on ``separator`` except inside double quotes (with backslash escapes)."""
    if '"' not in value:
        return value.split(separator)
    pieces: list[str] = []
    current: list[str] = []
    quoted = escaped = False
    for char in value:
        if escaped:
            escaped = False
        elif quoted and char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == separator and not quoted:
            pieces.append("".join(current))
            current = []
            continue
        current.append(char)
    pieces.append("".join(current))
    return pieces


def _unquote(value: str) -> str:
    """Remove the quotes and backslash escapes of an RFC 9110 quoted-string."""
    if len(value) < 2 or value[0] != '"' or value[-1] != '"':
        return value
    return re.sub(r"\\(.)", r"\1", value[1:-1])


def _require_boundary(media: str, params: dict[str, str]) -> str:
    """Return the boundary of a ``multipart/mixed`` type, refusing anything unusable."""
    if media != "multipart/mixed":
        raise _invalid("the body is not multipart/mixed")
    boundary = params.get("boundary", "")
    if not 0 < len(boundary) <= _MAX_BOUNDARY or boundary.endswith(" "):
        raise _invalid("missing or bad boundary")
    if not all(" " <= char <= "~" for char in boundary):
        raise _invalid("boundary is not printable ASCII")
    return boundary


def _split_multipart(body: bytes, boundary: str) -> list[bytes]:
    """Return the parts of an RFC 2046 multipart body (preamble and epilogue dropped)."""
    return [body[start:end] for start, end in _part_spans(body, boundary)]


def _part_spans(body: bytes, boundary: str) -> list[tuple[int, int]]:
    """Return where the parts of an RFC 2046 multipart body start and end.

    A delimiter is ``--boundary`` at the start of the body or after a line break, which belongs
    to the delimiter. The trailing line break of a delimiter line is only looked ahead at, so
    two delimiters on consecutive lines still both count. A body that stops without the close
    delimiter keeps its last part unless that part is empty. Candidates are found with
    ``bytes.find`` (a fast C scan) and then checked, so parsing stays linear and cheap.
    """
    marker = b"--" + boundary.encode("ascii")
    spans: list[tuple[int, int]] = []
    start: int | None = None
    position = body.find(marker)
    length = len(marker)
    while position >= 0:
        end = position + length
        if body.startswith(b"\r\n", end) and position >= 2 and body.startswith(b"\r\n", position - 2):
            begin, closing = position - 2, False  # the usual delimiter line, checked inline
        else:
            match = _delimiter_at(body, position, length)
            if match is None:
                position = body.find(marker, position + 1)
                continue
            begin, end, closing = match
        if start is not None:
            spans.append((start, begin))
            if len(spans) > MAX_PARTS:
                raise _invalid("too many parts")
        if closing:
            return spans
        start = _skip_eol(body, end)
        position = body.find(marker, end)
    if start is None:
        raise _invalid("no boundary delimiter found")
    if body[start:].strip(_BODY_WHITESPACE):
        spans.append((start, len(body)))
    return spans


def _delimiter_at(body: bytes, position: int, length: int) -> tuple[int, int, bool] | None:
    """If a delimiter line starts with the marker at ``position``, return (start of the line break
    before it, end of the delimiter, whether it closes); otherwise None."""
    if position == 0:
        begin = 0
    elif body[position - 1 : position] == b"\n":
        begin = position - 2 if position >= 2 and body[position - 2 : position - 1] == b"\r" else position - 1
    else:
        return None
    end = position + length
    closing = body.startswith(b"--", end)
    if closing:
        end += 2
    while body[end : end + 1] in (b" ", b"\t"):
        end += 1
    if end < len(body) and not body.startswith(b"\n", end) and not body.startswith(b"\r\n", end):
        return None
    return begin, end, closing


def _skip_eol(body: bytes, index: int) -> int:
    """Return the index just past the CRLF or LF at ``index`` (or ``index`` at end of body)."""
    if body.startswith(b"\r\n", index):
        return index + 2
    if body.startswith(b"\n", index):
        return index + 1
    return index


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------

_CRLF = b"\r\n"
_HTTP_PART_HEADERS = b"Content-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n"


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


def _reason(status: int) -> str:
    """The standard reason phrase, or an empty one (allowed by HTTP/1.1) for unknown codes."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def _content_id_line(content_id: str | None) -> bytes:
    """The ``Content-ID`` header line, or nothing when the client sent none."""
    return b"" if content_id is None else f"Content-ID: {content_id}\r\n".encode()


def _render_fields(fields: Iterable[tuple[str, str]]) -> bytes:
    """Header lines written verbatim, names in the caller's case."""
    return "".join([f"{name}: {value}\r\n" for name, value in fields]).encode()


def _changeset_header(boundary: str) -> bytes:
    """The header block of the batch part that wraps the changeset."""
    return f"Content-Type: {_multipart_type(boundary)}\r\n\r\n".encode()


def _delimiter(boundary: str) -> bytes:
    """A delimiter line; its leading CRLF is the trailing CRLF of the previous part."""
    return f"--{boundary}\r\n".encode()


def _close(boundary: str) -> bytes:
    """A close-delimiter line."""
    return f"--{boundary}--\r\n".encode()


def _multipart_type(boundary: str) -> str:
    """``multipart/mixed`` with the boundary, quoted only when it is not a plain token."""
    if _TOKEN_RE.fullmatch(boundary):
        return f"multipart/mixed; boundary={boundary}"
    escaped = boundary.replace("\\", "\\\\").replace('"', '\\"')
    return f'multipart/mixed; boundary="{escaped}"'
