"""Structured message bodies on the Data Lake API, on every store: ``azure-storage-file-datalake``
(sync and aio) appending and reading with ``validate_content="crc64"``, and raw DFS appends whose
frames or CRCs are wrong, refused in the DFS API's JSON error format with nothing appended."""

from __future__ import annotations

import asyncio
import os
import uuid
from io import BytesIO

import orjson
from azure.storage.filedatalake import FileSystemClient
from azure.storage.filedatalake.aio import DataLakeServiceClient as AsyncDataLakeServiceClient

from tests.blobhttp import BlobHttp
from tests.serverproc import ServerProcess
from tests.structured_bodies import MIB, STRUCTURED, Exchanges, framed


def test_appends_and_reads(fs: FileSystemClient) -> None:
    first, second = os.urandom(5 * MIB + 1), os.urandom(300)
    file = fs.create_file("dir/data.bin")
    seen = Exchanges()
    file.append_data(BytesIO(first), 0, len(first), validate_content="crc64", **seen.hooks())
    file.append_data(BytesIO(second), len(first), len(second), validate_content="crc64", **seen.hooks())
    assert seen.sent == seen.answered == [STRUCTURED] * 2
    file.flush_data(len(first) + len(second))
    content = first + second
    seen = Exchanges()
    assert file.download_file(validate_content="crc64", **seen.hooks()).readall() == content
    part = file.download_file(offset=4 * MIB, length=MIB + 100, validate_content="crc64", **seen.hooks())
    assert part.readall() == content[4 * MIB : 5 * MIB + 100]
    assert seen.answered and set(seen.answered) == {STRUCTURED}


def test_aio(lake: ServerProcess) -> None:
    content = os.urandom(70_000)

    async def scenario() -> None:
        async with AsyncDataLakeServiceClient.from_connection_string(lake.connection_string) as service:
            fs = await service.create_file_system("fs" + uuid.uuid4().hex[:12])
            file = await fs.create_file("a.bin")
            seen = Exchanges()
            await file.append_data(
                BytesIO(content), 0, len(content), validate_content="crc64", **seen.hooks()
            )
            await file.flush_data(len(content))
            downloader = await file.download_file(validate_content="crc64", **seen.hooks())
            assert await downloader.readall() == content
            assert seen.sent[0] == STRUCTURED and set(seen.answered) == {STRUCTURED}
            await fs.delete_file_system()

    asyncio.run(scenario())


def test_a_bad_append_is_refused_and_appends_nothing(fs: FileSystemClient, lake: ServerProcess) -> None:
    http = BlobHttp(lake.blob_port)
    file = fs.create_file("f.bin")
    content = os.urandom(3000)
    path = f"/{fs.file_system_name}/f.bin?action=append&position=0"
    headers = {"x-ms-structured-body": STRUCTURED, "x-ms-structured-content-length": str(len(content))}

    body = bytearray(framed(content, 1000))
    body[13 + 10 + 5] ^= 1
    reply = http.request("PATCH", path, headers, bytes(body))
    assert (reply.status, reply.code) == (400, "Crc64Mismatch")
    assert orjson.loads(reply.body)["error"]["code"] == "Crc64Mismatch"

    reply = http.request(
        "PATCH", path, {**headers, "x-ms-structured-content-length": "2999"}, framed(content, 1000)
    )
    assert (reply.status, reply.code) == (400, "InvalidInput")

    reply = http.request("PATCH", path, {"x-ms-structured-body": STRUCTURED}, framed(content, 1000))
    assert (reply.status, reply.code) == (400, "MissingRequiredHeader")

    reply = http.request("PATCH", path + "&flush=true", headers, framed(content, 1000))
    assert reply.status == 202 and reply.headers["x-ms-structured-body"] == STRUCTURED
    assert file.download_file().readall() == content  # only the good append's bytes
