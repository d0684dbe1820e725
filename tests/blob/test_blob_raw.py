"""The Blob service over raw HTTP: error shapes, bad input and what Tabulae does not serve.

Every malformed or unsupported request gets the status and code Azure gives, in its XML error
format (a HEAD answer carries the code in a header only), and leaves nothing half-written.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import formatdate
from http.client import HTTPConnection
from urllib.parse import quote

import pytest
from azure.core.exceptions import ClientAuthenticationError
from azure.storage.blob import (
    AccountSasPermissions,
    BlobBlock,
    BlobServiceClient,
    ContainerClient,
    ContainerSasPermissions,
    CorsRule,
    ResourceTypes,
    generate_account_sas,
    generate_container_sas,
)

from tests.blobhttp import BlobHttp
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess

MIB = 1024 * 1024


@pytest.fixture
def path(container: ContainerClient) -> Iterator[str]:
    yield "/" + container.container_name


def put_blob(http: BlobHttp, target: str, body: bytes, **headers: str) -> int:
    return http.request("PUT", target, {"x-ms-blob-type": "BlockBlob", **headers}, body).status


def test_error_format(http: BlobHttp, path: str) -> None:
    reply = http.request("GET", f"{path}/missing")
    assert reply.status == 404 and reply.code == "BlobNotFound"
    assert reply.headers["content-type"] == "application/xml"
    fields = reply.error_fields()
    assert fields["Code"] == "BlobNotFound"
    assert re.fullmatch(
        r"The specified blob does not exist\.\nRequestId:[0-9a-f-]{36}"
        r"\nTime:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{7}Z",
        fields["Message"],
    )
    assert reply.headers["x-ms-request-id"] in fields["Message"]
    head = http.request("HEAD", f"{path}/missing")
    assert head.status == 404 and head.code == "BlobNotFound" and head.body == b""
    gone = http.request("GET", "/nocontainerhere/blob")
    assert gone.status == 404 and gone.code == "ContainerNotFound"


def test_put_blob_headers(http: BlobHttp, path: str) -> None:
    reply = http.request("PUT", f"{path}/b", {}, b"x")
    assert reply.status == 400 and reply.code == "MissingRequiredHeader"
    assert reply.error_fields()["HeaderName"] == "x-ms-blob-type"
    reply = http.request("PUT", f"{path}/b", {"x-ms-blob-type": "Weird"}, b"x")
    assert reply.status == 400 and reply.code == "InvalidHeaderValue"
    reply = http.request("PUT", f"{path}/b", {"x-ms-blob-type": "AppendBlob"}, b"not empty")
    assert reply.status == 413 and reply.code == "RequestBodyTooLarge"
    assert http.request("GET", f"{path}/b").status == 404


@pytest.mark.parametrize(
    ("method", "suffix", "headers", "status", "code"),
    [
        ("PUT", "/b?comp=query", {}, 405, "UnsupportedHttpVerb"),
        ("DELETE", "/b?comp=legalhold", {}, 405, "UnsupportedHttpVerb"),
        ("GET", "/b?comp=nonsense", {}, 400, "InvalidQueryParameterValue"),
        ("POST", "/b", {}, 405, "UnsupportedHttpVerb"),
    ],
)
def test_what_is_not_served(
    http: BlobHttp, path: str, method: str, suffix: str, headers: dict[str, str], status: int, code: str
) -> None:
    reply = http.request(method, path + suffix, headers, b"")
    assert (reply.status, reply.code) == (status, code)
    assert reply.error_fields()["Code"] == code


def test_checksums(http: BlobHttp, path: str) -> None:
    body = b"Hello World!"
    good_md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
    assert put_blob(http, f"{path}/ok", body, **{"Content-MD5": good_md5}) == 201
    reply = http.request(
        "PUT", f"{path}/bad", {"x-ms-blob-type": "BlockBlob", "Content-MD5": "AAAAAAAAAAAAAAAAAAAAAA=="}, body
    )
    assert (reply.status, reply.code) == (400, "Md5Mismatch")
    assert reply.error_fields()["ServerCalculatedMd5"] == good_md5
    assert reply.error_fields()["UserSpecifiedMd5"] == "AAAAAAAAAAAAAAAAAAAAAA=="
    reply = http.request(
        "PUT", f"{path}/bad", {"x-ms-blob-type": "BlockBlob", "x-ms-content-crc64": "AQIDBAUGBwg="}, body
    )
    assert (reply.status, reply.code) == (400, "Crc64Mismatch")
    assert reply.error_fields()["ServerCalculatedCrc"] == "peH8Xsgc5QI="  # Azure's own value for this body
    reply = http.request("PUT", f"{path}/bad", {"x-ms-blob-type": "BlockBlob", "Content-MD5": "short"}, body)
    assert (reply.status, reply.code) == (400, "InvalidMd5")
    reply = http.request(
        "PUT", f"{path}/bad?comp=block&blockid=YQ%3D%3D", {"Content-MD5": "AAAAAAAAAAAAAAAAAAAAAA=="}, b"x"
    )
    assert reply.code == "Md5Mismatch"
    assert http.request("GET", f"{path}/bad").status == 404  # nothing half-written
    staged = http.request("PUT", f"{path}/ok?comp=block&blockid=YQ%3D%3D", {}, body)
    assert staged.status == 201 and staged.headers["x-ms-content-crc64"] == "peH8Xsgc5QI="


def test_both_checksums_at_once(http: BlobHttp, path: str) -> None:
    """One transactional checksum per request: an upload with both Content-MD5 and
    x-ms-content-crc64, or a ranged read asking for both, gets Azure's own codes for it."""
    body = b"HelloWorld"
    both = {
        "Content-MD5": base64.b64encode(hashlib.md5(body).digest()).decode(),
        "x-ms-content-crc64": "AAAAAAAAAAA=",
    }
    reply = http.request("PUT", f"{path}/both", {"x-ms-blob-type": "BlockBlob", **both}, body)
    assert (reply.status, reply.code) == (400, "BothCrc64AndMd5HeaderPresent")
    assert reply.error_fields()["Message"].startswith(
        "Both x-ms-content-crc64 header and Content-MD5 header are present."
    )
    reply = http.request("PUT", f"{path}/both?comp=block&blockid=YQ%3D%3D", both, body)
    assert (reply.status, reply.code) == (400, "BothCrc64AndMd5HeaderPresent")
    assert http.request("GET", f"{path}/both").status == 404  # nothing written
    assert put_blob(http, f"{path}/both", body) == 201
    wants = {
        "x-ms-range": "bytes=0-4",
        "x-ms-range-get-content-md5": "true",
        "x-ms-range-get-content-crc64": "true",
    }
    reply = http.request("GET", f"{path}/both", wants)
    assert (reply.status, reply.code) == (400, "BothCrc64AndMd5RangeHeaderPresent")


def test_append_block_of_nothing(http: BlobHttp, path: str) -> None:
    """Append Block with an empty body is 400 InvalidHeaderValue naming Content-Length (Azure
    refuses a length that is not positive), and the blob keeps no empty block."""
    assert http.request("PUT", f"{path}/app", {"x-ms-blob-type": "AppendBlob"}).status == 201
    reply = http.request("PUT", f"{path}/app?comp=appendblock", {}, b"")
    assert (reply.status, reply.code) == (400, "InvalidHeaderValue")
    assert reply.error_fields()["HeaderName"] == "Content-Length"
    head = http.request("HEAD", f"{path}/app")
    assert head.headers["x-ms-blob-committed-block-count"] == "0"
    assert http.request("PUT", f"{path}/app?comp=appendblock", {}, b"abc").status == 201


def test_backslash_is_a_slash(http: BlobHttp, path: str, container: ContainerClient) -> None:
    """Azure's front end reads a backslash in the path, percent-encoded (as the SDKs send it) or
    not, as a slash: the blob is listed, read and deleted by the name with slashes."""
    assert put_blob(http, f"{path}/dir%5Csub%5Cone.txt", b"one") == 201
    assert put_blob(http, f"{path}/dir\\two.txt", b"two") == 201
    names = [b.name for b in container.list_blobs(name_starts_with="dir")]
    assert names == ["dir/sub/one.txt", "dir/two.txt"]
    assert http.request("GET", f"{path}/dir/sub/one.txt").body == b"one"
    assert http.request("GET", f"{path}/dir%5ctwo.txt").body == b"two"
    assert container.get_blob_client("dir\\sub\\one.txt").download_blob().readall() == b"one"
    assert http.request("DELETE", f"{path}/dir%5Csub/one.txt").status == 202
    assert [b.name for b in container.list_blobs(name_starts_with="dir")] == ["dir/two.txt"]


def test_read_if_none_match_star(http: BlobHttp, path: str) -> None:
    """Get Blob and Get Blob Properties with If-None-Match: * are 400 UnsatisfiableCondition,
    for a blob that exists and one that does not; a write keeps its meaning (create only)."""
    assert put_blob(http, f"{path}/star", b"x") == 201
    for method in ("GET", "HEAD"):
        for name in ("star", "nothere"):
            reply = http.request(method, f"{path}/{name}", {"If-None-Match": "*"})
            assert (reply.status, reply.code) == (400, "UnsatisfiableCondition")
    reply = http.request("PUT", f"{path}/star", {"x-ms-blob-type": "BlockBlob", "If-None-Match": "*"}, b"y")
    assert (reply.status, reply.code) == (409, "BlobAlreadyExists")
    assert http.request("GET", f"{path}/star", {"If-None-Match": '"0x1"'}).body == b"x"


def test_ranges_raw(http: BlobHttp, path: str) -> None:
    assert put_blob(http, f"{path}/r", bytes(range(100))) == 201
    reply = http.request("GET", f"{path}/r", {"x-ms-range": "bytes=10-19"})
    assert reply.status == 206 and reply.body == bytes(range(10, 20))
    assert reply.headers["content-range"] == "bytes 10-19/100"
    assert reply.headers["x-ms-blob-content-md5"]  # the whole blob's MD5, not the range's
    # (Range is signed as it is sent; the Python SDK's signer cannot sign it, so a SAS is used.)
    sas = generate_account_sas(
        DEV_ACCOUNT, DEV_KEY, ResourceTypes(object=True), AccountSasPermissions(read=True),
        expiry=datetime.now(UTC) + timedelta(hours=1),
    )  # fmt: skip
    reply = http.request("GET", f"{path}/r?{sas}", {"Range": "bytes=95-"}, signed=False)
    assert reply.status == 206 and reply.body == bytes(range(95, 100))
    reply = http.request("GET", f"{path}/r", {"x-ms-range": "bytes=100-"})
    assert (reply.status, reply.code) == (416, "InvalidRange")
    assert reply.headers["content-range"] == "bytes */100"
    for bad in ("bytes=5-2", "bytes=abc", "pages=0-1"):
        reply = http.request("GET", f"{path}/r", {"x-ms-range": bad})
        assert (reply.status, reply.code) == (400, "InvalidHeaderValue"), bad
    bad_range = http.request("GET", f"{path}/r?{sas}", {"Range": "bytes=abc"}, signed=False)
    assert bad_range.status == 200  # a Range header that is no byte range is ignored, as HTTP asks
    reply = http.request(
        "GET", f"{path}/r", {"x-ms-range": "bytes=0-9", "x-ms-range-get-content-md5": "true"}
    )
    assert reply.headers["content-md5"] == base64.b64encode(hashlib.md5(bytes(range(10))).digest()).decode()


def test_lengths_and_limits(http: BlobHttp, path: str) -> None:
    # No Content-Length: 411.
    head = http.head_bytes(
        "PUT", f"{path}/chunked", {"x-ms-blob-type": "BlockBlob", "Transfer-Encoding": "chunked"}
    )
    answer = http.raw(head + b"3\r\nabc\r\n0\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 411") and b"MissingContentLengthHeader" in answer
    # Declared sizes past the limits are refused before any byte is read.
    for suffix, headers, length in (
        ("/huge", {"x-ms-blob-type": "BlockBlob"}, 5001 * MIB),
        ("/huge?comp=block&blockid=YQ%3D%3D", {}, 4001 * MIB),
        ("/huge?comp=block&blockid=YQ%3D%3D", {"x-ms-version": "2019-07-07"}, 101 * MIB),
        ("/huge?comp=appendblock", {}, 101 * MIB),
    ):
        head = http.head_bytes("PUT", path + suffix, {**headers, "Content-Length": str(length)})
        answer = http.raw(head, close_write=False, timeout=5)
        assert answer.startswith(b"HTTP/1.1 413"), (suffix, answer[:200])
        assert b"RequestBodyTooLarge" in answer
    assert http.request("GET", f"{path}/huge").status == 404


def test_body_shorter_than_its_length(http: BlobHttp, path: str, container: ContainerClient) -> None:
    """A client that declares more than it sends and goes away: nothing is stored, nothing breaks."""
    for suffix, headers in (
        ("/short", {"x-ms-blob-type": "BlockBlob"}),
        ("/short?comp=block&blockid=YQ%3D%3D", {}),
    ):
        head = http.head_bytes("PUT", path + suffix, {**headers, "Content-Length": "100000"})
        answer = http.raw(head + b"x" * 5000, close_write=True, timeout=5)
        assert not answer.startswith(b"HTTP/1.1 5"), answer[:200]
    large = http.head_bytes(
        "PUT", f"{path}/shortbig", {"x-ms-blob-type": "BlockBlob", "Content-Length": str(8 * MIB)}
    )
    http.raw(large + b"y" * (3 * MIB), close_write=True, timeout=5)
    time.sleep(0.5)
    assert http.request("GET", f"{path}/short").status == 404
    assert http.request("GET", f"{path}/shortbig").status == 404
    assert http.request("GET", f"{path}/short?comp=blocklist&blocklisttype=all").status == 404
    assert put_blob(http, f"{path}/after", b"still fine") == 201


@pytest.mark.parametrize(
    ("block_id", "code"),
    [
        ("not*base64", "InvalidQueryParameterValue"),
        (quote(base64.b64encode(b"x" * 65).decode(), safe=""), "InvalidQueryParameterValue"),
        ("", "InvalidQueryParameterValue"),
    ],
)
def test_invalid_block_ids(http: BlobHttp, path: str, block_id: str, code: str) -> None:
    reply = http.request("PUT", f"{path}/blk?comp=block&blockid={block_id}", {}, b"x")
    assert (reply.status, reply.code) == (400, code)


def test_block_id_rules(http: BlobHttp, path: str) -> None:
    reply = http.request("PUT", f"{path}/blk?comp=block", {}, b"x")
    assert (reply.status, reply.code) == (400, "MissingRequiredQueryParameter")
    assert http.request("PUT", f"{path}/blk?comp=block&blockid=YWFh", {}, b"x").status == 201
    reply = http.request("PUT", f"{path}/blk?comp=block&blockid=YWFhYQ%3D%3D", {}, b"x")
    assert (reply.status, reply.code) == (400, "InvalidBlobOrBlock")  # ids of one blob share a length


def test_block_id_lengths_are_of_the_bytes_encoded(http: BlobHttp, path: str) -> None:
    """Azure compares the decoded ids: a client numbering its blocks "9" then "10" is refused at
    the tenth, although both ids are four Base64 characters (``OQ==``, ``MTA=``)."""
    assert http.request("PUT", f"{path}/ids?comp=block&blockid=OQ%3D%3D", {}, b"x").status == 201
    reply = http.request("PUT", f"{path}/ids?comp=block&blockid=MTA%3D", {}, b"y")
    assert (reply.status, reply.code) == (400, "InvalidBlobOrBlock")
    assert http.request("PUT", f"{path}/ids?comp=block&blockid=OA%3D%3D", {}, b"z").status == 201
    listed = http.request("GET", f"{path}/ids?comp=blocklist&blocklisttype=uncommitted")
    assert b"OQ==" in listed.body and b"OA==" in listed.body and b"MTA=" not in listed.body


def test_block_list_documents(http: BlobHttp, path: str) -> None:
    assert http.request("PUT", f"{path}/bl?comp=block&blockid=YWFh", {}, b"abc").status == 201
    for body, code in (
        (b"<BlockList><Latest>YWFh</Latest>", "InvalidXmlDocument"),
        (b'<!DOCTYPE x [<!ENTITY a "b">]><BlockList><Latest>&a;</Latest></BlockList>', "InvalidXmlDocument"),
        (b"<Other><Latest>YWFh</Latest></Other>", "InvalidXmlDocument"),
        (b"<BlockList><Sideways>YWFh</Sideways></BlockList>", "InvalidXmlNodeValue"),
        (b"<BlockList><Committed>YWFh</Committed></BlockList>", "InvalidBlockList"),
    ):
        reply = http.request("PUT", f"{path}/bl?comp=blocklist", {"Content-Type": "application/xml"}, body)
        assert (reply.status, reply.code) == (400, code), body
    reply = http.request(
        "PUT", f"{path}/bl?comp=blocklist", {}, b"<BlockList><Latest>YWFh</Latest></BlockList>"
    )
    assert reply.status == 201 and http.request("GET", f"{path}/bl").body == b"abc"


@pytest.mark.parametrize(
    "name",
    [
        " spaced name ",
        "ünï/çödé",
        "100%",
        "q?uery#frag",
        "trailing/",
        "a//b",
        "\u2603.txt",
        "x" * 1024,
        ".a/.b",
    ],
)
def test_odd_names_round_trip(
    blob_service: BlobServiceClient, container: ContainerClient, http: BlobHttp, name: str
) -> None:
    blob = container.get_blob_client(name)
    blob.upload_blob(name.encode())
    assert blob.download_blob().readall() == name.encode()
    assert name in [b.name for b in container.list_blobs()]
    reply = http.request("GET", f"/{container.container_name}/" + quote(name, safe="/"))
    assert reply.status == 200 and reply.body == name.encode()


def test_dot_segments_raw(http: BlobHttp, path: str) -> None:
    """A ``..`` segment is part of a name, never a way out of it. (SDKs cannot send one: their
    HTTP layer removes dot segments from the path it signed, so such requests fail to verify.)"""
    assert put_blob(http, f"{path}/a/../b", b"literal") == 201
    assert http.request("GET", f"{path}/a/../b").body == b"literal"
    assert http.request("GET", f"{path}/b").status == 404
    reply = http.request("PUT", "/..?restype=container", {}, b"")
    assert (reply.status, reply.code) == (400, "OutOfRangeInput")
    reply = http.request("PUT", "/a..b?restype=container", {}, b"")
    assert (reply.status, reply.code) == (400, "InvalidResourceName")


@pytest.mark.parametrize(
    ("name", "code"),
    [("a%01b", "InvalidResourceName"), ("x" * 1025, "OutOfRangeInput"), ("%ee%80%80", "InvalidResourceName")],
)
def test_bad_blob_names(http: BlobHttp, path: str, name: str, code: str) -> None:
    reply = http.request("PUT", f"{path}/{name}", {"x-ms-blob-type": "BlockBlob"}, b"x")
    assert (reply.status, reply.code) == (400, code)


def test_bad_metadata_and_query_values(http: BlobHttp, path: str) -> None:
    assert put_blob(http, f"{path}/m", b"x") == 201
    for headers, code in (
        ({"x-ms-meta-1abc": "v"}, "InvalidMetadata"),
        ({"x-ms-meta-big": "v" * 9000}, "MetadataTooLarge"),
    ):
        reply = http.request("PUT", f"{path}/m?comp=metadata", headers, b"")
        assert (reply.status, reply.code) == (400, code)
    for query, code in (
        ("restype=container&comp=list&maxresults=0", "OutOfRangeQueryParameterValue"),
        ("restype=container&comp=list&maxresults=abc", "InvalidQueryParameterValue"),
        ("restype=container&comp=list&include=everything", "InvalidQueryParameterValue"),
        ("restype=container&comp=list&include=snapshots&delimiter=/", "InvalidQueryParameterValue"),
        ("restype=container&comp=list&marker=%%%", "InvalidQueryParameterValue"),
    ):
        reply = http.request("GET", f"{path}?{query}")
        assert (reply.status, reply.code) == (400, code), query
    reply = http.request("GET", f"{path}/m?snapshot=1")  # the front-end's refusal: the code in the body
    assert (reply.status, reply.code, reply.error_fields()["Code"]) == (
        400,
        None,
        "InvalidQueryParameterValue",
    )
    reply = http.request("PUT", f"{path}/m?comp=metadata&snapshot=2020-01-01T00:00:00.0000000Z", {}, b"")
    assert (reply.status, reply.code) == (400, "InvalidQueryParameterValue")  # Azure's: test_blob_rust_errors


def test_ten_thousand_uncommitted_blocks(server: ServerProcess, container: ContainerClient) -> None:
    """10,000 staged blocks (over keep-alive connections from 8 threads, with a SAS, so the
    client's own cost stays small), listed, then committed in one list: all Azure answers."""
    count, threads = 10_000, 8
    ids = [base64.b64encode(f"{i:08d}".encode()).decode() for i in range(count)]
    wire_ids = [base64.b64encode(i.encode()).decode() for i in ids]  # the SDK encodes ids once more
    sas = generate_container_sas(
        DEV_ACCOUNT, container.container_name, account_key=DEV_KEY,
        permission=ContainerSasPermissions(write=True), expiry=datetime.now(UTC) + timedelta(hours=1),
    )  # fmt: skip
    target = f"/{DEV_ACCOUNT}/{container.container_name}/many?comp=block&{sas}&blockid="
    failures: list[object] = []

    def stage(first: int) -> None:
        connection = HTTPConnection("127.0.0.1", server.blob_port, timeout=60)
        try:
            for i in range(first, count, threads):
                body = f"[{i}]".encode()
                connection.request(
                    "PUT", target + quote(wire_ids[i], safe=""), body, {"x-ms-version": "2026-10-06"}
                )
                response = connection.getresponse()
                answer = response.read()
                if response.status != 201:
                    failures.append((response.status, answer[:200]))
        except Exception as error:  # reported by the main thread
            failures.append(error)
        finally:
            connection.close()

    workers = [threading.Thread(target=stage, args=(t,)) for t in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert failures == []
    blob = container.get_blob_client("many")
    committed, uncommitted = blob.get_block_list("uncommitted")
    assert len(uncommitted) == count and committed == []
    blob.commit_block_list([BlobBlock(block_id) for block_id in ids])
    expected = b"".join(f"[{i}]".encode() for i in range(count))
    assert blob.download_blob().readall() == expected
    assert len(blob.get_block_list("committed")[0]) == count


def test_service_stats_and_secondary(http: BlobHttp, path: str) -> None:
    secondary = BlobHttp(http.port)
    secondary.base = secondary.base + "-secondary"
    reply = secondary.request("GET", "/?restype=service&comp=stats")
    assert reply.status == 200 and b"<Status>live</Status>" in reply.body
    assert put_blob(http, f"{path}/s", b"x") == 201
    assert secondary.request("GET", f"{path}/s").body == b"x"  # reads go to the secondary too
    reply = secondary.request("PUT", f"{path}/s", {"x-ms-blob-type": "BlockBlob"}, b"y")
    assert (reply.status, reply.code) == (403, "AuthorizationFailure")  # but writes do not


def test_shared_key_lite(http: BlobHttp, path: str) -> None:
    """Shared Key Lite, signed here by hand ("Authorize with Shared Key": verb, Content-MD5,
    Content-Type, Date, the x-ms- headers, and the resource with ``comp`` only)."""
    date = formatdate(usegmt=True)
    resource = f"/{DEV_ACCOUNT}/{DEV_ACCOUNT}{path}/lite"
    headers = {"x-ms-date": date, "x-ms-version": "2026-10-06", "x-ms-blob-type": "BlockBlob"}
    canonical = "".join(f"{name}:{headers[name]}\n" for name in sorted(headers))
    to_sign = f"PUT\n\ntext/plain\n\n{canonical}{resource}"
    mac = hmac.new(base64.b64decode(DEV_KEY), to_sign.encode(), hashlib.sha256).digest()
    headers["Authorization"] = f"SharedKeyLite {DEV_ACCOUNT}:{base64.b64encode(mac).decode()}"
    headers["Content-Type"] = "text/plain"
    assert http.request("PUT", f"{path}/lite", headers, b"lite", signed=False).status == 201
    headers["x-ms-meta-extra"] = "not signed"
    reply = http.request("PUT", f"{path}/lite", headers, b"lite", signed=False)
    assert (reply.status, reply.code) == (403, "AuthenticationFailed")


def test_cors(blob_service: BlobServiceClient, http: BlobHttp, path: str) -> None:
    original = blob_service.get_service_properties()["cors"]
    rule = CorsRule(["https://app.example"], ["GET", "PUT"], allowed_headers=["x-ms-meta-*"])
    blob_service.set_service_properties(cors=[rule])
    try:
        assert put_blob(http, f"{path}/c", b"x") == 201
        headers = {
            "Origin": "https://app.example",
            "Access-Control-Request-Method": "PUT",
            "Access-Control-Request-Headers": "x-ms-meta-a",
        }
        reply = http.request("OPTIONS", f"{path}/c", headers, signed=False)
        assert reply.status == 200
        assert reply.headers["access-control-allow-origin"] == "https://app.example"
        assert "PUT" in reply.headers["access-control-allow-methods"]
        denied = http.request(
            "OPTIONS", f"{path}/c", {**headers, "Origin": "https://evil.example"}, signed=False
        )
        assert (denied.status, denied.code) == (403, "CorsPreflightFailure")
        actual = http.request("GET", f"{path}/c", {"Origin": "https://app.example"})
        assert actual.headers["access-control-allow-origin"] == "https://app.example"
        assert "x-ms-blob-type" in actual.headers["access-control-expose-headers"]
    finally:
        blob_service.set_service_properties(cors=original)


def test_any_service_version_is_accepted(http: BlobHttp, path: str) -> None:
    for version in ("2019-02-02", "2021-08-06", "2026-10-06"):
        reply = http.request(
            "PUT", f"{path}/v", {"x-ms-blob-type": "BlockBlob", "x-ms-version": version}, b"x"
        )
        assert reply.status == 201 and reply.headers["x-ms-version"] == version


def test_anonymous_account_information_below_the_service(
    server: ServerProcess, http: BlobHttp, path: str
) -> None:
    """Get Account Information is never anonymous: at a container's or a blob's URL, whether the
    container exists or allows public reads, it is 401 NoAuthenticationInformation with the bearer
    challenge, as at the service's URL (recorded for the .NET SDK's container
    GetAccountInfoAsync_Error, a container that does not exist), not 404 ResourceNotFound."""
    http.request("PUT", f"/public-{path[1:]}?restype=container", {"x-ms-blob-public-access": "container"})
    for target in (path, f"{path}/blob", "/no-such-container", f"/public-{path[1:]}"):
        for method in ("GET", "HEAD"):
            reply = http.request(method, f"{target}?restype=account&comp=properties", signed=False)
            assert (reply.status, reply.code) == (401, "NoAuthenticationInformation"), (target, method)
            assert reply.headers["www-authenticate"].startswith("Bearer authorization_uri=")
    anonymous = ContainerClient(server.blob_endpoint, "no-such-container")
    with pytest.raises(ClientAuthenticationError) as raised:
        anonymous.get_account_information()
    assert raised.value.error_code == "NoAuthenticationInformation"
    assert http.request("GET", f"{path}/blob", signed=False).code == "ResourceNotFound"  # reads as before


def test_anonymous_operations_no_acl_allows(http: BlobHttp, path: str, container: ContainerClient) -> None:
    """An anonymous request for an operation no public access level allows (creating a container,
    writing, deleting) is 401 NoAuthenticationInformation with the bearer challenge, as Azure
    answered the .NET SDK's anonymous Create Container (CreateIfNotExistsAsync_Error, x-ms-version
    2024-08-04), whether the container exists, is private or public; reads an ACL could allow
    keep 404 ResourceNotFound where it does not."""
    http.request("PUT", f"/public-{path[1:]}?restype=container", {"x-ms-blob-public-access": "container"})
    assert put_blob(http, f"{path}/kept", b"x") == 201
    attempts = [
        ("PUT", "/anon-created-container?restype=container", b""),
        ("PUT", f"/public-{path[1:]}/written", b"x"),
        ("PUT", f"{path}/written", b"x"),
        ("DELETE", f"{path}/kept", b""),
        ("DELETE", f"{path}?restype=container", b""),
        ("PUT", f"{path}?restype=container&comp=metadata", b""),
    ]
    for method, target, body in attempts:
        headers = {"x-ms-blob-type": "BlockBlob", "Content-Length": str(len(body))}
        reply = http.request(method, target, headers, body, signed=False)
        assert (reply.status, reply.code) == (401, "NoAuthenticationInformation"), (method, target)
        assert reply.headers["www-authenticate"].startswith("Bearer authorization_uri=")
    assert http.request("GET", f"{path}/kept", signed=False).code == "ResourceNotFound"
    assert http.request("GET", f"{path}?restype=container&comp=list", signed=False).code == "ResourceNotFound"
    assert [b.name for b in container.list_blobs()] == ["kept"]
