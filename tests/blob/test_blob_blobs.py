"""Blob service: block blobs, block lists, ranges, properties, metadata, snapshots, copies,
append blobs and listings, through the official SDK (sync and aio) on each store."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os

import pytest
from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError
from azure.storage.blob import BlobBlock, BlobServiceClient, BlobType, ContainerClient, ContentSettings
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

from tests.serverproc import ServerProcess


def md5_b64(data: bytes) -> bytearray:
    return bytearray(hashlib.md5(data).digest())


def test_put_get_properties(container: ContainerClient) -> None:
    data = os.urandom(3000)
    blob = container.get_blob_client("dir/sub/a b+c%.bin")
    settings = ContentSettings(
        content_type="text/plain",
        content_encoding="identity",
        content_language="en",
        content_disposition="inline",
        cache_control="no-store",
    )
    created = blob.upload_blob(data, content_settings=settings, metadata={"Kind": "test"})
    assert created["content_md5"] == md5_b64(data)
    assert created["content_crc64"] is not None
    assert blob.download_blob().readall() == data
    props = blob.get_blob_properties()
    assert props.size == 3000 and props.blob_type == BlobType.BlockBlob
    assert props.content_settings.content_type == "text/plain"
    assert props.content_settings.content_language == "en"
    assert props.content_settings.cache_control == "no-store"
    assert props.content_settings.content_md5 == md5_b64(data)
    assert props.metadata == {"Kind": "test"}
    assert props.etag == created["etag"] and props.creation_time is not None
    with pytest.raises(ResourceExistsError) as raised:
        blob.upload_blob(b"again")  # upload_blob does not overwrite unless asked
    assert raised.value.error_code == "BlobAlreadyExists"
    replaced = blob.upload_blob(b"again", overwrite=True)
    assert replaced["etag"] != created["etag"]
    assert blob.download_blob().readall() == b"again"


def test_ranges(container: ContainerClient) -> None:
    data = bytes(range(256)) * 40
    blob = container.get_blob_client("ranged")
    blob.upload_blob(data)
    assert blob.download_blob(offset=10, length=5).readall() == data[10:15]
    assert blob.download_blob(offset=10000).readall() == data[10000:]
    assert blob.download_blob(offset=len(data) - 1, length=100).readall() == data[-1:]
    with pytest.raises(HttpResponseError) as raised:
        blob.download_blob(offset=len(data) + 5, length=3)
    assert raised.value.status_code == 416 and raised.value.error_code == "InvalidRange"
    checked = blob.download_blob(offset=100, length=1000, validate_content=True)
    assert checked.readall() == data[100:1100]
    empty = container.get_blob_client("empty")
    empty.upload_blob(b"")
    assert empty.download_blob().readall() == b""  # 416 on the first ranged GET, then a plain GET


def test_chunked_download_and_upload(server: ServerProcess, container: ContainerClient) -> None:
    service = BlobServiceClient.from_connection_string(
        server.connection_string,
        max_single_put_size=1024 * 1024,
        max_block_size=512 * 1024,
        max_single_get_size=512 * 1024,
        max_chunk_get_size=256 * 1024,
    )
    data = os.urandom(3 * 1024 * 1024 + 17)
    blob = service.get_blob_client(container.container_name, "chunked")
    blob.upload_blob(data, max_concurrency=4)
    assert len(blob.get_block_list()[0]) == 7
    assert blob.download_blob(max_concurrency=3).readall() == data


def test_block_list_out_of_order_and_kinds(container: ContainerClient) -> None:
    blob = container.get_blob_client("blocks")
    ids = [base64.b64encode(f"block-{i:03d}".encode()).decode() for i in range(5)]
    for i in reversed(range(5)):  # staged in reverse order
        blob.stage_block(ids[i], f"<{i}>".encode())
    committed, uncommitted = blob.get_block_list("all")
    assert committed == [] and sorted(b.id for b in uncommitted) == sorted(ids)
    assert not blob.exists()  # only staged blocks: no blob yet
    blob.commit_block_list([BlobBlock(ids[3]), BlobBlock(ids[1]), BlobBlock(ids[3]), BlobBlock(ids[0])])
    assert blob.download_blob().readall() == b"<3><1><3><0>"
    committed, uncommitted = blob.get_block_list("all")
    assert [b.id for b in committed] == [ids[3], ids[1], ids[3], ids[0]]
    assert uncommitted == []  # the rest were discarded
    # Committed blocks can be kept while new ones are added.
    new = base64.b64encode(b"block-new").decode()
    blob.stage_block(new, b"<n>")
    blob.commit_block_list([BlobBlock(ids[0]), BlobBlock(new)])
    assert blob.download_blob().readall() == b"<0><n>"
    with pytest.raises(HttpResponseError) as raised:
        blob.commit_block_list([BlobBlock(base64.b64encode(b"block-zzz").decode())])
    assert raised.value.error_code == "InvalidBlockList"
    assert blob.download_blob().readall() == b"<0><n>"  # a failed commit changes nothing


def test_properties_metadata_etags(container: ContainerClient) -> None:
    blob = container.get_blob_client("props")
    first = blob.upload_blob(b"x")["etag"]
    blob.set_http_headers(ContentSettings(content_type="image/png", content_language="fr"))
    props = blob.get_blob_properties()
    assert props.content_settings.content_type == "image/png"
    assert props.content_settings.content_md5 is None  # left out: cleared
    second = props.etag
    assert second != first
    blob.set_blob_metadata({"A": "1", "b": "two"})
    props = blob.get_blob_properties()
    assert props.metadata == {"A": "1", "b": "two"} and props.etag != second
    with pytest.raises(HttpResponseError) as stale:
        blob.set_blob_metadata({}, etag=first, match_condition=MatchConditions.IfNotModified)
    assert stale.value.status_code == 412 and stale.value.error_code == "ConditionNotMet"


def test_snapshots(container: ContainerClient) -> None:
    blob = container.get_blob_client("snap")
    blob.upload_blob(b"v1", metadata={"v": "1"})
    snapshot = blob.create_snapshot()
    blob.upload_blob(b"v2", overwrite=True)
    old = container.get_blob_client("snap", snapshot=snapshot["snapshot"])
    assert old.download_blob().readall() == b"v1"
    assert old.get_blob_properties().metadata == {"v": "1"}
    assert blob.download_blob().readall() == b"v2"
    listed = [(b.name, b.snapshot) for b in container.list_blobs(include=["snapshots"])]
    assert listed == [("snap", snapshot["snapshot"]), ("snap", None)]  # snapshots first
    with pytest.raises(HttpResponseError) as raised:
        blob.delete_blob()
    assert raised.value.error_code == "SnapshotsPresent"
    blob.delete_blob(delete_snapshots="only")
    assert not old.exists() and blob.exists()
    second = blob.create_snapshot()
    container.get_blob_client("snap", snapshot=second["snapshot"]).delete_blob()
    blob.create_snapshot()
    blob.delete_blob(delete_snapshots="include")
    assert list(container.list_blobs(include=["snapshots"])) == []


def test_copy_within_account(blob_service: BlobServiceClient, container: ContainerClient) -> None:
    source = container.get_blob_client("source")
    data = os.urandom(200_000)
    source.upload_blob(data, metadata={"from": "source"})
    target = container.get_blob_client("target")
    copy = target.start_copy_from_url(source.url)
    assert copy["copy_status"] == "success"
    props = target.get_blob_properties()
    assert props.copy.status == "success" and props.copy.id == copy["copy_id"]
    assert props.metadata == {"from": "source"}
    assert target.download_blob().readall() == data
    source.upload_blob(b"changed", overwrite=True)  # the copy does not follow its source
    assert target.download_blob().readall() == data
    missing = container.get_blob_client("nothing-here")
    with pytest.raises(ResourceNotFoundError):
        container.get_blob_client("copy2").start_copy_from_url(missing.url)


def test_append_blob(container: ContainerClient) -> None:
    blob = container.get_blob_client("log")
    blob.create_append_blob()
    offsets = [int(blob.append_block(f"line {i}\n".encode())["blob_append_offset"]) for i in range(3)]
    assert offsets == [0, 7, 14]
    props = blob.get_blob_properties()
    assert props.blob_type == BlobType.AppendBlob and props.size == 21
    with pytest.raises(HttpResponseError) as pos:
        blob.append_block(b"x", appendpos_condition=5)
    assert pos.value.status_code == 412 and pos.value.error_code == "AppendPositionConditionNotMet"
    with pytest.raises(HttpResponseError) as size:
        blob.append_block(b"xx", maxsize_condition=22)
    assert size.value.error_code == "MaxBlobSizeConditionNotMet"
    blob.append_block(b"ok", appendpos_condition=21, maxsize_condition=23)
    assert blob.download_blob().readall() == b"line 0\nline 1\nline 2\nok"
    block_blob = container.get_blob_client("notappend")
    block_blob.upload_blob(b"x")
    with pytest.raises(HttpResponseError) as wrong:
        block_blob.append_block(b"y")
    assert wrong.value.status_code == 409 and wrong.value.error_code == "InvalidBlobType"


def test_listing_delimiter_paging_uncommitted(container: ContainerClient) -> None:
    names = ["a/1", "a/2", "b", "c/x/1", "c/y", "d"]
    for name in names:
        container.upload_blob(name, b"x", metadata={"n": name.replace("/", "_")})
    container.get_blob_client("e").stage_block("YmxvY2s=", b"staged")
    assert [b.name for b in container.list_blobs()] == names
    assert [b.name for b in container.list_blobs(name_starts_with="c/")] == ["c/x/1", "c/y"]
    walked = {item.name for item in container.walk_blobs(delimiter="/")}
    assert walked == {"a/", "b", "c/", "d"}
    pages = [[b.name for b in page] for page in container.list_blobs(results_per_page=4).by_page()]
    assert pages == [names[:4], names[4:]]
    with_uncommitted = {b.name: b.size for b in container.list_blobs(include=["uncommittedblobs"])}
    assert with_uncommitted["e"] == 0 and "e" not in {b.name for b in container.list_blobs()}
    with_metadata = {b.name: b.metadata for b in container.list_blobs(include=["metadata"])}
    assert with_metadata["c/y"] == {"n": "c_y"}


def test_delete_blob_of_staged_blocks_only(container: ContainerClient) -> None:
    """A blob with only uncommitted blocks is deleted (202) with its blocks, as Azure answers
    (recorded in the JS SDK's "listBlobsFlat to list uncommitted blobs")."""
    blob = container.get_blob_client("staged")
    blob.stage_block("YmxvY2s=", b"Hello")
    blob.delete_blob()
    assert "staged" not in {b.name for b in container.list_blobs(include=["uncommittedblobs"])}
    blob.stage_block("b3RoZXI=", b"again")  # a fresh start: the old block is gone
    _committed, uncommitted = blob.get_block_list("uncommitted")
    assert [b.id for b in uncommitted] == ["b3RoZXI="]
    with pytest.raises(ResourceNotFoundError):
        container.get_blob_client("never").delete_blob()


def test_delete_blob(container: ContainerClient) -> None:
    blob = container.get_blob_client("gone")
    blob.upload_blob(b"x")
    blob.delete_blob()
    with pytest.raises(ResourceNotFoundError) as raised:
        blob.get_blob_properties()
    assert raised.value.error_code == "BlobNotFound"
    with pytest.raises(ResourceNotFoundError):
        blob.delete_blob()


def test_blobs_aio(server: ServerProcess, container: ContainerClient) -> None:
    async def run() -> None:
        async with AsyncBlobServiceClient.from_connection_string(
            server.connection_string, max_single_put_size=64 * 1024, max_block_size=32 * 1024
        ) as service:
            client = service.get_container_client(container.container_name)
            data = os.urandom(200_000)
            blob = client.get_blob_client("aio/big")
            await blob.upload_blob(data)
            assert len((await blob.get_block_list())[0]) == 7
            stream = await blob.download_blob(offset=1000, length=5000)
            assert await stream.readall() == data[1000:6000]
            append = client.get_blob_client("aio/log")
            await append.create_append_blob()
            await append.append_block(b"one")
            await append.append_block(b"two")
            assert await (await append.download_blob()).readall() == b"onetwo"
            names = [b.name async for b in client.list_blobs(name_starts_with="aio/")]
            assert names == ["aio/big", "aio/log"]
            await blob.delete_blob()
            with pytest.raises(ResourceNotFoundError):
                await blob.get_blob_properties()

    asyncio.run(run())
