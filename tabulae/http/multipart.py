r"""RFC 2046 ``multipart/mixed`` bodies whose parts are HTTP/1.1 messages, with no I/O: what the
Table service's ``$batch`` and the Blob service's ``comp=batch`` share.

Both carry requests as ``application/http`` MIME parts and answer with responses the same way;
every SDK writes these bodies a little differently, so the parser follows RFC 2046 but
tolerates what real clients send. Every malformed input raises ``ServiceError("InvalidInput")``
and nothing else (the code both services answer for a body they cannot parse). The structure
above the parts (a Table changeset, a Blob batch's limits) is each service's own codec's job.

Grammar of the pieces (ABNF-like; ``EOL = CRLF / LF``; ``B`` is the boundary)::

    content-type  = "multipart/mixed" *( ";" parameter )   ; case-insensitive, needs "boundary"
    parameter     = name "=" ( token / quoted-string )      ; unknown ones (charset) ignored
    body          = preamble 1*( delimiter(B) EOL part ) [ close(B) epilogue ]
    delimiter(X)  = ( start-of-body / EOL ) "--" X *WSP      ; the EOL belongs to the delimiter
    close(X)      = ( start-of-body / EOL ) "--" X "--" *WSP ( EOL / end-of-body )
    ; a body may stop without close(B); an empty last part (``--B EOL`` at the end) is dropped
    operation     = headers(ct=application/http) EOL http-request
    headers(...)  = *( field-name ":" value EOL *( WSP continuation EOL ) )
                    ; names case-insensitive; Content-ID optional;
                    ; Content-Transfer-Encoding absent, binary, 7bit or 8bit
    http-request  = *EOL method 1*WSP target 1*WSP "HTTP/1." DIGIT *WSP EOL
                    *( field-name ":" value EOL ) [ EOL body ]
    body          = *OCTET    ; leading/trailing SP, HTAB, CR and LF are stripped

Header bytes must be UTF-8. More than ``max_parts`` parts at one level is refused, so parsing
stays linear in the size of the body.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from http import HTTPStatus

from tabulae.model.errors import ServiceError

#: Parts allowed at one multipart level unless the caller says otherwise: a bound that only
#: stops pathological bodies early (each service reports its own, smaller, limit).
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


_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"


TOKEN_RE = re.compile(_TOKEN)


REQUEST_LINE_RE = re.compile(rf"({_TOKEN})[ \t]+(\S+)[ \t]+HTTP/1\.[0-9][ \t]*")


_LINE_SPLIT_RE = re.compile(r"\r?\n")


# Control characters (tab aside) anywhere in a header block, but for the CRLF or LF line breaks.
_FORBIDDEN_HEAD_CHARS_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\r(?!\n)")


_BODY_WHITESPACE = b" \t\r\n"


_EOL_BYTES = b"\r\n"


_CR = ord("\r")


_BINARY_ENCODINGS = frozenset({"binary", "7bit", "8bit"})


def invalid(reason: str) -> ServiceError:
    """Build the one error this module raises; ``reason`` only helps whoever reads the logs."""
    return ServiceError("InvalidInput", detail=f"Malformed batch body: {reason}.")


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


def parse_operation_at(body: bytes, start: int, end: int) -> SubRequest:
    """Parse the operation part ``body[start:end]`` as :func:`parse_operation_part` does.

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
            method, target, fields = parse_request_head(body[request_start : request_end - 1])
            request_body = body[request_end + 3 : end].strip(_BODY_WHITESPACE)
            return SubRequest(method, target, fields, request_body, content_id)
    return parse_operation_part(body[start:end])


def parse_operation_part(part: bytes) -> SubRequest:
    """:func:`parse_operation` of a whole MIME part, with the part's header block checked once
    for every part that repeats it (the parts of a batch differ in Content-ID only)."""
    head, payload = split_head(part)
    content_id = _operation_part_head(head)
    method, target, request_headers, request_body = _parse_http_request(payload)
    return SubRequest(method, target, request_headers, request_body, content_id)


def parse_operation(headers: Headers, payload: bytes) -> SubRequest:
    """Turn one ``application/http`` MIME part into a :class:`SubRequest`."""
    content_id = _operation_headers(headers)
    method, target, request_headers, request_body = _parse_http_request(payload)
    return SubRequest(method, target, request_headers, request_body, content_id)


def _operation_headers(headers: Headers) -> str | None:
    """Check an operation part's MIME headers; return its ``Content-ID``."""
    media, _ = parse_media_type(header_value(headers, "content-type") or "")
    if media != "application/http":
        raise invalid("an operation part is not application/http")
    encoding = header_value(headers, "content-transfer-encoding")
    if encoding is not None and encoding.lower() not in _BINARY_ENCODINGS:
        raise invalid("unsupported Content-Transfer-Encoding")
    return header_value(headers, "content-id")


def _parse_http_request(message: bytes) -> tuple[str, str, Headers, bytes]:
    """Split an embedded HTTP/1.x request into method, target, headers and stripped body.

    Blank lines before the request line are skipped (RFC 9112 §2.2; JS writes extra CRLFs).
    """
    head, body = split_head(message.lstrip(b"\r\n"))
    method, target, fields = parse_request_head(head)
    return method, target, fields, body.strip(_BODY_WHITESPACE)


# The parts of one batch repeat their header blocks (a MIME block differs only in Content-ID, a
# request block only in Content-Length), and a client's next batch repeats them again, so parsed
# blocks are kept. Errors are not cached: a bad block raises every time.
_HEAD_CACHE_SIZE = 1024


@lru_cache(maxsize=_HEAD_CACHE_SIZE)
def parse_request_head(head: bytes) -> tuple[str, str, Headers]:
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
        raise invalid("bad header line")  # an empty line ends no head: it was cut off before it
    return method, target, _parse_head(block)


@lru_cache(maxsize=_HEAD_CACHE_SIZE)
def _parse_request_line(line: bytes) -> tuple[str, str]:
    """An embedded request's method and target."""
    lines = decode_head(line)
    match = REQUEST_LINE_RE.fullmatch(lines[0]) if len(lines) == 1 else None
    if match is None:
        raise invalid("bad request line")
    return match[1], match[2]


@lru_cache(maxsize=_HEAD_CACHE_SIZE)
def _operation_part_head(head: bytes) -> str | None:
    """The ``Content-ID`` of an operation part's header block, once the block is checked."""
    return _operation_headers(parse_fields(decode_head(head)))


@lru_cache(maxsize=_HEAD_CACHE_SIZE)
def _parse_head(head: bytes) -> Headers:
    """The header fields of a MIME part's header block."""
    return parse_fields(decode_head(head))


def split_mime_part(part: bytes) -> tuple[Headers, bytes]:
    """Split a MIME part into its (lower-cased) header fields and its payload."""
    head, payload = split_head(part)
    return _parse_head(head), payload


def split_head(data: bytes) -> tuple[bytes, bytes]:
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


def decode_head(head: bytes) -> list[str]:
    """Decode a header block as UTF-8 and split it into lines (CRLF or bare LF)."""
    if not head:
        return []
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        raise invalid("header bytes are not UTF-8") from None
    if _FORBIDDEN_HEAD_CHARS_RE.search(text):
        raise invalid("control character in a header")
    return _LINE_SPLIT_RE.split(text)


def parse_fields(lines: Sequence[str]) -> Headers:
    """Parse ``name: value`` lines, unfolding obsolete continuation lines into the value.

    Pieces are collected in lists and joined once, so a flood of continuation lines stays linear.
    Blocks without continuation lines (all real clients) take a direct path.
    """
    simple: list[tuple[str, str]] = []
    for line in lines:
        name, colon, value = line.partition(":")
        if not colon or TOKEN_RE.fullmatch(name) is None:
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
        if not colon or TOKEN_RE.fullmatch(name) is None:
            raise invalid("bad header line")
        fields.append((name.lower(), [value.strip()]))
    return tuple((name, " ".join(piece for piece in pieces if piece)) for name, pieces in fields)


def header_value(headers: Headers, name: str) -> str | None:
    """Return the first value of the lower-case header ``name``, if any."""
    for key, value in headers:
        if key == name:
            return value
    return None


@lru_cache(maxsize=256)  # every part of a batch names the same one or two types
def parse_media_type(value: str) -> tuple[str, dict[str, str]]:
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


def require_boundary(media: str, params: dict[str, str]) -> str:
    """Return the boundary of a ``multipart/mixed`` type, refusing anything unusable."""
    if media != "multipart/mixed":
        raise invalid("the body is not multipart/mixed")
    boundary = params.get("boundary", "")
    if not 0 < len(boundary) <= _MAX_BOUNDARY or boundary.endswith(" "):
        raise invalid("missing or bad boundary")
    if not all(" " <= char <= "~" for char in boundary):
        raise invalid("boundary is not printable ASCII")
    return boundary


def split_multipart(body: bytes, boundary: str, max_parts: int = MAX_PARTS) -> list[bytes]:
    """Return the parts of an RFC 2046 multipart body (preamble and epilogue dropped)."""
    return [body[start:end] for start, end in part_spans(body, boundary, max_parts)]


def part_spans(
    body: bytes, boundary: str, max_parts: int = MAX_PARTS, *, inline: bool = False
) -> list[tuple[int, int]]:
    """Return where the parts of an RFC 2046 multipart body start and end.

    A delimiter is ``--boundary`` at the start of the body or after a line break, which belongs
    to the delimiter; with ``inline``, also right after a part's last byte on the same line
    (a caller whose service reads such bodies says so). The trailing line break of a delimiter
    line is only looked ahead at, so two delimiters on consecutive lines still both count. A
    body that stops without the close delimiter keeps its last part unless that part is empty.
    Candidates are found with ``bytes.find`` (a fast C scan) and then checked, so parsing stays
    linear and cheap.
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
            match = _delimiter_at(body, position, length, inline)
            if match is None:
                position = body.find(marker, position + 1)
                continue
            begin, end, closing = match
        if start is not None:
            spans.append((start, begin))
            if len(spans) > max_parts:
                raise invalid("too many parts")
        if closing:
            return spans
        start = _skip_eol(body, end)
        position = body.find(marker, end)
    if start is None:
        raise invalid("no boundary delimiter found")
    if body[start:].strip(_BODY_WHITESPACE):
        spans.append((start, len(body)))
    return spans


def _delimiter_at(
    body: bytes, position: int, length: int, inline: bool = False
) -> tuple[int, int, bool] | None:
    """If a delimiter line starts with the marker at ``position`` (or, ``inline``, the marker
    ends a line there), return (start of the line break before it, or of the marker, end of the
    delimiter, whether it closes); otherwise None."""
    if position == 0:
        begin = 0
    elif body[position - 1 : position] == b"\n":
        begin = position - 2 if position >= 2 and body[position - 2 : position - 1] == b"\r" else position - 1
    elif inline:
        begin = position
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


CRLF = b"\r\n"


HTTP_PART_HEADERS = b"Content-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n"


def reason(status: int) -> str:
    """The standard reason phrase, or an empty one (allowed by HTTP/1.1) for unknown codes."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def content_id_line(content_id: str | None) -> bytes:
    """The ``Content-ID`` header line, or nothing when the client sent none."""
    return b"" if content_id is None else f"Content-ID: {content_id}\r\n".encode()


def render_fields(fields: Iterable[tuple[str, str]]) -> bytes:
    """Header lines written verbatim, names in the caller's case."""
    return "".join([f"{name}: {value}\r\n" for name, value in fields]).encode()


def delimiter(boundary: str) -> bytes:
    """A delimiter line; its leading CRLF is the trailing CRLF of the previous part."""
    return f"--{boundary}\r\n".encode()


def close(boundary: str) -> bytes:
    """A close-delimiter line."""
    return f"--{boundary}--\r\n".encode()


def multipart_type(boundary: str) -> str:
    """``multipart/mixed`` with the boundary, quoted only when it is not a plain token."""
    if TOKEN_RE.fullmatch(boundary):
        return f"multipart/mixed; boundary={boundary}"
    escaped = boundary.replace("\\", "\\\\").replace('"', '\\"')
    return f'multipart/mixed; boundary="{escaped}"'
