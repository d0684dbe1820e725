"""Data Lake answers compared with Azure's recordings of the JavaScript SDK's storage-file-datalake
tests (its nock recordings of 2019 to 2023 in Azure/azure-sdk-assets and the SDK's repository),
sent over raw HTTP as the JS client sent them, and through the Python SDK where it can say it."""

from __future__ import annotations

from azure.storage.filedatalake import FileSystemClient

from tests.blobhttp import BlobHttp
from tests.serverproc import ServerProcess

JSON = {"Accept": "application/json"}


def test_create_path_answers_encryption_from_2020_06_12(fs: FileSystemClient, lake: ServerProcess) -> None:
    """Create Path of a file and of a directory: no x-ms-request-server-encrypted at x-ms-version
    2019-02-02 (December 2019), 2019-12-12 (June 2020) and 2020-02-10 (September to December
    2020), ``true`` at 2020-06-12 (May 2021) and later (2021-10-04, 2023-01-03, 2023-08-03); Append
    Data answers it at every version (2019-02-02 on), as recorded."""
    http = BlobHttp(lake.blob_port)
    root = f"/{fs.file_system_name}"
    for version, answered in (
        ("2019-02-02", False),
        ("2020-02-10", False),
        ("2020-06-12", True),
        ("2023-08-03", True),
    ):
        at = {**JSON, "x-ms-version": version}
        name = version.replace("-", "")
        for kind in ("file", "directory"):
            created = http.request("PUT", f"{root}/{kind}{name}?resource={kind}", at)
            assert created.status == 201 and "etag" in created.headers
            assert ("x-ms-request-server-encrypted" in created.headers) is answered, (version, kind)
        appended = http.request("PATCH", f"{root}/file{name}?action=append&position=0", at, b"Hello World")
        assert appended.status == 202 and appended.headers["x-ms-request-server-encrypted"] == "true"
    assert fs.get_file_client("sdkfile").create_file()["request_server_encrypted"] is True
