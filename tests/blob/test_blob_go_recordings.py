"""Blob requests the Go SDK sends, answered as its recordings of real Azure show
(``Azure/azure-sdk-assets``, ``go/sdk/storage/azdatalake/testdata/recordings/Test/``: the Data
Lake client sets the account's soft delete through the Blob API, x-ms-version 2023-11-03).

* ``TestAccountDeleteRetentionPolicyDaysTooLarge.json``: Set Blob Service Properties with an
  enabled ``DeleteRetentionPolicy`` of 366 days is 400 ``InvalidXmlDocument`` at line 2, position
  91 (the name in the ``</DeleteRetentionPolicy>`` after ``</Days>``), reason "Retention days must
  be greater than 0 and less than or equal to 365 days." (375 bytes, as ours).
* ``TestAccountDeleteRetentionPolicyDaysOmitted.json``: without ``Days``, line 2, position 75
  (the same end tag's name), reason "Element is missing: Days." (327 bytes, as ours).
* ``TestAccountDeleteRetentionPolicyEmpty.json``: an empty ``<DeleteRetentionPolicy>`` element,
  line 2, position 52 (its end tag's name), reason "Element is missing: Enabled." (330 bytes).
"""

from __future__ import annotations

import pytest
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import BlobServiceClient, RetentionPolicy

from tests.blobhttp import BlobHttp
from tests.serverproc import ServerProcess

GO_HEADERS = {"x-ms-version": "2023-11-03", "Accept": "application/xml", "Content-Type": "application/xml"}
PROPERTIES = "/?comp=properties&restype=service"
RANGE = "Retention days must be greater than 0 and less than or equal to 365 days."


def _go_body(policy: str) -> bytes:
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<StorageServiceProperties><DeleteRetentionPolicy>'
        f"{policy}</DeleteRetentionPolicy></StorageServiceProperties>"
    ).encode()


@pytest.mark.parametrize(
    ("policy", "position", "reason", "length"),
    [
        ("<Enabled>true</Enabled><Days>366</Days>", "91", RANGE, "375"),
        ("<Enabled>true</Enabled>", "75", "Element is missing: Days.", "327"),
        ("", "52", "Element is missing: Enabled.", "330"),
    ],
)
def test_retention_days_refused_where_the_reader_stood(
    server: ServerProcess, policy: str, position: str, reason: str, length: str
) -> None:
    http = BlobHttp(server.blob_port)
    before = http.request("GET", PROPERTIES, {"x-ms-version": "2023-11-03"}).body
    answer = http.request("PUT", PROPERTIES, GO_HEADERS, _go_body(policy))
    assert (answer.status, answer.code) == (400, "InvalidXmlDocument"), answer
    fields = answer.error_fields()
    assert fields["Message"].startswith("XML specified is not syntactically valid.\nRequestId:")
    assert (fields["LineNumber"], fields["LinePosition"], fields["Reason"]) == ("2", position, reason)
    assert answer.body.endswith(
        b"</Message><LineNumber>2</LineNumber>"
        + f"<LinePosition>{position}".encode()
        + b"</LinePosition><Reason>"
        + reason.encode()
        + b"</Reason></Error>"
    )
    assert answer.headers["content-length"] == length
    assert http.request("GET", PROPERTIES, {"x-ms-version": "2023-11-03"}).body == before


def test_the_sdk_reads_the_code(blob_service: BlobServiceClient) -> None:
    for days in (0, 366):
        with pytest.raises(HttpResponseError) as caught:
            blob_service.set_service_properties(
                delete_retention_policy=RetentionPolicy(enabled=True, days=days)
            )
        assert (caught.value.status_code, caught.value.error_code) == (400, "InvalidXmlDocument")
