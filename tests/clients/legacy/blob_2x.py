"""Blob operations through the legacy azure-storage-blob 2.1.0 (BlockBlobService, AppendBlobService,
PageBlobService; x-ms-version 2019-02-02), run by tests/clients/test_legacy_python_sdks.py in a
virtual environment of its own. Prints "ok" or raises. argv: the Blob endpoint's URL, a name."""

import datetime
import io
import os
import sys

from azure.common import AzureHttpError
from azure.storage.blob import AppendBlobService, BlobBlock, BlockBlobService, PageBlobService
from azure.storage.blob.models import (
    BatchDeleteSubRequest,
    BatchSetBlobTierSubRequest,
    BlobPermissions,
    ContainerPermissions,
    PublicAccess,
    StandardBlobTier,
)
from azure.storage.common.models import AccessPolicy

ENDPOINT, NAME = sys.argv[1], sys.argv[2]
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
CONNECTION = (
    f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={KEY};BlobEndpoint={ENDPOINT};"
)
SOON = datetime.datetime.utcnow() + datetime.timedelta(hours=1)


def refused(call, code):
    try:
        call()
    except AzureHttpError as error:
        assert f"ErrorCode: {code}" in str(error), str(error)
        return
    raise AssertionError(f"expected {code}")


def no_retry(service):
    service.retry = lambda context: None
    return service


blocks, appends, pages = (
    no_retry(cls(connection_string=CONNECTION))
    for cls in (BlockBlobService, AppendBlobService, PageBlobService)
)
c = NAME
assert blocks.create_container(c, metadata={"team": "blue"}, fail_on_exist=True)
assert not blocks.create_container(c)
assert c in [x.name for x in blocks.list_containers(prefix=c, include_metadata=True)]
blocks.set_container_acl(
    c, {"pol": AccessPolicy(ContainerPermissions.READ, expiry=SOON)}, public_access=PublicAccess.Blob
)
assert blocks.get_container_acl(c).public_access == "blob"

# one shot and in blocks, by bytes and from a stream; ranged and parallel downloads
data = os.urandom(5000)
blocks.MAX_SINGLE_PUT_SIZE = blocks.MAX_BLOCK_SIZE = 1024
blocks.MAX_SINGLE_GET_SIZE = blocks.MAX_CHUNK_GET_SIZE = 1024
blocks.create_blob_from_bytes(c, "small.txt", b"hello", metadata={"m": "v"})
blocks.create_blob_from_bytes(c, "big.bin", data, max_connections=2)
blocks.create_blob_from_stream(c, "stream.bin", io.BytesIO(data), count=None, max_connections=2)
blocks.create_blob_from_bytes(c, "md5.bin", data, validate_content=True)
assert blocks.get_blob_to_bytes(c, "big.bin", max_connections=2).content == data
assert blocks.get_blob_to_bytes(c, "stream.bin").content == data
assert (
    blocks.get_blob_to_bytes(c, "big.bin", start_range=10, end_range=1500, validate_content=False).content
    == data[10:1501]
)
assert (
    blocks.get_blob_to_bytes(c, "big.bin", start_range=0, end_range=99, validate_content=True).content
    == data[:100]
)
assert blocks.get_blob_properties(c, "small.txt").properties.content_length == 5
blocks.set_blob_metadata(c, "small.txt", {"k": "v2"})
assert blocks.get_blob_metadata(c, "small.txt") == {"k": "v2"}
assert [b.name for b in blocks.list_blobs(c, num_results=2)] == ["big.bin", "md5.bin"]
blocks.put_block(c, "staged", b"AAAA", "YmxvY2sx")
blocks.put_block(c, "staged", b"BBBB", "YmxvY2sy")
assert len(blocks.get_block_list(c, "staged", block_list_type="uncommitted").uncommitted_blocks) == 2
blocks.put_block_list(c, "staged", [BlobBlock(id="YmxvY2sy"), BlobBlock(id="YmxvY2sx")])
assert blocks.get_blob_to_bytes(c, "staged").content == b"BBBBAAAA"

# snapshots, leases, copies
snapshot = blocks.snapshot_blob(c, "small.txt").snapshot
assert blocks.get_blob_to_bytes(c, "small.txt", snapshot=snapshot).content == b"hello"
lease = blocks.acquire_blob_lease(c, "small.txt", lease_duration=15)
refused(lambda: blocks.create_blob_from_bytes(c, "small.txt", b"x"), "LeaseIdMissing")
blocks.create_blob_from_bytes(c, "small.txt", b"leased", lease_id=lease)
blocks.break_blob_lease(c, "small.txt", lease_break_period=0)
copied = blocks.copy_blob(c, "copy.bin", blocks.make_blob_url(c, "big.bin"))
assert copied.status == "success"
assert blocks.get_blob_to_bytes(c, "copy.bin").content == data

# SAS: a blob's, a stored policy's, and anonymous reads of a public container
token = blocks.generate_blob_shared_access_signature(
    c, "big.bin", permission=BlobPermissions.READ, expiry=SOON
)
by_sas = BlockBlobService(account_name="devstoreaccount1", sas_token=token, custom_domain=ENDPOINT)
assert by_sas.get_blob_to_bytes(c, "big.bin").content == data
by_policy = BlockBlobService(
    account_name="devstoreaccount1",
    sas_token=blocks.generate_blob_shared_access_signature(c, "big.bin", id="pol"),
    custom_domain=ENDPOINT,
)
assert by_policy.get_blob_properties(c, "big.bin").properties.content_length == 5000
anonymous = BlockBlobService(account_name="devstoreaccount1", custom_domain=ENDPOINT)
assert anonymous.get_blob_to_bytes(c, "md5.bin").content == data

# append and page blobs
appends.create_blob(c, "log")
appends.append_block(c, "log", b"one\n")
appends.append_blob_from_bytes(c, "log", data)
refused(lambda: appends.append_block(c, "log", b"x", appendpos_condition=1), "AppendPositionConditionNotMet")
assert appends.get_blob_properties(c, "log").properties.content_length == 5004
pages.create_blob(c, "disk", content_length=4096)
pages.update_page(c, "disk", b"\x01" * 512, start_range=512, end_range=1023)
assert [(r.start, r.end) for r in pages.get_page_ranges(c, "disk")] == [(512, 1023)]
pages.MAX_PAGE_SIZE = 1024
pages.create_blob_from_bytes(c, "sparse", b"\x00" * 2048 + data[:2048])
assert [(r.start, r.end) for r in pages.get_page_ranges(c, "sparse")] == [(2048, 4095)]

# Blob Batch: sub-request paths without the account
tiers = blocks.batch_set_standard_blob_tier([BatchSetBlobTierSubRequest(c, "big.bin", StandardBlobTier.Cool)])
assert [t.http_response.status for t in tiers] == [200]
assert blocks.get_blob_properties(c, "big.bin").properties.blob_tier == "Cool"
deleted = blocks.batch_delete_blobs(
    [BatchDeleteSubRequest(c, "stream.bin"), BatchDeleteSubRequest(c, "copy.bin")]
)
assert [d.http_response.status for d in deleted] == [202, 202]
assert not blocks.exists(c, "stream.bin")

assert blocks.delete_container(c, fail_not_exist=True)
print("ok")
