"""Page blobs through the official SDK (sync and aio) on each store: creation, Put Page (update
and clear), Get Page Ranges with a range, a diff and paging, resizing, sequence numbers,
snapshots, copies, Incremental Copy, listings, the refusals between blob types, and sparse
storage (an 8 TiB blob with 1 MiB written keeps about 1 MiB)."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError, ResourceModifiedError
from azure.storage.blob import (
    BlobClient,
    BlobSasPermissions,
    BlobType,
    ContainerClient,
    SequenceNumberAction,
    generate_blob_sas,
)
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

from tests.serverproc import DEV_KEY, ServerProcess

KIB, MIB, TIB = 1024, 1024 * 1024, 1024**4


def ranges_of(blob: BlobClient, **kwargs: object) -> list[tuple[int, int, bool]]:
    return [(r.start, r.end, r.cleared) for r in blob.list_page_ranges(**kwargs)]  # type: ignore[arg-type]


def test_create_write_read(container: ContainerClient) -> None:
    blob = container.get_blob_client("disk.vhd")
    created = blob.create_page_blob(8 * KIB, metadata={"kind": "disk"}, sequence_number=7)
    props = blob.get_blob_properties()
    assert props.blob_type == BlobType.PageBlob and props.size == 8 * KIB
    assert props.page_blob_sequence_number == 7 and props.metadata == {"kind": "disk"}
    assert props.etag == created["etag"]
    assert blob.download_blob().readall() == bytes(8 * KIB)  # nothing written: zeros
    data = os.urandom(2 * KIB)
    written = blob.upload_page(data, offset=1 * KIB, length=2 * KIB)
    assert written["blob_sequence_number"] == 7 and written["content_crc64"] is not None
    assert written["etag"] != created["etag"]
    assert blob.download_blob().readall() == bytes(KIB) + data + bytes(5 * KIB)
    assert blob.download_blob(offset=1536, length=1024).readall() == data[512:1536]
    assert blob.download_blob(offset=6 * KIB).readall() == bytes(2 * KIB)
    assert ranges_of(blob) == [(1024, 3071, False)]
    overwrite = os.urandom(512)
    blob.upload_page(overwrite, offset=2 * KIB, length=512, validate_content=True)
    expected = bytes(KIB) + data[:KIB] + overwrite + data[1536:] + bytes(5 * KIB)
    assert blob.download_blob().readall() == expected
    blob.clear_page(offset=1 * KIB, length=512)
    expected = bytes(1536) + expected[1536:]
    assert blob.download_blob().readall() == expected
    assert ranges_of(blob) == [(1536, 3071, False)]


def test_ranges_offset_and_paging(container: ContainerClient) -> None:
    blob = container.get_blob_client("ranges")
    blob.create_page_blob(4 * KIB)
    page = os.urandom(512)
    for offset in (0, 1024, 2048, 3072):
        blob.upload_page(page, offset=offset, length=512)
    assert ranges_of(blob, offset=1024, length=1536) == [(1024, 1535, False), (2048, 2559, False)]
    pages = blob.list_page_ranges(results_per_page=3).by_page()
    assert [len(list(p)) for p in pages] == [3, 1]
    ranges, cleared = blob.get_page_ranges()
    assert [r["start"] for r in ranges] == [0, 1024, 2048, 3072] and cleared == []


def test_diff_against_snapshots(container: ContainerClient) -> None:
    blob = container.get_blob_client("diff")
    blob.create_page_blob(2048)
    first = blob.create_snapshot()
    blob.upload_page(os.urandom(1536), offset=0, length=1536)
    second = blob.create_snapshot()
    blob.clear_page(offset=512, length=512)
    assert ranges_of(blob, previous_snapshot=first) == [
        (0, 511, False),
        (512, 1023, True),
        (1024, 1535, False),
    ]
    assert ranges_of(blob, previous_snapshot=second["snapshot"]) == [(512, 1023, True)]
    pages = blob.list_page_ranges(previous_snapshot=first, results_per_page=2).by_page()
    assert [len(list(p)) for p in pages] == [2, 1]
    # a snapshot keeps its pages after the base changes
    old = container.get_blob_client("diff", snapshot=second["snapshot"])
    assert old.download_blob().readall()[512:1024] != bytes(512)
    assert [(r.start, r.end) for r in old.list_page_ranges()] == [(0, 1535)]


def test_resize_and_sequence_numbers(container: ContainerClient) -> None:
    blob = container.get_blob_client("resize")
    blob.create_page_blob(4096)
    blob.upload_page(os.urandom(4096), offset=0, length=4096)
    blob.resize_blob(1024)
    assert blob.get_blob_properties().size == 1024
    assert ranges_of(blob) == [(0, 1023, False)]
    blob.resize_blob(8192)  # growing adds unwritten pages
    assert blob.download_blob().readall()[1024:] == bytes(7168)
    assert blob.set_sequence_number(SequenceNumberAction.Update, 10)["blob_sequence_number"] == 10
    assert blob.set_sequence_number(SequenceNumberAction.Max, 5)["blob_sequence_number"] == 10
    assert blob.set_sequence_number(SequenceNumberAction.Increment)["blob_sequence_number"] == 11
    assert blob.get_blob_properties().page_blob_sequence_number == 11
    blob.upload_page(bytes(512), offset=0, length=512, if_sequence_number_lte=11)
    blob.upload_page(bytes(512), offset=0, length=512, if_sequence_number_eq=11)
    with pytest.raises(HttpResponseError) as raised:
        blob.upload_page(bytes(512), offset=0, length=512, if_sequence_number_lt=11)
    assert raised.value.status_code == 412 and raised.value.error_code == "SequenceNumberConditionNotMet"
    with pytest.raises(HttpResponseError) as raised:
        blob.clear_page(offset=0, length=512, if_sequence_number_eq=3)
    assert raised.value.error_code == "SequenceNumberConditionNotMet"


def test_conditions_and_leases(container: ContainerClient) -> None:
    blob = container.get_blob_client("leased")
    blob.create_page_blob(1024)
    lease = blob.acquire_lease()
    with pytest.raises(HttpResponseError) as raised:
        blob.upload_page(bytes(512), offset=0, length=512)
    assert raised.value.error_code == "LeaseIdMissing"
    blob.upload_page(os.urandom(512), offset=0, length=512, lease=lease)
    etag = blob.get_blob_properties().etag
    with pytest.raises(ResourceModifiedError):
        blob.upload_page(
            bytes(512),
            offset=512,
            length=512,
            lease=lease,
            etag="0x1",
            match_condition=MatchConditions.IfNotModified,
        )
    blob.upload_page(
        bytes(512),
        offset=512,
        length=512,
        lease=lease,
        etag=etag,
        match_condition=MatchConditions.IfNotModified,
    )
    with pytest.raises(HttpResponseError) as raised:
        blob.create_page_blob(1024)  # replacing a leased blob needs its lease
    assert raised.value.error_code == "LeaseIdMissing"
    blob.create_page_blob(1024, lease=lease)
    assert ranges_of(blob) == []
    lease.release()


def test_snapshot_copy_and_listing(container: ContainerClient) -> None:
    blob = container.get_blob_client("source")
    blob.create_page_blob(4096, sequence_number=3)
    data = os.urandom(1024)
    blob.upload_page(data, offset=1024, length=1024)
    copy = container.get_blob_client("copied")
    copy.start_copy_from_url(blob.url)
    assert copy.download_blob().readall() == bytes(1024) + data + bytes(2048)
    assert ranges_of(copy) == [(1024, 2047, False)]
    blob.upload_page(os.urandom(1024), offset=1024, length=1024)  # the copy keeps its bytes
    assert copy.download_blob().readall()[1024:2048] == data
    listed = {b.name: b for b in container.list_blobs(include=["snapshots"])}
    assert listed["copied"].blob_type == BlobType.PageBlob and listed["copied"].size == 4096
    assert listed["source"].page_blob_sequence_number == 3
    blob.delete_blob()
    assert copy.download_blob().readall()[1024:2048] == data


def test_blob_type_refusals(container: ContainerClient) -> None:
    page = container.get_blob_client("page")
    page.create_page_blob(1024)
    for attempt in (
        lambda: page.append_block(b"x"),
        lambda: page.stage_block("YQ==", b"x"),
        lambda: page.commit_block_list([]),
    ):
        with pytest.raises(HttpResponseError) as raised:
            attempt()
        assert raised.value.status_code == 409 and raised.value.error_code == "InvalidBlobType"
    block = container.get_blob_client("block")
    block.upload_blob(b"x" * 512)
    with pytest.raises(HttpResponseError) as raised:
        block.upload_page(bytes(512), offset=0, length=512)
    assert raised.value.error_code == "InvalidBlobType"
    with pytest.raises(HttpResponseError) as raised:
        block.list_page_ranges().__next__()
    assert raised.value.error_code == "InvalidBlobType"
    with pytest.raises(HttpResponseError) as raised:
        block.resize_blob(1024)
    assert raised.value.error_code == "InvalidBlobType"
    # replacing a page blob by a block blob leaves no pages behind, and back again
    page.upload_blob(b"block now", overwrite=True)
    assert page.download_blob().readall() == b"block now"
    page.create_page_blob(1024)
    assert page.download_blob().readall() == bytes(1024) and ranges_of(page) == []


def test_incremental_copy(server: ServerProcess, container: ContainerClient) -> None:
    source = container.get_blob_client("vm.vhd")
    source.create_page_blob(2048, metadata={"sourcemeta": "val"})
    data = os.urandom(512)
    source.upload_page(data, offset=0, length=512)
    snapshot = source.create_snapshot()["snapshot"]
    token = generate_blob_sas(
        "devstoreaccount1", container.container_name, "vm.vhd", snapshot=snapshot, account_key=DEV_KEY,
        permission=BlobSasPermissions(read=True), expiry=datetime.now(UTC) + timedelta(hours=1),
    )  # fmt: skip
    url = f"{source.url}?snapshot={snapshot}&{token}"
    dest = container.get_blob_client("backup.vhd")
    started = dest.start_copy_from_url(url, incremental_copy=True)
    assert started["copy_status"] == "pending" and started["copy_id"]
    props = dest.get_blob_properties()
    assert props.copy.status == "success" and props.copy.incremental_copy
    # the source's SAS signature is not kept (readable by whoever may read the properties)
    assert props.copy.source and "sig=" not in props.copy.source and "sp=r" in props.copy.source
    assert props.metadata == {"sourcemeta": "val"}  # the snapshot's, as Azure's recorded copy has
    kept = props.copy.destination_snapshot
    assert kept
    copied = container.get_blob_client("backup.vhd", snapshot=kept)
    assert copied.download_blob().readall() == data + bytes(1536)
    # a later snapshot copies again; an earlier one is refused
    source.upload_page(os.urandom(512), offset=1024, length=512)
    later = source.create_snapshot()["snapshot"]
    dest.start_copy_from_url(url.replace(snapshot, later), incremental_copy=True)
    assert [(r.start, r.end) for r in dest.list_page_ranges()] == [(0, 511), (1024, 1535)]
    with pytest.raises(HttpResponseError) as raised:
        dest.start_copy_from_url(url, incremental_copy=True)
    assert raised.value.error_code == "IncrementalCopyOfEarlierVersionSnapshotNotAllowed"
    with pytest.raises(HttpResponseError) as raised:
        dest.upload_page(bytes(512), offset=0, length=512)
    assert raised.value.error_code == "OperationNotAllowedOnIncrementalCopyBlob"
    with pytest.raises(HttpResponseError) as raised:
        container.get_blob_client("other").start_copy_from_url(source.url, incremental_copy=True)
    assert raised.value.error_code == "IncrementalCopySourceMustBeSnapshot"


def test_incremental_copy_missing_source(container: ContainerClient) -> None:
    """A source snapshot that does not exist: 404 CannotVerifyCopySource naming the source's
    404 BlobNotFound in headers and document, with the source's message, as Azure answers the
    .NET SDK's StartCopyIncrementalAsync_Error (x-ms-version 2024-08-04)."""
    snapshot = "2019-03-29T18:12:15.6608647Z"
    token = generate_blob_sas(
        "devstoreaccount1", container.container_name, "absent.vhd", snapshot=snapshot, account_key=DEV_KEY,
        permission=BlobSasPermissions(read=True), expiry=datetime.now(UTC) + timedelta(hours=1),
    )  # fmt: skip
    source = container.get_blob_client("absent.vhd")
    dest = container.get_blob_client("copy-of-absent.vhd")
    dest.create_page_blob(4096)
    with pytest.raises(HttpResponseError) as raised:
        dest.start_copy_from_url(f"{source.url}?snapshot={snapshot}&{token}", incremental_copy=True)
    error = raised.value
    assert (error.status_code, error.error_code) == (404, "CannotVerifyCopySource")
    assert error.response is not None
    headers = error.response.headers
    assert (headers["x-ms-copy-source-status-code"], headers["x-ms-copy-source-error-code"]) == (
        "404",
        "BlobNotFound",
    )
    body = error.response.text()
    assert "<Message>The specified blob does not exist.\n" in body
    assert "<CopySourceStatusCode>404</CopySourceStatusCode>" in body
    assert "<CopySourceErrorCode>BlobNotFound</CopySourceErrorCode>" in body
    assert "<CopySourceErrorMessage>The specified blob does not exist.</CopySourceErrorMessage>" in body


def test_page_blobs_aio(server: ServerProcess, container: ContainerClient) -> None:
    async def run() -> None:
        async with AsyncBlobServiceClient.from_connection_string(server.connection_string) as service:
            blob = service.get_blob_client(container.container_name, "aio.vhd")
            await blob.create_page_blob(4096)
            data = os.urandom(1024)
            await blob.upload_page(data, offset=2048, length=1024)
            snapshot = await blob.create_snapshot()
            await blob.clear_page(offset=2048, length=512)
            ranges = [(r.start, r.end, r.cleared) async for r in blob.list_page_ranges()]
            assert ranges == [(2560, 3071, False)]
            diff = [(r.start, r.cleared) async for r in blob.list_page_ranges(previous_snapshot=snapshot)]
            assert diff == [(2048, True)]
            content = await (await blob.download_blob()).readall()
            assert content == bytes(2560) + data[512:] + bytes(1024)
            await blob.resize_blob(2048)
            await blob.set_sequence_number(SequenceNumberAction.Increment)
            props = await blob.get_blob_properties()
            assert props.size == 2048 and props.page_blob_sequence_number == 1
            with pytest.raises(HttpResponseError) as raised:
                await blob.upload_page(bytes(512), offset=0, length=512, if_sequence_number_lt=1)
            assert raised.value.error_code == "SequenceNumberConditionNotMet"

    asyncio.run(run())


def _content_bytes(server: ServerProcess, container: str, name: str) -> int:
    """The bytes the store keeps for a blob's pages: its extents' files and rows (SQLite), its
    chunk rows (PostgreSQL and Citus)."""
    if server.backend == "sqlite":
        conn = sqlite3.connect(f"file:{server.data_dir / 'tabulae.db'}?mode=ro", uri=True)
        try:
            refs = [
                row[0]
                for row in conn.execute(
                    "SELECT DISTINCT p.ref FROM blob_pages p JOIN blob_containers c ON c.id = p.container_id"
                    " WHERE c.name = ? AND p.name = ? AND NOT p.cleared",
                    (container, name),
                )
            ]
            total = 0
            for ref in refs:
                if ref.startswith("i"):
                    total += conn.execute(
                        "SELECT length(data) FROM blob_data WHERE ref = ?", (ref,)
                    ).fetchone()[0]
                else:
                    total += (Path(server.data_dir) / "blobs" / ref[1:3] / ref[1:]).stat().st_size
            return total
        finally:
            conn.close()
    import psycopg

    url = server.extra_args[server.extra_args.index("--store") + 1]
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(octet_length(k.data)), 0) FROM blob_chunks k"
            " WHERE (k.dkey, k.ref) IN (SELECT p.dkey, p.ref FROM blob_pages p WHERE p.name = %s"
            " AND NOT p.cleared AND p.container_id = (SELECT id FROM blob_containers WHERE name = %s))",
            (name, container),
        ).fetchone()
    assert row is not None
    return int(row[0])


def _span_rows(server: ServerProcess, container: str, name: str) -> int:
    """How many page spans the store keeps for every version of a blob."""
    sql = (
        "SELECT count(*) FROM blob_pages WHERE name = {p} AND container_id ="
        " (SELECT id FROM blob_containers WHERE name = {p})"
    )
    if server.backend == "sqlite":
        conn = sqlite3.connect(f"file:{server.data_dir / 'tabulae.db'}?mode=ro", uri=True)
        try:
            return int(conn.execute(sql.format(p="?"), (name, container)).fetchone()[0])
        finally:
            conn.close()
    import psycopg

    url = server.extra_args[server.extra_args.index("--store") + 1]
    with psycopg.connect(url) as conn:
        row = conn.execute(sql.format(p="%s"), (name, container)).fetchone()
    assert row is not None
    return int(row[0])


def test_deletes_leave_no_spans(server: ServerProcess, container: ContainerClient) -> None:
    """A page blob's snapshot keeps its spans when the base becomes a block blob, and they go
    when the snapshots are deleted; so do a deleted page blob's and a deleted snapshot's."""
    blob = container.get_blob_client("turned.vhd")
    blob.create_page_blob(1024)
    blob.upload_page(os.urandom(512), offset=0, length=512)
    kept = blob.create_snapshot()["snapshot"]
    blob.upload_blob(b"a block blob now", overwrite=True)
    assert _span_rows(server, container.container_name, "turned.vhd") == 1
    assert container.get_blob_client("turned.vhd", snapshot=kept).download_blob().readall()[512:] == bytes(
        512
    )
    blob.delete_blob(delete_snapshots="include")
    assert _span_rows(server, container.container_name, "turned.vhd") == 0
    other = container.get_blob_client("other.vhd")
    other.create_page_blob(1024)
    other.upload_page(os.urandom(1024), offset=0, length=1024)
    first = other.create_snapshot()["snapshot"]
    container.get_blob_client("other.vhd", snapshot=first).delete_blob()
    assert _span_rows(server, container.container_name, "other.vhd") == 1
    other.delete_blob()
    assert _span_rows(server, container.container_name, "other.vhd") == 0


def test_sparse_8tib_blob(server: ServerProcess, container: ContainerClient) -> None:
    blob = container.get_blob_client("sparse.vhd")
    blob.create_page_blob(8 * TIB)
    pieces = [
        (0, os.urandom(256 * KIB)),
        (TIB, os.urandom(256 * KIB)),
        (8 * TIB - 512 * KIB, os.urandom(512 * KIB)),
    ]
    for offset, data in pieces:
        blob.upload_page(data, offset=offset, length=len(data))
    assert blob.get_blob_properties().size == 8 * TIB
    assert ranges_of(blob) == [(o, o + len(d) - 1, False) for o, d in pieces]
    assert blob.download_blob(offset=TIB - 512, length=1024).readall() == bytes(512) + pieces[1][1][:512]
    assert blob.download_blob(offset=8 * TIB - 512 * KIB).readall() == pieces[2][1]
    stored = _content_bytes(server, container.container_name, "sparse.vhd")
    assert MIB <= stored < MIB + 64 * KIB  # the written mebibyte, not 8 TiB
    blob.clear_page(offset=0, length=256 * KIB)
    assert _content_bytes(server, container.container_name, "sparse.vhd") < 800 * KIB


def test_overwritten_pages_become_garbage(server: ServerProcess, container: ContainerClient) -> None:
    """An extent no span names any more is garbage; one a snapshot still names is not."""
    if server.backend != "sqlite":
        pytest.skip("the garbage table is read directly on SQLite; the plans are the same on every engine")
    blob = container.get_blob_client("gc.vhd")
    blob.create_page_blob(128 * KIB)
    blob.upload_page(os.urandom(128 * KIB), offset=0, length=128 * KIB)
    conn = sqlite3.connect(f"file:{server.data_dir / 'tabulae.db'}?mode=ro", uri=True)
    try:
        (first,) = conn.execute("SELECT DISTINCT ref FROM blob_pages WHERE name = 'gc.vhd'").fetchone()
        snapshot = blob.create_snapshot()["snapshot"]
        blob.upload_page(os.urandom(128 * KIB), offset=0, length=128 * KIB)
        garbage = conn.execute("SELECT count(*) FROM blob_garbage WHERE ref = ?", (first,)).fetchone()[0]
        assert garbage == 0  # the snapshot still reads it
        blob.delete_blob(delete_snapshots="only")
        assert conn.execute("SELECT count(*) FROM blob_garbage WHERE ref = ?", (first,)).fetchone()[0] == 1
        assert container.get_blob_client("gc.vhd", snapshot=snapshot).exists() is False
    finally:
        conn.close()
