"""Requests the Go SDK (``aztables``) sends, answered as its recordings of real Azure show
(``Azure/azure-sdk-assets``, ``go/sdk/data/aztables/testdata/recordings/``, the ``_storage``
ones, x-ms-version 2019-02-02). Raw HTTP with the Go client's bodies.

The Go client's batch sub-requests carry absolute URLs of another host, ``$format`` in their
query, empty ``DataServiceVersion:`` and ``x-ms-version:`` headers and ``Prefer:
return-no-content`` on inserts.

* ``TestBatchMixed/TestBatchMixed_storage.json``: each inserted entity's part is 204 with
  ``Preference-Applied: return-no-content`` before ``DataServiceVersion: 3.0;``.
* ``TestBatchError/TestBatchError_storage.json``: the third insert meets an entity that exists:
  the one part is 409 ``EntityAlreadyExists`` ("2:The specified entity already exists."), its
  ``Preference-Applied`` before ``DataServiceVersion`` too.
"""

from __future__ import annotations

import json
import uuid

from tests.rawhttp import RawClient

GO_HEADERS = {
    "Accept": "application/json;odata=minimalmetadata",
    "DataServiceVersion": "3.0",
    "MaxDataServiceVersion": None,
    "x-ms-version": "2019-02-02",
}
FORMAT = "%24format=application%2Fjson%3Bodata%3Dminimalmetadata"


def _go_entity(rk: str) -> dict[str, object]:
    return {
        "Bool": True,
        "Byte": "c29tZWJ5dGVz",
        "DateTime": "2021-07-13T00:00:00Z",
        "Float": 3.14159,
        "Integer": int(rk),
        "PartitionKey": "partition",
        "RowKey": rk,
        "String": "someString",
        "Timestamp": "0001-01-01T00:00:00Z",
    }


def _go_insert_batch(table: str, rks: list[str]) -> tuple[str, bytes]:
    """A batch of inserts as the Go client writes it: (its Content-Type, its body)."""
    batch, changeset = f"batch_{uuid.uuid4()}", f"changeset_{uuid.uuid4()}"
    lines = [f"--{batch}", f"Content-Type: multipart/mixed; boundary={changeset}", ""]
    for rk in rks:
        body = json.dumps(_go_entity(rk), separators=(",", ":"))
        lines += [
            f"--{changeset}",
            "Content-Transfer-Encoding: binary",
            "Content-Type: application/http",
            "",
            f"POST https://jhendrixprim.table.core.windows.net/{table}?{FORMAT} HTTP/1.1",
            "Accept: application/json;odata=minimalmetadata",
            f"Content-Length: {len(body)}",
            "Content-Type: application/json",
            "DataServiceVersion: ",
            "Prefer: return-no-content",
            "x-ms-version: ",
            "",
            body,
        ]
    lines += [f"--{changeset}--", "", f"--{batch}--", ""]
    return f"multipart/mixed; boundary={batch}", "\r\n".join(lines).encode()


def _create(raw: RawClient, table_name: str) -> None:
    assert raw.request("POST", "Tables", {"TableName": table_name}, headers=GO_HEADERS).status == 201


def test_inserted_parts_apply_the_preference_before_the_version(raw: RawClient, table_name: str) -> None:
    _create(raw, table_name)
    content_type, body = _go_insert_batch(table_name, ["1", "2"])
    response = raw.request("POST", "$batch", body, headers={**GO_HEADERS, "Content-Type": content_type})
    assert response.status == 202, response
    text = response.body.decode()
    assert text.count("HTTP/1.1 204 No Content\r\n") == 2, text
    assert (
        text.count(
            "Cache-Control: no-cache\r\nPreference-Applied: return-no-content\r\nDataServiceVersion: 3.0;\r\n"
            "Location: "
        )
        == 2
    ), text


def test_a_conflicting_insert_applies_the_preference_before_the_version(
    raw: RawClient, table_name: str
) -> None:
    _create(raw, table_name)
    assert raw.request("POST", table_name, _go_entity("3"), headers=GO_HEADERS).status == 201
    content_type, body = _go_insert_batch(table_name, ["1", "2", "3"])
    response = raw.request("POST", "$batch", body, headers={**GO_HEADERS, "Content-Type": content_type})
    assert response.status == 202, response
    text = response.body.decode()
    assert (
        "HTTP/1.1 409 Conflict\r\nX-Content-Type-Options: nosniff\r\nCache-Control: no-cache\r\n"
        "Preference-Applied: return-no-content\r\nDataServiceVersion: 3.0;\r\n"
        "Content-Type: application/json;odata=minimalmetadata;streaming=true;charset=utf-8\r\n\r\n"
        '{"odata.error":{"code":"EntityAlreadyExists","message":{"lang":"en-US",'
        '"value":"2:The specified entity already exists.\\nRequestId:'
    ) in text, text
    listed = raw.request("GET", f"{table_name}()", headers=GO_HEADERS)
    assert [e["RowKey"] for e in listed.json()["value"]] == ["3"]
