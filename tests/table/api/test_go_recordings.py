"""Requests the Go SDK (``aztables``) sends, answered as its recordings of real Azure show
(``Azure/azure-sdk-assets``, ``go/sdk/data/aztables/testdata/recordings/``, the ``_storage``
ones, x-ms-version 2019-02-02). Raw HTTP with the Go client's bodies.

The Go client's batch sub-requests carry absolute URLs of another host, ``$format`` in their
query, empty ``DataServiceVersion:`` and ``x-ms-version:`` headers and ``Prefer:
return-no-content`` on inserts.

* ``TestBatchMixed/TestBatchMixed_storage.json``: each inserted entity's part is 204 with
  ``Preference-Applied: return-no-content`` before ``DataServiceVersion: 3.0;``.
  The second batch (merge, delete with ``If-Match: *``, replace and merge of entities, no
  ``If-Match`` on the others: upserts) is four 204 parts with ``DataServiceVersion: 1.0;``, an
  ``ETag`` on all but the delete.
* ``TestBatchError/TestBatchError_storage.json``: the third insert meets an entity that exists:
  the one part is 409 ``EntityAlreadyExists`` ("2:The specified entity already exists."), its
  ``Preference-Applied`` before ``DataServiceVersion`` too.
* ``TestSetMultipleAccessPolicies.json`` and ``TestGetStatistics.json``: Get Table ACL and Get
  Table Service Stats (on the secondary) answer their documents after a byte order mark, as Get
  Table Service Properties does; an identifier set without a policy reads back without one.
* ``TestRetentionTooLong.json``: Set Table Service Properties with a MinuteMetrics retention of
  366 days is 400 ``InvalidXmlDocument`` in the ``m:error`` form (327 bytes, as ours), no byte
  order mark.
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


def _go_part(method: str, url: str, body: str = "", extra: str = "") -> str:
    """A non-insert sub-request as the Go client writes it (no ``$format``, ``Accept:
    application/json``), its version headers empty."""
    return (
        "Content-Transfer-Encoding: binary\r\nContent-Type: application/http\r\n\r\n"
        f"{method} https://jhendrixprim.table.core.windows.net/{url} HTTP/1.1\r\n"
        f"Accept: application/json\r\nContent-Length: {len(body)}\r\nContent-Type: application/json\r\n"
        f"DataServiceVersion: \r\n{extra}x-ms-version: \r\n\r\n{body}"
    )


def test_updates_and_deletes_answer_in_version_one(raw: RawClient, table_name: str) -> None:
    _create(raw, table_name)
    content_type, body = _go_insert_batch(table_name, ["1", "2", "3", "4", "5"])
    assert (
        raw.request("POST", "$batch", body, headers={**GO_HEADERS, "Content-Type": content_type}).status
        == 202
    )

    def key(rk: str) -> str:
        return f"{table_name}(PartitionKey='partition',RowKey='{rk}')"

    parts = [
        _go_part("PATCH", key("1"), '{"MergeProperty":"foo","PartitionKey":"partition","RowKey":"1"}'),
        _go_part("DELETE", f"{key('2')}?{FORMAT}", extra="If-Match: *\r\n"),
        _go_part("PUT", key("3"), '{"PartitionKey":"partition","ReplaceProperty":"foo","RowKey":"3"}'),
        _go_part("PATCH", key("4"), json.dumps(_go_entity("4"), separators=(",", ":"))),
    ]
    batch, changeset = f"batch_{uuid.uuid4()}", f"changeset_{uuid.uuid4()}"
    body = (
        f"--{batch}\r\nContent-Type: multipart/mixed; boundary={changeset}\r\n\r\n"
        + "".join(f"--{changeset}\r\n{part}\r\n" for part in parts)
        + f"--{changeset}--\r\n\r\n--{batch}--\r\n"
    ).encode()
    response = raw.request(
        "POST", "$batch", body, headers={**GO_HEADERS, "Content-Type": f"multipart/mixed; boundary={batch}"}
    )
    assert response.status == 202, response
    text = response.body.decode()
    common = "HTTP/1.1 204 No Content\r\nX-Content-Type-Options: nosniff\r\nCache-Control: no-cache\r\n"
    assert text.count(common + "DataServiceVersion: 1.0;\r\nETag: W/\"datetime'") == 3, text
    assert text.count(common + "DataServiceVersion: 1.0;\r\n\r\n") == 1, text
    assert "3.0;" not in text
    merged = raw.request("GET", f"{table_name}()?$filter=RowKey%20eq%20'1'", headers=GO_HEADERS)
    assert merged.json()["value"][0]["MergeProperty"] == "foo"


def test_acl_and_stats_documents_start_with_a_byte_order_mark(raw: RawClient, table_name: str) -> None:
    _create(raw, table_name)
    xml = {"Accept": "application/xml", "x-ms-version": "2019-02-02", "DataServiceVersion": None}
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<SignedIdentifiers><SignedIdentifier><Id>empty</Id>'
        "</SignedIdentifier><SignedIdentifier><AccessPolicy><Permission>r</Permission></AccessPolicy>"
        "<Id>partial</Id></SignedIdentifier><SignedIdentifier><AccessPolicy><Permission>r</Permission>"
        "<Expiry>2021-06-08T02:10:09Z</Expiry><Start>2021-06-08T02:10:09Z</Start></AccessPolicy>"
        "<Id>full</Id></SignedIdentifier></SignedIdentifiers>"
    )
    put = raw.request("PUT", f"{table_name}?comp=acl", body, {**xml, "Content-Type": "application/xml"})
    assert put.status == 204, put
    got = raw.request("GET", f"{table_name}?comp=acl", None, xml)
    assert got.body == (
        b'\xef\xbb\xbf<?xml version="1.0" encoding="utf-8"?><SignedIdentifiers><SignedIdentifier>'
        b"<Id>empty</Id></SignedIdentifier><SignedIdentifier><Id>partial</Id><AccessPolicy>"
        b"<Permission>r</Permission></AccessPolicy></SignedIdentifier><SignedIdentifier><Id>full</Id>"
        b"<AccessPolicy><Start>2021-06-08T02:10:09.0000000Z</Start><Expiry>2021-06-08T02:10:09.0000000Z"
        b"</Expiry><Permission>r</Permission></AccessPolicy></SignedIdentifier></SignedIdentifiers>"
    ), got
    stats = raw.request(
        "GET", "?comp=stats&restype=service", None, xml, path_prefix="/devstoreaccount1-secondary"
    )
    assert stats.status == 200, stats
    assert stats.body.startswith(b'\xef\xbb\xbf<?xml version="1.0" encoding="utf-8"?><StorageServiceStats>')


def test_retention_too_long_is_a_document_error(raw: RawClient) -> None:
    xml = {"Accept": "application/xml", "x-ms-version": "2019-02-02", "DataServiceVersion": None}
    before = raw.request("GET", "?comp=properties&restype=service", None, xml).body
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<StorageServiceProperties><MinuteMetrics><Enabled>true'
        "</Enabled><IncludeAPIs>true</IncludeAPIs><RetentionPolicy><Enabled>true</Enabled><Days>366</Days>"
        "</RetentionPolicy><Version>1.0</Version></MinuteMetrics></StorageServiceProperties>"
    )
    answer = raw.request(
        "PUT", "?comp=properties&restype=service", body, {**xml, "Content-Type": "application/xml"}
    )
    assert answer.status == 400, answer
    assert answer.header("x-ms-error-code") == "InvalidXmlDocument"
    assert answer.body.startswith(
        b'<?xml version="1.0" encoding="utf-8"?><m:error xmlns:m="http://schemas.microsoft.com/ado/2007/08/'
        b'dataservices/metadata"><m:code>InvalidXmlDocument</m:code><m:message xml:lang="en-US">XML '
        b"specified is not syntactically valid.\nRequestId:"
    ), answer
    assert answer.header("content-length") == "327"
    assert raw.request("GET", "?comp=properties&restype=service", None, xml).body == before
