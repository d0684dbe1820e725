"""Entity group transactions exactly as the legacy Python SDK (Azure-Storage 1.4.x) writes them.

The requests are captured bytes (``tests/fixtures/legacy_batch``): LF-only multipart bodies whose
sub-requests name the table relative to the host, with or without the account depending on how the
client was built, and carry ``Content-ID`` among the embedded request's headers. Each is replayed
unchanged but for a fresh signature, and must be answered as Azure answers it: 202, one ``204``
part per operation under a ``changesetresponse_`` boundary (the legacy client splits on that
literal), ``Content-ID`` echoed, an ETag per written entity.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import socket
from collections.abc import Iterator
from email.utils import formatdate
from pathlib import Path

import pytest
from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import TableClient, TableServiceClient

from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "legacy_batch"
TABLE = "mytable"  # the table the captured requests write to


def resign(raw: bytes, host: str, account: str = DEV_ACCOUNT, body: bytes | None = None) -> bytes:
    """The captured request with a fresh ``x-ms-date``, its Shared Key signature, ``Host`` (and,
    when ``body`` is given, that body with its length); every other byte is as captured."""
    head, captured_body = raw.split(b"\r\n\r\n", 1)
    payload = captured_body if body is None else body
    request_line, *lines = head.decode("latin-1").split("\r\n")
    method, target, _version = request_line.split(" ")
    fields = [line.split(": ", 1) for line in lines]
    date = formatdate(usegmt=True)
    content_type = next(value for name, value in fields if name.lower() == "content-type")
    string_to_sign = f"{method}\n\n{content_type}\n{date}\n/{account}{target}"
    mac = hmac.new(base64.b64decode(DEV_KEY), string_to_sign.encode(), hashlib.sha256).digest()
    replaced = {
        "host": host,
        "x-ms-date": date,
        "authorization": f"SharedKey {account}:{base64.b64encode(mac).decode()}",
        "content-length": str(len(payload)),
    }
    out = [request_line, *(f"{name}: {replaced.get(name.lower(), value)}" for name, value in fields)]
    return ("\r\n".join(out) + "\r\n\r\n").encode("latin-1") + payload


def send_raw(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send bytes as they are; return the status, headers and body of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            assert chunk, data
            data += chunk
        head, body = data.split(b"\r\n\r\n", 1)
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {name.lower(): value for name, value in (line.split(": ", 1) for line in lines)}
        while len(body) < int(headers["content-length"]):
            chunk = sock.recv(65536)
            assert chunk
            body += chunk
    return int(status_line.split(" ")[1]), headers, body


def legacy_parts(body: bytes) -> list[tuple[int, dict[str, str], bytes]]:
    """The operation answers as the legacy client reads them: split on the literal
    ``--changesetresponse_``, then a status line, ``name: value`` headers and a body each."""
    parts = []
    for chunk in body.split(b"--changesetresponse_")[1:]:
        start = chunk.find(b"HTTP/")
        if start < 0:
            continue
        message = chunk[start:]
        head, _, rest = message.partition(b"\r\n\r\n")
        status_line, *lines = head.decode().split("\r\n")
        headers = {name.lower(): value for name, value in (line.split(": ", 1) for line in lines)}
        parts.append((int(status_line.split(" ")[1]), headers, rest.strip()))
    return parts


@pytest.fixture
def legacy_table(service: TableServiceClient) -> Iterator[TableClient]:
    """The captured requests' own table, with the entity their MERGE updates."""
    service.delete_table(TABLE)
    table = service.create_table(TABLE)
    table.create_entity({"PartitionKey": "p", "RowKey": "r2", "Old": "kept"})
    try:
        yield table
    finally:
        service.delete_table(TABLE)
        table.close()


def _assert_insert_merge_applied(table: TableClient, parts: list[tuple[int, dict[str, str], bytes]]) -> None:
    assert [status for status, _headers, _body in parts] == [204, 204]
    assert [headers.get("content-id") for _status, headers, _body in parts] == ["1", "2"]
    inserted = table.get_entity("p", "r1")
    merged = table.get_entity("p", "r2")
    assert parts[0][1]["etag"] == inserted.metadata["etag"]
    assert parts[1][1]["etag"] == merged.metadata["etag"]
    assert parts[0][1]["preference-applied"] == "return-no-content"
    assert parts[0][1]["location"].endswith(f"/{TABLE}(PartitionKey='p',RowKey='r1')")
    assert inserted["Data1"].value == 12345 and inserted["Data1"].edm_type.value == "Edm.Int64"
    assert inserted["Name"] == "x"
    assert merged["Data2"] == 3.5 and merged["Old"] == "kept"


@pytest.mark.parametrize(
    "capture",
    [
        "legacy-batch-endpoint-insert-merge.bin",  # POST /mytable: relative to the host
        "legacy-batch-isemulated-insert-merge.bin",  # POST /devstoreaccount1/mytable
        "legacy-batch-usedevstorage-insert-merge.bin",
    ],
)
def test_captured_legacy_batch_is_applied(
    server: ServerProcess, legacy_table: TableClient, capture: str
) -> None:
    raw = (FIXTURES / capture).read_bytes()
    status, headers, body = send_raw(server.port, resign(raw, f"127.0.0.1:{server.port}"))
    assert status == 202, body
    assert re.fullmatch(r"multipart/mixed; boundary=batchresponse_[0-9a-f-]{36}", headers["content-type"])
    _assert_insert_merge_applied(legacy_table, legacy_parts(body))


def test_captured_production_form_on_a_host_style_endpoint(
    server: ServerProcess, legacy_table: TableClient
) -> None:
    """``POST /$batch`` with ``POST /mytable`` parts: the form Azure itself receives."""
    raw = (FIXTURES / "legacy-batch-prodstyle-insert-merge.bin").read_bytes()
    request = resign(raw, f"{DEV_ACCOUNT}.table.core.windows.net:{server.port}")
    status, _headers, body = send_raw(server.port, request)
    assert status == 202, body
    _assert_insert_merge_applied(legacy_table, legacy_parts(body))


@pytest.mark.parametrize(
    "capture", ["legacy-batch-endpoint-all-ops.bin", "legacy-batch-isemulated-all-ops.bin"]
)
def test_captured_legacy_batch_of_every_operation(
    server: ServerProcess, legacy_table: TableClient, capture: str
) -> None:
    """Insert, merge, replace with an ETag, both upserts and a delete, as one changeset."""
    legacy_table.create_entity({"PartitionKey": "p", "RowKey": "r'3", "Gone": True})
    legacy_table.create_entity({"PartitionKey": "p", "RowKey": "r6"})
    etag = legacy_table.get_entity("p", "r'3").metadata["etag"]
    raw = (FIXTURES / capture).read_bytes()
    captured_etag = b"W/\"datetime'2024-01-01T00%3A00%3A00.0000000Z'\""
    body = raw.split(b"\r\n\r\n", 1)[1].replace(captured_etag, etag.encode())  # the one live value
    status, _headers, answer = send_raw(server.port, resign(raw, f"127.0.0.1:{server.port}", body=body))
    assert status == 202, answer
    parts = legacy_parts(answer)
    assert [part[0] for part in parts] == [204] * 6, answer
    assert [part[1].get("content-id") for part in parts] == ["1", "2", "3", "4", "5", "6"]
    replaced = legacy_table.get_entity("p", "r'3")
    assert "Gone" not in replaced and replaced["I32"] == 7 and replaced["T"] is True
    assert str(replaced["G"]) == "00000000-0000-0000-0000-000000000001"
    assert legacy_table.get_entity("p", "r4")["X"] == "y"
    assert legacy_table.get_entity("p", "r5")["X"] == "y"
    with pytest.raises(ResourceNotFoundError):
        legacy_table.get_entity("p", "r6")


def test_captured_legacy_batch_with_a_stale_etag_fails_as_a_whole(
    server: ServerProcess, legacy_table: TableClient
) -> None:
    """The captured ETag is stale here: the third operation fails and nothing is applied; the
    failing part is JSON ``odata.error``, which the legacy client reads."""
    legacy_table.create_entity({"PartitionKey": "p", "RowKey": "r'3"})
    raw = (FIXTURES / "legacy-batch-endpoint-all-ops.bin").read_bytes()
    status, _headers, answer = send_raw(server.port, resign(raw, f"127.0.0.1:{server.port}"))
    assert status == 202, answer
    (part,) = legacy_parts(answer)
    assert part[0] == 412 and part[1]["content-id"] == "3"
    assert b'"code":"UpdateConditionNotSatisfied"' in part[2] and b'"value":"2:' in part[2]
    with pytest.raises(ResourceNotFoundError):
        legacy_table.get_entity("p", "r1")


def test_sub_request_naming_another_account_is_refused(
    server: ServerProcess, legacy_table: TableClient
) -> None:
    """Only a path without an account resolves against the batch's account."""
    raw = (FIXTURES / "legacy-batch-isemulated-insert-merge.bin").read_bytes()
    body = raw.split(b"\r\n\r\n", 1)[1].replace(b"/devstoreaccount1/mytable", b"/otheraccount/mytable")
    status, _headers, answer = send_raw(server.port, resign(raw, f"127.0.0.1:{server.port}", body=body))
    assert status == 202, answer
    (part,) = legacy_parts(answer)
    assert part[0] == 400 and b'"code":"InvalidInput"' in part[2]
    with pytest.raises(ResourceNotFoundError):
        legacy_table.get_entity("p", "r1")
