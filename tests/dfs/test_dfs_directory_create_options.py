"""Create Path options on a directory, as Azure answers them in the JS SDK's recordings:
``x-ms-encryption-context`` is kept with a directory as with a file (answered by Get Properties,
"DataLakeDirectoryClient create with encryption context"), and ``x-ms-expiry-option`` is refused
with 400 ``ExpiryNotSupportedForDirectory`` before anything is made ("create with relative
expiry"). Against ``tabulae serve --hns``: the SDK, and raw HTTP for the expiry."""

from __future__ import annotations

import json

from azure.core.exceptions import ResourceNotFoundError
from azure.storage.filedatalake import FileSystemClient

from tests.blobhttp import BlobHttp
from tests.serverproc import ServerProcess


def test_a_directory_keeps_its_encryption_context(fs: FileSystemClient, lake: ServerProcess) -> None:
    """The Python SDK's directory properties carry no context: the HEAD the JS SDK reads does."""
    http = BlobHttp(lake.blob_port)
    fs.get_directory_client("ctx").create_directory(encryption_context="EncryptionContext")
    fs.create_directory("plain")
    head = http.request("HEAD", f"/{fs.file_system_name}/ctx")
    assert (head.status, head.headers.get("x-ms-encryption-context")) == (200, "EncryptionContext")
    assert "x-ms-encryption-context" not in http.request("HEAD", f"/{fs.file_system_name}/plain").headers
    listed = {p.name: p.encryption_context for p in fs.get_paths()}
    assert listed == {"ctx": "EncryptionContext", "plain": None}


def test_a_directory_takes_no_expiry(fs: FileSystemClient, lake: ServerProcess) -> None:
    http = BlobHttp(lake.blob_port)
    for option, time in (("RelativeToNow", "3600000"), ("Absolute", "Sat, 28 Nov 2099 10:00:00 GMT")):
        refused = http.request(
            "PUT",
            f"/{fs.file_system_name}/expiring?resource=directory",
            {"x-ms-expiry-option": option, "x-ms-expiry-time": time},
        )
        assert (refused.status, refused.headers["x-ms-error-code"]) == (400, "ExpiryNotSupportedForDirectory")
        error = json.loads(refused.body)["error"]
        assert error["message"].startswith("Set Expiry is not supported for a directory")
    try:
        fs.get_directory_client("expiring").get_directory_properties()
        raise AssertionError("the refused directory was made")
    except ResourceNotFoundError:
        pass
