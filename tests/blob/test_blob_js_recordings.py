"""Blob answers compared with Azure's recordings of the JavaScript SDK's storage-blob tests
(``js/sdk/storage/storage-blob/recordings/node/`` in Azure/azure-sdk-assets), sent over raw HTTP
as the JS client sent them, on an account that keeps versions with blob soft delete on, as the
recording account did, and read back through the Python SDK where it can express the request."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime
from urllib.parse import quote

import pytest
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import BlobServiceClient, RetentionPolicy

from tests.backends import backend_names
from tests.blobhttp import BlobHttp
from tests.conftest import fresh_store
from tests.serverproc import ServerProcess

_names = itertools.count()


@pytest.fixture(scope="module", params=backend_names())
def js_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server whose account keeps versions and soft-deletes blobs, one per backend."""
    extra = [*fresh_store(request.param), "--blob-versioning"]
    process = ServerProcess(tmp_path_factory.mktemp("jsrec"), extra_args=extra, backend=request.param)
    process.start()
    with BlobServiceClient.from_connection_string(process.connection_string) as service:
        service.set_service_properties(delete_retention_policy=RetentionPolicy(enabled=True, days=7))
    yield process
    process.stop()


@pytest.fixture
def http(js_server: ServerProcess) -> BlobHttp:
    return BlobHttp(js_server.blob_port)


@pytest.fixture
def box(http: BlobHttp) -> str:
    """A new container's name."""
    return http.new_container("jsc")


def test_deleting_a_version_with_its_snapshots_names_versionid(
    js_server: ServerProcess, http: BlobHttp, box: str
) -> None:
    """recording_deleting_a_blob_with_both_deletesnapshots_and_versionid_option_should_fail.json
    (node/blob_versioning, x-ms-version 2026-02-06): Delete Blob with ``versionid`` and
    ``x-ms-delete-snapshots`` (include or only) is 400 InvalidQueryParameterValue naming
    ``versionid`` with the id sent and the reason 'This operation is only allowed on the root
    blob. Version id should not be provided.' (494 bytes); the version stays."""
    first = http.request("PUT", f"/{box}/b", {"x-ms-blob-type": "BlockBlob"}, b"Hello World")
    version = first.headers["x-ms-version-id"]
    assert http.request("PUT", f"/{box}/b", {"x-ms-blob-type": "BlockBlob"}).status == 201
    for option in ("include", "only"):
        refused = http.request(
            "DELETE", f"/{box}/b?versionid={quote(version)}", {"x-ms-delete-snapshots": option}
        )
        assert (refused.status, refused.code, len(refused.body)) == (400, "InvalidQueryParameterValue", 494)
        fields = refused.error_fields()
        assert (fields["QueryParameterName"], fields["QueryParameterValue"]) == ("versionid", version)
        assert fields["Reason"] == (
            "This operation is only allowed on the root blob. Version id should not be provided."
        )
    assert http.request("HEAD", f"/{box}/b?versionid={quote(version)}").status == 200
    with BlobServiceClient.from_connection_string(js_server.connection_string) as service:
        blob = service.get_blob_client(box, "b")
        with pytest.raises(HttpResponseError) as caught:
            blob.delete_blob(delete_snapshots="include", version_id=version)
        assert caught.value.error_code == "InvalidQueryParameterValue"


def test_a_previous_versions_read_names_no_current_flag(
    js_server: ServerProcess, http: BlobHttp, box: str
) -> None:
    """recording_get_properties_of_a_blob_version.json and
    recording_undelete_a_softdeleted_version.json (node/blob_versioning, x-ms-version 2026-02-06):
    Get Blob Properties of a previous version answers its x-ms-version-id and no
    x-ms-is-current-version (nor lease headers); the current version, named or not, answers
    ``x-ms-is-current-version: true``. Get Blob of a previous version is the same."""
    old = http.request("PUT", f"/{box}/b", {"x-ms-blob-type": "BlockBlob"}, b"Hello World")
    version = old.headers["x-ms-version-id"]
    current = http.request("PUT", f"/{box}/b", {"x-ms-blob-type": "BlockBlob"}).headers["x-ms-version-id"]
    for method in ("HEAD", "GET"):
        previous = http.request(method, f"/{box}/b?versionid={quote(version)}")
        assert previous.status == 200 and previous.headers["x-ms-version-id"] == version
        assert "x-ms-is-current-version" not in previous.headers
        assert "x-ms-lease-state" not in previous.headers
        for path in (f"/{box}/b", f"/{box}/b?versionid={quote(current)}"):
            now = http.request(method, path)
            assert now.headers["x-ms-version-id"] == current
            assert now.headers["x-ms-is-current-version"] == "true"
    with BlobServiceClient.from_connection_string(js_server.connection_string) as service:
        blob = service.get_blob_client(box, "b")
        assert blob.get_blob_properties(version_id=version).is_current_version is None
        assert blob.get_blob_properties().is_current_version is True


def _ticks(stamp: str) -> int:
    """A snapshot or version time (seven fractional digits) in 100 ns ticks."""
    whole, fraction = stamp.rstrip("Z").split(".")
    seconds = int(datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp())
    return seconds * 10_000_000 + int(fraction)


def test_a_snapshots_version_follows_it_by_a_millisecond(
    js_server: ServerProcess, http: BlobHttp, box: str
) -> None:
    """recording_get_properties_of_a_blob_version.json and
    recording_deleting_a_blob_with_both_deletesnapshots_and_versionid_option_should_fail.json
    (node/blob_versioning, x-ms-version 2026-02-06), and the JS SDK's nock recordings at 2019-12-12,
    2020-02-10 and 2020-12-06: Snapshot Blob on an account that keeps versions answers an
    x-ms-version-id one millisecond after its x-ms-snapshot (``...35.0606219Z`` and
    ``...35.0616219Z``); that version is the blob's current one and reads as it."""
    assert http.request("PUT", f"/{box}/b", {"x-ms-blob-type": "BlockBlob"}, b"Hello World").status == 201
    taken = http.request("PUT", f"/{box}/b?comp=snapshot")
    snapshot, version = taken.headers["x-ms-snapshot"], taken.headers["x-ms-version-id"]
    assert _ticks(version) - _ticks(snapshot) == 10_000
    current = http.request("HEAD", f"/{box}/b")
    assert (current.headers["x-ms-version-id"], current.headers["x-ms-is-current-version"]) == (
        version,
        "true",
    )
    assert http.request("HEAD", f"/{box}/b?versionid={quote(version)}").status == 200
    with BlobServiceClient.from_connection_string(js_server.connection_string) as service:
        blob = service.get_blob_client(box, "b")
        again = blob.create_snapshot()
        assert _ticks(again["version_id"]) - _ticks(again["snapshot"]) == 10_000
        assert blob.get_blob_properties().version_id == again["version_id"]


@pytest.mark.parametrize("version", ["2018-03-28", "2018-11-09"])
def test_versions_before_2019_02_02_answer_no_crc64(http: BlobHttp, box: str, version: str) -> None:
    """The JS SDK's nock recordings at x-ms-version 2018-03-28 (June 2019: Put Blob of 'Hello
    World' answers Content-MD5 and no x-ms-content-crc64; List Blobs with include=snapshots has
    no ``<Content-CRC64 />``) and 2018-11-09 (July/August 2019: the same), where 2019-02-02 answers
    both (September 2019 on): the CRC64 is a 2019-02-02 feature, on writes and in listings."""
    old = {"x-ms-version": version}
    put = http.request("PUT", f"/{box}/b", {**old, "x-ms-blob-type": "BlockBlob"}, b"Hello World")
    assert put.status == 201 and put.headers["content-md5"] == "sQqNsWTgdUEFt6mb5y4/5Q=="
    assert "x-ms-content-crc64" not in put.headers
    assert http.request("PUT", f"/{box}/a", {**old, "x-ms-blob-type": "AppendBlob"}).status == 201
    appended = http.request("PUT", f"/{box}/a?comp=appendblock", old, b"Hello World")
    assert appended.status == 201 and "x-ms-content-crc64" not in appended.headers
    listed = http.request("GET", f"/{box}?restype=container&comp=list&include=snapshots", old)
    assert listed.status == 200 and b"<Content-CRC64" not in listed.body
    assert b"<Content-Encoding /><Content-Language /><Content-MD5>" in listed.body
    new = {"x-ms-version": "2019-02-02"}
    put = http.request("PUT", f"/{box}/b", {**new, "x-ms-blob-type": "BlockBlob"}, b"Hello World")
    assert put.headers["x-ms-content-crc64"] == "YeJLfssylmU="
    listed = http.request("GET", f"/{box}?restype=container&comp=list", new)
    assert b"<Content-Language /><Content-CRC64 /><Content-MD5>" in listed.body


def test_a_snapshots_tier_and_encryption_answer_from_2018_11_09(http: BlobHttp, box: str) -> None:
    """The JS SDK's nock recordings at x-ms-version 2018-03-28 (April and June 2019, two
    accounts): Snapshot Blob answers no x-ms-request-server-encrypted, Get Blob Properties of the
    snapshot and its List Blobs entry show no tier, while the base blob beside it shows Hot,
    inferred; at 2018-11-09 (August 2019) the snapshot answers
    ``x-ms-request-server-encrypted: false`` and shows its tier, inferred."""
    assert http.request("PUT", f"/{box}/b", {"x-ms-blob-type": "BlockBlob"}, b"Hello World").status == 201
    for version, shown in (("2018-03-28", False), ("2018-11-09", True)):
        at = {"x-ms-version": version}
        taken = http.request("PUT", f"/{box}/b?comp=snapshot", at)
        assert taken.status == 201
        assert ("x-ms-request-server-encrypted" in taken.headers) is shown
        snapshot = taken.headers["x-ms-snapshot"]
        props = http.request("HEAD", f"/{box}/b?snapshot={quote(snapshot)}", at)
        assert ("x-ms-access-tier" in props.headers) is shown
        base = http.request("HEAD", f"/{box}/b", at)
        assert (base.headers["x-ms-access-tier"], base.headers["x-ms-access-tier-inferred"]) == (
            "Hot",
            "true",
        )
        listed = http.request("GET", f"/{box}?restype=container&comp=list&include=snapshots", at).body
        entry = listed.split(f"<Snapshot>{snapshot}</Snapshot>".encode())[1].split(b"</Blob>")[0]
        assert (b"<AccessTier>" in entry) is shown


@pytest.fixture(scope="module", params=backend_names())
def flat_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server whose account soft-deletes blobs and keeps no versions, one per backend."""
    process = ServerProcess(
        tmp_path_factory.mktemp("jsflat"), extra_args=fresh_store(request.param), backend=request.param
    )
    process.start()
    with BlobServiceClient.from_connection_string(process.connection_string) as service:
        service.set_service_properties(delete_retention_policy=RetentionPolicy(enabled=True, days=7))
    yield process
    process.stop()


def test_a_soft_deleted_blob_is_listed_with_its_tier_and_an_empty_lease(flat_server: ServerProcess) -> None:
    """The JS SDK's nock recordings of List Blobs include=deleted on a flat account (x-ms-version
    2018-03-28, 2018-11-09, 2019-02-02 and 2019-12-12, June 2019 to June 2020): a soft-deleted
    block blob's properties carry ``<AccessTier>Hot</AccessTier><AccessTierInferred>true
    </AccessTierInferred><LeaseStatus />`` before ``<ServerEncrypted>``; a tier that was set
    shows as set."""
    http = BlobHttp(flat_server.blob_port)
    box = f"jsf{next(_names)}x"
    assert http.request("PUT", f"/{box}?restype=container").status == 201
    for name in ("b", "c"):
        assert (
            http.request("PUT", f"/{box}/{name}", {"x-ms-blob-type": "BlockBlob"}, b"Hello World").status
            == 201
        )
    assert http.request("PUT", f"/{box}/c?comp=tier", {"x-ms-access-tier": "Cool"}).status == 200
    for name in ("b", "c"):
        assert http.request("DELETE", f"/{box}/{name}").status == 202
    listed = http.request(
        "GET", f"/{box}?restype=container&comp=list&include=deleted", {"x-ms-version": "2019-12-12"}
    )
    entries = listed.body.split(b"<Blob><Name>")[1:]
    assert (
        b"<BlobType>BlockBlob</BlobType><AccessTier>Hot</AccessTier><AccessTierInferred>true</AccessTierInferred>"
        b"<LeaseStatus /><ServerEncrypted>true</ServerEncrypted><DeletedTime>" in entries[0]
    )
    assert b"<AccessTier>Cool</AccessTier><AccessTierChangeTime>" in entries[1]
    assert b"<LeaseStatus /><ServerEncrypted>" in entries[1]
    with BlobServiceClient.from_connection_string(flat_server.connection_string) as service:
        deleted = list(service.get_container_client(box).list_blobs(include=["deleted"]))
        assert [(b.name, b.deleted, b.blob_tier) for b in deleted] == [
            ("b", True, "Hot"),
            ("c", True, "Cool"),
        ]


def test_an_empty_page_list_closes_itself(http: BlobHttp, box: str) -> None:
    """The JS SDK's nock recording of Get Page Ranges of a 512-byte page blob with no pages
    written (x-ms-version 2019-12-12, July 2020): ``<?xml version="1.0" encoding="utf-8"?>
    <PageList />`` with no line break; a list with ranges keeps its break."""
    created = http.request(
        "PUT", f"/{box}/p", {"x-ms-blob-type": "PageBlob", "x-ms-blob-content-length": "512"}
    )
    assert created.status == 201
    empty = http.request("GET", f"/{box}/p?comp=pagelist", {"x-ms-version": "2019-12-12"})
    assert empty.status == 200
    assert empty.body == b'\xef\xbb\xbf<?xml version="1.0" encoding="utf-8"?><PageList />'
    page = {"x-ms-page-write": "update", "x-ms-range": "bytes=0-511"}
    assert http.request("PUT", f"/{box}/p?comp=page", page, b"a" * 512).status == 201
    full = http.request("GET", f"/{box}/p?comp=pagelist", {"x-ms-version": "2019-12-12"})
    assert full.body.endswith(
        b"?>\n<PageList><PageRange><Start>0</Start><End>511</End></PageRange></PageList>"
    )


def test_account_information_names_hns_from_2019_07_07(http: BlobHttp, box: str) -> None:
    """The JS SDK's nock recordings of Get Account Information: x-ms-sku-name and
    x-ms-account-kind alone at x-ms-version 2018-03-28, 2018-11-09 and 2019-02-02 (2019),
    ``x-ms-is-hns-enabled: false`` beside them at 2020-02-10 (December 2020); Learn dates the
    header 2019-07-07."""
    for version, named in (
        ("2018-03-28", False),
        ("2019-02-02", False),
        ("2019-07-07", True),
        ("2020-02-10", True),
    ):
        for path in ("/?restype=account&comp=properties", f"/{box}?restype=account&comp=properties"):
            info = http.request("GET", path, {"x-ms-version": version})
            assert info.status == 200 and info.headers["x-ms-account-kind"] == "StorageV2"
            assert ("x-ms-is-hns-enabled" in info.headers) is named
