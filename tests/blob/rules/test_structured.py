"""The structured message codec (blob/rules/structured.py) against Microsoft's own: bodies the
Python SDK's encoder frames are taken apart by ours, whatever pieces they arrive in, and bodies
ours frames are read back by the SDK's decoder; every kind of bad frame is refused."""

from __future__ import annotations

import asyncio
import os
import struct
from collections.abc import AsyncIterator
from io import BytesIO

import pytest
from awscrt.checksums import crc64nvme
from azure.storage.blob._shared.streams import (
    StructuredMessageDecoder,
    StructuredMessageEncodeStream,
    StructuredMessageProperties,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from tabulae.blob.rules import structured
from tabulae.model.errors import ServiceError


def sdk_frame(content: bytes, segment: int) -> bytes:
    """The body Microsoft's SDK sends for ``content`` with ``validate_content="crc64"``."""
    stream = StructuredMessageEncodeStream(
        BytesIO(content), len(content), StructuredMessageProperties.CRC64, segment_size=segment
    )
    return stream.read()


async def _pieces(body: bytes, sizes: list[int]) -> AsyncIterator[bytes]:
    at = 0
    for size in sizes:
        if at >= len(body):
            break
        yield body[at : at + size]
        at += size
    if at < len(body):
        yield body[at:]


def deframe(body: bytes, content_length: int, sizes: list[int] | None = None) -> bytes:
    async def run() -> bytes:
        chunks = _pieces(body, sizes or [len(body)])
        return b"".join([piece async for piece in structured.deframe(chunks, len(body), content_length)])

    return asyncio.run(run())


def frame(content: bytes, segment: int, sizes: list[int]) -> bytes:
    async def run() -> bytes:
        framed = structured.frame(_pieces(content, sizes), len(content), segment)
        return b"".join([piece async for piece in framed])

    return asyncio.run(run())


@settings(max_examples=60, deadline=None)
@given(
    content=st.binary(max_size=3000),
    segment=st.integers(1, 700),
    sizes=st.lists(st.integers(1, 900), max_size=12),
)
def test_sdk_bodies_are_taken_apart_whatever_pieces_they_come_in(
    content: bytes, segment: int, sizes: list[int]
) -> None:
    body = sdk_frame(content, segment)
    assert deframe(body, len(content), sizes) == content


@settings(max_examples=60, deadline=None)
@given(
    content=st.binary(max_size=3000),
    segment=st.integers(1, 700),
    sizes=st.lists(st.integers(1, 900), max_size=12),
)
def test_framed_downloads_are_read_by_the_sdks_decoder(
    content: bytes, segment: int, sizes: list[int]
) -> None:
    body = frame(content, segment, sizes)
    assert len(body) == structured.encoded_length(len(content), segment=segment)
    decoder = StructuredMessageDecoder(iter([body]), len(body))
    assert decoder.read() == content
    assert body == sdk_frame(content, segment)  # byte for byte what the SDK itself would send


def test_a_download_is_framed_in_four_mib_segments() -> None:
    content = os.urandom(9 * 1024 * 1024 + 5)
    body = frame(content, structured.DOWNLOAD_SEGMENT, [1 << 20] * 10)
    assert struct.unpack_from("<BQHH", body) == (1, len(body), 1, 3)
    assert StructuredMessageDecoder(iter([body]), len(body)).read() == content


def test_empty_content_is_one_empty_segment() -> None:
    body = frame(b"", structured.DOWNLOAD_SEGMENT, [])
    assert body == sdk_frame(b"", 4 * 1024 * 1024)
    assert deframe(body, 0) == b""


def _error(body: bytes, content_length: int, sizes: list[int] | None = None) -> ServiceError:
    with pytest.raises(ServiceError) as excinfo:
        deframe(body, content_length, sizes)
    return excinfo.value


def _corrupt(body: bytes, at: int) -> bytes:
    return body[:at] + bytes([body[at] ^ 0x40]) + body[at + 1 :]


CONTENT = bytes(range(256)) * 4  # 1024 bytes in segments of 300: 300, 300, 300, 124
BODY = sdk_frame(CONTENT, 300)


def test_a_segment_with_a_wrong_crc_is_crc64mismatch() -> None:
    data_at = 13 + 10 + 300 + 8 + 10  # the second segment's first byte
    error = _error(_corrupt(BODY, data_at + 5), len(CONTENT), [7] * 400)
    assert error.code == "Crc64Mismatch"
    fields = dict(error.fields)
    assert fields["UserSpecifiedCrc"] != fields["ServerCalculatedCrc"]


def test_a_wrong_segment_crc_is_crc64mismatch() -> None:
    assert _error(_corrupt(BODY, 13 + 10 + 300), len(CONTENT)).code == "Crc64Mismatch"


def test_a_wrong_message_crc_is_crc64mismatch() -> None:
    assert _error(_corrupt(BODY, len(BODY) - 3), len(CONTENT)).code == "Crc64Mismatch"


def _header(
    body: bytes, version: int = 1, length: int | None = None, flags: int = 1, segments: int = 4
) -> bytes:
    return struct.pack("<BQHH", version, len(body) if length is None else length, flags, segments) + body[13:]


@pytest.mark.parametrize(
    "body",
    [
        _header(BODY, version=2),
        _header(BODY, length=len(BODY) + 1),
        _header(BODY, flags=0),
        _header(BODY, flags=3),
        _header(BODY, segments=0),
        _header(BODY, segments=5),  # more segments than the length leaves room for
    ],
    ids=["version", "length", "no-crc-flag", "unknown-flag", "no-segments", "segment-count"],
)
def test_a_bad_message_header_is_invalid_input(body: bytes) -> None:
    assert _error(body, len(CONTENT)).code == "InvalidInput"


def test_segments_out_of_order_are_invalid_input() -> None:
    second = 13 + 10 + 300 + 8
    body = BODY[:second] + struct.pack("<H", 3) + BODY[second + 2 :]
    assert _error(body, len(CONTENT)).code == "InvalidInput"


def test_a_segment_longer_than_the_content_left_is_invalid_input() -> None:
    last = 13 + 3 * (10 + 300 + 8)
    body = BODY[:last] + struct.pack("<HQ", 4, 125) + BODY[last + 10 :]
    assert _error(body, len(CONTENT)).code == "InvalidInput"


def test_a_body_cut_short_is_invalid_input() -> None:
    async def run() -> None:
        chunks = _pieces(BODY[:-4], [64] * 100)
        async for _ in structured.deframe(chunks, len(BODY), len(CONTENT)):
            pass

    with pytest.raises(ServiceError) as excinfo:
        asyncio.run(run())
    assert excinfo.value.code == "InvalidInput"


def test_the_content_length_header_must_match_the_frames() -> None:
    assert _error(BODY, len(CONTENT) - 1).code == "InvalidInput"


def test_unequal_segments_a_client_may_choose_are_taken() -> None:
    """Nothing in the format asks for equal segments: a client may cut its content as it likes."""
    parts = [CONTENT[:10], CONTENT[10:10], CONTENT[10:1000], CONTENT[1000:]]
    body = struct.pack("<BQHH", 1, structured.encoded_length(len(CONTENT), segments=4), 1, 4)
    for number, part in enumerate(parts, 1):
        body += struct.pack("<HQ", number, len(part)) + part + crc64nvme(part, 0).to_bytes(8, "little")
    body += crc64nvme(CONTENT, 0).to_bytes(8, "little")
    assert deframe(body, len(CONTENT), [33] * 40) == CONTENT


@pytest.mark.parametrize("value", ["XSM/1.0; properties=crc64", "xsm/1.0;properties=CRC64"])
def test_the_header_value_is_crc64_v1(value: str) -> None:
    assert structured.wanted(value, "2026-10-06")


@pytest.mark.parametrize("value", ["XSM/2.0; properties=crc64", "XSM/1.0", "XSM/1.0; properties=md5", ""])
def test_other_header_values_are_invalid_header_value(value: str) -> None:
    with pytest.raises(ServiceError) as excinfo:
        structured.wanted(value, "2026-10-06")
    assert excinfo.value.code == "InvalidHeaderValue"
    assert dict(excinfo.value.fields)["HeaderName"] == "x-ms-structured-body"


def test_before_its_version_the_header_is_ignored() -> None:
    assert not structured.wanted("XSM/1.0; properties=crc64", "2024-11-04")
    assert not structured.wanted("anything", "2024-11-04")


def test_the_structured_content_length() -> None:
    assert structured.content_length("1024", len(BODY)) == 1024
    for declared in (None, "x", "-1", str(len(BODY))):
        with pytest.raises(ServiceError) as excinfo:
            structured.content_length(declared, len(BODY))
        expected = "MissingRequiredHeader" if declared is None else "InvalidHeaderValue"
        assert excinfo.value.code == expected
        assert dict(excinfo.value.fields)["HeaderName"] == "x-ms-structured-content-length"
