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
* ``TestFilesystemSetAccessPolicyWithNullId.json``: Set Container ACL with an identifier without
  ``Id`` is 400 ``InvalidXmlDocument`` at line 2, position 115 (the name in the
  ``</SignedIdentifiers>`` after it), reason "Signed identifier ID cannot be empty or over 64
  characters in length" (371 bytes), as Set Queue ACL answers; the container keeps no policy.
"""

from __future__ import annotations

import uuid

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


def test_an_identifier_without_id_is_refused_where_the_reader_stood(server: ServerProcess) -> None:
    http = BlobHttp(server.blob_port)
    name = f"gonullid{uuid.uuid4().hex[:12]}"
    assert http.request("PUT", f"/{name}?restype=container", GO_HEADERS).status == 201
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<SignedIdentifiers><SignedIdentifier><AccessPolicy>'
        "<Permission>rw</Permission></AccessPolicy></SignedIdentifier></SignedIdentifiers>"
    )
    answer = http.request("PUT", f"/{name}?comp=acl&restype=container", GO_HEADERS, body.encode())
    assert (answer.status, answer.code) == (400, "InvalidXmlDocument"), answer
    fields = answer.error_fields()
    assert (fields["LineNumber"], fields["LinePosition"]) == ("2", "115")
    assert fields["Reason"] == "Signed identifier ID cannot be empty or over 64 characters in length"
    assert answer.headers["content-length"] == "371"
    acl = http.request("GET", f"/{name}?comp=acl&restype=container", {"x-ms-version": "2023-11-03"})
    assert acl.body.endswith(b"<SignedIdentifiers />")
    # an Id of 65 characters is answered alike (the same reason), one of 64 is taken
    for length, status in ((65, 400), (64, 200)):
        one = body.replace("<SignedIdentifier>", f"<SignedIdentifier><Id>{'a' * length}</Id>")
        reply = http.request("PUT", f"/{name}?comp=acl&restype=container", GO_HEADERS, one.encode())
        assert reply.status == status, reply
    assert http.request("DELETE", f"/{name}?restype=container", {"x-ms-version": "2023-11-03"}).status == 202
