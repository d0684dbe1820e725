"""Blob index tags through the SDK (sync and aio) on each store: Set and Get Blob Tags (on blobs
and snapshots), tags set with the blob (Put Blob, Put Block List, Copy Blob), the tag count in
properties and listings, Find Blobs by Tags on the account and in a container (the index follows
every write), ``x-ms-if-tags`` conditions, leases, SAS permissions ``t`` and ``f``, and the
errors Azure answers bad tags and filters with (raw HTTP where the SDK checks first)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import pytest
from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError, ResourceModifiedError
from azure.storage.blob import (
    AccountSasPermissions,
    BlobBlock,
    BlobClient,
    BlobSasPermissions,
    BlobServiceClient,
    ContainerClient,
    ContainerSasPermissions,
    ResourceTypes,
    generate_account_sas,
    generate_blob_sas,
    generate_container_sas,
)
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

from tests.blobhttp import BlobHttp
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess

HOUR = timedelta(hours=1)


def unique() -> str:
    """A tag value no other test (the server is shared) uses."""
    return uuid.uuid4().hex[:12]


def names(found: object) -> list[tuple[str, str]]:
    return [(item["container_name"], item["name"]) for item in found]  # type: ignore[attr-defined]


def test_set_get_and_count(container: ContainerClient) -> None:
    blob = container.get_blob_client("tagged")
    tags = {"tag1": "firsttag", "+-./:=_ ": "v", "empty": ""}
    etag = blob.upload_blob(b"abc", tags=tags)["etag"]
    assert blob.get_blob_tags() == tags
    props = blob.get_blob_properties()
    assert props.tag_count == 3
    assert blob.download_blob().properties.tag_count == 3
    blob.set_blob_tags({"other": "value"})
    assert blob.get_blob_tags() == {"other": "value"}
    assert blob.get_blob_properties().etag == etag  # tags are not what the ETag describes
    listed = list(container.list_blobs(include=["tags"]))
    assert [(b.name, b.tag_count, b.tags) for b in listed] == [("tagged", 1, {"other": "value"})]
    plain = list(container.list_blobs())
    assert plain[0].tags is None and plain[0].tag_count == 1
    blob.set_blob_tags({})
    assert blob.get_blob_tags() == {}
    assert blob.get_blob_properties().tag_count is None
    blob.upload_blob(b"def", overwrite=True, tags={"a": "1"})
    blob.upload_blob(b"ghi", overwrite=True)  # a new blob: no tags unless given
    assert blob.get_blob_tags() == {}


def test_snapshot_tags(container: ContainerClient) -> None:
    blob = container.get_blob_client("snapped")
    blob.upload_blob(b"x", tags={"k": "before"})
    snapshot = blob.create_snapshot()
    blob.set_blob_tags({"k": "after"})
    frozen = container.get_blob_client("snapped", snapshot=snapshot["snapshot"])
    assert frozen.get_blob_tags() == {"k": "before"}
    frozen.set_blob_tags({"k": "snap"})
    assert frozen.get_blob_tags() == {"k": "snap"}
    assert blob.get_blob_tags() == {"k": "after"}


def test_commit_block_list_and_copy_with_tags(container: ContainerClient) -> None:
    blob = container.get_blob_client("blocks")
    blob.upload_blob(b"", tags={"condition tag": "test tag"})
    blob.stage_block("1", b"AAA")
    with pytest.raises(ResourceModifiedError):
        blob.commit_block_list(
            [BlobBlock("1")], tags={"t": "1"}, if_tags_match_condition="\"condition tag\"='no'"
        )
    blob.commit_block_list(
        [BlobBlock("1")], tags={"t": "1"}, if_tags_match_condition="\"condition tag\"='test tag'"
    )
    assert blob.get_blob_tags() == {"t": "1"}
    copy = container.get_blob_client("copy")
    copy.start_copy_from_url(blob.url, tags={"copied": "yes"})
    assert copy.get_blob_tags() == {"copied": "yes"}
    again = container.get_blob_client("copy2")
    again.start_copy_from_url(blob.url)
    assert again.get_blob_tags() == {}  # Copy Blob sets x-ms-tags only, never the source's


def test_find_blobs_by_tags(blob_service: BlobServiceClient, container: ContainerClient) -> None:
    value = unique()
    other = blob_service.create_container(container.container_name + "b")
    try:
        for client, name, rank in ((container, "b1", "3"), (container, "a1", "1"), (other, "a2", "2")):
            client.upload_blob(name, b"x", tags={"project": value, "rank": rank, "extra": "e"})
        container.upload_blob("untagged", b"x")
        first, second = container.container_name, other.container_name
        where = f"project='{value}'"
        found = list(blob_service.find_blobs_by_tags(where))
        assert names(found) == [(first, "a1"), (first, "b1"), (second, "a2")]
        assert found[0]["tags"] == {"project": value}  # only the tags the filter names
        ranged = list(
            blob_service.find_blobs_by_tags(f"\"project\" = '{value}' AND rank > '1' and rank <= '3'")
        )
        assert names(ranged) == [(first, "b1"), (second, "a2")]
        assert ranged[0]["tags"] == {"project": value, "rank": "3"}
        scoped = list(blob_service.find_blobs_by_tags(f"@container='{second}' AND project='{value}'"))
        assert names(scoped) == [(second, "a2")]
        inside = list(container.find_blobs_by_tags(f"project='{value}' AND rank < '3'"))
        assert names(inside) == [(first, "a1")]
        pages = list(blob_service.find_blobs_by_tags(where, results_per_page=2).by_page())
        assert [names(page) for page in pages] == [[(first, "a1"), (first, "b1")], [(second, "a2")]]
        # The index follows every write: retagging, overwriting, deleting, deleting a container.
        container.get_blob_client("a1").set_blob_tags({"project": "elsewhere"})
        container.upload_blob("b1", b"y", overwrite=True)
        container.get_blob_client("untagged").set_blob_tags({"project": value})
        assert names(blob_service.find_blobs_by_tags(where)) == [(first, "untagged"), (second, "a2")]
        container.delete_blob("untagged")
        assert names(blob_service.find_blobs_by_tags(where)) == [(second, "a2")]
        other.delete_container()
        assert names(blob_service.find_blobs_by_tags(where)) == []
    finally:
        with contextlib.suppress(HttpResponseError):
            other.delete_container()


def test_if_tags_conditions(container: ContainerClient) -> None:
    blob = container.get_blob_client("conditional")
    blob.upload_blob(b"abc", tags={"state": "draft", "n": "5"})
    good, bad = "state = 'draft' AND n > '4'", "state = 'final' OR n < '5'"
    calls = [
        lambda c: blob.get_blob_properties(if_tags_match_condition=c),
        lambda c: blob.download_blob(if_tags_match_condition=c).readall(),
        lambda c: blob.set_blob_metadata({"m": "1"}, if_tags_match_condition=c),
        lambda c: blob.set_http_headers(None, if_tags_match_condition=c),
        lambda c: blob.get_blob_tags(if_tags_match_condition=c),
        lambda c: blob.set_blob_tags({"state": "draft", "n": "5"}, if_tags_match_condition=c),
        lambda c: blob.create_snapshot(if_tags_match_condition=c),
        lambda c: blob.upload_blob(
            b"new", overwrite=True, tags={"state": "draft", "n": "5"}, if_tags_match_condition=c
        ),
        lambda c: blob.acquire_lease(if_tags_match_condition=c).release(),
        lambda c: blob.get_block_list(if_tags_match_condition=c),
        lambda c: blob.set_standard_blob_tier("Cool", if_tags_match_condition=c),
    ]
    for call in calls:
        call(good)
        with pytest.raises(ResourceModifiedError) as unmet:
            call(bad)
        assert unmet.value.status_code == 412 and unmet.value.error_code == "ConditionNotMet"
    with pytest.raises(HttpResponseError) as syntax:
        blob.get_blob_properties(if_tags_match_condition="state = draft")
    assert syntax.value.status_code == 400 and syntax.value.error_code == "InvalidHeaderValue"
    with pytest.raises(ResourceModifiedError):
        blob.delete_blob(delete_snapshots="include", if_tags_match_condition=bad)
    blob.delete_blob(delete_snapshots="include", if_tags_match_condition="state <> 'final'")
    missing = container.get_blob_client("never")
    with pytest.raises(ResourceModifiedError):
        missing.upload_blob(
            b"x", overwrite=True, if_tags_match_condition=good
        )  # nothing to match on a missing blob


def test_tags_and_leases(container: ContainerClient) -> None:
    blob = container.get_blob_client("leased")
    blob.upload_blob(b"abc")
    lease = blob.acquire_lease(lease_id="00000000-1111-2222-3333-444444444444")
    with pytest.raises(HttpResponseError) as missing:
        blob.set_blob_tags({"a": "b"})
    assert missing.value.status_code == 412 and missing.value.error_code == "LeaseIdMissing"
    blob.set_blob_tags({"a": "b"}, lease=lease)
    assert blob.get_blob_tags() == {"a": "b"}  # reading needs no lease id
    with pytest.raises(HttpResponseError) as wrong:
        blob.get_blob_tags(lease="99999999-1111-2222-3333-444444444444")
    assert wrong.value.error_code == "LeaseIdMismatchWithBlobOperation"
    assert blob.get_blob_tags(lease=lease) == {"a": "b"}
    blob.delete_blob(lease=lease)


def test_sas_permissions(
    server: ServerProcess, blob_service: BlobServiceClient, container: ContainerClient
) -> None:
    value = unique()
    container.upload_blob("s", b"x", tags={"sas": value})
    expiry = datetime.now(UTC) + HOUR
    name = container.container_name

    def blob_token(**permissions: bool) -> BlobClient:
        token = generate_blob_sas(
            DEV_ACCOUNT,
            name,
            "s",
            account_key=DEV_KEY,
            permission=BlobSasPermissions(**permissions),
            expiry=expiry,
        )
        return BlobClient(blob_service.url, name, "s", credential=token)

    tagger = blob_token(tag=True)
    tagger.set_blob_tags({"sas": value, "more": "1"})
    assert tagger.get_blob_tags() == {"sas": value, "more": "1"}
    with pytest.raises(HttpResponseError) as denied:
        blob_token(read=True, write=True).get_blob_tags()
    assert denied.value.status_code == 403 and denied.value.error_code == "AuthorizationPermissionMismatch"

    def account(**permissions: bool) -> BlobServiceClient:
        token = generate_account_sas(
            DEV_ACCOUNT, DEV_KEY, ResourceTypes(service=True, container=True, object=True),
            AccountSasPermissions(**permissions), expiry,
        )  # fmt: skip
        return BlobServiceClient(blob_service.url, credential=token)

    assert names(account(filter_by_tags=True).find_blobs_by_tags(f"sas='{value}'")) == [(name, "s")]
    with pytest.raises(HttpResponseError) as unfiltered:
        list(account(read=True, list=True).find_blobs_by_tags(f"sas='{value}'"))
    assert unfiltered.value.error_code == "AuthorizationPermissionMismatch"
    token = generate_container_sas(
        DEV_ACCOUNT,
        name,
        account_key=DEV_KEY,
        permission=ContainerSasPermissions(filter_by_tags=True),
        expiry=expiry,
    )
    scoped = ContainerClient(blob_service.url, name, credential=token)
    assert names(scoped.find_blobs_by_tags(f"sas='{value}'")) == [(name, "s")]


def test_tags_aio(server: ServerProcess, container: ContainerClient) -> None:
    value = unique()

    async def run() -> None:
        async with AsyncBlobServiceClient.from_connection_string(server.connection_string) as client:
            box = client.get_container_client(container.container_name)
            blob = box.get_blob_client("aio")
            await blob.upload_blob(b"x", tags={"aio": value})
            assert await blob.get_blob_tags() == {"aio": value}
            await blob.set_blob_tags({"aio": value, "two": "2"}, if_tags_match_condition=f"aio='{value}'")
            assert (await blob.get_blob_properties()).tag_count == 2
            found = [item async for item in client.find_blobs_by_tags(f"aio='{value}' AND two='2'")]
            assert [(f.container_name, f.name, f.tags) for f in found] == [
                (container.container_name, "aio", {"aio": value, "two": "2"})
            ]
            inside = [item.name async for item in box.find_blobs_by_tags(f"aio='{value}'")]
            assert inside == ["aio"]
            with pytest.raises(ResourceModifiedError):
                await blob.delete_blob(if_tags_match_condition=f"aio='{value}x'")

    asyncio.run(run())


def test_bad_tags_and_filters(server: ServerProcess, container: ContainerClient) -> None:
    http = BlobHttp(server.blob_port)
    name = container.container_name
    container.upload_blob("b", b"x")

    def put_tags(body: str) -> tuple[int, str | None]:
        reply = http.request(
            "PUT", f"/{name}/b?comp=tags", {"Content-Type": "application/xml"}, body.encode()
        )
        return reply.status, reply.code

    def tag_xml(*pairs: tuple[str, str]) -> str:
        items = "".join(f"<Tag><Key>{k}</Key><Value>{v}</Value></Tag>" for k, v in pairs)
        return f"<?xml version='1.0' encoding='utf-8'?><Tags><TagSet>{items}</TagSet></Tags>"

    assert put_tags(tag_xml(*((f"k{i}", "v") for i in range(11)))) == (400, "TagsTooLarge")
    assert put_tags(tag_xml(("k" * 129, "v"))) == (400, "TagsTooLarge")
    assert put_tags(tag_xml(("bad!", "v"))) == (400, "InvalidTag")
    assert put_tags(tag_xml(("", "v"))) == (400, "EmptyTagName")
    assert put_tags(tag_xml(("k", "1"), ("k", "2"))) == (400, "DuplicateTagNames")
    assert put_tags("<Tags><TagSet>") == (400, "InvalidXmlDocument")
    assert put_tags(tag_xml(("k", "v"))) == (204, None)
    reply = http.request("GET", f"/{name}/b?comp=tags")
    assert reply.status == 200 and b"<Key>k</Key><Value>v</Value>" in reply.body
    assert http.request("GET", f"/{name}/missing?comp=tags").code == "BlobNotFound"
    put = http.request("PUT", f"/{name}/c", {"x-ms-blob-type": "BlockBlob", "x-ms-tags": "a=1&b%21=2"}, b"x")
    assert (put.status, put.code) == (400, "InvalidTag")
    reply = http.request("GET", "/?comp=blobs&where=" + quote("a = 1"))
    assert (reply.status, reply.code) == (400, "InvalidQueryParameterValue")
    fields = reply.error_fields()
    assert fields["QueryParameterName"] == "where"
    assert fields["Message"].startswith("Error parsing query at or near character position")
    for bad in ("a = '1' OR b = '2'", "a <> '1'", f"@container = '{name}'"):
        assert http.request("GET", "/?comp=blobs&where=" + quote(bad)).code == "InvalidQueryParameterValue"
    inside = http.request(
        "GET", f"/{name}?restype=container&comp=blobs&where=" + quote(f"@container='{name}'")
    )
    assert (inside.status, inside.code) == (400, "InvalidQueryParameterValue")
    zero = http.request("GET", "/?comp=blobs&maxresults=0&where=" + quote("a='1'"))
    assert zero.status == 400
    gone = http.request("GET", "/nosuchcontainer?restype=container&comp=blobs&where=" + quote("a='1'"))
    assert (gone.status, gone.code) == (404, "ContainerNotFound")
    marker = http.request("GET", "/?comp=blobs&marker=%21%21&where=" + quote("a='1'"))
    assert (marker.status, marker.code) == (400, "InvalidQueryParameterValue")
    syntax = http.request("GET", f"/{name}/b", {"x-ms-if-tags": "k = v"})
    assert (syntax.status, syntax.code) == (400, "InvalidHeaderValue")
    assert syntax.error_fields()["HeaderName"] == "x-ms-if-tags"
    unmet = http.request("GET", f"/{name}/b", {"x-ms-if-tags": "k = 'w'"})
    assert (unmet.status, unmet.code) == (412, "ConditionNotMet")
    ignored = http.request("PUT", f"/{name}?restype=container&comp=metadata", {"x-ms-if-tags": "k = 'w'"})
    assert ignored.status == 200  # a blob's condition: a container operation does not look at it


def test_tag_operations_take_blob_conditions(container: ContainerClient) -> None:
    """Set and Get Blob Tags read the blob's conditions from ``x-ms-blob-if-*`` (what the SDK
    sends for them); an unmet one is 412 on both."""
    blob = container.get_blob_client("blobconditions")
    etag = blob.upload_blob(b"abc")["etag"]
    early = blob.get_blob_properties().last_modified
    with pytest.raises(ResourceModifiedError) as unmet:
        blob.set_blob_tags({"a": "1"}, if_modified_since=early)
    assert unmet.value.status_code == 412
    with pytest.raises(ResourceModifiedError) as unmet:
        blob.get_blob_tags(if_modified_since=early)
    assert unmet.value.status_code == 412
    blob.set_blob_tags({"a": "1"}, if_unmodified_since=early)
    blob.set_blob_tags({"a": "2"}, etag=etag, match_condition=MatchConditions.IfNotModified)
    assert blob.get_blob_tags(etag=etag, match_condition=MatchConditions.IfNotModified) == {"a": "2"}
    with pytest.raises(ResourceModifiedError):
        blob.get_blob_tags(etag=etag, match_condition=MatchConditions.IfModified)


def test_copy_with_source_tag_condition(container: ContainerClient) -> None:
    """An unmet x-ms-source-if-tags is 412 ConditionNotMet (not SourceConditionNotMet, which the
    source's ETag and date conditions give)."""
    source = container.get_blob_client("source")
    source.upload_blob(b"data", tags={"source": "source tag"})
    copy = container.get_blob_client("target")
    with pytest.raises(ResourceModifiedError) as unmet:
        copy.start_copy_from_url(source.url, source_if_tags_match_condition="\"source\"='sourcetag'")
    assert unmet.value.status_code == 412 and unmet.value.error_code == "ConditionNotMet"
    copy.start_copy_from_url(
        source.url, tags={"t": "1"}, source_if_tags_match_condition="source='source tag'"
    )
    assert copy.get_blob_tags() == {"t": "1"}
    assert copy.download_blob(if_tags_match_condition="t='1'").readall() == b"data"
