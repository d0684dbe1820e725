"""Requests the Go SDK (``azqueue``) sends, answered as its recordings of real Azure show
(``Azure/azure-sdk-assets``, ``go/sdk/storage/azqueue/testdata/recordings/Test/``, x-ms-version
2018-03-28). Raw HTTP with the Go client's bodies, so the bytes are the ones compared.

* ``TestQueueSetACLMoreThanFive.json``: Set Queue ACL with six well-formed identifiers is 400
  ``InvalidXmlDocument`` naming line 0, position 0 and an empty ``<Reason />`` (294 bytes with
  Azure's request id and time, as ours).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.queuehttp import QueueHttp, assert_error

GO_HEADERS = {"x-ms-version": "2018-03-28", "Accept": "application/xml"}
GO_DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>\n'


def _go_identifier(id_: str, start: str, expiry: str) -> str:
    """A signed identifier as the Go client writes it: the policy before the Id."""
    return (
        f"<SignedIdentifier><AccessPolicy><Permission>r</Permission><Expiry>{expiry}</Expiry>"
        f"<Start>{start}</Start></AccessPolicy><Id>{id_}</Id></SignedIdentifier>"
    )


@pytest.fixture
def q(queue_http: QueueHttp, queue_name: str) -> Iterator[str]:
    assert queue_http.request("PUT", f"/{queue_name}", headers=GO_HEADERS).status == 201
    yield queue_name
    queue_http.delete(queue_name)


def test_six_identifiers_name_no_place(queue_http: QueueHttp, q: str) -> None:
    six = "".join(_go_identifier(f"000{i}", "2021-06-11T20:00:00Z", "2049-06-11T20:00:00Z") for i in range(6))
    body = f"{GO_DECLARATION}<SignedIdentifiers>{six}</SignedIdentifiers>"
    response = queue_http.request("PUT", f"/{q}?comp=acl", body, headers=GO_HEADERS)
    assert_error(response, 400, "InvalidXmlDocument", LineNumber="0", LinePosition="0", Reason="")
    assert response.body.endswith(
        b"</Message><LineNumber>0</LineNumber><LinePosition>0</LinePosition><Reason /></Error>"
    ), response
    assert response.header("content-length") == "294"
    assert queue_http.request("GET", f"/{q}?comp=acl", headers=GO_HEADERS).body.endswith(
        b"<SignedIdentifiers />"
    )
    # five are taken
    five = "".join(
        _go_identifier(f"000{i}", "2021-06-11T20:00:00Z", "2049-06-11T20:00:00Z") for i in range(5)
    )
    body = f"{GO_DECLARATION}<SignedIdentifiers>{five}</SignedIdentifiers>"
    assert queue_http.request("PUT", f"/{q}?comp=acl", body, headers=GO_HEADERS).status == 204
