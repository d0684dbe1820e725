"""Structured message bodies (``x-ms-structured-body: XSM/1.0; properties=crc64``) on every
store: Microsoft's SDK, sync and aio, with ``validate_content="crc64"`` (its streamed stage_block
and append_block frame their bodies, its downloads ask for framed ones), and raw HTTP with bodies
framed by the SDK's own encoder for the operations the SDK frames only in some cases (Put Blob,
Put Page) and for the bad frames, CRCs and lengths it never sends."""

from __future__ import annotations

import asyncio
import hashlib
import os
import struct
from io import BytesIO

import pytest
from azure.core.exceptions import ResourceNotFoundError
from azure.storage.blob import BlobBlock, BlobServiceClient, ContainerClient
from azure.storage.blob._shared.streams import (
    StructuredMessageDecoder,
)
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

from tests.blobhttp import BlobHttp, Reply
from tests.serverproc import ServerProcess
from tests.structured_bodies import MIB, STRUCTURED, Exchanges, framed, structured_headers

# ------------------------------------------------------------------------------ the SDK


def test_streamed_blocks_and_appends_are_framed_and_stored_as_content(container: ContainerClient) -> None:
    big = os.urandom(9 * MIB + 7)  # three segments: 4 MiB, 4 MiB and the rest
    small = os.urandom(1000)
    blob = container.get_blob_client("blocks")
    seen = Exchanges()
    blob.stage_block("b1", BytesIO(big), validate_content="crc64", **seen.hooks())
    blob.stage_block("b2", BytesIO(small), validate_content="crc64", **seen.hooks())
    blob.stage_block("b3", BytesIO(b""), validate_content="crc64", **seen.hooks())
    assert seen.sent == seen.answered == [STRUCTURED] * 3  # framed, and answered in kind
    blob.commit_block_list([BlobBlock("b1"), BlobBlock("b2"), BlobBlock("b3")])
    assert blob.download_blob().readall() == big + small
    _, uncommitted = blob.get_block_list("all")
    assert uncommitted == []

    appended = container.get_blob_client("appended")
    appended.create_append_blob()
    seen = Exchanges()
    appended.append_block(BytesIO(small), validate_content="crc64", **seen.hooks())
    appended.append_block(BytesIO(big), validate_content="crc64", **seen.hooks())
    assert seen.sent == seen.answered == [STRUCTURED] * 2
    assert appended.download_blob().readall() == small + big
    assert appended.get_blob_properties().size == len(small) + len(big)


def test_downloads_asked_framed_are_framed(container: ContainerClient) -> None:
    content = os.urandom(9 * MIB + 11)
    blob = container.get_blob_client("download")
    blob.upload_blob(content)
    seen = Exchanges()
    assert blob.download_blob(validate_content="crc64", **seen.hooks()).readall() == content
    got = blob.download_blob(
        offset=5 * MIB - 3, length=4 * MIB + 10, validate_content="crc64", **seen.hooks()
    )
    assert got.readall() == content[5 * MIB - 3 : 9 * MIB + 7]
    assert seen.answered and set(seen.answered) == {STRUCTURED}

    empty = container.get_blob_client("empty")
    empty.upload_blob(b"")
    assert empty.download_blob(validate_content="crc64").readall() == b""

    pages = container.get_blob_client("pages")
    pages.create_page_blob(3 * 512)
    pages.upload_page(b"\x07" * 512, offset=512, length=512)
    expected = bytes(512) + b"\x07" * 512 + bytes(512)  # unwritten pages read as zeros
    assert pages.download_blob(validate_content="crc64").readall() == expected


def test_aio(server: ServerProcess, container: ContainerClient) -> None:
    content = os.urandom(5 * MIB + 3)

    async def scenario() -> None:
        async with AsyncBlobServiceClient.from_connection_string(server.connection_string) as client:
            blob = client.get_blob_client(container.container_name, "aio")
            seen = Exchanges()
            await blob.stage_block("a", BytesIO(content), validate_content="crc64", **seen.hooks())
            await blob.commit_block_list([BlobBlock("a")])
            downloader = await blob.download_blob(validate_content="crc64", **seen.hooks())
            assert await downloader.readall() == content
            appended = client.get_blob_client(container.container_name, "aio-append")
            await appended.create_append_blob()
            await appended.append_block(BytesIO(content[:70000]), validate_content="crc64", **seen.hooks())
            part = await appended.download_blob(offset=100, length=5000, validate_content="crc64")
            assert await part.readall() == content[100:5100]
            assert seen.sent == seen.answered == [STRUCTURED] * 3

    asyncio.run(scenario())


# ------------------------------------------------------------------------------ raw HTTP


def _path(container: ContainerClient, name: str, query: str = "") -> str:
    return f"/{container.container_name}/{name}{query}"


def test_put_blob_and_put_page_take_framed_bodies(http: BlobHttp, container: ContainerClient) -> None:
    content = os.urandom(3000)
    headers = structured_headers(len(content), **{"x-ms-blob-type": "BlockBlob"})
    reply = http.request("PUT", _path(container, "put"), headers, framed(content, 1024))
    assert reply.status == 201, reply.body
    assert reply.headers["x-ms-structured-body"] == STRUCTURED
    assert container.get_blob_client("put").download_blob().readall() == content
    # the content's checksums, not the message's
    properties = container.get_blob_client("put").get_blob_properties()
    assert properties.size == len(content)
    assert bytes(properties.content_settings.content_md5) == hashlib.md5(content).digest()

    pages = container.get_blob_client("pages")
    pages.create_page_blob(2048)
    page = os.urandom(1024)
    headers = structured_headers(len(page), **{"x-ms-page-write": "update", "x-ms-range": "bytes=1024-2047"})
    reply = http.request("PUT", _path(container, "pages", "?comp=page"), headers, framed(page, 300))
    assert reply.status == 201, reply.body
    assert reply.headers["x-ms-structured-body"] == STRUCTURED
    assert pages.download_blob().readall() == bytes(1024) + page
    headers = structured_headers(512, **{"x-ms-page-write": "update", "x-ms-range": "bytes=0-1023"})
    reply = http.request("PUT", _path(container, "pages", "?comp=page"), headers, framed(page[:512]))
    fields = _refused(reply, 400, "InvalidHeaderValue")
    assert (fields["HeaderName"], fields["HeaderValue"]) == ("x-ms-structured-content-length", "512")


def test_a_get_without_a_range_is_framed_whole(http: BlobHttp, container: ContainerClient) -> None:
    content = os.urandom(100_000)
    container.get_blob_client("whole").upload_blob(content)
    reply = http.request("GET", _path(container, "whole"), {"x-ms-structured-body": STRUCTURED})
    assert reply.status == 200
    assert reply.headers["x-ms-structured-body"] == STRUCTURED
    assert reply.headers["x-ms-structured-content-length"] == str(len(content))
    assert int(reply.headers["content-length"]) == len(reply.body) == len(framed(content))
    assert StructuredMessageDecoder(iter([reply.body]), len(reply.body)).read() == content

    reply = http.request(
        "GET", _path(container, "whole"), {"x-ms-structured-body": STRUCTURED, "x-ms-range": "bytes=10-19"}
    )
    assert reply.status == 206
    assert reply.headers["content-range"] == f"bytes 10-19/{len(content)}"
    assert reply.headers["x-ms-structured-content-length"] == "10"
    assert reply.body == framed(content[10:20])


def _refused(reply: Reply, status: int, code: str) -> dict[str, str]:
    assert (reply.status, reply.code) == (status, code), reply.body
    assert "x-ms-structured-body" not in reply.headers
    return reply.error_fields()


def test_a_bad_crc_stores_nothing(http: BlobHttp, container: ContainerClient) -> None:
    content = os.urandom(5000)
    body = bytearray(framed(content, 2048))
    body[13 + 10 + 2048 + 8 + 10 + 100] ^= 1  # a byte of the second segment's data
    blob = container.get_blob_client("crc")
    reply = http.request(
        "PUT",
        _path(container, "crc", "?comp=block&blockid=YWFh"),
        structured_headers(len(content)),
        bytes(body),
    )
    fields = _refused(reply, 400, "Crc64Mismatch")
    assert fields["UserSpecifiedCrc"] != fields["ServerCalculatedCrc"]
    with pytest.raises(ResourceNotFoundError):  # no block was staged
        blob.get_block_list("all")

    trailer = bytearray(framed(content, 2048))
    trailer[-1] ^= 0x80  # the message's own CRC
    headers = structured_headers(len(content), **{"x-ms-blob-type": "BlockBlob"})
    _refused(http.request("PUT", _path(container, "crc"), headers, bytes(trailer)), 400, "Crc64Mismatch")
    assert not blob.exists()


def test_bad_frames_are_invalid_input(http: BlobHttp, container: ContainerClient) -> None:
    content = os.urandom(3000)
    body = framed(content, 1024)
    put = {"x-ms-blob-type": "BlockBlob"}
    wrong_length = struct.pack("<BQHH", 1, len(body) + 5, 1, 3) + body[13:]
    out_of_order = body[: 13 + 1024 + 18] + struct.pack("<H", 3) + body[13 + 1024 + 20 :]
    for bad in (wrong_length, out_of_order):
        reply = http.request("PUT", _path(container, "frames"), structured_headers(len(content), **put), bad)
        _refused(reply, 400, "InvalidInput")
    # the content length the header declares must be the one the frames carry
    reply = http.request("PUT", _path(container, "frames"), structured_headers(len(content) - 1, **put), body)
    _refused(reply, 400, "InvalidInput")
    assert not container.get_blob_client("frames").exists()


def test_bad_headers(http: BlobHttp, container: ContainerClient) -> None:
    body = framed(b"abc")
    put = {"x-ms-blob-type": "BlockBlob"}
    reply = http.request("PUT", _path(container, "h"), {"x-ms-structured-body": STRUCTURED, **put}, body)
    assert _refused(reply, 400, "MissingRequiredHeader")["HeaderName"] == "x-ms-structured-content-length"
    reply = http.request(
        "PUT",
        _path(container, "h"),
        {**structured_headers(3), "x-ms-structured-body": "XSM/2.0", **put},
        body,
    )
    fields = _refused(reply, 400, "InvalidHeaderValue")
    assert (fields["HeaderName"], fields["HeaderValue"]) == ("x-ms-structured-body", "XSM/2.0")
    reply = http.request("PUT", _path(container, "h"), structured_headers(len(body), **put), body)
    assert _refused(reply, 400, "InvalidHeaderValue")["HeaderName"] == "x-ms-structured-content-length"
    reply = http.request("GET", _path(container, "h"), {"x-ms-structured-body": "XSM/2.0"})
    assert _refused(reply, 400, "InvalidHeaderValue")["HeaderName"] == "x-ms-structured-body"

    container.get_blob_client("h").upload_blob(b"abc")
    reply = http.request(
        "GET",
        _path(container, "h"),
        {"x-ms-structured-body": STRUCTURED, "x-ms-range": "bytes=0-1", "x-ms-range-get-content-md5": "true"},
    )
    _refused(reply, 400, "InvalidHeaderValue")


def test_the_content_is_what_the_size_limit_counts(http: BlobHttp, container: ContainerClient) -> None:
    """A Put Page of 4 MiB, the most it takes, is a little more than 4 MiB framed."""
    pages = container.get_blob_client("limit")
    pages.create_page_blob(4 * MIB)
    page = os.urandom(4 * MIB)
    headers = structured_headers(
        len(page), **{"x-ms-page-write": "update", "x-ms-range": f"bytes=0-{4 * MIB - 1}"}
    )
    reply = http.request("PUT", _path(container, "limit", "?comp=page"), headers, framed(page, MIB))
    assert reply.status == 201, reply.body
    assert pages.download_blob().readall() == page


def test_before_its_version_the_header_is_ignored(http: BlobHttp, container: ContainerClient) -> None:
    """Azure ignores a header newer than the request's version: the framed body is the content."""
    body = framed(b"abc")
    headers = structured_headers(3, **{"x-ms-blob-type": "BlockBlob", "x-ms-version": "2024-11-04"})
    reply = http.request("PUT", _path(container, "old"), headers, body)
    assert reply.status == 201 and "x-ms-structured-body" not in reply.headers
    assert container.get_blob_client("old").download_blob().readall() == body


def test_requests_without_the_header_are_untouched(
    blob_service: BlobServiceClient, container: ContainerClient
) -> None:
    blob = container.get_blob_client("plain")
    seen = Exchanges()
    blob.upload_blob(b"plain", **seen.hooks())
    assert blob.download_blob(**seen.hooks()).readall() == b"plain"
    assert seen.answered == [None, None]
