"""DFS bodies and headers: byte-equal to recorded Azure responses, and read back by the real
``azure-storage-file-datalake`` client through a loopback transport (no network, no server)."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from azure.core.exceptions import HttpResponseError, ResourceExistsError
from azure.core.pipeline.transport import HttpResponse, HttpTransport
from azure.storage.filedatalake import DataLakeServiceClient
from hypothesis import given
from hypothesis import strategies as st

from tabulae.dfs import formats
from tabulae.dfs.formats import AclFailure, FilesystemItem, PathItem
from tabulae.model.errors import ServiceError

KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
ENDPOINT = "http://127.0.0.1:10000/devstoreaccount1"


class _Answer(HttpResponse):
    def __init__(self, request: Any, status: int, headers: dict[str, str], body: bytes) -> None:
        super().__init__(request, None)
        self.status_code = status
        self.headers = headers
        self.reason = "OK" if status < 400 else "Error"
        self.content_type = headers.get("Content-Type")
        self._body = body

    def body(self) -> bytes:
        return self._body

    def text(self, encoding: str | None = None) -> str:
        return self._body.decode()


class _Canned(HttpTransport):
    """Answers every request with one canned response, as Tabulae would write it."""

    def __init__(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes = b"") -> None:
        self.status = status
        self.headers = {name.decode(): value.decode() for name, value in headers}
        self.headers.setdefault("Content-Length", str(len(body)))
        self.body = body

    def __enter__(self) -> _Canned:
        return self

    def __exit__(self, *args: object) -> None:
        pass

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def send(self, request: Any, **kwargs: Any) -> Any:
        return _Answer(request, self.status, dict(self.headers), self.body)


def _client(transport: _Canned) -> DataLakeServiceClient:
    return DataLakeServiceClient(
        ENDPOINT, credential={"account_name": "devstoreaccount1", "account_key": KEY}, transport=transport
    )


CREATED = datetime(2025, 2, 10, 20, 51, 30, 94943, tzinfo=UTC)
MODIFIED = datetime(2025, 2, 10, 20, 51, 30, tzinfo=UTC)


def test_filetime_matches_the_recording() -> None:
    """test_file_system.pyTestFileSystemtest_list_paths: dir10 created 2025-02-10 20:51:30 reads
    ``"creationTime": "133836942900949432"`` (to the 100 ns tick)."""
    created = formats.from_filetime("133836942900949432")
    assert created is not None
    assert created.replace(microsecond=0) == MODIFIED
    assert formats.filetime(created) == "133836942900949430"  # microseconds: the last tick digit goes
    assert formats.filetime(None) == "0"
    assert formats.from_filetime("0") is None


@given(st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)))
def test_filetime_round_trips(moment: datetime) -> None:
    assert formats.from_filetime(formats.filetime(moment)) == moment


def test_list_paths_is_byte_equal_to_azures() -> None:
    """A JS SDK recording of List Paths (2023, x-ms-version 2021-12-02+): a directory and a file."""
    when = datetime(2023, 2, 22, 2, 41, 26, tzinfo=UTC)
    su = "$superuser"
    items = [
        PathItem("dirname167703368658305293", True, 0, when, '"0x8DB147E4B7DFE4B"', su, su, "rwxr-x---",
                 formats.from_filetime("133215072868040267") or CREATED),
        PathItem("file16", False, 11, when, '"0x8DB147E4B6CE654"', su, su, "rw-r-----",
                 formats.from_filetime("133215072864453051") or CREATED),
    ]  # fmt: skip
    body = formats.list_paths(items)
    assert body.startswith(
        b'{"paths":[{"contentLength":"0","creationTime":"13321507286804026'
    )  # the last digit is a 100 ns tick, below a datetime's resolution
    assert body[body.index(b'","etag"') :].startswith(
        b'","etag":"0x8DB147E4B7DFE4B","expiryTime":"0","group":"$superuser","isDirectory":"true",'
        b'"lastModified":"Wed, 22 Feb 2023 02:41:26 GMT","name":"dirname167703368658305293",'
        b'"owner":"$superuser","permissions":"rwxr-x---"},{"contentLength":"11","creationTime":"'
    )
    second = orjson.loads(body)["paths"][1]
    assert "isDirectory" not in second
    assert list(second) == sorted(second)


def test_the_sdk_reads_a_list_paths_page() -> None:
    su = "$superuser"
    items = [
        PathItem("dir", True, 0, MODIFIED, '"0x8DD4A14B1E671B8"', su, su, "rwxr-x---", CREATED),
        PathItem("dir/a b.txt", False, 11, MODIFIED, '"0x8DD4A14B1E671B9"', "oid", "gid", "rw-r-----+",
                 CREATED, expiry_time=CREATED + timedelta(days=1)),
    ]  # fmt: skip
    transport = _Canned(
        200,
        [(b"Content-Type", formats.JSON_CONTENT_TYPE), (formats.CONTINUATION, b"")],
        formats.list_paths(items),
    )
    paths = list(_client(transport).get_file_system_client("fs").get_paths())
    assert [(p.name, p.is_directory, p.content_length) for p in paths] == [
        ("dir", True, 0),
        ("dir/a b.txt", False, 11),
    ]
    assert paths[1].owner == "oid" and paths[1].group == "gid" and paths[1].permissions == "rw-r-----+"
    assert paths[0].last_modified == MODIFIED.replace(tzinfo=None)  # the SDK drops the zone
    assert paths[0].etag == "0x8DD4A14B1E671B8"
    assert paths[0].creation_time.replace(microsecond=0) == CREATED.replace(microsecond=0)
    assert paths[0].expiry_time is None
    assert paths[1].expiry_time is not None


def test_the_sdk_follows_the_continuation_header() -> None:
    token = formats.encode_continuation("dir/b")
    transport = _Canned(
        200,
        [(b"Content-Type", formats.JSON_CONTENT_TYPE), (formats.CONTINUATION, token.encode())],
        formats.list_paths([]),
    )
    pages = _client(transport).get_file_system_client("fs").get_paths(max_results=1).by_page()
    next(pages)
    assert pages.continuation_token == token
    assert formats.decode_continuation(token) == "dir/b"


def test_list_filesystems_body() -> None:
    body = formats.list_filesystems([FilesystemItem("fs1", MODIFIED, '"0x8DD4A14B1BCF671"')])
    assert body == (
        b'{"filesystems":[{"etag":"0x8DD4A14B1BCF671",'
        b'"lastModified":"Mon, 10 Feb 2025 20:51:30 GMT","name":"fs1"}]}'
    )


def test_acl_recursive_body_is_byte_equal_to_azures() -> None:
    """test_directory.pyTestDirectorytest_set_access_control_recursive, base64 body decoded."""
    recorded = base64.b64decode(
        "eyJkaXJlY3Rvcmllc1N1Y2Nlc3NmdWwiOjYsImZhaWxlZEVudHJpZXMiOltdLCJmYWlsdXJlQ291bnQiOjAsImZpbGVzU3VjY2Vzc2Z1bCI6MjV9Cg=="
    )
    assert formats.acl_recursive_result(6, 25, 0) == recorded


def test_the_sdk_reads_acl_recursive_counts_and_failures() -> None:
    body = formats.acl_recursive_result(
        2, 3, 1, [AclFailure("dir/x", False, "This request is not authorized to perform this operation.")]
    )
    transport = _Canned(200, [(b"Content-Type", formats.JSON_CONTENT_TYPE), formats.NAMESPACE_ENABLED], body)
    directory = _client(transport).get_file_system_client("fs").get_directory_client("dir")
    result = directory.set_access_control_recursive(acl="user::rwx,group::r-x,other::---")
    counters = result.counters
    assert (counters.directories_successful, counters.files_successful, counters.failure_count) == (2, 3, 1)
    failure = orjson.loads(body)["failedEntries"][0]
    assert failure == {
        "errorMessage": "This request is not authorized to perform this operation.",
        "name": "dir/x",
        "type": "FILE",
    }


def test_error_body_is_azures_and_the_sdk_reads_its_code() -> None:
    error = ServiceError("PathAlreadyExists")
    body = formats.error_body(error, "14400e54-401f-0021-0460-f528af000000", "2020-03-08T15:46:42.1944872Z")
    # a JS SDK recording of Create Path on an existing file, byte for byte
    assert body == (
        b'{"error":{"code":"PathAlreadyExists","message":"The specified path already exists.\\n'
        b'RequestId:14400e54-401f-0021-0460-f528af000000\\nTime:2020-03-08T15:46:42.1944872Z"}}'
    )
    transport = _Canned(
        409, [(b"Content-Type", formats.JSON_CONTENT_TYPE), (b"x-ms-error-code", b"PathAlreadyExists")], body
    )
    file = _client(transport).get_file_system_client("fs").get_file_client("f")
    with pytest.raises(ResourceExistsError) as raised:
        file.create_file()
    assert raised.value.error_code == "PathAlreadyExists"
    assert "The specified path already exists." in str(raised.value)


def test_the_sdk_reads_access_control_headers() -> None:
    headers = [
        *formats.access_control_headers(
            "$superuser", "$superuser", "rwxr-x---", "user::rwx,group::r-x,other::---"
        ),
        (b"ETag", b'"0x8DD4A099DDFD26C"'),
        (b"Last-Modified", b"Mon, 10 Feb 2025 19:32:12 GMT"),
    ]
    file = _client(_Canned(200, headers)).get_file_system_client("fs").get_directory_client("d")
    control = file.get_access_control()
    assert {name: control[name] for name in ("owner", "group", "permissions", "acl")} == {
        "owner": "$superuser",
        "group": "$superuser",
        "permissions": "rwxr-x---",
        "acl": "user::rwx,group::r-x,other::---",
    }


# --- x-ms-properties -----------------------------------------------------------------------------


def test_properties_as_the_sdk_sends_them() -> None:
    """test_directory.pyTestDirectorytest_get_access_control sends ``hello=d29ybGQ=,number=NDI=``."""
    assert formats.parse_properties("hello=d29ybGQ=,number=NDI=") == {"hello": "world", "number": "42"}
    assert formats.render_properties({"hello": "world", "number": "42"}) == "hello=d29ybGQ=,number=NDI="
    assert formats.parse_properties("n1=djE=, n2=djI=") == {"n1": "v1", "n2": "v2"}
    assert formats.parse_properties("") == {}
    assert formats.parse_properties("empty=") == {"empty": ""}


@pytest.mark.parametrize(
    ("text", "code", "message"),
    [
        ("=djE=", "InvalidPropertyName", "A property name cannot be empty."),
        ("novalue", "InvalidPropertyName", "A property name cannot be empty."),
        ("a,b=djE=", "InvalidPropertyName", "A property name cannot be empty."),
        ("bad-name=djE=", "InvalidPropertyName", "The property name contains invalid characters."),
        ("1st=djE=", "InvalidPropertyName", "The property name contains invalid characters."),
        ("a=djE=,A=djI=", "InvalidPropertyName", "The property name contains invalid characters."),
        ("a=not base64", "InvalidHeaderValue", None),
        ("a=/w==", "InvalidHeaderValue", None),  # base64 of a byte that is no UTF-8
    ],
)
def test_bad_properties(text: str, code: str, message: str | None) -> None:
    with pytest.raises(ServiceError) as raised:
        formats.parse_properties(text)
    assert raised.value.code == code
    assert raised.value.status == 400
    if message is not None:
        assert raised.value.message == message


@given(
    st.dictionaries(
        st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True), st.text(max_size=20), max_size=5
    ).filter(lambda d: len({k.lower() for k in d}) == len(d))
)
def test_properties_round_trip(properties: dict[str, str]) -> None:
    assert formats.parse_properties(formats.render_properties(properties)) == properties


@given(st.text(max_size=40))
def test_properties_parser_only_raises_azures_errors(text: str) -> None:
    try:
        formats.parse_properties(text)
    except ServiceError as error:
        assert error.code in ("InvalidPropertyName", "InvalidHeaderValue")


# --- continuation and expiry ---------------------------------------------------------------------


@given(st.text())
def test_continuation_round_trips(marker: str) -> None:
    token = formats.encode_continuation(marker)
    assert token.isascii() and "=" not in token and "+" not in token and "/" not in token
    assert formats.decode_continuation(token) == marker


def test_bad_continuation() -> None:
    with pytest.raises(ServiceError) as raised:
        formats.decode_continuation("/w")
    assert raised.value.code == "InvalidQueryParameterValue"


def test_expiry_options() -> None:
    now = datetime(2025, 1, 1, tzinfo=UTC)
    created = now - timedelta(hours=1)
    assert formats.expiry("NeverExpire", None, now=now, created=created) is None
    assert formats.expiry("RelativeToNow", "1000", now=now, created=created) == now + timedelta(seconds=1)
    assert formats.expiry("RelativeToCreation", "3600000", now=now, created=created) == now
    assert formats.expiry(
        "Absolute", "Wed, 01 Jan 2025 01:00:00 GMT", now=now, created=created
    ) == now + timedelta(hours=1)
    for option, value in [
        ("Never", None),
        ("NeverExpire", "5"),
        ("RelativeToNow", "-1"),
        ("RelativeToNow", "1e3"),
        ("Absolute", "tomorrow"),
        ("RelativeToNow", "9" * 30),
    ]:
        with pytest.raises(ServiceError) as raised:
            formats.expiry(option, value, now=now, created=created)
        assert raised.value.code == "InvalidHeaderValue"
    with pytest.raises(ServiceError) as raised:
        formats.expiry("RelativeToNow", None, now=now, created=created)
    assert raised.value.code == "MissingRequiredHeader"


def test_resource_type_header() -> None:
    assert formats.resource_type_header(True) == (b"x-ms-resource-type", b"directory")
    assert formats.resource_type_header(False) == (b"x-ms-resource-type", b"file")


def test_sdk_error_is_an_http_response_error() -> None:
    body = formats.error_body(ServiceError("InvalidFlushPosition"), "r", "t")
    transport = _Canned(
        400,
        [(b"Content-Type", formats.JSON_CONTENT_TYPE), (b"x-ms-error-code", b"InvalidFlushPosition")],
        body,
    )
    file = _client(transport).get_file_system_client("fs").get_file_client("f")
    with pytest.raises(HttpResponseError) as raised:
        file.flush_data(5)
    assert raised.value.status_code == 400
    assert raised.value.error_code == "InvalidFlushPosition"
