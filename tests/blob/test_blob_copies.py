"""Copies from a URL, through the official SDK (sync and aio) on each store: Put Blob, Put Block
and Append Block From URL, Copy Blob From URL (synchronous), Copy Blob from outside the server
(pending, then done in the background), Abort Copy; sources of this server authorised as a Get
Blob would be, sources elsewhere fetched (a local HTTP server that trickles, refuses, stalls or
redirects), and Azure's CannotVerifyCopySource with the source's status when one refuses."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import signal
import sqlite3
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from azure.core import MatchConditions
from azure.core.exceptions import (
    HttpResponseError,
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
)
from azure.storage.blob import (
    BlobClient,
    BlobSasPermissions,
    BlobServiceClient,
    ContainerClient,
    ContentSettings,
    StandardBlobTier,
    generate_blob_sas,
)
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

from tests.blob.remote_source import RemoteSource, content, remote_source
from tests.blobhttp import BlobHttp
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess

OTHER_ACCOUNT = "otheraccount"
OTHER_KEY = base64.b64encode(b"another account's key, 32 bytes").decode()


@pytest.fixture(scope="module")
def remote() -> Iterator[RemoteSource]:
    with remote_source() as source:
        yield source


def sas_url(blob: BlobClient, key: str = DEV_KEY, **permissions: bool) -> str:
    token = generate_blob_sas(
        blob.account_name or DEV_ACCOUNT,
        blob.container_name,
        blob.blob_name,
        account_key=key,
        permission=BlobSasPermissions(**(permissions or {"read": True})),
        expiry=datetime.now(UTC) + timedelta(hours=1),
    )
    return f"{blob.url}?{token}"


def source_blob(container: ContainerClient, data: bytes, **kwargs: object) -> BlobClient:
    blob = container.get_blob_client(f"source-{os.urandom(4).hex()}")
    blob.upload_blob(data, **kwargs)  # type: ignore[arg-type]
    return blob


def refused(error: pytest.ExceptionInfo[HttpResponseError]) -> tuple[int, str | None, str | None, str | None]:
    """(status, code, the source's status header, the source's code header) of a refused copy."""
    headers = error.value.response.headers
    return (
        error.value.status_code,
        headers.get("x-ms-error-code"),
        headers.get("x-ms-copy-source-status-code"),
        headers.get("x-ms-copy-source-error-code"),
    )


def wait_for_copy(blob: BlobClient, timeout: float = 60.0) -> object:
    deadline = time.monotonic() + timeout
    while True:
        props = blob.get_blob_properties()
        if props.copy.status != "pending" or time.monotonic() > deadline:
            return props
        time.sleep(0.2)


# ------------------------------------------------------------------------------ From URL, local


def test_put_blob_from_url(container: ContainerClient) -> None:
    data = os.urandom(300_000)
    settings = ContentSettings(content_type="text/x-source", content_language="es")
    source = source_blob(container, data, content_settings=settings, metadata={"kept": "no"})
    url = sas_url(source)
    target = container.get_blob_client("target")
    done = target.upload_blob_from_url(url, metadata={"given": "yes"})
    assert done["content_md5"] == bytearray(hashlib.md5(data).digest()) and done["content_crc64"]
    assert target.download_blob().readall() == data
    props = target.get_blob_properties()
    assert props.content_settings.content_type == "text/x-source"  # the source's, by default
    assert props.content_settings.content_language == "es"
    assert props.metadata == {"given": "yes"}  # the request's only
    assert props.etag == done["etag"]
    # The request's own properties win; without the source's, only the request's are kept.
    target.upload_blob_from_url(url, overwrite=True, content_settings=ContentSettings(content_language="en"))
    props = target.get_blob_properties()
    assert props.content_settings.content_language == "en"
    assert props.content_settings.content_type == "text/x-source"
    target.upload_blob_from_url(url, overwrite=True, include_source_blob_properties=False)
    props = target.get_blob_properties()
    assert props.content_settings.content_language is None
    assert props.content_settings.content_type == "application/octet-stream"
    # Not over an existing blob unless asked to; the source's MD5 is checked when given.
    with pytest.raises(ResourceExistsError):
        target.upload_blob_from_url(url, overwrite=False)
    good = bytearray(hashlib.md5(data).digest())
    target.upload_blob_from_url(url, overwrite=True, source_content_md5=good)
    with pytest.raises(HttpResponseError) as bad:
        target.upload_blob_from_url(url, overwrite=True, source_content_md5=bytearray(16))
    assert bad.value.error_code == "Md5Mismatch"
    assert target.download_blob().readall() == data


def test_put_blob_from_url_conditions_unmet(container: ContainerClient) -> None:
    """Put Blob From URL names which side's conditions failed: 412 SourceConditionNotMet and
    412 TargetConditionNotMet, as Azure answers (recorded for the JS SDK's syncUploadFromURL
    "source conditon" and "destination conditon")."""
    source = source_blob(container, b"Hello World")
    url = sas_url(source)
    target = container.get_blob_client("target")
    made = target.upload_blob(b"hello")
    source_etag = source.get_blob_properties().etag
    target.upload_blob_from_url(
        url, overwrite=True, source_etag=source_etag, source_match_condition=MatchConditions.IfNotModified
    )
    with pytest.raises(HttpResponseError) as error:
        target.upload_blob_from_url(
            url, overwrite=True, source_etag='"0x1"', source_match_condition=MatchConditions.IfNotModified
        )
    assert (error.value.status_code, error.value.error_code) == (412, "SourceConditionNotMet")
    with pytest.raises(HttpResponseError) as error:
        target.upload_blob_from_url(
            url, overwrite=True, etag=made["etag"], match_condition=MatchConditions.IfNotModified
        )
    assert (error.value.status_code, error.value.error_code) == (412, "TargetConditionNotMet")
    current = target.get_blob_properties().etag
    target.upload_blob_from_url(
        url, overwrite=True, etag=current, match_condition=MatchConditions.IfNotModified
    )
    assert target.download_blob().readall() == b"Hello World"


def test_put_blob_from_url_date_conditions_unmet(container: ContainerClient) -> None:
    """Date conditions keep the codes of Azure's recording for the Python SDK's
    upload_blob_from_url (x-ms-version 2021-08-06): the destination's If-(Un)Modified-Since
    unmet is 412 ConditionNotMet; the source's x-ms-source-if-modified-since is 304 and its
    x-ms-source-if-unmodified-since 412, both CannotVerifyCopySource. Only ETag conditions get
    Source/TargetConditionNotMet (test above)."""
    source = source_blob(container, b"Hello World")
    url = sas_url(source)
    target = container.get_blob_client("dated")
    target.upload_blob(b"hello")
    early = datetime.now(UTC) - timedelta(minutes=15)
    late = datetime.now(UTC) + timedelta(minutes=15)
    with pytest.raises(ResourceModifiedError) as error:
        target.upload_blob_from_url(url, overwrite=True, if_modified_since=late)
    assert (error.value.status_code, error.value.error_code) == (412, "ConditionNotMet")
    with pytest.raises(ResourceModifiedError) as error:
        target.upload_blob_from_url(url, overwrite=True, if_unmodified_since=early)
    assert (error.value.status_code, error.value.error_code) == (412, "ConditionNotMet")
    with pytest.raises(HttpResponseError) as error:
        target.upload_blob_from_url(url, overwrite=True, source_if_modified_since=late)
    assert (error.value.status_code, error.value.error_code) == (304, "CannotVerifyCopySource")
    with pytest.raises(HttpResponseError) as error:
        target.upload_blob_from_url(url, overwrite=True, source_if_unmodified_since=early)
    assert (error.value.status_code, error.value.error_code) == (412, "CannotVerifyCopySource")
    target.upload_blob_from_url(url, overwrite=True, if_unmodified_since=late, source_if_modified_since=early)
    assert target.download_blob().readall() == b"Hello World"


def test_from_url_source_authorisation(container: ContainerClient) -> None:
    """The From URL operations never read a source by the destination's key (Azure's recorded
    401 NoAuthenticationInformation); a SAS must be valid and read; a missing source is 404."""
    source = source_blob(container, b"secret")
    target = container.get_blob_client("target")
    with pytest.raises(HttpResponseError) as error:
        target.upload_blob_from_url(source.url)
    assert refused(error) == (401, "CannotVerifyCopySource", "401", "NoAuthenticationInformation")
    with pytest.raises(HttpResponseError) as error:
        target.upload_blob_from_url(sas_url(source, write=True))
    assert refused(error) == (403, "CannotVerifyCopySource", "403", "AuthorizationPermissionMismatch")
    wrong_key = base64.b64encode(b"x" * 64).decode()
    with pytest.raises(HttpResponseError) as error:
        target.upload_blob_from_url(sas_url(source, key=wrong_key))
    assert refused(error) == (403, "CannotVerifyCopySource", "403", "AuthenticationFailed")
    missing = container.get_blob_client("missing")
    with pytest.raises(ResourceNotFoundError) as error:
        target.upload_blob_from_url(sas_url(missing))
    assert refused(error) == (404, "CannotVerifyCopySource", "404", "BlobNotFound")
    assert not target.exists()


def test_public_container_source(blob_service: BlobServiceClient, container: ContainerClient) -> None:
    public = blob_service.create_container(f"pub{os.urandom(4).hex()}", public_access="blob")
    try:
        source = source_blob(public, b"open to all")
        target = container.get_blob_client("target")
        target.upload_blob_from_url(source.url)
        assert target.download_blob().readall() == b"open to all"
    finally:
        public.delete_container()


def test_stage_block_from_url(container: ContainerClient) -> None:
    data = os.urandom(100_000)
    url = sas_url(source_blob(container, data))
    target = container.get_blob_client("blocks")
    target.stage_block_from_url("AAAA", url, source_offset=0, source_length=40_000)
    piece = data[40_000:]
    done = target.stage_block_from_url(
        "BBBB", url, source_offset=40_000, source_length=60_000,
        source_content_md5=bytearray(hashlib.md5(piece).digest()),
    )  # fmt: skip
    assert done["content_md5"] and done["content_crc64"]
    target.stage_block_from_url("CCCC", url)  # no range: the whole source
    with pytest.raises(HttpResponseError) as bad:
        target.stage_block_from_url("DDDD", url, source_content_md5=bytearray(16))
    assert bad.value.error_code == "Md5Mismatch"
    _committed, staged = target.get_block_list("uncommitted")
    assert [(block.id, block.size) for block in staged] == [
        ("AAAA", 40_000),
        ("BBBB", 60_000),
        ("CCCC", 100_000),
    ]
    target.commit_block_list(["AAAA", "BBBB"])
    assert target.download_blob().readall() == data
    with pytest.raises(HttpResponseError) as past:
        target.stage_block_from_url("EEEE", url, source_offset=200_000, source_length=10)
    assert refused(past)[:3] == (416, "CannotVerifyCopySource", "416")


def test_append_block_from_url(container: ContainerClient) -> None:
    data = os.urandom(10_000)
    source = source_blob(container, data)
    url = sas_url(source)
    target = container.get_blob_client("log")
    target.create_append_blob()
    first = target.append_block_from_url(url, source_offset=0, source_length=4_000)
    assert first["blob_append_offset"] == "0" and first["blob_committed_block_count"] == 1
    second = target.append_block_from_url(url, source_offset=4_000, source_length=6_000)
    assert second["blob_append_offset"] == "4000" and second["blob_committed_block_count"] == 2
    assert target.download_blob().readall() == data
    etag = source.get_blob_properties().etag
    target.append_block_from_url(url, source_etag=etag, source_match_condition=MatchConditions.IfNotModified)
    with pytest.raises(ResourceNotFoundError) as error:  # the SDK's class for CannotVerifyCopySource
        target.append_block_from_url(
            url, source_etag="0x111111111111111", source_match_condition=MatchConditions.IfNotModified
        )
    assert refused(error) == (412, "CannotVerifyCopySource", "412", "ConditionNotMet")
    with pytest.raises(ResourceNotFoundError) as error:
        target.append_block_from_url(url, source_etag=etag, source_match_condition=MatchConditions.IfModified)
    assert error.value.status_code == 304
    with pytest.raises(HttpResponseError) as full:
        target.append_block_from_url(url, maxsize_condition=20_000)
    assert full.value.error_code == "MaxBlobSizeConditionNotMet"
    with pytest.raises(HttpResponseError) as wrong_type:
        container.get_blob_client(source.blob_name).append_block_from_url(url)
    assert wrong_type.value.error_code == "InvalidBlobType"
    assert target.get_blob_properties().size == 20_000


def test_upload_pages_from_url(
    server: ServerProcess, container: ContainerClient, remote: RemoteSource
) -> None:
    data = os.urandom(4096)
    url = sas_url(source_blob(container, data))
    target = container.get_blob_client("pages")
    target.create_page_blob(8192)
    done = target.upload_pages_from_url(url, offset=1024, length=2048, source_offset=512)
    assert done["etag"] and done["blob_sequence_number"] == 0
    target.upload_pages_from_url(remote.url("/data/4096"), offset=4096, length=512, source_offset=0)
    got = target.download_blob().readall()
    assert got[1024:3072] == data[512:2560] and got[4096:4608] == content(4096)[:512]
    assert got[:1024] == bytes(1024) and got[4608:] == bytes(8192 - 4608)
    ranges, _cleared = target.get_page_ranges()
    assert [(r["start"], r["end"]) for r in ranges] == [(1024, 3071), (4096, 4607)]
    http = BlobHttp(server.blob_port)
    path = f"/{container.container_name}/pages?comp=page"
    page = {"x-ms-page-write": "update", "x-ms-copy-source": url}
    unaligned = http.request(
        "PUT", path, {**page, "x-ms-range": "bytes=100-611", "x-ms-source-range": "bytes=0-511"}
    )
    assert (unaligned.status, unaligned.code) == (400, "InvalidHeaderValue")
    unequal = http.request(
        "PUT", path, {**page, "x-ms-range": "bytes=0-511", "x-ms-source-range": "bytes=0-1023"}
    )
    assert (unequal.status, unequal.code) == (400, "InvalidHeaderValue")
    assert unequal.error_fields()["HeaderName"] == "x-ms-source-range"
    missing = http.request("PUT", path, {**page, "x-ms-range": "bytes=0-511"})
    assert (missing.status, missing.code) == (400, "MissingRequiredHeader")
    with pytest.raises(HttpResponseError) as md5:
        target.upload_pages_from_url(
            url, offset=0, length=512, source_offset=0, source_content_md5=bytearray(16)
        )
    assert md5.value.error_code == "Md5Mismatch"
    with pytest.raises(HttpResponseError) as sequence:
        target.upload_pages_from_url(url, offset=0, length=512, source_offset=0, if_sequence_number_lt=0)
    assert sequence.value.error_code == "SequenceNumberConditionNotMet"
    with pytest.raises(HttpResponseError) as unauthorised:
        target.upload_pages_from_url(target.url, offset=0, length=512, source_offset=0)
    assert refused(unauthorised)[:4] == (401, "CannotVerifyCopySource", "401", "NoAuthenticationInformation")
    block = container.get_blob_client("notpages")
    block.upload_blob(b"x")
    with pytest.raises(HttpResponseError) as wrong:
        block.upload_pages_from_url(url, offset=0, length=512, source_offset=0)
    assert wrong.value.error_code == "InvalidBlobType"


@pytest.mark.parametrize("spelling", ["SIG", "Sig", "%73ig", "%53IG"])
def test_a_signature_spelt_otherwise_is_not_recorded_either(
    container: ContainerClient, spelling: str
) -> None:
    """A SAS reads ``SIG=`` or ``%73ig=`` as its ``sig``, so a copy source spelt so must not keep
    it in ``x-ms-copy-source``: whoever may read the destination's properties (anyone, in a
    public container) could read the source with it. Copy Blob, Copy Blob From URL and Put Blob
    From URL each record their source; Incremental Copy has its own test in test_blob_pages."""
    source = source_blob(container, b"secret source")
    url = sas_url(source)
    signature = url.split("sig=", 1)[1].split("&", 1)[0]
    respelt = url.replace("sig=", spelling + "=")
    read = urllib.request.Request(respelt, headers={"x-ms-version": "2021-08-06"})
    with urllib.request.urlopen(read, timeout=30) as answer:  # as good as the original spelling
        assert answer.read() == b"secret source"
    for name, copy in (
        ("pending", lambda target: target.start_copy_from_url(respelt)),
        ("synced", lambda target: target.start_copy_from_url(respelt, requires_sync=True)),
        ("uploaded", lambda target: target.upload_blob_from_url(respelt, overwrite=True)),
    ):
        target = container.get_blob_client(f"{name}-{spelling.strip('%')}")
        copy(target)
        shown = target.get_blob_properties().copy.source or ""
        if name != "uploaded":  # Put Blob From URL records no copy at all
            assert shown and "sp=r" in shown, (name, shown)
        assert signature not in shown and signature.replace("%2B", "+") not in shown, (name, shown)
        assert "sig=" not in shown.lower() and "%73ig" not in shown.lower(), (name, shown)
        assert target.download_blob().readall() == b"secret source"


def test_copy_from_url_sync(container: ContainerClient) -> None:
    data = os.urandom(50_000)
    source = source_blob(container, data, metadata={"from": "source"})
    target = container.get_blob_client("synced")
    with pytest.raises(HttpResponseError) as error:  # never the destination's key
        target.start_copy_from_url(source.url, requires_sync=True)
    assert refused(error) == (401, "CannotVerifyCopySource", "401", "NoAuthenticationInformation")
    copy = target.start_copy_from_url(sas_url(source), requires_sync=True)
    assert copy["copy_status"] == "success" and copy["copy_id"]
    props = target.get_blob_properties()
    assert "sig=" not in props.copy.source and "sp=r" in props.copy.source  # the signature is not kept
    assert props.copy.status == "success" and props.copy.id == copy["copy_id"]
    assert props.copy.progress == "50000/50000" and props.copy.completion_time is not None
    assert props.metadata == {"from": "source"}
    assert target.download_blob().readall() == data
    with pytest.raises(HttpResponseError) as done:  # a completed copy has nothing to abort
        target.abort_copy(copy)
    assert done.value.error_code == "NoPendingCopyOperation"


def test_copy_blob_same_account_stays_instant(container: ContainerClient) -> None:
    source = source_blob(container, b"x" * 1000)
    copy = container.get_blob_client("copied").start_copy_from_url(source.url)
    assert copy["copy_status"] == "success"
    # Azure's own name of an account this server serves is this server (it stands in for Azure).
    azure_name = f"https://{DEV_ACCOUNT}.blob.core.windows.net/{container.container_name}/{source.blob_name}"
    named = container.get_blob_client("named")
    assert named.start_copy_from_url(azure_name)["copy_status"] == "success"
    assert named.download_blob().readall() == b"x" * 1000
    assert named.get_blob_properties().copy.source == azure_name
    missing = container.get_blob_client("missing")
    with pytest.raises(ResourceNotFoundError) as error:
        container.get_blob_client("copy2").start_copy_from_url(missing.url)
    assert refused(error) == (404, "BlobNotFound", None, None)  # as recorded (Go, .NET)


def test_copy_only_if_missing(container: ContainerClient, remote: RemoteSource) -> None:
    """Copy Blob with If-None-Match: * onto a blob that exists is 409 BlobAlreadyExists, as Put
    Blob's is (Azure's "must not exist" condition), from this server or from elsewhere."""
    source = source_blob(container, b"new")
    container.upload_blob("there", b"old")
    target = container.get_blob_client("there")
    for url in (source.url, remote.url("/data/100")):
        with pytest.raises(ResourceExistsError) as error:
            target.start_copy_from_url(url, match_condition=MatchConditions.IfMissing)
        assert (error.value.status_code, error.value.error_code) == (409, "BlobAlreadyExists")
    assert target.download_blob().readall() == b"old"
    fresh = container.get_blob_client("fresh")
    fresh.start_copy_from_url(source.url, match_condition=MatchConditions.IfMissing)
    assert fresh.download_blob().readall() == b"new"


# ------------------------------------------------------------------------------ sources elsewhere


def test_copy_blob_from_remote_is_pending_then_done(container: ContainerClient, remote: RemoteSource) -> None:
    size = 400_000
    target = container.get_blob_client("remote")
    copy = target.start_copy_from_url(remote.url(f"/data/{size}?pieces=8&pause=0.4"))
    assert copy["copy_status"] == "pending"
    props = target.get_blob_properties()
    assert props.copy.status == "pending" and props.copy.id == copy["copy_id"]
    assert props.copy.progress.endswith(f"/{size}") and props.size == 0
    assert props.copy.completion_time is None
    listed = next(iter(container.list_blobs(name_starts_with="remote", include=["copy"])))
    assert listed.copy.status in ("pending", "success")
    props = wait_for_copy(target)
    assert props.copy.status == "success" and props.copy.progress == f"{size}/{size}"  # type: ignore[attr-defined]
    assert props.metadata == {"origin": "remote"}  # type: ignore[attr-defined]
    assert props.content_settings.content_type == "application/x-test"  # type: ignore[attr-defined]
    assert target.download_blob().readall() == content(size)


def test_pending_copy_keeps_its_tags_and_tier(container: ContainerClient, remote: RemoteSource) -> None:
    """x-ms-tags and x-ms-access-tier of a Copy Blob from outside are the finished copy's."""
    target = container.get_blob_client("tiered")
    copy = target.start_copy_from_url(
        remote.url("/data/90000?pieces=3&pause=0.3"),
        tags={"stage": "raw", "n": "1"},
        standard_blob_tier=StandardBlobTier.COOL,
    )
    assert copy["copy_status"] == "pending"
    props = wait_for_copy(target)
    assert props.copy.status == "success"  # type: ignore[attr-defined]
    assert props.blob_tier == "Cool" and not props.blob_tier_inferred  # type: ignore[attr-defined]
    assert props.tag_count == 2  # type: ignore[attr-defined]
    assert target.get_blob_tags() == {"stage": "raw", "n": "1"}
    assert target.download_blob().readall() == content(90_000)
    found = list(container.find_blobs_by_tags("\"stage\" = 'raw'"))
    assert [blob.name for blob in found] == ["tiered"]


def test_copy_from_url_sync_keeps_its_tier(container: ContainerClient) -> None:
    source = source_blob(container, b"tiered copy")
    target = container.get_blob_client("sync-cold")
    target.start_copy_from_url(sas_url(source), requires_sync=True, standard_blob_tier=StandardBlobTier.COLD)
    props = target.get_blob_properties()
    assert props.blob_tier == "Cold" and not props.blob_tier_inferred
    assert target.download_blob().readall() == b"tiered copy"


def test_put_blob_from_remote_url_keeps_tags(container: ContainerClient, remote: RemoteSource) -> None:
    target = container.get_blob_client("remote-tags")
    target.upload_blob_from_url(
        remote.url("/data/5000"), tags={"from": "url"}, standard_blob_tier=StandardBlobTier.COOL
    )
    assert target.get_blob_tags() == {"from": "url"}
    assert target.get_blob_properties().blob_tier == "Cool"


def test_abort_pending_copy(container: ContainerClient, remote: RemoteSource) -> None:
    target = container.get_blob_client("aborted")
    target.upload_blob(b"old", metadata={"m": "1"})
    copy = target.start_copy_from_url(remote.url("/data/500000?pieces=50&pause=0.3"), metadata={"m": "2"})
    assert copy["copy_status"] == "pending"
    with pytest.raises(HttpResponseError) as busy:  # one copy at a time: abort this one first
        target.start_copy_from_url(remote.url("/data/10"))
    assert (busy.value.status_code, busy.value.error_code) == (409, "PendingCopyOperation")
    with pytest.raises(HttpResponseError) as other:
        target.abort_copy("00000000-0000-0000-0000-000000000000")
    assert (other.value.status_code, other.value.error_code) == (409, "CopyIdMismatch")
    target.abort_copy(copy)
    props = target.get_blob_properties()
    assert props.copy.status == "aborted" and props.size == 0 and props.metadata == {"m": "2"}
    assert target.download_blob().readall() == b""
    with pytest.raises(HttpResponseError) as again:
        target.abort_copy(copy)
    assert (again.value.status_code, again.value.error_code) == (409, "NoPendingCopyOperation")
    time.sleep(1.5)  # the copy's task, had it gone on, would have written by now
    assert target.get_blob_properties().copy.status == "aborted"


def test_abort_copy_id_not_a_guid(server: ServerProcess, container: ContainerClient) -> None:
    """A copyid that is not a GUID is 400 InvalidQueryParameterValue with Azure's reason, before
    the blob is looked up, as recorded for the Java SDK's BlobApiTests.abortCopyError."""
    http = BlobHttp(server.blob_port)
    container.get_blob_client("present").upload_blob(b"default")
    for name in ("missing", "present"):
        reply = http.request(
            "PUT", f"/{container.container_name}/{name}?comp=copy&copyid=id", {"x-ms-copy-action": "abort"}
        )
        assert (reply.status, reply.code) == (400, "InvalidQueryParameterValue")
        assert reply.error_fields() | {"Message": ""} == {
            "Code": "InvalidQueryParameterValue",
            "Message": "",
            "QueryParameterName": "copyid",
            "QueryParameterValue": "id",
            "Reason": "copyid needs to be valid Guid.",
        }
    with pytest.raises(ResourceNotFoundError):  # a GUID goes on to the blob
        container.get_blob_client("missing").abort_copy("00000000-0000-0000-0000-000000000000")


def test_remote_from_url_operations(container: ContainerClient, remote: RemoteSource) -> None:
    data = content(50_000)
    target = container.get_blob_client("fromremote")
    target.upload_blob_from_url(remote.url("/data/50000"))
    assert target.download_blob().readall() == data
    assert target.get_blob_properties().content_settings.content_type == "application/x-test"
    blocks = container.get_blob_client("remoteblocks")
    blocks.stage_block_from_url("AAAA", remote.url("/data/50000"), source_offset=10, source_length=20)
    blocks.commit_block_list(["AAAA"])
    assert blocks.download_blob().readall() == data[10:30]
    assert remote.seen[-1]["range"] == "bytes=10-29"
    synced = container.get_blob_client("remotesync")
    assert (
        synced.start_copy_from_url(remote.url("/data/50000"), requires_sync=True)["copy_status"] == "success"
    )
    assert synced.download_blob().readall() == data
    token = "Bearer abc.def.ghi"
    synced.start_copy_from_url(remote.url("/data/10"), requires_sync=True, source_authorization=token)
    assert remote.seen[-1]["authorization"] == token  # the source's token goes to the source only


def test_remote_source_refuses(container: ContainerClient, remote: RemoteSource) -> None:
    target = container.get_blob_client("refused")
    with pytest.raises(HttpResponseError) as error:
        target.upload_blob_from_url(remote.url("/status/403"))
    assert refused(error) == (403, "CannotVerifyCopySource", "403", "AuthorizationFailure")
    assert "not authorized" in error.value.message
    with pytest.raises(HttpResponseError) as error:
        target.start_copy_from_url(remote.url("/status/404"))
    assert refused(error)[:3] == (404, "CannotVerifyCopySource", "404")
    assert not target.exists()


def test_remote_source_that_stalls(
    server: ServerProcess, container: ContainerClient, remote: RemoteSource
) -> None:
    with BlobServiceClient.from_connection_string(server.connection_string, retry_total=0) as client:
        target = client.get_blob_client(container.container_name, "stalled")
        started = time.monotonic()
        with pytest.raises(HttpResponseError) as error:
            target.upload_blob_from_url(remote.url("/silent"))
        assert (error.value.status_code, error.value.error_code) == (500, "CannotVerifyCopySource")
        assert time.monotonic() - started < 45  # the fetch gave up; the request did not hang
        assert not target.exists()


def test_redirects(server: ServerProcess, container: ContainerClient, remote: RemoteSource) -> None:
    """Redirects are followed (a few), but never to a link-local address (cloud metadata)."""
    target = container.get_blob_client("redirected")
    target.upload_blob_from_url(remote.url("/redirect?to=/data/1000"))
    assert target.download_blob().readall() == content(1000)
    with BlobServiceClient.from_connection_string(server.connection_string, retry_total=0) as client:
        blob = client.get_blob_client(container.container_name, "metadata")
        for where in ("http://169.254.169.254/latest/meta-data/", "http://[::ffff:169.254.169.254]/"):
            with pytest.raises(HttpResponseError) as error:
                blob.upload_blob_from_url(remote.url(f"/redirect?to={where}"))
            assert (error.value.status_code, error.value.error_code) == (500, "CannotVerifyCopySource")
            assert "forbidden address" in error.value.message
        with pytest.raises(HttpResponseError) as error:
            blob.start_copy_from_url("http://169.254.169.254/latest/meta-data/")
        assert error.value.error_code == "CannotVerifyCopySource"
        assert not blob.exists()


def test_aio_copies(server: ServerProcess, container: ContainerClient, remote: RemoteSource) -> None:
    data = os.urandom(20_000)
    url = sas_url(source_blob(container, data))

    async def run() -> None:
        async with AsyncBlobServiceClient.from_connection_string(server.connection_string) as client:
            box = client.get_container_client(container.container_name)
            blob = box.get_blob_client("aio-put")
            await blob.upload_blob_from_url(url)
            assert await (await blob.download_blob()).readall() == data
            blocks = box.get_blob_client("aio-blocks")
            await blocks.stage_block_from_url("AAAA", url, source_offset=0, source_length=5)
            await blocks.commit_block_list(["AAAA"])
            assert await (await blocks.download_blob()).readall() == data[:5]
            log = box.get_blob_client("aio-log")
            await log.create_append_blob()
            await log.append_block_from_url(url, source_offset=5, source_length=10)
            assert await (await log.download_blob()).readall() == data[5:15]
            synced = box.get_blob_client("aio-sync")
            copy = await synced.start_copy_from_url(url, requires_sync=True)
            assert copy["copy_status"] == "success"
            pending = box.get_blob_client("aio-remote")
            copy = await pending.start_copy_from_url(remote.url("/data/120000?pieces=4&pause=0.3"))
            assert copy["copy_status"] == "pending"
            for _ in range(300):
                props = await pending.get_blob_properties()
                if props.copy.status != "pending":
                    break
                await asyncio.sleep(0.2)
            assert props.copy.status == "success"
            assert await (await pending.download_blob()).readall() == content(120_000)

    asyncio.run(run())


# ------------------------------------------------------------------------------ servers of their own


def test_copy_from_another_tabulae(tmp_path: Path, container: ContainerClient) -> None:
    """Another Tabulae is a source like any URL: read with the SAS its URL carries; without one
    it answers as Azure does (404 for an anonymous read of a private container)."""
    other = ServerProcess(tmp_path / "other").start()
    try:
        with BlobServiceClient.from_connection_string(other.connection_string) as theirs:
            box = theirs.create_container("box")
            data = os.urandom(70_000)
            source = source_blob(box, data, metadata={"there": "yes"})
            url = sas_url(source)
            target = container.get_blob_client("fromother")
            target.upload_blob_from_url(url)
            assert target.download_blob().readall() == data
            copy = target.start_copy_from_url(url)
            props = (
                wait_for_copy(target) if copy["copy_status"] == "pending" else target.get_blob_properties()
            )
            assert props.copy.status == "success" and props.metadata == {"there": "yes"}  # type: ignore[attr-defined]
            assert target.download_blob().readall() == data
            with pytest.raises(HttpResponseError) as error:
                target.upload_blob_from_url(source.url, overwrite=True)
            assert refused(error) == (404, "CannotVerifyCopySource", "404", "ResourceNotFound")
    finally:
        other.stop()


def test_copy_from_remote_off(tmp_path: Path, remote: RemoteSource) -> None:
    server = ServerProcess(tmp_path / "data", extra_args=["--copy-from-remote", "off"]).start()
    try:
        with BlobServiceClient.from_connection_string(server.connection_string) as client:
            box = client.create_container("box")
            target = box.get_blob_client("target")
            asked = len(remote.seen)
            with pytest.raises(HttpResponseError) as error:
                target.start_copy_from_url(remote.url("/data/10"))
            assert (error.value.status_code, error.value.error_code) == (403, "CannotVerifyCopySource")
            assert "--copy-from-remote off" in error.value.message
            with pytest.raises(HttpResponseError):
                target.upload_blob_from_url(remote.url("/data/10"))
            assert len(remote.seen) == asked  # nothing was fetched
            source = source_blob(box, b"local is fine")
            assert target.start_copy_from_url(source.url)["copy_status"] == "success"
            target.upload_blob_from_url(sas_url(source), overwrite=True)
            assert target.download_blob().readall() == b"local is fine"
    finally:
        server.stop()


def test_another_account_of_the_same_server(tmp_path: Path) -> None:
    accounts = ["--account", f"{DEV_ACCOUNT}:{DEV_KEY}", "--account", f"{OTHER_ACCOUNT}:{OTHER_KEY}"]
    server = ServerProcess(tmp_path / "data", extra_args=accounts).start()
    other_string = server.connection_string.replace(DEV_ACCOUNT, OTHER_ACCOUNT).replace(DEV_KEY, OTHER_KEY)
    try:
        with (
            BlobServiceClient.from_connection_string(server.connection_string) as mine,
            BlobServiceClient.from_connection_string(other_string) as theirs,
        ):
            box = mine.create_container("box")
            their_box = theirs.create_container("theirs")
            source = source_blob(their_box, b"their bytes")
            target = box.get_blob_client("copied")
            with pytest.raises(HttpResponseError) as error:  # our key is not theirs
                target.start_copy_from_url(source.url)
            # nothing of the source's in Copy Blob's 401 (the Go SDK's TestBlobStartCopySourcePrivate)
            assert refused(error) == (401, "CannotVerifyCopySource", None, None)
            copy = target.start_copy_from_url(sas_url(source, key=OTHER_KEY))
            assert copy["copy_status"] == "success"  # in-process: instant
            assert target.download_blob().readall() == b"their bytes"
            target.upload_blob_from_url(sas_url(source, key=OTHER_KEY), overwrite=True)
            assert target.download_blob().readall() == b"their bytes"
    finally:
        server.stop()


def test_pending_copy_across_a_restart(tmp_path: Path, remote: RemoteSource) -> None:
    """A copy whose server stopped does not stay pending for ever: an orderly stop fails it at
    once; a killed server's copy fails at the first look after the restart (its owner, a process
    of this machine, is gone; the heartbeat rule is for owners elsewhere, tests/blob/rules). Its
    blob is then empty, and a new copy can start."""
    server = ServerProcess(tmp_path / "data").start()
    trickle = remote.url("/data/1000000?pieces=100&pause=1")
    try:
        with BlobServiceClient.from_connection_string(server.connection_string) as client:
            box = client.create_container("box")
            assert box.get_blob_client("stopped").start_copy_from_url(trickle)["copy_status"] == "pending"
        server.stop()  # SIGTERM: the worker ends its copies as it shuts down
        server.start()
        with BlobServiceClient.from_connection_string(server.connection_string) as client:
            stopped = client.get_blob_client("box", "stopped").get_blob_properties()
            assert stopped.copy.status == "failed" and stopped.size == 0
            assert "interrupted" in (stopped.copy.status_description or "")
            target = client.get_blob_client("box", "killed")
            assert target.start_copy_from_url(trickle)["copy_status"] == "pending"
        server.stop(signal.SIGKILL)
        server.start()
        with BlobServiceClient.from_connection_string(server.connection_string) as client:
            target = client.get_blob_client("box", "killed")
            props = target.get_blob_properties()
            assert props.copy.status == "failed" and props.size == 0
            assert "interrupted" in (props.copy.status_description or "")
            assert target.start_copy_from_url(remote.url("/data/100"))["copy_status"] == "pending"
            assert wait_for_copy(target).copy.status == "success"  # type: ignore[attr-defined]
    finally:
        server.stop()


def test_source_range_open_ended(
    server: ServerProcess, container: ContainerClient, remote: RemoteSource
) -> None:
    """``x-ms-source-range: bytes=N-`` reads the source from N to its end: what the .NET SDK sends
    for Put Block and Append Block From URL given no range, and Azure takes (recorded for its
    StageBlockFromUriAsync_Min and AppendBlockFromUriAsync_NullOptions), here or elsewhere."""
    source = source_blob(container, bytes(range(256)) * 4)
    appended = container.get_blob_client("appended")
    appended.create_append_blob()
    appended.append_block_from_url(sas_url(source), source_offset=0)  # the SDK writes "bytes=0-"
    appended.append_block_from_url(sas_url(source), source_offset=1000)
    assert appended.download_blob().readall() == bytes(range(256)) * 4 + bytes(range(232, 256))
    http = BlobHttp(server.blob_port)
    path = f"/{container.container_name}/staged?comp=block&blockid=QUFBQQ%3D%3D"
    staged = http.request("PUT", path, {"x-ms-copy-source": sas_url(source), "x-ms-source-range": "bytes=0-"})
    assert staged.status == 201
    container.get_blob_client("staged").commit_block_list(["AAAA"])  # the SDK encodes it
    assert container.get_blob_client("staged").download_blob().readall() == bytes(range(256)) * 4
    appended.append_block_from_url(remote.url("/data/50000"), source_offset=49_990)
    assert remote.seen[-1]["range"] == "bytes=49990-"
    assert appended.download_blob().readall()[-10:] == content(50_000)[-10:]
    for bad in ("bytes=5-3", "bytes=-3", "bytes=x-"):
        reply = http.request("PUT", path, {"x-ms-copy-source": sas_url(source), "x-ms-source-range": bad})
        assert (reply.status, reply.code) == (400, "InvalidHeaderValue")


def test_source_md5_mismatch_documents(container: ContainerClient) -> None:
    """An unmet x-ms-source-content-md5 is 400 Md5Mismatch; Put Block From URL's document names
    both values, Append Block's and Put Page's From URL name neither, as Azure's recordings for
    the .NET SDK show (StageBlockFromUriAsync_MD5_Fail, AppendBlockFromUriAsync_MD5_Fail,
    UploadPagesFromUriAsync_MD5_Fail)."""
    source = source_blob(container, os.urandom(1024))
    wrong = hashlib.md5(b"something else").digest()
    appended = container.get_blob_client("append-md5")
    appended.create_append_blob()
    pages = container.get_blob_client("pages-md5")
    pages.create_page_blob(1024)
    blocks = container.get_blob_client("blocks-md5")
    attempts = {
        "append": lambda: appended.append_block_from_url(sas_url(source), source_content_md5=wrong),
        "pages": lambda: pages.upload_pages_from_url(sas_url(source), 0, 1024, 0, source_content_md5=wrong),
        "block": lambda: blocks.stage_block_from_url(
            "AAAA", sas_url(source), 0, 1024, source_content_md5=wrong
        ),
    }
    documents = {}
    for name, attempt in attempts.items():
        with pytest.raises(HttpResponseError) as raised:
            attempt()
        assert (raised.value.status_code, raised.value.error_code) == (400, "Md5Mismatch")
        assert raised.value.response is not None
        documents[name] = raised.value.response.text()
    for name in ("append", "pages"):
        assert "UserSpecifiedMd5" not in documents[name] and "ServerCalculatedMd5" not in documents[name]
    assert f"<UserSpecifiedMd5>{base64.b64encode(wrong).decode()}</UserSpecifiedMd5>" in documents["block"]
    assert "<ServerCalculatedMd5>" in documents["block"]
    assert appended.get_blob_properties().size == 0


def test_refusal_message_is_the_sources_where_azure_says_it(container: ContainerClient) -> None:
    """A refused source: Put Blob, Put Block and Copy Blob From URL put the source's own message in
    their CannotVerifyCopySource document, Append Block and Put Page From URL the generic one, as
    Azure's recordings for the .NET SDK show (SyncUploadFromUriAsync_SourceBearerTokenFail,
    StageBlobFromUriAsync_SourceErrorAndStatusCode, SyncCopyFromUriAsync_Error;
    AppendBlockFromUriAsync_SourceErrorAndStatusCode, UploadPagesFromUriAsync_SourceBearerTokenFail)."""
    source = source_blob(container, os.urandom(1024))
    malformed = "Authentication information is not given in the correct format."
    anonymous = "Server failed to authenticate the request."
    generic = "Could not verify the copy source within the specified time."
    target = container.get_blob_client("target")
    appended = container.get_blob_client("appended")
    appended.create_append_blob()
    pages = container.get_blob_client("pages")
    pages.create_page_blob(1024)
    token = "Bearer auth token"
    attempts = [
        (lambda: target.upload_blob_from_url(source.url, source_authorization=token), malformed),
        (lambda: target.stage_block_from_url("AAAA", source.url, source_authorization=token), malformed),
        (lambda: target.start_copy_from_url(source.url, requires_sync=True), anonymous),
        (lambda: appended.append_block_from_url(source.url), generic),
        (lambda: pages.upload_pages_from_url(source.url, 0, 1024, 0, source_authorization=token), generic),
    ]
    for attempt, message in attempts:
        with pytest.raises(HttpResponseError) as error:
            attempt()
        assert error.value.error_code == "CannotVerifyCopySource"
        assert error.value.response is not None
        assert f"<Message>{message}" in error.value.response.text(), message


def test_a_signature_recorded_before_is_not_shown(tmp_path: Path) -> None:
    """A source recorded with its signature by an earlier release (Incremental Copy kept the
    whole URL; ``SIG=`` was kept by every copy) is shown without it: in Get Blob Properties'
    ``x-ms-copy-source`` and List Blobs' ``<CopySource>``. The record is written as that release
    left it, straight into the SQLite store."""
    server = ServerProcess(tmp_path / "data", extra_args=["--workers", "1"]).start()
    try:
        service = BlobServiceClient.from_connection_string(server.connection_string)
        container = service.create_container("atrest")
        source = source_blob(container, b"kept")
        target = container.get_blob_client("copied")
        target.start_copy_from_url(sas_url(source), requires_sync=True)
        database = sqlite3.connect(server.data_dir / "tabulae.db")
        try:
            (doc,) = database.execute("SELECT doc FROM blobs WHERE name = 'copied'").fetchone()
            fields = json.loads(doc)
            fields[5][1] += "&sig=c2VjcmV0&SIG=c2VjcmV0Mg%3D%3D"  # the copy state's source URL
            with database:
                database.execute(
                    "UPDATE blobs SET doc = ? WHERE name = 'copied'", (json.dumps(fields).encode(),)
                )
        finally:
            database.close()
        shown = target.get_blob_properties().copy.source or ""
        listed = (
            next(iter(container.list_blobs(name_starts_with="copied", include=["copy"]))).copy.source or ""
        )
        for source_url in (shown, listed):
            assert "sp=r" in source_url and "c2VjcmV0" not in source_url, source_url
    finally:
        server.stop()
