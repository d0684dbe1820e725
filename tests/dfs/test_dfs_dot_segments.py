"""``.`` and ``..`` segments of a DFS path are resolved, as Azure does: the JS SDK's recorded
"create directory path with directory dots under a dir" creates
``dir/.%2Fadir%2F..%2Fanotherdir%2F..%2F.%2Fsub`` as ``dir/sub`` (201), and a ``..`` that
climbs out of ``dir`` lands at the root. Raw HTTP against ``tabulae serve --hns`` (the Python SDK
sends the path as given), then the SDK reads what was made."""

from __future__ import annotations

from azure.storage.filedatalake import FileSystemClient

from tests.blobhttp import BlobHttp
from tests.serverproc import ServerProcess


def _names(fs: FileSystemClient) -> set[str]:
    return {p.name for p in fs.get_paths(recursive=True)}


def test_dot_segments_are_resolved(fs: FileSystemClient, lake: ServerProcess) -> None:
    http = BlobHttp(lake.blob_port)
    name = fs.file_system_name
    fs.create_directory("dir")
    made = http.request("PUT", f"/{name}/dir/.%2Fadir%2F..%2Fanotherdir%2F..%2F.%2Fsub?resource=directory")
    assert made.status == 201, made.body
    made = http.request("PUT", f"/{name}/dir/./adir/../../anotherdir/.././top.txt?resource=file")
    assert made.status == 201, made.body
    assert _names(fs) == {"dir", "dir/sub", "top.txt"}
    assert fs.get_directory_client("dir/sub").get_directory_properties().name == "dir/sub"
    above = http.request("PUT", f"/{name}/dir/../../escape?resource=directory")
    assert (above.status, above.code) == (400, "InvalidResourceName")
    assert _names(fs) == {"dir", "dir/sub", "top.txt"}
