"""DFS routing against what ``azure-storage-file-datalake`` really sends to an IP-host endpoint.

A loopback transport records each request the SDK (sync and aio) would put on the wire and stops
it there: no network, no server. Every request is then routed by :mod:`tabulae.dfs.routing`, so a
change in what the SDK sends, or in the rules, shows up here.
"""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import Callable
from typing import Any

import pytest
from azure.core.pipeline.transport import AsyncHttpTransport, HttpTransport
from azure.storage.filedatalake import DataLakeServiceClient
from azure.storage.filedatalake.aio import DataLakeServiceClient as AioDataLakeServiceClient
from hypothesis import given
from hypothesis import strategies as st

from tabulae.dfs import routing
from tabulae.dfs.routing import DfsOperation, Location, Target, locate, resolve
from tabulae.http.addressing import decode_segments
from tabulae.model.errors import ServiceError

KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
CONNECTION = (
    "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
    f"AccountKey={KEY};BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;"
)


class _Sent(Exception):
    """Raised by the loopback transport once it has the request: nothing goes further."""

    def __init__(self, request: Any) -> None:
        super().__init__("captured")
        self.request = request


class _Loopback(HttpTransport):
    def __enter__(self) -> _Loopback:
        return self

    def __exit__(self, *args: object) -> None:
        pass

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def send(self, request: Any, **kwargs: Any) -> Any:
        raise _Sent(request)


class _AioLoopback(AsyncHttpTransport):
    async def __aenter__(self) -> _AioLoopback:
        return self

    async def __aexit__(self, *args: object) -> None:
        pass

    async def open(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def send(self, request: Any, **kwargs: Any) -> Any:
        raise _Sent(request)


def _route(request: Any) -> tuple[Location, str, dict[str, str], dict[str, str]]:
    url = urllib.parse.urlsplit(request.url)
    assert url.netloc == "127.0.0.1:10000", "an IP host: DFS shares the Blob host and port"
    raw = url.path.removeprefix("/devstoreaccount1")
    segments = decode_segments(raw.removeprefix("/")) if raw not in ("", "/") else []
    query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
    headers = {name.lower(): value for name, value in request.headers.items()}
    return locate(segments), request.method, query, headers


def _capture(call: Callable[[Any], Any]) -> Any:
    client = DataLakeServiceClient.from_connection_string(CONNECTION, transport=_Loopback())
    with pytest.raises(_Sent) as sent:
        call(client)
    return sent.value.request


def _fs(client: Any) -> Any:
    return client.get_file_system_client("fs1")


def _file(client: Any) -> Any:
    return _fs(client).get_file_client("dir/a b+c.txt")


def _dir(client: Any) -> Any:
    return _fs(client).get_directory_client("dir/sub")


# (name, SDK call, the DFS operation, or None where the SDK uses the Blob API)
SDK_CALLS: list[tuple[str, Callable[[Any], Any], DfsOperation | None]] = [
    ("create_file_system", lambda c: _fs(c).create_file_system(), None),
    ("delete_file_system", lambda c: _fs(c).delete_file_system(), None),
    ("get_file_system_properties", lambda c: _fs(c).get_file_system_properties(), None),
    ("set_file_system_metadata", lambda c: _fs(c).set_file_system_metadata({"a": "b"}), None),
    ("list_file_systems", lambda c: list(c.list_file_systems()), None),
    (
        "get_paths",
        lambda c: list(_fs(c).get_paths(path="dir", recursive=False, max_results=5)),
        DfsOperation.LIST_PATHS,
    ),
    ("get_paths_root", lambda c: list(_fs(c).get_paths()), DfsOperation.LIST_PATHS),
    (
        "get_paths_upn",
        lambda c: list(_fs(c).get_paths(upn=True, start_from="dir/b")),
        DfsOperation.LIST_PATHS,
    ),
    ("list_deleted_paths", lambda c: list(_fs(c).list_deleted_paths()), DfsOperation.LIST_DELETED_PATHS),
    (
        "create_directory",
        lambda c: _dir(c).create_directory(permissions="rwxr-x---", umask="0027"),
        DfsOperation.CREATE_DIRECTORY,
    ),
    (
        "create_directory_acl",
        lambda c: _dir(c).create_directory(acl="user::rwx,group::r-x,other::---", owner="o"),
        DfsOperation.CREATE_DIRECTORY,
    ),
    ("create_sub_directory", lambda c: _dir(c).create_sub_directory("x"), DfsOperation.CREATE_DIRECTORY),
    ("create_file", lambda c: _file(c).create_file(metadata={"k": "v"}), DfsOperation.CREATE_FILE),
    (
        "create_file_expiry",
        lambda c: _file(c).create_file(expires_on=3600, lease_id="x", lease_duration=15),
        DfsOperation.CREATE_FILE,
    ),
    ("upload_data", lambda c: _file(c).upload_data(b"hello", overwrite=True), DfsOperation.CREATE_FILE),
    ("append_data", lambda c: _file(c).append_data(b"abc", offset=0, length=3), DfsOperation.APPEND),
    (
        "append_data_flush",
        lambda c: _file(c).append_data(b"abc", offset=0, length=3, flush=True),
        DfsOperation.APPEND,
    ),
    (
        "append_data_lease",
        lambda c: _file(c).append_data(b"abc", 0, 3, lease_action="acquire", lease_duration=15),
        DfsOperation.APPEND,
    ),
    (
        "flush_data",
        lambda c: _file(c).flush_data(3, retain_uncommitted_data=True, close=True),
        DfsOperation.FLUSH,
    ),
    ("download_file", lambda c: _file(c).download_file().readall(), None),
    ("get_file_properties", lambda c: _file(c).get_file_properties(), None),
    ("get_directory_properties", lambda c: _dir(c).get_directory_properties(), None),
    ("exists", lambda c: _file(c).exists(), None),
    ("set_metadata", lambda c: _file(c).set_metadata({"a": "b"}), None),
    ("set_http_headers", lambda c: _file(c).set_http_headers(), None),
    ("get_access_control", lambda c: _file(c).get_access_control(upn=True), DfsOperation.GET_ACCESS_CONTROL),
    (
        "set_access_control",
        lambda c: _file(c).set_access_control(permissions="0750"),
        DfsOperation.SET_ACCESS_CONTROL,
    ),
    (
        "set_access_control_acl",
        lambda c: _file(c).set_access_control(acl="user::rwx", owner="o"),
        DfsOperation.SET_ACCESS_CONTROL,
    ),
    (
        "set_acl_recursive",
        lambda c: _dir(c).set_access_control_recursive(acl="user::rwx", batch_size=2),
        DfsOperation.SET_ACCESS_CONTROL_RECURSIVE,
    ),
    (
        "update_acl_recursive",
        lambda c: _dir(c).update_access_control_recursive(acl="user::rwx"),
        DfsOperation.SET_ACCESS_CONTROL_RECURSIVE,
    ),
    (
        "remove_acl_recursive",
        lambda c: _dir(c).remove_access_control_recursive(acl="mask,default:user:x"),
        DfsOperation.SET_ACCESS_CONTROL_RECURSIVE,
    ),
    (
        "acl_recursive_continue",
        lambda c: _dir(c).set_access_control_recursive(
            acl="user::rwx", continuation_token="t", continue_on_failure=True
        ),
        DfsOperation.SET_ACCESS_CONTROL_RECURSIVE,
    ),
    ("delete_file", lambda c: _file(c).delete_file(), None),
    ("delete_directory", lambda c: _dir(c).delete_directory(), DfsOperation.DELETE_PATH),
    ("rename_file", lambda c: _file(c).rename_file("fs1/new dir/b+c.txt"), DfsOperation.RENAME),
    ("rename_directory", lambda c: _dir(c).rename_directory("fs1/other"), DfsOperation.RENAME),
    ("acquire_lease", lambda c: _file(c).acquire_lease(lease_duration=15), None),
    (
        "set_file_expiry",
        lambda c: _file(c).set_file_expiry("RelativeToNow", expires_on=1000),
        DfsOperation.SET_EXPIRY,
    ),
    ("undelete_path", lambda c: _fs(c)._undelete_path("dir/a", "123"), DfsOperation.UNDELETE),
    ("get_file_system_access_policy", lambda c: _fs(c).get_file_system_access_policy(), None),
]


@pytest.mark.parametrize(("name", "call", "expected"), SDK_CALLS, ids=[case[0] for case in SDK_CALLS])
def test_sdk_requests_route_as_azure_would(
    name: str, call: Callable[[Any], Any], expected: DfsOperation | None
) -> None:
    location, method, query, headers = _route(_capture(call))
    assert resolve(location, method, query, headers) is expected


def test_sdk_request_shapes_the_rules_rely_on() -> None:
    """The facts the module docstring states, as captured."""
    request = _capture(lambda c: _file(c).rename_file("fs1/new dir/b+c.txt"))
    location, method, query, headers = _route(request)
    assert (method, query.get("mode")) == ("PUT", "legacy")
    assert headers["x-ms-rename-source"] == "/fs1/dir/a%20b%2Bc.txt"
    assert location == Location(Target.PATH, "fs1", "new dir/b+c.txt")
    request = _capture(lambda c: _dir(c).delete_directory())
    assert _route(request)[2] == {"recursive": "true"}
    request = _capture(lambda c: _file(c).delete_file())
    assert _route(request)[1:3] == ("DELETE", {})
    request = _capture(lambda c: list(_fs(c).get_paths(path="dir", recursive=False, max_results=5, upn=True)))
    location, method, query, _ = _route(request)
    assert location == Location(Target.FILESYSTEM, "fs1")
    assert query == {
        "resource": "filesystem",
        "directory": "dir",
        "recursive": "false",
        "maxResults": "5",
        "upn": "true",
    }
    request = _capture(
        lambda c: _dir(c).create_directory(permissions="rwxr-x---", umask="0027", metadata={"k": "v"})
    )
    headers = _route(request)[3]
    assert (headers["x-ms-permissions"], headers["x-ms-umask"], headers["x-ms-properties"]) == (
        "rwxr-x---",
        "0027",
        "k=dg==",
    )
    request = _capture(lambda c: _fs(c)._undelete_path("dir/a", "123"))
    assert _route(request)[3]["x-ms-undelete-source"] == "dir/a?deletionid=123"


def test_rename_source_carries_the_clients_sas() -> None:
    sas = "sv=2025-01-05&ss=b&srt=sco&sp=rwdlac&se=2030-01-01T00:00:00Z&sig=abc%2Bdef%3D"
    client = DataLakeServiceClient(
        "http://127.0.0.1:10000/devstoreaccount1", credential=sas, transport=_Loopback()
    )
    with pytest.raises(_Sent) as sent:
        _file(client).rename_file("fs1/n.txt")
    location, method, query, headers = _route(sent.value.request)
    assert resolve(location, method, query, headers) is DfsOperation.RENAME
    source, _, source_sas = headers["x-ms-rename-source"].partition("?")
    assert source == "/fs1/dir/a%20b%2Bc.txt"
    # the SDK re-encodes the token (``:`` as ``%3A``): it must be read form-decoded
    assert urllib.parse.parse_qsl(source_sas) == urllib.parse.parse_qsl(sas)
    assert "%3A" in source_sas


def test_aio_client_sends_the_same_requests() -> None:
    async def capture(call: Callable[[Any], Any]) -> Any:
        client = AioDataLakeServiceClient.from_connection_string(CONNECTION, transport=_AioLoopback())
        with pytest.raises(_Sent) as sent:
            await call(client)
        return sent.value.request

    cases: list[tuple[Callable[[Any], Any], DfsOperation]] = [
        (lambda c: _file(c).create_file(), DfsOperation.CREATE_FILE),
        (lambda c: _file(c).append_data(b"abc", 0, 3), DfsOperation.APPEND),
        (lambda c: _file(c).flush_data(3), DfsOperation.FLUSH),
        (lambda c: _file(c).set_access_control(permissions="rwx------"), DfsOperation.SET_ACCESS_CONTROL),
        (lambda c: _file(c).get_access_control(), DfsOperation.GET_ACCESS_CONTROL),
        (lambda c: _file(c).rename_file("fs1/z"), DfsOperation.RENAME),
        (lambda c: _dir(c).delete_directory(), DfsOperation.DELETE_PATH),
        (lambda c: _dir(c).create_directory(), DfsOperation.CREATE_DIRECTORY),
    ]
    for call, expected in cases:
        request = asyncio.run(capture(call))
        assert resolve(*_route(request)) is expected


# Raw REST forms the SDK does not send ("Data Lake Storage Gen2" REST reference).
RAW: list[tuple[str, str, dict[str, str], dict[str, str], DfsOperation | None]] = [
    ("GET", "", {"resource": "account"}, {}, DfsOperation.LIST_FILESYSTEMS),
    ("PUT", "fs", {"resource": "filesystem"}, {}, DfsOperation.CREATE_FILESYSTEM),
    ("DELETE", "fs", {"resource": "filesystem"}, {}, DfsOperation.DELETE_FILESYSTEM),
    ("HEAD", "fs", {"resource": "filesystem"}, {}, DfsOperation.GET_FILESYSTEM_PROPERTIES),
    ("PATCH", "fs", {"resource": "filesystem"}, {}, DfsOperation.SET_FILESYSTEM_PROPERTIES),
    ("GET", "fs/", {"resource": "filesystem", "recursive": "true"}, {}, DfsOperation.LIST_PATHS),
    ("HEAD", "fs/f", {"action": "getStatus"}, {}, DfsOperation.GET_STATUS),
    ("HEAD", "fs/f", {"upn": "true"}, {}, DfsOperation.GET_PROPERTIES),
    ("GET", "fs/f", {"upn": "true"}, {}, DfsOperation.READ),
    ("PATCH", "fs/f", {"action": "setProperties"}, {}, DfsOperation.SET_PROPERTIES),
    ("POST", "fs/f", {}, {"x-ms-lease-action": "acquire"}, DfsOperation.LEASE),
    ("DELETE", "fs/d", {"recursive": "true", "continuation": "abc"}, {}, DfsOperation.DELETE_PATH),
    ("DELETE", "fs/d", {"paginated": "true", "recursive": "true"}, {}, DfsOperation.DELETE_PATH),
    ("PUT", "fs/d", {}, {"x-ms-rename-source": "/fs/e"}, DfsOperation.RENAME),
    ("PUT", "fs/d", {"mode": "posix"}, {"x-ms-rename-source": "/fs/e"}, DfsOperation.RENAME),
    ("PUT", "fs/d", {"resource": "directory"}, {"x-ms-rename-source": "/fs/e"}, DfsOperation.RENAME),
    # Blob requests stay Blob requests
    ("PUT", "fs/b", {}, {"x-ms-blob-type": "BlockBlob", "x-ms-permissions": "0777"}, None),
    ("PUT", "fs/b", {"comp": "block", "blockid": "AA=="}, {}, None),
    ("GET", "fs", {"restype": "container", "comp": "list"}, {}, None),
    ("PUT", "fs/b", {"comp": "undelete"}, {}, None),
    ("GET", "fs/b", {}, {"x-ms-range": "bytes=0-1"}, None),
    ("GET", "fs/b", {"timeout": "5"}, {}, None),
    ("HEAD", "fs/b", {}, {}, None),
    ("DELETE", "fs/b", {}, {}, None),
    ("GET", "", {"comp": "list"}, {}, None),
]


@pytest.mark.parametrize(("method", "path", "query", "headers", "expected"), RAW)
def test_raw_requests(
    method: str, path: str, query: dict[str, str], headers: dict[str, str], expected: DfsOperation | None
) -> None:
    location = locate(path.split("/") if path else [])
    assert resolve(location, method, query, headers) is expected


BAD: list[tuple[str, str, dict[str, str], dict[str, str], str, str | None]] = [
    ("GET", "", {"resource": "filesystem"}, {}, "InvalidQueryParameterValue", "resource"),
    ("GET", "", {"recursive": "true"}, {}, "MissingRequiredQueryParameter", "resource"),
    ("PUT", "", {"resource": "account"}, {}, "UnsupportedHttpVerb", None),
    ("GET", "fs", {"recursive": "true"}, {}, "MissingRequiredQueryParameter", "resource"),
    ("GET", "fs", {"resource": "file"}, {}, "InvalidQueryParameterValue", "resource"),
    ("POST", "fs", {"resource": "filesystem"}, {}, "UnsupportedHttpVerb", None),
    ("PUT", "fs/f", {"resource": "blob"}, {}, "InvalidQueryParameterValue", "resource"),
    ("PUT", "fs/f", {"upn": "true"}, {}, "MissingRequiredQueryParameter", "resource"),
    ("PUT", "fs/f", {}, {"x-ms-permissions": "0777"}, "MissingRequiredQueryParameter", "resource"),
    ("PUT", "fs/f", {"mode": "copy"}, {"x-ms-rename-source": "/fs/e"}, "InvalidQueryParameterValue", "mode"),
    ("PATCH", "fs/f", {}, {}, "MissingRequiredQueryParameter", "action"),
    ("PATCH", "fs/f", {"action": "getStatus"}, {}, "InvalidQueryParameterValue", "action"),
    ("PATCH", "fs/f", {"action": "setAccessControlRecursive"}, {}, "MissingRequiredQueryParameter", "mode"),
    (
        "PATCH",
        "fs/f",
        {"action": "setAccessControlRecursive", "mode": "merge"},
        {},
        "InvalidQueryParameterValue",
        "mode",
    ),
    ("HEAD", "fs/f", {"action": "append"}, {}, "InvalidQueryParameterValue", "action"),
    ("POST", "fs/f", {}, {"x-ms-lease-action": "steal"}, "InvalidHeaderValue", None),
    ("OPTIONS", "fs/f", {"action": "append"}, {}, "UnsupportedHttpVerb", None),
    ("GET", "fs/f", {"comp": "expiry"}, {}, "UnsupportedHttpVerb", None),
    (
        "PUT",
        "fs",
        {"restype": "container", "comp": "list", "showonly": "deleted"},
        {},
        "UnsupportedHttpVerb",
        None,
    ),
]


@pytest.mark.parametrize(("method", "path", "query", "headers", "code", "parameter"), BAD)
def test_bad_dfs_requests_get_azures_errors(
    method: str, path: str, query: dict[str, str], headers: dict[str, str], code: str, parameter: str | None
) -> None:
    with pytest.raises(ServiceError) as raised:
        resolve(locate(path.split("/") if path else []), method, query, headers)
    assert raised.value.code == code
    if parameter is not None:
        assert ("QueryParameterName", parameter) in raised.value.fields


def test_locate() -> None:
    assert locate([]) == Location(Target.ACCOUNT)
    assert locate([""]) == Location(Target.ACCOUNT)
    assert locate(["fs"]) == Location(Target.FILESYSTEM, "fs")
    assert locate(["fs", ""]) == Location(Target.FILESYSTEM, "fs")
    assert locate(["fs", "a", "b c", ""]) == Location(Target.PATH, "fs", "a/b c/")
    assert locate(["fs", "a%2Fb"]) == Location(Target.PATH, "fs", "a%2Fb")


def test_flag_and_count() -> None:
    assert routing.flag({"recursive": "TRUE"}, "recursive") is True
    assert routing.flag({"recursive": "false"}, "recursive") is False
    assert routing.flag({}, "recursive", default=False) is False
    with pytest.raises(ServiceError) as raised:
        routing.flag({"recursive": "yes"}, "recursive")
    assert raised.value.code == "InvalidQueryParameterValue"
    assert routing.count({"position": "0"}, "position") == 0
    assert routing.count({}, "position") is None
    for bad in ("-1", "1.5", "", " 1", "١"):
        with pytest.raises(ServiceError) as raised:
            routing.count({"position": bad}, "position")
        assert raised.value.code == "InvalidQueryParameterValue"
    with pytest.raises(ServiceError) as raised:
        routing.count({"maxResults": "0"}, "maxResults", minimum=1)
    assert raised.value.code == "OutOfRangeQueryParameterValue"


def test_recursive_mode_and_lease_action() -> None:
    assert routing.recursive_mode({"mode": "modify"}) is routing.RecursiveMode.MODIFY
    assert routing.lease_action({"x-ms-lease-action": "break"}) == "break"


def test_every_operation_has_sas_permissions() -> None:
    for operation in DfsOperation:
        assert routing.sas_permissions(operation, {})
    acl_headers = {"x-ms-owner": "o", "x-ms-acl": "user::rwx,group::r-x,other::---"}
    assert routing.sas_permissions(DfsOperation.SET_ACCESS_CONTROL, acl_headers) == ("o", "p")
    assert routing.sas_permissions(DfsOperation.SET_ACCESS_CONTROL, {"x-ms-group": "g"}) == ("o",)
    assert routing.sas_allows(
        "rwdlacmeop", routing.sas_permissions(DfsOperation.SET_ACCESS_CONTROL, acl_headers)
    )
    assert not routing.sas_allows("o", ("o", "p"))
    assert routing.sas_allows("c", routing.sas_permissions(DfsOperation.CREATE_FILE, {}))
    assert routing.sas_allows("w", routing.sas_permissions(DfsOperation.CREATE_FILE, {}))
    assert not routing.sas_allows("rl", routing.sas_permissions(DfsOperation.RENAME, {}))
    assert routing.sas_allows("rcwd", routing.sas_permissions(DfsOperation.RENAME, {}))  # Azure: live tests


_NAMES = ["resource", "action", "mode", "position", "recursive", "comp", "restype", "showonly", "upn", "x"]
_VALUES = [
    "file", "directory", "filesystem", "account", "append", "flush", "setAccessControlRecursive",
    "getStatus", "set", "legacy", "true", "list", "container", "deleted", "expiry", "undelete", "",
]  # fmt: skip
_HEADERS = ["x-ms-rename-source", "x-ms-lease-action", "x-ms-blob-type", "x-ms-acl", "x-ms-undelete-source"]


@given(
    st.sampled_from(["GET", "PUT", "HEAD", "DELETE", "PATCH", "POST", "OPTIONS", "MERGE"]),
    st.lists(st.sampled_from(["", "fs", "fs/a", "fs/a/b/"]), max_size=1),
    st.dictionaries(st.sampled_from(_NAMES), st.sampled_from(_VALUES), max_size=4),
    st.dictionaries(
        st.sampled_from(_HEADERS), st.sampled_from(["acquire", "/fs/x", "BlockBlob", ""]), max_size=3
    ),
)
def test_resolve_decides_or_raises_a_dfs_error(
    method: str, path: list[str], query: dict[str, str], headers: dict[str, str]
) -> None:
    location = locate(path[0].split("/") if path and path[0] else [])
    try:
        operation = resolve(location, method, query, headers)
    except ServiceError as error:
        assert error.code in {
            "MissingRequiredQueryParameter", "InvalidQueryParameterValue", "UnsupportedHttpVerb",
            "MissingRequiredHeader", "InvalidHeaderValue",
        }  # fmt: skip
        assert "comp" not in query or query["comp"] in ("expiry", "undelete", "list")
    else:
        if "comp" in query or "restype" in query:
            assert operation in (
                None,
                DfsOperation.SET_EXPIRY,
                DfsOperation.UNDELETE,
                DfsOperation.LIST_DELETED_PATHS,
            )


def test_a_bare_post_stays_a_blob_request() -> None:
    """The Blob API answers POST without comp 405 UnsupportedHttpVerb (tests/blob/test_blob_raw.py);
    only a POST naming a lease action is Path Lease."""
    assert resolve(locate(["fs", "f"]), "POST", {}, {}) is None
