"""Azure Storage's structured message body (``x-ms-structured-body: XSM/1.0; properties=crc64``):
content framed in segments, each followed by the CRC64 of its bytes, the whole message followed
by the CRC64 of all of them. The SDKs send it with ``validate_content="crc64"`` (Put Blob, Put
Block, Append Block, Put Page, DFS append) and ask for it on Get Blob, so that every stretch of
a transfer is checked as it streams instead of once, after gigabytes, by a single header.

The v1 format, all integers little-endian::

    header   uint8 version (1), uint64 message length, uint16 flags (1: CRC64), uint16 segments
    segment  uint16 number (1, 2, ...), uint64 data length, data, [8 bytes CRC64 of the data]
    trailer  [8 bytes CRC64 of all segments' data]

The message length is the whole body's (the HTTP Content-Length); the content's own length comes
in ``x-ms-structured-content-length``. :class:`Deframer` takes an upload's body apart chunk by
chunk as it arrives, never holding more than one header's bytes; :func:`frame` wraps a download's
content as Azure sends it, in segments of 4 MiB. Both only run for requests that carry the header:
the rest pay one dictionary look-up.
"""

from __future__ import annotations

import struct
from collections.abc import AsyncIterable, AsyncIterator

from awscrt.checksums import crc64nvme

from tabulae.blob.rules.checksums import b64
from tabulae.model.errors import ServiceError

HEADER_NAME = "x-ms-structured-body"
LENGTH_HEADER_NAME = "x-ms-structured-content-length"
STRUCTURED_CRC64 = "XSM/1.0; properties=crc64"  # the one body type Azure speaks
FIRST_VERSION = "2025-01-05"  # requests of older versions have their header ignored, as Azure does
DOWNLOAD_SEGMENT = 4 * 1024 * 1024  # the segment size of the framed downloads Azure sends

_HEADER = struct.Struct("<BQHH")  # version, message length, flags, number of segments
_SEGMENT_HEADER = struct.Struct("<HQ")  # segment number, data length
_CRC = 8
_CRC64_FLAG = 1
_PER_SEGMENT = _SEGMENT_HEADER.size + _CRC

# what the deframer is reading
_IN_HEADER, _IN_SEGMENT_HEADER, _IN_DATA, _IN_SEGMENT_CRC, _IN_TRAILER, _DONE = range(6)


def bad_header(name: str, value: str) -> ServiceError:
    return ServiceError("InvalidHeaderValue", fields=(("HeaderName", name), ("HeaderValue", value)))


def wanted(value: str, version: str) -> bool:
    """Whether a request's ``x-ms-structured-body`` (present) applies: ignored before the version
    that brought it; any body type but ``XSM/1.0; properties=crc64`` is 400 InvalidHeaderValue."""
    if version < FIRST_VERSION:
        return False
    if value.replace(" ", "").lower() != "xsm/1.0;properties=crc64":
        raise bad_header(HEADER_NAME, value)
    return True


def content_length(declared: str | None, message_length: int) -> int:
    """The content's length, from ``x-ms-structured-content-length`` (required with a structured
    body); one that cannot fit the message's Content-Length is refused before a byte is read."""
    if declared is None:
        raise ServiceError("MissingRequiredHeader", fields=(("HeaderName", LENGTH_HEADER_NAME),))
    if not declared.isdigit():
        raise bad_header(LENGTH_HEADER_NAME, declared)
    length = int(declared)
    if encoded_length(length, segments=1) > message_length:
        raise bad_header(LENGTH_HEADER_NAME, declared)
    return length


def encoded_length(content: int, *, segment: int = DOWNLOAD_SEGMENT, segments: int | None = None) -> int:
    """The length of a message carrying ``content`` bytes in segments of ``segment`` bytes (or in
    ``segments`` segments)."""
    if segments is None:
        segments = max(1, -(-content // segment))
    return _HEADER.size + segments * _PER_SEGMENT + content + _CRC


def _invalid(reason: str) -> ServiceError:
    return ServiceError(
        "InvalidInput", f"One of the request inputs is not valid. The structured body {reason}."
    )


def _mismatch(sent: bytes, crc: int) -> ServiceError:
    return ServiceError(
        "Crc64Mismatch",
        fields=(("UserSpecifiedCrc", b64(sent)), ("ServerCalculatedCrc", b64(crc.to_bytes(8, "little")))),
    )


class Deframer:
    """An upload's structured body taken apart as it streams: :meth:`feed` each chunk and get
    back the content in it; :meth:`finish` once the body has all come. Every segment's CRC64 and
    the message's are checked as they arrive (400 Crc64Mismatch), and every frame against the
    message length and the content length the headers declared (400 InvalidInput)."""

    __slots__ = (
        "_content",
        "_crc",
        "_left",
        "_message",
        "_meta",
        "_seen",
        "_segment",
        "_segment_crc",
        "_segments",
        "_state",
        "_want",
    )  # fmt: skip

    def __init__(self, message_length: int, content_length: int) -> None:
        self._message = message_length
        self._content = content_length
        self._state = _IN_HEADER
        self._want = _HEADER.size  # bytes of the header or checksum being gathered
        self._meta = bytearray()
        self._left = 0  # bytes of the current segment's data still to come
        self._segment = 0
        self._segments = 0
        self._seen = 0  # content bytes so far
        self._segment_crc = 0
        self._crc = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        pieces: list[bytes] = []
        size = len(chunk)
        at = 0
        while at < size:
            if self._state == _IN_DATA:
                take = min(self._left, size - at)
                piece = chunk if take == size else chunk[at : at + take]
                self._segment_crc = crc64nvme(piece, self._segment_crc)
                self._crc = crc64nvme(piece, self._crc)
                pieces.append(piece)
                at += take
                self._left -= take
                if not self._left:
                    self._expect(_IN_SEGMENT_CRC, _CRC)
                continue
            if self._state == _DONE:
                raise _invalid("continues past its trailer")
            take = min(self._want - len(self._meta), size - at)
            self._meta += chunk[at : at + take]
            at += take
            if len(self._meta) == self._want:
                meta = bytes(self._meta)
                self._meta.clear()
                self._frame(meta)
        return pieces

    def finish(self) -> None:
        if self._state != _DONE:
            raise _invalid("ends before its trailer")

    def _expect(self, state: int, size: int) -> None:
        self._state = state
        self._want = size

    def _frame(self, meta: bytes) -> None:
        state = self._state
        if state == _IN_HEADER:
            version, length, flags, segments = _HEADER.unpack(meta)
            if version != 1:
                raise _invalid(f"has version {version}; only version 1 is supported")
            if length != self._message:
                raise _invalid(f"says its length is {length} but Content-Length is {self._message}")
            if flags != _CRC64_FLAG:
                raise _invalid(f"has flags {flags}, not CRC64's")
            if not segments:
                raise _invalid("has no segments")
            if encoded_length(self._content, segments=segments) != length:
                raise _invalid(
                    f"of {length} bytes in {segments} segment(s) cannot carry "
                    f"x-ms-structured-content-length {self._content}"
                )
            self._segments = segments
            self._expect(_IN_SEGMENT_HEADER, _SEGMENT_HEADER.size)
        elif state == _IN_SEGMENT_HEADER:
            number, length = _SEGMENT_HEADER.unpack(meta)
            if number != self._segment + 1:
                raise _invalid(f"has segment {number} where segment {self._segment + 1} belongs")
            remaining = self._content - self._seen
            if length > remaining or (number == self._segments and length != remaining):
                raise _invalid(
                    f"has segment {number} of {length} bytes, with {remaining} bytes of content left"
                )
            self._segment = number
            self._seen += length
            self._segment_crc = 0
            self._left = length
            if length:
                self._expect(_IN_DATA, 0)
            else:
                self._expect(_IN_SEGMENT_CRC, _CRC)
        elif state == _IN_SEGMENT_CRC:
            if int.from_bytes(meta, "little") != self._segment_crc:
                raise _mismatch(meta, self._segment_crc)
            if self._segment == self._segments:
                self._expect(_IN_TRAILER, _CRC)
            else:
                self._expect(_IN_SEGMENT_HEADER, _SEGMENT_HEADER.size)
        else:  # the trailer
            if int.from_bytes(meta, "little") != self._crc:
                raise _mismatch(meta, self._crc)
            self._expect(_DONE, 0)


async def deframe(
    chunks: AsyncIterable[bytes], message_length: int, content_length: int
) -> AsyncIterator[bytes]:
    """The content of a structured upload body, checked as it streams (see :class:`Deframer`)."""
    deframer = Deframer(message_length, content_length)
    async for chunk in chunks:
        for piece in deframer.feed(chunk):
            yield piece
    deframer.finish()


async def frame(
    content: AsyncIterable[bytes], length: int, segment: int = DOWNLOAD_SEGMENT
) -> AsyncIterator[bytes]:
    """``length`` bytes of ``content`` as a structured message of ``segment``-byte segments: the
    framing goes out with the content beside it, never gathered whole."""
    segments = max(1, -(-length // segment))
    head = _HEADER.pack(1, encoded_length(length, segments=segments), _CRC64_FLAG, segments)
    number = 1
    left = min(segment, length)  # of the current segment
    crc = segment_crc = 0
    pending = head + _SEGMENT_HEADER.pack(number, left)  # framing bytes sent with the next piece
    async for chunk in content:
        at = 0
        size = len(chunk)
        while at < size:
            take = min(left, size - at)
            if not take:
                break  # more than ``length`` bytes: not ours to send
            piece = chunk if take == size else chunk[at : at + take]
            segment_crc = crc64nvme(piece, segment_crc)
            crc = crc64nvme(piece, crc)
            yield pending + piece if pending else piece
            pending = b""
            at += take
            left -= take
            if not left and number < segments:
                number += 1
                left = min(segment, length - (number - 1) * segment)
                pending = segment_crc.to_bytes(8, "little") + _SEGMENT_HEADER.pack(number, left)
                segment_crc = 0
    yield pending + segment_crc.to_bytes(8, "little") + crc.to_bytes(8, "little")
