"""``$batch`` on the wire, in the exact shapes real clients send.

Each request body is written byte for byte the way one client writes it (see
``client-wire-profiles.txt``): the Python SDK; the JavaScript SDK (lower-case part headers, no
``Content-ID``, extra CRLFs, ``Prefer: return-no-content``, a DELETE body of ``undefined``); .NET
(``Content-ID``, ``DataServiceVersion: 3.0;``); and the legacy SDKs (``MERGE``, ``%27`` quotes,
origin-form URLs, bare LF, an Atom ``Accept`` on the outer request).

Every response is read twice, because a server has to satisfy both readers at once: with the
stdlib ``email`` parser plus ``http.client``, as azure-core does for the Python SDK, and with the
JavaScript SDK's string rules (split on the literal ``--changesetresponse_``, drop the first and
last pieces, ``HTTP\\/1.1 ([0-9]*)`` for the status, the case-sensitive ``ETag: (.*)``, and any
single-line ``{…}`` taken as an error).
"""

from __future__ import annotations

import email
import email.message
import http.client
import io
import json
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from azure.data.tables._serialize import _add_entity_properties

from tests.rawhttp import (
    VERSION,
    RawClient,
    RawResponse,
    assert_error,
    js_keys,
    legacy_keys,
    py_keys,
    rfc1123_now,
)
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess

JSON_PART_TYPE = "application/json;odata=minimalmetadata;streaming=true;charset=utf-8"
ETAG_RE = re.compile(r"^W/\"datetime'\d{4}-\d{2}-\d{2}T\d{2}%3A\d{2}%3A\d{2}(\.\d{1,7})?Z'\"$")
STALE_ETAG = "W/\"datetime'2000-01-01T00%3A00%3A00.0000000Z'\""

# --------------------------------------------------------------------------------------------
# Operations, and how each client writes them
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Op:
    """One operation of a changeset, independent of the client that writes it.

    ``kind`` is ``insert``, ``merge`` (update/upsert with MERGE semantics), ``replace`` or
    ``delete``; ``if_match`` None means an upsert (or, for a delete, no header at all).
    """

    kind: str
    table: str
    pk: str
    rk: str
    props: dict[str, Any] | None = None
    if_match: str | None = None

    @property
    def entity(self) -> dict[str, Any]:
        return {"PartitionKey": self.pk, "RowKey": self.rk, **(self.props or {})}


def insert(table: str, rk: str, pk: str = "p", **props: Any) -> Op:
    return Op("insert", table, pk, rk, props)


def merge(table: str, rk: str, if_match: str | None = "*", pk: str = "p", **props: Any) -> Op:
    return Op("merge", table, pk, rk, props, if_match)


def replace(table: str, rk: str, if_match: str | None = "*", pk: str = "p", **props: Any) -> Op:
    return Op("replace", table, pk, rk, props, if_match)


def delete(table: str, rk: str, if_match: str | None = "*", pk: str = "p") -> Op:
    return Op("delete", table, pk, rk, None, if_match)


@dataclass(frozen=True)
class Batch:
    """A request body and the outer headers that go with it."""

    content_type: str
    body: bytes
    headers: dict[str, str | None]
    auth: str = "SharedKey"


def _new_boundaries() -> tuple[str, str]:
    return f"batch_{uuid.uuid4()}", f"changeset_{uuid.uuid4()}"


def python_batch(
    endpoint: str,
    ops: Sequence[Op],
    *,
    content_ids: Sequence[str] | None = None,
    targets: Sequence[str] | None = None,
    tunnel: bool = False,
    boundary: str | None = None,
) -> Batch:
    """azure-data-tables 12.7: its batch bytes (absolute URLs, Content-ID from 0).

    ``targets`` replaces the request-line targets; ``tunnel`` sends updates and deletes as
    ``POST`` with ``X-HTTP-Method``.
    """
    batch, changeset = _new_boundaries()
    batch = boundary or batch
    date = rfc1123_now()
    out = [f"--{batch}\r\n", f"Content-Type: multipart/mixed; boundary={changeset}\r\n", "\r\n"]
    for index, op in enumerate(ops):
        method, accept, content_type = {
            "insert": ("POST", "application/json;odata=minimalmetadata", "application/json;odata=nometadata"),
            "merge": ("PATCH", "application/json", "application/json"),
            "replace": ("PUT", "application/json", "application/json"),
            "delete": ("DELETE", "application/json;odata=minimalmetadata", None),
        }[op.kind]
        path = op.table if op.kind == "insert" else op.table + py_keys(op.pk, op.rk)
        target = targets[index] if targets is not None else f"{endpoint}/{path}"
        content_id = str(index) if content_ids is None else content_ids[index]
        body = json.dumps(_add_entity_properties(op.entity)) if content_type else ""
        tunnelled = tunnel and method != "POST"
        out += [
            f"--{changeset}\r\n",
            "Content-Type: application/http\r\n",
            "Content-Transfer-Encoding: binary\r\n",
            f"Content-ID: {content_id}\r\n",
            "\r\n",
            f"{'POST' if tunnelled else method} {target} HTTP/1.1\r\n",
        ]
        if tunnelled:
            out.append(f"X-HTTP-Method: {'MERGE' if method == 'PATCH' else method}\r\n")
        if content_type:
            out += [f"Content-Type: {content_type}\r\n", f"Content-Length: {len(body.encode())}\r\n"]
        out += [f"x-ms-version: {VERSION}\r\n", "DataServiceVersion: 3.0\r\n", f"Accept: {accept}\r\n"]
        if op.if_match is not None:
            out.append(f"If-Match: {op.if_match}\r\n")
        out += [f"x-ms-date: {date}\r\n", f"Date: {date}\r\n", "\r\n", body + "\r\n"]
    out += [f"--{changeset}--\r\n", "\r\n", f"--{batch}--\r\n"]
    headers = {"Accept": "application/json", "Content-Type": f"multipart/mixed; boundary={batch}"}
    return Batch(headers["Content-Type"], "".join(out).encode(), dict(headers))


def js_batch(endpoint: str, ops: Sequence[Op], *, truncated_close: bool = False) -> Batch:
    """@azure/data-tables: the shapes of its recordings against Azure.

    Lower-case part headers, no Content-ID, no x-ms-version in sub-requests, a blank line plus
    an extra CRLF after the changeset header block and before each body, ``Prefer:
    return-no-content`` on inserts, a DELETE body of ``undefined``. With ``truncated_close`` the
    body ends with ``--batch_x\\r\\n`` (no closing ``--``) as older JS versions wrote it.
    """
    batch, changeset = _new_boundaries()
    out = [f"--{batch}\r\n", f"content-type: multipart/mixed; boundary={changeset}\r\n", "\r\n", "\r\n"]
    for op in ops:
        out += [
            f"--{changeset}\r\n",
            "content-type: application/http\r\n",
            "content-transfer-encoding: binary\r\n",
            "\r\n",
        ]
        compact = json.dumps(op.entity, separators=(",", ":"))
        if op.kind == "insert":
            out += [
                f"POST {endpoint}/{op.table} HTTP/1.1\r\n",
                "content-type: application/json;odata=nometadata\r\n",
                "accept: application/json;odata=minimalmetadata\r\n",
                "dataserviceversion: 3.0\r\n",
                "prefer: return-no-content\r\n",
                "\r\n",
                "\r\n",
                compact + "\r\n",
            ]
            continue
        url = f"{endpoint}/{op.table}{js_keys(op.pk, op.rk)}"
        if op.kind == "delete":
            out += [
                f"DELETE {url} HTTP/1.1\r\n",
                "Content-Type: application/json; charset=utf-8\r\n",
                "Accept: application/json;odata=minimalmetadata\r\n",
                "DataServiceVersion: 3.0\r\n",
                f"If-Match: {op.if_match or '*'}\r\n",
                "\r\n",
                "undefined\r\n",
            ]
            continue
        out += [
            f"{'PATCH' if op.kind == 'merge' else 'PUT'} {url} HTTP/1.1\r\n",
            "Content-Type: application/json\r\n",
            "DataServiceVersion: 3.0\r\n",
            "Accept: application/json\r\n",
        ]
        if op.if_match is not None:
            out.append(f"If-Match: {op.if_match}\r\n")
        out += ["\r\n", "\r\n", compact + "\r\n"]
    out.append(f"--{changeset}--\r\n")
    out.append(f"--{batch}\r\n" if truncated_close else f"--{batch}--\r\n")
    headers: dict[str, str | None] = {
        "Accept": "application/json",
        "Content-Type": f"multipart/mixed; boundary={batch}",
        "DataServiceVersion": "3.0;",
        "MaxDataServiceVersion": "3.0;NetFx",
    }
    return Batch(f"multipart/mixed; boundary={batch}", "".join(out).encode(), headers, auth="SharedKeyLite")


def net_batch(endpoint: str, ops: Sequence[Op]) -> Batch:
    """Azure.Data.Tables: Content-ID on every part, ``Prefer: return-no-content`` on inserts and
    upserts, ``DataServiceVersion: 3.0;``."""
    batch, changeset = _new_boundaries()
    out = [f"--{batch}\r\n", f"Content-Type: multipart/mixed; boundary={changeset}\r\n", "\r\n"]
    for index, op in enumerate(ops):
        method = {"insert": "POST", "merge": "PATCH", "replace": "PUT", "delete": "DELETE"}[op.kind]
        url = f"{endpoint}/{op.table}" + ("" if op.kind == "insert" else py_keys(op.pk, op.rk))
        out += [
            f"--{changeset}\r\n",
            "Content-Type: application/http\r\n",
            "Content-Transfer-Encoding: binary\r\n",
            f"Content-ID: {index}\r\n",
            "\r\n",
            f"{method} {url} HTTP/1.1\r\n",
            "Accept: application/json;odata=minimalmetadata\r\n",
            "DataServiceVersion: 3.0;\r\n",
        ]
        if op.kind == "insert" or (op.kind in ("merge", "replace") and op.if_match is None):
            out.append("Prefer: return-no-content\r\n")
        if op.if_match is not None:
            out.append(f"If-Match: {op.if_match}\r\n")
        if op.kind == "delete":
            out += ["\r\n", "\r\n"]
            continue
        body = json.dumps(op.entity, separators=(",", ":"))
        out += ["Content-Type: application/json; odata=nometadata\r\n", "\r\n", body + "\r\n"]
    out += [f"--{changeset}--\r\n", f"--{batch}--\r\n"]
    headers: dict[str, str | None] = {
        "Accept": "application/json",
        "Content-Type": f"multipart/mixed; boundary={batch}",
        "DataServiceVersion": "3.0;",
        "x-ms-version": "2020-12-06",
    }
    return Batch(f"multipart/mixed; boundary={batch}", "".join(out).encode(), headers, auth="SharedKeyLite")


def cpp_batch(endpoint: str, ops: Sequence[Op]) -> Batch:
    """azure-data-tables-cpp 1.0.0-beta.5 (recorded TransactionCreateOK-key and
    TransactionCreateFail-key, x-ms-version 2019-02-02): LF line endings, ``Prefer:
    return-no-content``, ``DataServiceVersion: 3.0;``, and every operation's body but the last
    followed on the same line by the next changeset delimiter (``{...}--changeset_...``)."""
    batch, changeset = _new_boundaries()
    out = [f"--{batch}\n", f"Content-Type: multipart/mixed; boundary={changeset}\n", "\n"]
    for index, op in enumerate(ops):
        assert op.kind == "insert", "the recordings show inserts"
        out += [
            f"--{changeset}\n",
            "Content-Type: application/http\n",
            "Content-Transfer-Encoding: binary\n",
            "\n",
            f"POST {endpoint}/{op.table} HTTP/1.1\n",
            "Content-Type: application/json\n",
            "Accept: application/json;odata=minimalmetadata\n",
            "Prefer: return-no-content\n",
            "DataServiceVersion: 3.0;\n",
            "\n",
            json.dumps(op.entity, separators=(",", ":")) + ("\n\n" if index == len(ops) - 1 else ""),
        ]
    out += [f"--{changeset}--\n", f"--{batch}\n"]
    headers: dict[str, str | None] = {
        "Accept": "application/json;odata=fullmetadata",
        "Accept-Charset": "UTF-8",
        "Content-Type": f"multipart/mixed; boundary={batch}",
        "dataserviceversion": "3.0",
        "x-ms-version": "2019-02-02",
    }
    return Batch(f"multipart/mixed; boundary={batch}", "".join(out).encode(), headers)


def legacy_python_batch(ops: Sequence[Op]) -> Batch:
    """azure-cosmosdb-table / Azure-Storage 1.4.2: bare LF, origin-form ``/devstoreaccount1/t(…)``
    targets with ``%27`` quotes, ``MERGE``, ``Content-ID`` (from 1) inside the embedded request."""
    batch, changeset = _new_boundaries()
    out = [f"--{batch}\n", f"Content-Type: multipart/mixed; boundary={changeset}\n\n"]
    for index, op in enumerate(ops, start=1):
        method = {"insert": "POST", "merge": "MERGE", "replace": "PUT", "delete": "DELETE"}[op.kind]
        path = f"/{DEV_ACCOUNT}/{op.table}" + ("" if op.kind == "insert" else legacy_keys(op.pk, op.rk))
        out += [
            f"--{changeset}\n",
            "Content-Type: application/http\n",
            "Content-Transfer-Encoding: binary\n\n",
            f"{method} {path} HTTP/1.1\n",
            f"Content-ID: {index}\n",
        ]
        if op.kind == "insert":
            out.append("Prefer: return-no-content\n")
        if op.if_match is not None:
            out.append(f"If-Match: {op.if_match}\n")
        out += ["Accept: application/json;odata=minimalmetadata\n", "DataServiceVersion: 3.0;NetFx\n"]
        if op.kind != "delete":
            body = json.dumps(op.entity)
            out += [
                "Content-Type: application/json\n",
                f"Content-Length: {len(body.encode())}\n\n",
                body + "\n",
            ]
        out.append("\n")
    out += [f"--{changeset}--\n", f"--{batch}--"]
    headers: dict[str, str | None] = {
        "Accept": "application/json;odata=minimalmetadata",
        "Content-Type": f"multipart/mixed; boundary={batch}",
        "x-ms-version": "2018-03-28",
        "DataServiceVersion": "3.0;NetFx",
        "MaxDataServiceVersion": "3.0",
    }
    return Batch(f"multipart/mixed; boundary={batch}", "".join(out).encode(), headers)


def legacy_node_batch(endpoint: str, ops: Sequence[Op]) -> Batch:
    """azure-storage-node (Azure-Storage 2.10.7): bare LF, absolute ``%27`` URLs, ``MERGE``,
    ``charset`` before the boundary, and ``Accept: application/atom+xml,application/xml`` on the
    outer request (the batch itself is JSON; only the Atom *default* of that client shows)."""
    batch, changeset = _new_boundaries()
    out = [f"--{batch}\n", f'Content-Type: multipart/mixed; charset="utf-8"; boundary={changeset}\n\n']
    for index, op in enumerate(ops):
        method = {"insert": "POST", "merge": "MERGE", "replace": "PUT", "delete": "DELETE"}[op.kind]
        url = f"{endpoint}/{op.table}" + ("" if op.kind == "insert" else legacy_keys(op.pk, op.rk))
        out += [
            f"--{changeset}\n",
            "content-type: application/http\n",
            "content-transfer-encoding: binary\n\n",
        ]
        message = [f"{method} {url} HTTP/1.1\n"]
        if op.if_match is not None:
            message.append(f"if-match: {op.if_match}\n")
        message += [
            "prefer: return-no-content\n",
            "dataserviceversion: 3.0;\n",
            "accept: application/json;odata=minimalmetadata\n",
            f"content-id: {index}\n",
        ]
        body = "" if op.kind == "delete" else json.dumps(op.entity, separators=(",", ":"))
        if body:
            message += ["content-type: application/json\n", f"content-length: {len(body.encode())}\n"]
        message += ["\n", body]
        out += ["".join(message), "\n"]
    out += [f"--{changeset}--\n", f"--{batch}--"]
    content_type = f'multipart/mixed; charset="utf-8"; boundary={batch}'
    headers: dict[str, str | None] = {
        "Accept": "application/atom+xml,application/xml",
        "Content-Type": content_type,
        "x-ms-version": "2018-03-28",
        "DataServiceVersion": "3.0;",
        "MaxDataServiceVersion": "3.0;NetFx",
    }
    return Batch(content_type, "".join(out).encode(), headers)


def send(raw: RawClient, batch: Batch) -> RawResponse:
    return raw.request("POST", "$batch", batch.body, batch.headers, auth=batch.auth)


# --------------------------------------------------------------------------------------------
# Reading responses: the Python way (email + http.client) and the JavaScript way (strings)
# --------------------------------------------------------------------------------------------


@dataclass
class Part:
    """One sub-response as azure-core sees it, plus its raw header lines for order/case checks."""

    status: int
    headers: http.client.HTTPMessage
    header_lines: list[str]
    body: bytes


class _BytesSocket:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def makefile(self, *_args: Any) -> io.BytesIO:
        return io.BytesIO(self._data)


def _http_part(message: email.message.Message) -> Part:
    assert message.get_content_type() == "application/http", message
    payload = message.get_payload(decode=True)
    assert isinstance(payload, bytes)
    response = http.client.HTTPResponse(_BytesSocket(payload))  # type: ignore[arg-type]
    response.begin()
    body = response.read()
    head = payload.split(b"\r\n\r\n", 1)[0].decode()
    lines = head.split("\r\n")
    assert re.fullmatch(r"HTTP/1\.1 \d{3} .*", lines[0]), lines[0]
    return Part(response.status, response.headers, lines[1:], body)


def email_parts(response: RawResponse) -> tuple[list[Part], bool]:
    """Parse like azure-core: prepend the Content-Type, ``email`` parser, ``http.client`` per part.

    Returns the parts and whether they came inside a changeset.
    """
    content_type = response.header("Content-Type") or ""
    assert re.fullmatch(r"multipart/mixed; boundary=batchresponse_[0-9a-f-]{36}", content_type), content_type
    message = email.message_from_bytes(
        b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + response.body
    )
    assert message.is_multipart()
    outer = message.get_payload()
    assert isinstance(outer, list) and len(outer) == 1, outer
    (first,) = outer
    assert isinstance(first, email.message.Message)
    if first.get_content_type() != "multipart/mixed":
        return [_http_part(first)], False
    assert str(first.get_param("boundary", "")).startswith("changesetresponse_")
    inner = first.get_payload()
    assert isinstance(inner, list)
    assert all(isinstance(part, email.message.Message) for part in inner)
    return [_http_part(part) for part in inner if isinstance(part, email.message.Message)], True


@dataclass
class JsPart:
    status: int
    etag: str | None
    row_key: str | None
    error: dict[str, Any] | None


# JavaScript's "." stops at any line terminator; Python's only at "\n".
_JS_DOT = r"[^\n\r\u2028\u2029]"


def js_parts(response: RawResponse) -> list[JsPart]:
    """``parseTransactionResponse`` of @azure/data-tables."""
    assert response.status == 202
    pieces = response.body.decode().split("--changesetresponse_")[1:-1]
    parts = []
    for piece in pieces:
        status = re.search(r"HTTP\/1.1 ([0-9]*)", piece)
        assert status is not None and status[1], piece
        body = re.search(rf"\{{({_JS_DOT}*)\}}", piece)
        etag = re.search(rf"ETag: ({_JS_DOT}*)", piece)
        row_key = re.search(rf"RowKey='({_JS_DOT}*)'", piece)
        parts.append(
            JsPart(
                int(status[1]),
                etag[1] if etag else None,
                row_key[1] if row_key else None,
                json.loads(body[0]) if body else None,
            )
        )
    return parts


def assert_success(response: RawResponse, count: int, *, bodies: bool = False) -> list[Part]:
    """202, one part per operation inside a changeset, all 2xx, one ETag for the whole batch.

    Unless ``bodies`` (Python-style inserts without ``Prefer`` return the entity), no part has a
    body, so the JavaScript reader finds no ``{…}`` to mistake for an error.
    """
    assert response.status == 202, response
    assert response.header("Cache-Control") == "no-cache"
    parts, in_changeset = email_parts(response)
    assert in_changeset
    assert len(parts) == count, parts
    # DataServiceVersion "3.0;" for an insert, "1.0;" for an update, merge, upsert or delete, as
    # Azure writes them (the C++ SDK's TransactionCreateOK-key, TransactionMerge-key and
    # TransactionDelete-key; the JS SDK's batch recordings).
    for part in parts:
        inserted = part.headers["Location"] is not None
        assert part.headers["DataServiceVersion"] == ("3.0;" if inserted else "1.0;"), part
    assert all(200 <= part.status < 300 for part in parts), [part.status for part in parts]
    etags = {part.headers["ETag"] for part in parts if part.headers["ETag"] is not None}
    assert len(etags) <= 1, etags
    for etag in etags:
        assert ETAG_RE.match(etag), etag
    js = js_parts(response)
    assert [p.status for p in js] == [p.status for p in parts]
    assert [p.etag for p in js] == [p.headers["ETag"] for p in parts]
    if not bodies:
        assert [p.body for p in parts] == [b""] * count
        assert all(p.error is None for p in js), js
    return parts


def assert_failure(response: RawResponse, index: int, status: int, code: str) -> dict[str, Any]:
    """A failed changeset: 202 with exactly one part, the real status, compact one-line JSON whose
    message starts with ``<index>:``; readable by the Python, .NET and JavaScript rules. The part
    carries no ``Content-ID``: these clients send theirs among the part's MIME headers, which
    Azure does not echo (see ``test_python_shape_every_operation``)."""
    assert response.status == 202, response
    parts, in_changeset = email_parts(response)
    assert in_changeset
    assert len(parts) == 1, [(p.status, p.body) for p in parts]
    (part,) = parts
    assert part.status == status, (part.status, part.body)
    assert all(not line.lower().startswith("content-id:") for line in part.header_lines), part
    assert part.headers["Content-Type"] == JSON_PART_TYPE
    body = part.body.removesuffix(b"\r\n")
    assert b"\n" not in body and b"\r" not in body, body
    error = json.loads(body)
    assert json.dumps(error, separators=(",", ":"), ensure_ascii=False).encode() == body, body
    assert list(error) == ["odata.error"]
    assert list(error["odata.error"]) == ["code", "message"]
    assert error["odata.error"]["code"] == code
    message = error["odata.error"]["message"]
    assert list(message) == ["lang", "value"]
    assert message["value"].startswith(f"{index}:"), message
    assert f"\nRequestId:{response.header('x-ms-request-id')}\nTime:" in message["value"]
    # .NET: FailedTransactionActionIndex from a regex over the raw JSON.
    net_index = re.search(rb'"value":"(?P<index>\d+):', body)
    assert net_index is not None and int(net_index["index"]) == index
    # JavaScript: one piece, status from the regex, the error from the single-line {...}.
    js = js_parts(response)
    assert len(js) == 1
    assert js[0].status == status
    assert js[0].error == error
    return dict(error["odata.error"])


def assert_request_error(response: RawResponse, status: int, code: str) -> None:
    """A request-level error: the JSON error itself, not a multipart body."""
    assert_error(response, status, code)
    assert (response.header("Content-Type") or "").startswith("application/json"), response
    assert b"batchresponse_" not in response.body


# --------------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------------


@pytest.fixture
def table(raw: RawClient, table_name: str) -> str:
    assert raw.create_table(table_name).status == 201
    return table_name


def seed(raw: RawClient, table: str, *rks: str, pk: str = "p") -> dict[str, str]:
    """Insert entities ``{rk: {"v": "old-<rk>"}}`` one by one; return their ETags."""
    etags = {}
    for rk in rks:
        response = raw.insert(table, {"PartitionKey": pk, "RowKey": rk, "v": f"old-{rk}"})
        assert response.status == 201, response
        etags[rk] = str(response.header("ETag"))
    return etags


def read(raw: RawClient, table: str, rk: str, pk: str = "p") -> dict[str, Any] | None:
    response = raw.get_entity(table, pk, rk)
    if response.status == 404:
        return None
    assert response.status == 200, response
    entity: dict[str, Any] = response.json()
    return entity


def user_props(entity: dict[str, Any] | None) -> dict[str, Any] | None:
    if entity is None:
        return None
    skip = ("odata.", "PartitionKey", "RowKey", "Timestamp")
    return {k: v for k, v in entity.items() if not k.startswith(skip)}


def snapshot(raw: RawClient, table: str, rks: Sequence[str], pk: str = "p") -> dict[str, Any]:
    """Every key read separately: the full entity (with its ETag) or None."""
    return {rk: read(raw, table, rk, pk) for rk in rks}


# --------------------------------------------------------------------------------------------
# Success, per client shape
# --------------------------------------------------------------------------------------------


def test_python_shape_every_operation(raw: RawClient, table: str) -> None:
    before = seed(raw, table, "m", "r", "d", "mc", "rc", "dc")
    ops = [
        insert(table, "new", v="inserted", n=1),
        merge(table, "m", "*", w="merged"),
        replace(table, "r", "*", w="replaced"),
        delete(table, "d"),
        merge(table, "um", None, v="upsert-merge"),
        replace(table, "ur", None, v="upsert-replace"),
        merge(table, "mc", before["mc"], w="cond-merge"),
        replace(table, "rc", before["rc"], w="cond-replace"),
        delete(table, "dc", before["dc"]),
    ]
    response = send(raw, python_batch(raw.endpoint, ops))
    parts = assert_success(response, len(ops), bodies=True)

    # The parts' MIME Content-IDs are not echoed: Azure's answers to azure-data-tables' batches,
    # which send Content-ID: 0, 1 ... as here, carry none (azure-sdk-assets python/sdk/tables/
    # azure-data-tables/tests/recordings/test_encoder.pyTestTableEncodertest_encoder_batch.json,
    # x-ms-version 2019-02-02; test_table_batch.pyTestTableBatchtest_batch_update.json and
    # ...test_batch_same_row_operations_fail.json, 2025-07-05).
    assert all(not line.lower().startswith("content-id") for p in parts for line in p.header_lines)
    # Insert without Prefer: 201 with the entity, Location and ETag.
    created = parts[0]
    assert created.status == 201
    assert created.headers["Content-Type"] == JSON_PART_TYPE
    assert created.headers["Location"] == f"{raw.endpoint}/{table}(PartitionKey='p',RowKey='new')"
    assert created.headers["Preference-Applied"] is None
    # in Azure's order: version and type first (azure-sdk-assets python/sdk/tables/azure-data-tables/
    # tests/recordings/test_encoder.pyTestTableEncodertest_encoder_batch.json, x-ms-version 2019-02-02)
    assert [line.split(":")[0] for line in created.header_lines] == [
        "DataServiceVersion",
        "Content-Type",
        "X-Content-Type-Options",
        "Cache-Control",
        "Location",
        "ETag",
    ], created.header_lines
    entity = json.loads(created.body)
    assert (entity["PartitionKey"], entity["RowKey"], entity["v"], entity["n"]) == ("p", "new", "inserted", 1)
    assert entity["odata.etag"] == created.headers["ETag"]
    # Updates, merges and upserts: 204 with an ETag; deletes: 204 without one.
    for index, part in enumerate(parts[1:], start=1):
        assert part.status == 204, (index, part)
        assert part.body == b""
        if ops[index].kind == "delete":
            assert part.headers["ETag"] is None
        else:
            assert part.headers["ETag"] == created.headers["ETag"]
    batch_etag = created.headers["ETag"]
    assert batch_etag not in before.values()

    state = snapshot(raw, table, ["new", "m", "r", "d", "um", "ur", "mc", "rc", "dc"])
    assert user_props(state["new"]) == {"v": "inserted", "n": 1}
    assert user_props(state["m"]) == {"v": "old-m", "w": "merged"}
    assert user_props(state["r"]) == {"w": "replaced"}
    assert user_props(state["um"]) == {"v": "upsert-merge"}
    assert user_props(state["ur"]) == {"v": "upsert-replace"}
    assert user_props(state["mc"]) == {"v": "old-mc", "w": "cond-merge"}
    assert user_props(state["rc"]) == {"w": "cond-replace"}
    assert state["d"] is None and state["dc"] is None
    written = [e for e in state.values() if e is not None]
    assert {e["odata.etag"] for e in written} == {batch_etag}
    assert len({e["Timestamp"] for e in written}) == 1


def test_js_shape_return_no_content(raw: RawClient, table: str) -> None:
    seed(raw, table, "1", "2", "3")
    ops = [
        insert(table, "a", value="1"),
        insert(table, "b", value="2"),
        merge(table, "1", "*", name="merged"),
        replace(table, "2", "*", name="replaced"),
        merge(table, "u", None, name="upserted"),
        delete(table, "3"),
    ]
    response = send(raw, js_batch(raw.endpoint, ops))
    parts = assert_success(response, len(ops))
    etag = parts[0].headers["ETag"]
    for rk, part in zip(["a", "b"], parts[:2], strict=True):
        # Prefer: return-no-content honoured: 204 with the four headers JS and Azure use.
        assert part.status == 204
        assert part.body == b""
        location = f"{raw.endpoint}/{table}(PartitionKey='p',RowKey='{rk}')"
        assert part.headers["Preference-Applied"] == "return-no-content"
        assert part.headers["Location"] == location
        assert part.headers["DataServiceId"] == location
        assert part.headers["ETag"] == etag
    # No Content-ID was sent, so none comes back.
    assert all(not line.lower().startswith("content-id") for p in parts for line in p.header_lines)

    js = js_parts(response)
    assert [p.status for p in js] == [204] * len(ops)
    assert [p.row_key for p in js[:2]] == ["a", "b"]
    assert [p.etag for p in js] == [etag] * 5 + [None]
    # "ETag: " with that exact case is what the case-sensitive JS regex needs.
    assert re.findall(r"(?im)^etag: ", response.body.decode()) == ["ETag: "] * 5

    state = snapshot(raw, table, ["a", "b", "1", "2", "3", "u"])
    assert user_props(state["a"]) == {"value": "1"}
    assert user_props(state["1"]) == {"v": "old-1", "name": "merged"}
    assert user_props(state["2"]) == {"name": "replaced"}
    assert user_props(state["u"]) == {"name": "upserted"}
    assert state["3"] is None


def test_js_shape_truncated_close_delimiter(raw: RawClient, table: str) -> None:
    ops = [insert(table, "r1", value="1"), insert(table, "r2", value="2"), insert(table, "r3", value="3")]
    batch = js_batch(raw.endpoint, ops, truncated_close=True)
    boundary = batch.content_type.split("boundary=", 1)[1]
    assert batch.body.endswith(f"--\r\n--{boundary}\r\n".encode())
    response = send(raw, batch)
    assert_success(response, 3)
    assert [p.row_key for p in js_parts(response)] == ["r1", "r2", "r3"]
    assert all(read(raw, table, rk) is not None for rk in ("r1", "r2", "r3"))


def test_net_shape_content_id_not_echoed(raw: RawClient, table: str) -> None:
    before = seed(raw, table, "x", "y")
    ops = [
        insert(table, "i", v=1),
        replace(table, "ur", None, v=2),
        merge(table, "x", before["x"], v=3),
        delete(table, "y"),
    ]
    response = send(raw, net_batch(raw.endpoint, ops))
    parts = assert_success(response, len(ops))
    for part in parts:
        assert not part.header_lines[0].lower().startswith("content-id"), part.header_lines
        assert part.status == 204
    assert parts[0].headers["Preference-Applied"] == "return-no-content"
    assert parts[0].headers["Location"] == f"{raw.endpoint}/{table}(PartitionKey='p',RowKey='i')"
    assert parts[1].headers["ETag"] == parts[0].headers["ETag"] == parts[2].headers["ETag"]
    state = snapshot(raw, table, ["i", "ur", "x", "y"])
    assert [user_props(state[k]) for k in ("i", "ur", "x")] == [{"v": 1}, {"v": 2}, {"v": 3}]
    assert state["y"] is None


def test_legacy_python_shape(raw: RawClient, table: str) -> None:
    """Bare LF, origin-form targets, MERGE, %27 quotes, Content-ID inside the embedded request.

    Azurite answered this client with 500s (client-wire-profiles.txt); the batch parser rules
    accept every one of these features, so the answer must be a 202 multipart.
    """
    seed(raw, table, "m", "d")
    ops = [
        insert(table, "new", v="legacy"),
        merge(table, "m", "*", w="merged"),
        merge(table, "um", None, v="upsert"),
        replace(table, "ur", None, v="replace"),
        delete(table, "d"),
    ]
    batch = legacy_python_batch(ops)
    assert b"\r" not in batch.body
    assert b"MERGE /devstoreaccount1/" in batch.body and b"%27" in batch.body
    response = send(raw, batch)
    parts = assert_success(response, len(ops))
    assert parts[0].status == 204 and parts[0].headers["Preference-Applied"] == "return-no-content"
    state = snapshot(raw, table, ["new", "m", "um", "ur", "d"])
    assert user_props(state["new"]) == {"v": "legacy"}
    assert user_props(state["m"]) == {"v": "old-m", "w": "merged"}
    assert user_props(state["um"]) == {"v": "upsert"}
    assert user_props(state["ur"]) == {"v": "replace"}
    assert state["d"] is None


def test_legacy_node_shape_with_atom_accept(raw: RawClient, table: str) -> None:
    """The outer ``Accept: application/atom+xml,application/xml`` is this client's default for
    every request; with x-ms-version 2018-03-28 (≥ 2015-12-11) it is not an Atom request to
    refuse, and the batch is answered with a 202 multipart like any other."""
    seed(raw, table, "m")
    ops = [insert(table, "n1", v="a"), merge(table, "m", "*", w="b"), insert(table, "n2", v="c")]
    response = send(raw, legacy_node_batch(raw.endpoint, ops))
    assert_success(response, len(ops))
    state = snapshot(raw, table, ["n1", "m", "n2"])
    assert user_props(state["n1"]) == {"v": "a"}
    assert user_props(state["m"]) == {"v": "old-m", "w": "b"}
    assert user_props(state["n2"]) == {"v": "c"}


def test_absolute_urls_with_another_host_and_port(raw: RawClient, table: str) -> None:
    """Proxies and port mappings: the scheme and host of sub-request URLs are ignored."""
    seed(raw, table, "m")
    ops = [insert(table, "a", v=1), merge(table, "m", "*", w=2), insert(table, "b", v=3)]
    targets = [
        f"https://proxy.example.com:8443/{DEV_ACCOUNT}/{table}",
        f"http://10.1.2.3:10002/{DEV_ACCOUNT}/{table}{py_keys('p', 'm')}",
        f"/{DEV_ACCOUNT}/{table}",
    ]
    response = send(raw, python_batch(raw.endpoint, ops, targets=targets))
    assert_success(response, 3, bodies=True)
    state = snapshot(raw, table, ["a", "m", "b"])
    assert [user_props(state[k]) for k in ("a", "m", "b")] == [{"v": 1}, {"v": "old-m", "w": 2}, {"v": 3}]


def test_bare_lf_line_endings(raw: RawClient, table: str) -> None:
    seed(raw, table, "m", "d")
    ops = [insert(table, "a", v=1), merge(table, "m", "*", w=2), delete(table, "d")]
    batch = python_batch(raw.endpoint, ops)
    lf = Batch(batch.content_type, batch.body.replace(b"\r\n", b"\n"), batch.headers)
    response = send(raw, lf)
    assert_success(response, 3, bodies=True)
    state = snapshot(raw, table, ["a", "m", "d"])
    assert user_props(state["a"]) == {"v": 1}
    assert user_props(state["m"]) == {"v": "old-m", "w": 2}
    assert state["d"] is None


def test_quoted_boundary_preamble_and_epilogue(raw: RawClient, table: str) -> None:
    """RFC 2046: the boundary parameter may be quoted; preamble and epilogue are ignored."""
    ops = [insert(table, "a", v=1), insert(table, "b", v=2)]
    batch = python_batch(raw.endpoint, ops)
    boundary = batch.content_type.split("boundary=", 1)[1]
    body = b"This is a preamble.\r\n" + batch.body + b"This is an epilogue.\r\n"
    quoted = f'multipart/mixed; boundary="{boundary}"'
    response = send(raw, Batch(quoted, body, {**batch.headers, "Content-Type": quoted}))
    assert_success(response, 2, bodies=True)
    assert read(raw, table, "a") is not None and read(raw, table, "b") is not None


def test_x_http_method_tunnelling(raw: RawClient, table: str) -> None:
    """POST with ``X-HTTP-Method: MERGE``/``PUT``/``DELETE`` inside a changeset."""
    seed(raw, table, "m", "r", "d")
    ops = [merge(table, "m", "*", w=1), replace(table, "r", "*", w=2), delete(table, "d")]
    response = send(raw, python_batch(raw.endpoint, ops, tunnel=True))
    parts = assert_success(response, 3)
    assert [p.status for p in parts] == [204, 204, 204]
    state = snapshot(raw, table, ["m", "r", "d"])
    assert user_props(state["m"]) == {"v": "old-m", "w": 1}
    assert user_props(state["r"]) == {"w": 2}
    assert state["d"] is None


def test_bare_get_batch(raw: RawClient, table: str) -> None:
    """One GET outside any changeset is answered with a 200 part and the entity."""
    seed(raw, table, "g")
    boundary = f"batch_{uuid.uuid4()}"
    body = (
        f"--{boundary}\r\n"
        "Content-Type: application/http\r\n"
        "Content-Transfer-Encoding: binary\r\n"
        "\r\n"
        f"GET {raw.endpoint}/{table}{py_keys('p', 'g')} HTTP/1.1\r\n"
        "Accept: application/json;odata=minimalmetadata\r\n"
        "DataServiceVersion: 3.0\r\n"
        "\r\n"
        f"--{boundary}--\r\n"
    ).encode()
    content_type = f"multipart/mixed; boundary={boundary}"
    response = send(raw, Batch(content_type, body, {"Content-Type": content_type}))
    assert response.status == 202, response
    parts, in_changeset = email_parts(response)
    assert not in_changeset
    assert len(parts) == 1
    (part,) = parts
    assert part.status == 200
    assert (part.headers["Content-Type"] or "").startswith("application/json")
    entity = json.loads(part.body)
    assert (entity["PartitionKey"], entity["RowKey"], entity["v"]) == ("p", "g", "old-g")
    stored = read(raw, table, "g")
    assert stored is not None
    assert entity["odata.etag"] == part.headers["ETag"] == stored["odata.etag"]


# --------------------------------------------------------------------------------------------
# Failure responses
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "builder",
    [lambda endpoint, ops: python_batch(endpoint, ops, content_ids=["10", "11", "12"]), js_batch, net_batch],
    ids=["python", "js", "net"],
)
@pytest.mark.parametrize(
    ("failing", "status", "code"),
    [
        ("duplicate-insert", 409, "EntityAlreadyExists"),
        ("delete-missing", 404, "ResourceNotFound"),
        ("stale-etag", 412, "UpdateConditionNotSatisfied"),
    ],
)
@pytest.mark.parametrize("index", [0, 1, 2])
def test_failure_is_one_part_with_index(
    raw: RawClient,
    table: str,
    builder: Callable[[str, Sequence[Op]], Batch],
    failing: str,
    status: int,
    code: str,
    index: int,
) -> None:
    """The index is the position in the changeset, not the Content-ID; nothing is applied."""
    etags = seed(raw, table, "e0", "e1", "e2", "dup")
    bad = {
        "duplicate-insert": insert(table, "dup", v="again"),
        "delete-missing": delete(table, "missing"),
        "stale-etag": replace(table, f"e{index}", STALE_ETAG, v="stale"),
    }[failing]
    ops = [merge(table, "e0", etags["e0"], w=0), insert(table, "n1", v=1), delete(table, "e2")]
    ops[index] = bad
    before = snapshot(raw, table, ["e0", "e1", "e2", "dup", "n1", "missing"])

    response = send(raw, builder(raw.endpoint, ops))

    error = assert_failure(response, index, status, code)
    assert error["message"]["value"].split("\n", 1)[0].startswith(f"{index}:")
    assert snapshot(raw, table, ["e0", "e1", "e2", "dup", "n1", "missing"]) == before


def test_missing_table_is_404_part(raw: RawClient, table_name: str) -> None:
    """The JS recording against Azure: a 404 ``TableNotFound`` part with ``0:``."""
    ops = [insert(table_name, "1", name="first"), insert(table_name, "2", name="second")]
    response = send(raw, js_batch(raw.endpoint, ops))
    error = assert_failure(response, 0, 404, "TableNotFound")
    assert error["message"]["value"].startswith("0:The table specified does not exist.")


def test_different_partitions_is_400_part(raw: RawClient, table: str) -> None:
    ops = [insert(table, "a"), insert(table, "b"), insert(table, "c", pk="other"), insert(table, "d")]
    response = send(raw, python_batch(raw.endpoint, ops))
    error = assert_failure(response, 2, 400, "CommandsInBatchActOnDifferentPartitions")
    assert error["message"]["value"].startswith(
        "2:All commands in a batch must operate on same entity group."
    )
    assert snapshot(raw, table, ["a", "b", "d"]) == {"a": None, "b": None, "d": None}
    assert read(raw, table, "c", pk="other") is None


def test_duplicate_row_is_400_part(raw: RawClient, table: str) -> None:
    seed(raw, table, "x")
    ops = [insert(table, "a"), merge(table, "x", "*", w=1), delete(table, "a", "*")]
    before = snapshot(raw, table, ["a", "x"])
    response = send(raw, net_batch(raw.endpoint, ops))
    error = assert_failure(response, 2, 400, "InvalidDuplicateRow")
    assert error["message"]["value"].startswith(
        "2:The batch request contains multiple changes with same row key."
    )
    assert snapshot(raw, table, ["a", "x"]) == before


def test_cpp_shape_delimiter_after_the_body(raw: RawClient, table: str) -> None:
    """The C++ SDK's changeset, whose delimiters follow each body but the last on its line:
    Azure runs both inserts (TransactionCreateOK-key: 202, two 204s) and, when both name one row,
    answers InvalidDuplicateRow at index 1 (TransactionCreateFail-key)."""
    ops = [insert(table, "R1", "P1", Name="Azure", Product="Tables"), insert(table, "R2", "P1", Name="Azure")]
    batch = cpp_batch(raw.endpoint, ops)
    assert b'"}--changeset_' in batch.body
    assert_success(send(raw, batch), 2)
    assert user_props(read(raw, table, "R1", "P1")) == {"Name": "Azure", "Product": "Tables"}
    assert user_props(read(raw, table, "R2", "P1")) == {"Name": "Azure"}
    twice = [insert(table, "R3", "P1", Name="Azure"), insert(table, "R3", "P1", Name="Azure")]
    error = assert_failure(send(raw, cpp_batch(raw.endpoint, twice)), 1, 400, "InvalidDuplicateRow")
    assert error["message"]["value"].startswith(
        "1:The batch request contains multiple changes with same row key. An entity can appear only "
        "once in a batch request.\n"
    )
    assert read(raw, table, "R3", "P1") is None


@pytest.mark.parametrize("other", ["otheraccount", "devstoreaccount2"])
def test_sub_request_of_another_account_is_400_part(raw: RawClient, table: str, other: str) -> None:
    """The account in a sub-request URL must be the outer one, else 400 InvalidInput."""
    ops = [insert(table, "a"), insert(table, "b"), insert(table, "c")]
    targets = [
        f"{raw.endpoint}/{table}",
        f"http://127.0.0.1:{raw.port}/{other}/{table}",
        f"{raw.endpoint}/{table}",
    ]
    response = send(raw, python_batch(raw.endpoint, ops, targets=targets))
    assert_failure(response, 1, 400, "InvalidInput")
    assert snapshot(raw, table, ["a", "b", "c"]) == {"a": None, "b": None, "c": None}


def test_sub_request_of_another_known_account_is_400_part(tmp_path: Path) -> None:
    """Both accounts are served, and the outer request is signed for the first: the second
    account's table must not be reachable through it."""
    second_key = DEV_KEY
    server = ServerProcess(
        tmp_path / "data",
        extra_args=["--account", f"{DEV_ACCOUNT}:{DEV_KEY}", "--account", f"second:{second_key}"],
    ).start()
    try:
        first = RawClient(server.port)
        second = RawClient(server.port, account="second", key=second_key)
        assert first.create_table("shared").status == 201
        assert second.create_table("shared").status == 201
        ops = [insert("shared", "a"), insert("shared", "b")]
        targets = [f"{first.endpoint}/shared", f"{second.endpoint}/shared"]
        response = send(first, python_batch(first.endpoint, ops, targets=targets))
        assert_failure(response, 1, 400, "InvalidInput")
        assert read(first, "shared", "a") is None
        assert read(second, "shared", "b") is None
    finally:
        server.stop()


def test_table_mismatch_is_400_part(raw: RawClient, table: str, table_name: str) -> None:
    """All operations of a batch target one table."""
    other = table_name + "b"
    assert raw.create_table(other).status == 201
    ops = [insert(table, "a"), insert(other, "b")]
    response = send(raw, python_batch(raw.endpoint, ops))
    assert_failure(response, 1, 400, "InvalidInput")
    assert read(raw, table, "a") is None and read(raw, other, "b") is None


def test_malformed_if_match_is_400_part(raw: RawClient, table: str) -> None:
    """An If-Match that is neither ``*`` nor ``W/"…"`` is 400 InvalidInput."""
    seed(raw, table, "x")
    ops = [insert(table, "a"), merge(table, "x", "not-an-etag", w=1)]
    before = snapshot(raw, table, ["a", "x"])
    response = send(raw, python_batch(raw.endpoint, ops))
    assert_failure(response, 1, 400, "InvalidInput")
    assert snapshot(raw, table, ["a", "x"]) == before


def test_if_match_reads_as_in_a_single_request(raw: RawClient, table: str) -> None:
    """A lower-case weak ETag is compared (a stale one is 412, the current one works); several
    ETags and If-None-Match are 400, exactly as for a single request."""
    etags = seed(raw, table, "x", "y")
    stale = "w/\"datetime'2000-01-01T00%3A00%3A00.0000000Z'\""
    for op in (merge(table, "x", stale, w=1), replace(table, "x", stale, w=1), delete(table, "x", stale)):
        response = send(raw, python_batch(raw.endpoint, [insert(table, "a"), op]))
        assert_failure(response, 1, 412, "UpdateConditionNotSatisfied")
    several = merge(table, "x", f"{etags['x']},{etags['x']}", w=1)
    assert_failure(send(raw, python_batch(raw.endpoint, [several])), 0, 400, "InvalidInput")
    with_none_match = merge(table, "x", "*\r\nIf-None-Match: *", w=1)  # a second header line
    assert_failure(send(raw, python_batch(raw.endpoint, [with_none_match])), 0, 400, "InvalidInput")
    assert read(raw, table, "a") is None
    current = [merge(table, "x", "w/" + etags["x"][2:], w=2), delete(table, "y", "w/" + etags["y"][2:])]
    assert_success(send(raw, python_batch(raw.endpoint, current)), 2)
    assert (user_props(read(raw, table, "x")) or {}).get("w") == 2 and read(raw, table, "y") is None


SPECIAL_KEYS = ["it's", "a b", "ü€", "100%", "x''y", "(x,y)='z'"]


@pytest.mark.parametrize(
    "builder",
    [
        python_batch,
        js_batch,
        net_batch,
        lambda endpoint, ops: legacy_python_batch(ops),
        legacy_node_batch,
    ],
    ids=["python", "js", "net", "legacy-python", "legacy-node"],
)
def test_special_keys_in_sub_request_urls(
    raw: RawClient, table: str, builder: Callable[[str, Sequence[Op]], Batch]
) -> None:
    """Each client's key encoding in sub-request URLs reaches the right entity."""
    for rk in SPECIAL_KEYS:
        assert raw.insert(table, {"PartitionKey": "p q'", "RowKey": rk, "v": 0}).status == 201
    ops = [
        merge(table, SPECIAL_KEYS[0], "*", pk="p q'", w=1),
        replace(table, SPECIAL_KEYS[1], "*", pk="p q'", w=2),
        delete(table, SPECIAL_KEYS[2], pk="p q'"),
        merge(table, SPECIAL_KEYS[3], None, pk="p q'", w=4),
        replace(table, SPECIAL_KEYS[4], None, pk="p q'", w=5),
        delete(table, SPECIAL_KEYS[5], "*", pk="p q'"),
    ]
    response = send(raw, builder(raw.endpoint, ops))
    assert_success(response, len(ops))
    state = snapshot(raw, table, SPECIAL_KEYS, pk="p q'")
    assert [user_props(state[rk]) for rk in SPECIAL_KEYS] == [
        {"v": 0, "w": 1},
        {"w": 2},
        None,
        {"v": 0, "w": 4},
        {"w": 5},
        None,
    ]


def test_invalid_entity_in_batch_is_400_part(raw: RawClient, table: str) -> None:
    ops = [insert(table, "a", v=1), Op("insert", table, "p", "b", {"bad-name": 1}), insert(table, "c")]
    response = send(raw, js_batch(raw.endpoint, ops))
    assert_failure(response, 1, 400, "PropertyNameInvalid")
    assert snapshot(raw, table, ["a", "b", "c"]) == {"a": None, "b": None, "c": None}


# --------------------------------------------------------------------------------------------
# Request-level errors: a plain JSON error, not a multipart body
# --------------------------------------------------------------------------------------------


def _malformed(endpoint: str, table: str, case: str) -> Batch:
    good = python_batch(endpoint, [insert(table, "a")])
    boundary = good.content_type.split("boundary=", 1)[1]
    if case == "no-boundary-parameter":
        return Batch("multipart/mixed", good.body, {**good.headers, "Content-Type": "multipart/mixed"})
    if case == "not-multipart":
        return Batch("application/json", good.body, {**good.headers, "Content-Type": "application/json"})
    if case == "boundary-not-in-body":
        body = good.body.replace(boundary.encode(), b"batch_somethingelse")
        return Batch(good.content_type, body, good.headers)
    if case == "garbage-request-line":
        body = good.body.replace(f"POST {endpoint}/{table} HTTP/1.1".encode(), b"THIS IS NOT HTTP")
        return Batch(good.content_type, body, good.headers)
    if case == "operation-not-application-http":
        body = good.body.replace(b"Content-Type: application/http", b"Content-Type: text/plain", 1)
        return Batch(good.content_type, body, good.headers)
    if case == "empty-changeset":
        changeset = f"changeset_{uuid.uuid4()}"
        body = (
            f"--{boundary}\r\nContent-Type: multipart/mixed; boundary={changeset}\r\n\r\n"
            f"--{changeset}--\r\n\r\n--{boundary}--\r\n"
        ).encode()
        return Batch(good.content_type, body, good.headers)
    if case == "two-changesets":
        second = python_batch(endpoint, [insert(table, "b")], boundary=boundary)
        body = good.body.removesuffix(f"--{boundary}--\r\n".encode()) + second.body
        return Batch(good.content_type, body, good.headers)
    if case == "empty-body":
        return Batch(good.content_type, b"", good.headers)
    raise AssertionError(case)


@pytest.mark.parametrize(
    "case",
    [
        "no-boundary-parameter",
        "not-multipart",
        "boundary-not-in-body",
        "garbage-request-line",
        "operation-not-application-http",
        "empty-changeset",
        "two-changesets",
        "empty-body",
    ],
)
def test_malformed_multipart_is_400_json(raw: RawClient, table: str, case: str) -> None:
    response = send(raw, _malformed(raw.endpoint, table, case))
    assert_request_error(response, 400, "InvalidInput")
    assert read(raw, table, "a") is None and read(raw, table, "b") is None


def test_body_over_4_mib_is_413_json(raw: RawClient, table: str) -> None:
    """Whole body ≤ 4 MiB, else 413 RequestBodyTooLarge (a plain JSON error)."""
    big = "x" * 30_000
    ops = [insert(table, f"r{i:03d}", a=big, b=big) for i in range(75)]
    batch = python_batch(raw.endpoint, ops)
    assert len(batch.body) > 4 * 1024 * 1024
    response = send(raw, batch)
    assert_request_error(response, 413, "RequestBodyTooLarge")
    assert read(raw, table, "r000") is None
