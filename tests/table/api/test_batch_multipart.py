"""``$batch`` multipart parsing and rendering: real client bodies, malformed input,
round trips, and the ways the Python and JavaScript SDKs read a batch response."""

from __future__ import annotations

import email
import http.client
import io
import json
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from email.message import Message
from typing import Any

import pytest
from azure.core import MatchConditions
from azure.core.pipeline.transport import HttpTransport
from azure.core.rest import HttpRequest
from azure.data.tables import TableClient, TableTransactionError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabulae.model.errors import ServiceError
from tabulae.table.api.batch import (
    MAX_PARTS,
    BatchRequest,
    SubRequest,
    SubResponse,
    parse_batch,
    render_batch_request,
    render_batch_response,
)

# --------------------------------------------------------------------------------------------
# Fixtures: request bodies as real clients write them
# --------------------------------------------------------------------------------------------

PY_BATCH = "batch_73f7a412-d9a2-4bf4-bc5f-92f3feb1ed14"
PY_CHANGESET = "changeset_4e7c3407-b456-4983-b6c9-cb67d24c1464"
PY_CONTENT_TYPE = f"multipart/mixed; boundary={PY_BATCH}"
PY_ENTITY = (
    b'{"PartitionKey": "x", "PartitionKey@odata.type": "Edm.String", '
    b'"RowKey": "1", "RowKey@odata.type": "Edm.String"}'
)
DATE = "Sun, 22 Nov 2026 05:41:35 GMT"

# An azure-data-tables batch request, byte for byte.
PY_BODY = b"".join(
    [
        b"--batch_73f7a412-d9a2-4bf4-bc5f-92f3feb1ed14\r\n",
        b"Content-Type: multipart/mixed; boundary=changeset_4e7c3407-b456-4983-b6c9-cb67d24c1464\r\n",
        b"\r\n",
        b"--changeset_4e7c3407-b456-4983-b6c9-cb67d24c1464\r\n",
        b"Content-Type: application/http\r\n",
        b"Content-Transfer-Encoding: binary\r\n",
        b"Content-ID: 0\r\n",
        b"\r\n",
        b"PATCH http://127.0.0.1:10002/devstoreaccount1/bftable(PartitionKey='x',RowKey='1') HTTP/1.1\r\n",
        b"Content-Type: application/json\r\n",
        b"Content-Length: 112\r\n",
        b"x-ms-version: 2019-02-02\r\n",
        b"DataServiceVersion: 3.0\r\n",
        b"Accept: application/json\r\n",
        b"x-ms-date: Sun, 22 Nov 2026 05:41:35 GMT\r\n",
        b"Date: Sun, 22 Nov 2026 05:41:35 GMT\r\n",
        b"\r\n",
        PY_ENTITY + b"\r\n",
        b"--changeset_4e7c3407-b456-4983-b6c9-cb67d24c1464\r\n",
        b"Content-Type: application/http\r\n",
        b"Content-Transfer-Encoding: binary\r\n",
        b"Content-ID: 1\r\n",
        b"\r\n",
        b"DELETE http://127.0.0.1:10002/devstoreaccount1/bftable(PartitionKey='x',RowKey='nope')"
        b" HTTP/1.1\r\n",
        b"x-ms-version: 2019-02-02\r\n",
        b"DataServiceVersion: 3.0\r\n",
        b"Accept: application/json;odata=minimalmetadata\r\n",
        b"If-Match: *\r\n",
        b"x-ms-date: Sun, 22 Nov 2026 05:41:35 GMT\r\n",
        b"Date: Sun, 22 Nov 2026 05:41:35 GMT\r\n",
        b"\r\n",
        b"\r\n",
        b"--changeset_4e7c3407-b456-4983-b6c9-cb67d24c1464--\r\n",
        b"\r\n",
        b"--batch_73f7a412-d9a2-4bf4-bc5f-92f3feb1ed14--\r\n",
    ]
)

# The same operations with the header names the Python SDK writes (render keeps their case).
PY_PATCH_HEADERS = (
    ("Content-Type", "application/json"),
    ("Content-Length", "112"),
    ("x-ms-version", "2019-02-02"),
    ("DataServiceVersion", "3.0"),
    ("Accept", "application/json"),
    ("x-ms-date", DATE),
    ("Date", DATE),
)
PY_DELETE_HEADERS = (
    ("x-ms-version", "2019-02-02"),
    ("DataServiceVersion", "3.0"),
    ("Accept", "application/json;odata=minimalmetadata"),
    ("If-Match", "*"),
    ("x-ms-date", DATE),
    ("Date", DATE),
)
PY_URL = "http://127.0.0.1:10002/devstoreaccount1/bftable"


def _lower_names(headers: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """What the parser makes of header names: lower case."""
    return tuple((name.lower(), value) for name, value in headers)


def _py_batch(*, cased: bool) -> BatchRequest:
    """The ``PY_BODY`` batch as a value, with the SDK's header case or the parser's."""

    def headers(raw: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
        return raw if cased else _lower_names(raw)

    return BatchRequest(
        PY_BATCH,
        PY_CHANGESET,
        (
            SubRequest(
                "PATCH", f"{PY_URL}(PartitionKey='x',RowKey='1')", headers(PY_PATCH_HEADERS), PY_ENTITY, "0"
            ),
            SubRequest(
                "DELETE", f"{PY_URL}(PartitionKey='x',RowKey='nope')", headers(PY_DELETE_HEADERS), b"", "1"
            ),
        ),
    )


# JS SDK: lower-case headers, no Content-ID, extra CRLFs after the changeset header block and
# before each body, Prefer on the insert, nometadata JSON.
JS_BODY = b"".join(
    [
        b"--batch_js1\r\n",
        b"content-type: multipart/mixed; boundary=changeset_js1\r\n",
        b"\r\n",
        b"\r\n",
        b"--changeset_js1\r\n",
        b"content-type: application/http\r\n",
        b"content-transfer-encoding: binary\r\n",
        b"\r\n",
        b"POST http://127.0.0.1:10002/devstoreaccount1/jstable HTTP/1.1\r\n",
        b"content-type: application/json;odata=nometadata\r\n",
        b"accept: application/json\r\n",
        b"dataserviceversion: 3.0;\r\n",
        b"prefer: return-no-content\r\n",
        b"\r\n",
        b"\r\n",
        b'{"PartitionKey":"p","RowKey":"1","n":1}\r\n',
        b"--changeset_js1\r\n",
        b"content-type: application/http\r\n",
        b"content-transfer-encoding: binary\r\n",
        b"\r\n",
        b"PUT http://127.0.0.1:10002/devstoreaccount1/jstable(PartitionKey='p',RowKey='2') HTTP/1.1\r\n",
        b"content-type: application/json;odata=nometadata\r\n",
        b"accept: application/json\r\n",
        b"\r\n",
        b"\r\n",
        b'{"PartitionKey":"p","RowKey":"2","n":2}\r\n',
        b"--changeset_js1--\r\n",
        b"--batch_js1--\r\n",
    ]
)

# Old .NET storage library: MERGE, %27 quotes, origin-form URLs, Atom Accept, charset first.
LEGACY_CONTENT_TYPE = 'multipart/mixed; charset="utf-8"; boundary=batch_legacy'
LEGACY_BODY = b"".join(
    [
        b"--batch_legacy\r\n",
        b"Content-Type: multipart/mixed; boundary=changeset_legacy\r\n",
        b"\r\n",
        b"--changeset_legacy\r\n",
        b"Content-Type: application/http\r\n",
        b"Content-Transfer-Encoding: binary\r\n",
        b"\r\n",
        b"MERGE /devstoreaccount1/legacy(PartitionKey=%27p1%27,RowKey=%27r1%27) HTTP/1.1\r\n",
        b"Accept: application/atom+xml,application/xml\r\n",
        b"Content-Type: application/json\r\n",
        b"DataServiceVersion: 3.0;\r\n",
        b"If-Match: *\r\n",
        b"\r\n",
        b'{"PartitionKey":"p1","RowKey":"r1","n":2}\r\n',
        b"--changeset_legacy\r\n",
        b"Content-Type: application/http\r\n",
        b"Content-Transfer-Encoding: binary\r\n",
        b"\r\n",
        b"DELETE /devstoreaccount1/legacy(PartitionKey=%27p1%27,RowKey=%27r2%27) HTTP/1.1\r\n",
        b"Accept: application/atom+xml,application/xml\r\n",
        b"If-Match: *\r\n",
        b"\r\n",
        b"--changeset_legacy--\r\n",
        b"--batch_legacy--\r\n",
    ]
)


def _changeset_body(*operations: bytes, batch: str = "b1", changeset: str = "c1") -> bytes:
    """A well-formed Python-SDK-style body around raw ``application/http`` payloads."""
    parts = b"".join(
        b"--%s\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n%s\r\n"
        % (changeset.encode(), operation)
        for operation in operations
    )
    return b"--%s\r\nContent-Type: multipart/mixed; boundary=%s\r\n\r\n%s--%s--\r\n\r\n--%s--\r\n" % (
        batch.encode(),
        changeset.encode(),
        parts,
        changeset.encode(),
        batch.encode(),
    )


INSERT = b'POST http://h/acct/t HTTP/1.1\r\nContent-Type: application/json\r\n\r\n{"PartitionKey":"p"}'
GET_ONE = b"GET http://h/acct/t(PartitionKey='p',RowKey='r') HTTP/1.1\r\nAccept: application/json\r\n\r\n"
SIMPLE_CT = "multipart/mixed; boundary=b1"

# --------------------------------------------------------------------------------------------
# Parsing real client bodies
# --------------------------------------------------------------------------------------------


def test_python_sdk_request_parses_exactly() -> None:
    assert parse_batch(PY_CONTENT_TYPE, PY_BODY) == _py_batch(cased=False)


def test_python_sdk_request_renders_byte_for_byte() -> None:
    assert render_batch_request(_py_batch(cased=True)) == (PY_CONTENT_TYPE, PY_BODY)


def test_js_request_with_lower_case_headers_and_extra_crlfs() -> None:
    batch = parse_batch("multipart/mixed; boundary=batch_js1", JS_BODY)

    assert batch.batch_boundary == "batch_js1"
    assert batch.changeset_boundary == "changeset_js1"
    insert, replace_op = batch.operations
    assert insert == SubRequest(
        "POST",
        "http://127.0.0.1:10002/devstoreaccount1/jstable",
        (
            ("content-type", "application/json;odata=nometadata"),
            ("accept", "application/json"),
            ("dataserviceversion", "3.0;"),
            ("prefer", "return-no-content"),
        ),
        b'{"PartitionKey":"p","RowKey":"1","n":1}',
        None,
    )
    assert replace_op.method == "PUT"
    assert replace_op.target.endswith("jstable(PartitionKey='p',RowKey='2')")
    assert replace_op.body == b'{"PartitionKey":"p","RowKey":"2","n":2}'
    assert replace_op.content_id is None


def test_legacy_request_with_merge_encoded_quotes_and_relative_urls() -> None:
    batch = parse_batch(LEGACY_CONTENT_TYPE, LEGACY_BODY)

    assert batch.batch_boundary == "batch_legacy"
    merge, delete = batch.operations
    assert merge == SubRequest(
        "MERGE",
        "/devstoreaccount1/legacy(PartitionKey=%27p1%27,RowKey=%27r1%27)",
        (
            ("accept", "application/atom+xml,application/xml"),
            ("content-type", "application/json"),
            ("dataserviceversion", "3.0;"),
            ("if-match", "*"),
        ),
        b'{"PartitionKey":"p1","RowKey":"r1","n":2}',
        None,
    )
    assert delete.method == "DELETE"
    assert delete.target == "/devstoreaccount1/legacy(PartitionKey=%27p1%27,RowKey=%27r2%27)"
    assert delete.body == b""


def test_delete_with_empty_body() -> None:
    body = _changeset_body(b"DELETE http://h/acct/t(PartitionKey='p',RowKey='r') HTTP/1.1\r\nIf-Match: *\r\n")
    (delete,) = parse_batch(SIMPLE_CT, body).operations
    assert delete == SubRequest(
        "DELETE", "http://h/acct/t(PartitionKey='p',RowKey='r')", (("if-match", "*"),), b"", None
    )


@pytest.mark.parametrize(
    "ending",
    [
        pytest.param(b"--batch_js1\r\n", id="close-without-dashes"),
        pytest.param(b"--batch_js1", id="close-without-dashes-or-crlf"),
        pytest.param(b"", id="no-close-at-all"),
    ],
)
def test_truncated_final_close_delimiter(ending: bytes) -> None:
    body = JS_BODY.removesuffix(b"--batch_js1--\r\n") + ending
    expected = parse_batch("multipart/mixed; boundary=batch_js1", JS_BODY)
    assert parse_batch("multipart/mixed; boundary=batch_js1", body) == expected


def test_changeset_without_close_delimiter() -> None:
    body = PY_BODY.replace(f"--{PY_CHANGESET}--\r\n".encode(), b"")
    assert parse_batch(PY_CONTENT_TYPE, body) == _py_batch(cased=False)


def test_bare_lf_line_endings() -> None:
    body = PY_BODY.replace(b"\r\n", b"\n")
    assert parse_batch(PY_CONTENT_TYPE, body) == _py_batch(cased=False)


def test_mixed_line_endings() -> None:
    body = PY_BODY.replace(b"binary\r\n", b"binary\n").replace(b"GMT\r\n\r\n", b"GMT\n\r\n")
    assert parse_batch(PY_CONTENT_TYPE, body) == _py_batch(cased=False)


@pytest.mark.parametrize(
    "content_type",
    [
        f'multipart/mixed; boundary="{PY_BATCH}"',
        f"Multipart/Mixed;BOUNDARY={PY_BATCH}",
        f'multipart/mixed; charset="utf-8"; boundary={PY_BATCH}',
        f'multipart/mixed; charset="utf-8;x"; boundary="{PY_BATCH}";',
        f"multipart/mixed; boundary = {PY_BATCH} ",
    ],
)
def test_content_type_variants(content_type: str) -> None:
    assert parse_batch(content_type, PY_BODY) == _py_batch(cased=False)


def test_quoted_boundary_with_special_characters() -> None:
    body = PY_BODY.replace(PY_BATCH.encode(), b"batch:a=b?c d")
    batch = parse_batch('multipart/mixed; boundary="batch:a=b?c d"', body)
    assert batch == replace(_py_batch(cased=False), batch_boundary="batch:a=b?c d")


def test_quoted_changeset_boundary() -> None:
    body = PY_BODY.replace(f"boundary={PY_CHANGESET}".encode(), f'boundary="{PY_CHANGESET}"'.encode())
    assert parse_batch(PY_CONTENT_TYPE, body) == _py_batch(cased=False)


def test_preamble_and_epilogue_are_ignored() -> None:
    body = b"This is a preamble.\r\n" + PY_BODY + b"epilogue --batch_x\r\nnoise"
    assert parse_batch(PY_CONTENT_TYPE, body) == _py_batch(cased=False)


def test_line_starting_with_boundary_text_is_not_a_delimiter() -> None:
    body = _changeset_body(b"POST http://h/acct/t HTTP/1.1\r\n\r\n{}\r\n--c1x not a delimiter")
    (insert,) = parse_batch(SIMPLE_CT, body).operations
    assert insert.body == b"{}\r\n--c1x not a delimiter"


def test_delimiter_with_transport_padding() -> None:
    body = PY_BODY.replace(f"--{PY_CHANGESET}\r\n".encode(), f"--{PY_CHANGESET} \t\r\n".encode())
    assert parse_batch(PY_CONTENT_TYPE, body) == _py_batch(cased=False)


def test_body_whitespace_is_stripped_and_content_length_ignored() -> None:
    body = _changeset_body(b'PUT /acct/t HTTP/1.1\r\nContent-Length: 999\r\n\r\n \r\n\t{"a": 1} \r\n\r\n')
    (op,) = parse_batch(SIMPLE_CT, body).operations
    assert op.body == b'{"a": 1}'
    assert op.headers == (("content-length", "999"),)


def test_folded_header_and_value_whitespace() -> None:
    body = _changeset_body(
        b"PUT /acct/t HTTP/1.1\r\nX-Long:  one\r\n  two\r\n\tthree \r\nIf-Match:*\r\n\r\n{}"
    )
    (op,) = parse_batch(SIMPLE_CT, body).operations
    assert op.headers == (("x-long", "one two three"), ("if-match", "*"))


def test_header_block_without_blank_line_before_delimiter() -> None:
    body = (
        b"--b1\r\nContent-Type: multipart/mixed; boundary=c1\r\n\r\n"
        b"--c1\r\nContent-Type: application/http\r\n\r\n"
        b"DELETE /acct/t HTTP/1.1\r\nIf-Match: *\r\n--c1--\r\n--b1--\r\n"
    )
    (op,) = parse_batch(SIMPLE_CT, body).operations
    assert (op.method, op.headers, op.body) == ("DELETE", (("if-match", "*"),), b"")


def test_non_ascii_target_header_and_body() -> None:
    operation = "PUT /acct/t(PartitionKey='ü',RowKey='€') HTTP/1.1\r\nX-Name: Zoë\r\n\r\n{\"v\":\"日本\"}"
    (op,) = parse_batch(SIMPLE_CT, _changeset_body(operation.encode())).operations
    assert op.target == "/acct/t(PartitionKey='ü',RowKey='€')"
    assert op.headers == (("x-name", "Zoë"),)
    assert op.body == '{"v":"日本"}'.encode()


def test_bare_get_outside_changeset() -> None:
    body = (
        b"--b1\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n"
        b"Content-ID: 7\r\n\r\n" + GET_ONE + b"\r\n--b1--\r\n"
    )
    batch = parse_batch(SIMPLE_CT, body)
    assert batch == BatchRequest(
        "b1",
        None,
        (
            SubRequest(
                "GET",
                "http://h/acct/t(PartitionKey='p',RowKey='r')",
                (("accept", "application/json"),),
                b"",
                "7",
            ),
        ),
    )


def test_content_ids_are_kept_per_operation() -> None:
    body = _changeset_body(INSERT, INSERT).replace(
        b"binary\r\n\r\nPOST", b"binary\r\nContent-ID: 42\r\n\r\nPOST", 1
    )
    first, second = parse_batch(SIMPLE_CT, body).operations
    assert (first.content_id, second.content_id) == ("42", None)


def test_python_sdk_actual_request_bytes_parse_and_render_back() -> None:
    """What azure-data-tables really sends today parses, and re-renders to the same layout."""
    transport = _SdkTransport(lambda batch: _success(batch))
    client = _table_client(transport)
    client.submit_transaction(
        [
            ("create", {"PartitionKey": "p", "RowKey": "1", "n": 1}),
            ("upsert", {"PartitionKey": "p", "RowKey": "2"}, {"mode": "replace"}),
            (
                "update",
                {"PartitionKey": "p", "RowKey": "3"},
                {"mode": "merge", "etag": 'W/"x"', "match_condition": MatchConditions.IfNotModified},
            ),
            ("delete", {"PartitionKey": "p", "RowKey": "4"}),
        ]
    )
    (request,) = transport.requests
    content_type, body = request.headers["Content-Type"], request.body
    batch = parse_batch(content_type, body)

    assert [op.method for op in batch.operations] == ["POST", "PUT", "PATCH", "DELETE"]
    assert [op.content_id for op in batch.operations] == ["0", "1", "2", "3"]
    assert batch.operations[0].target == "http://127.0.0.1:10002/devstoreaccount1/sdktable"
    assert json.loads(batch.operations[0].body)["n"] == 1
    assert ("if-match", 'W/"x"') in batch.operations[2].headers
    rendered_type, rendered = render_batch_request(batch)
    assert rendered_type == content_type
    assert _lower_header_names(rendered) == _lower_header_names(body)


def _lower_header_names(data: bytes) -> bytes:
    """Lower-case every ``Name:`` at the start of a line, to compare layouts ignoring name case."""
    return re.sub(rb"(?m)^[!#$%&'*+.^_`|~0-9A-Za-z-]+:", lambda match: match[0].lower(), data)


# --------------------------------------------------------------------------------------------
# Malformed input
# --------------------------------------------------------------------------------------------

_MALFORMED: list[Any] = [
    pytest.param("application/json", PY_BODY, id="not-multipart"),
    pytest.param("multipart/related; boundary=b1", _changeset_body(INSERT), id="multipart-related"),
    pytest.param("multipart/mixed", PY_BODY, id="no-boundary"),
    pytest.param('multipart/mixed; boundary=""', PY_BODY, id="empty-boundary"),
    pytest.param("multipart/mixed; boundary=" + "b" * 201, PY_BODY, id="boundary-too-long"),
    pytest.param("multipart/mixed; boundary=bé", "--bé\r\n".encode(), id="non-ascii-boundary"),
    pytest.param("", PY_BODY, id="empty-content-type"),
    pytest.param(SIMPLE_CT, b"", id="empty-body"),
    pytest.param(SIMPLE_CT, b"no delimiter anywhere\r\n", id="no-delimiter"),
    pytest.param(SIMPLE_CT, b"--b1--\r\n", id="no-parts"),
    pytest.param(SIMPLE_CT, b"--b1\r\n\r\n\r\n--b1--\r\n", id="part-without-headers"),
    pytest.param(
        SIMPLE_CT,
        b"--b1\r\nContent-Type: multipart/mixed; boundary=c1\r\n\r\n--c1--\r\n--b1--\r\n",
        id="empty-changeset",
    ),
    pytest.param(
        SIMPLE_CT,
        b"--b1\r\nContent-Type: multipart/mixed\r\n\r\n--c1\r\n--b1--\r\n",
        id="changeset-without-boundary",
    ),
    pytest.param(
        SIMPLE_CT, _changeset_body(INSERT, changeset="b1", batch="b1"), id="changeset-reuses-batch-boundary"
    ),
    pytest.param(SIMPLE_CT, _changeset_body(b"PATCH /acct/t(PartitionKey='p')\r\n\r\n{}"), id="no-version"),
    pytest.param(SIMPLE_CT, _changeset_body(b"PATCH /acct/t HTTP/2\r\n\r\n{}"), id="http-2"),
    pytest.param(SIMPLE_CT, _changeset_body(b"PATCH  HTTP/1.1\r\n\r\n{}"), id="no-target"),
    pytest.param(SIMPLE_CT, _changeset_body(b"PA(TCH /t HTTP/1.1\r\n\r\n{}"), id="bad-method"),
    pytest.param(SIMPLE_CT, _changeset_body(b"PUT /t HTTP/1.1 extra\r\n\r\n{}"), id="extra-token"),
    pytest.param(SIMPLE_CT, _changeset_body(b"\r\n\r\n"), id="empty-operation"),
    pytest.param(SIMPLE_CT, _changeset_body(b"PUT /t HTTP/1.1\r\nno colon\r\n\r\n{}"), id="header-no-colon"),
    pytest.param(SIMPLE_CT, _changeset_body(b"PUT /t HTTP/1.1\r\nBad Name: x\r\n\r\n{}"), id="header-space"),
    pytest.param(SIMPLE_CT, _changeset_body(b"PUT /t HTTP/1.1\r\nX: a\rb\r\n\r\n{}"), id="bare-cr-in-header"),
    pytest.param(SIMPLE_CT, _changeset_body(b"PUT /t\xff HTTP/1.1\r\n\r\n{}"), id="non-utf8-request-line"),
    pytest.param(
        SIMPLE_CT, _changeset_body(b"PUT /t HTTP/1.1\r\nX: \xc3\x28\r\n\r\n{}"), id="non-utf8-header"
    ),
    pytest.param(
        SIMPLE_CT,
        _changeset_body(INSERT).replace(b"application/http", b"application/json"),
        id="part-not-application-http",
    ),
    pytest.param(
        SIMPLE_CT,
        _changeset_body(INSERT).replace(b"Content-Type: application/http\r\n", b""),
        id="part-without-content-type",
    ),
    pytest.param(
        SIMPLE_CT,
        _changeset_body(INSERT).replace(b"binary", b"base64"),
        id="base64-transfer-encoding",
    ),
    pytest.param(
        SIMPLE_CT,
        _changeset_body(INSERT).replace(
            b"Content-Type: application/http", b"Content-Type: multipart/mixed; boundary=d1"
        ),
        id="nested-multipart-in-changeset",
    ),
    pytest.param(SIMPLE_CT, _changeset_body(INSERT, GET_ONE), id="get-inside-changeset"),
    pytest.param(
        SIMPLE_CT,
        _changeset_body(INSERT).removesuffix(b"--b1--\r\n")
        + _changeset_body(INSERT, batch="b1", changeset="c2"),
        id="two-changesets",
    ),
    pytest.param(
        SIMPLE_CT,
        b"--b1\r\nContent-Type: application/http\r\n\r\n" + GET_ONE + b"\r\n" + _changeset_body(INSERT),
        id="get-mixed-with-changeset",
    ),
    pytest.param(
        SIMPLE_CT,
        b"--b1\r\nContent-Type: application/http\r\n\r\n" + GET_ONE + b"\r\n--b1\r\n"
        b"Content-Type: application/http\r\n\r\n" + GET_ONE + b"\r\n--b1--\r\n",
        id="two-bare-gets",
    ),
    pytest.param(
        SIMPLE_CT,
        b"--b1\r\nContent-Type: application/http\r\n\r\n" + INSERT + b"\r\n--b1--\r\n",
        id="bare-write-outside-changeset",
    ),
    pytest.param(
        SIMPLE_CT,
        b"--b1\r\nContent-Type: text/plain\r\n\r\nhello\r\n--b1--\r\n",
        id="outer-part-text-plain",
    ),
]


@pytest.mark.parametrize(("content_type", "body"), _MALFORMED)
def test_malformed_input_is_invalid_input(content_type: str, body: bytes) -> None:
    with pytest.raises(ServiceError) as caught:
        parse_batch(content_type, body)
    assert caught.value.code == "InvalidInput"
    assert caught.value.status == 400


def test_part_cap_is_enforced_in_changeset() -> None:
    body = _changeset_body(*[INSERT] * (MAX_PARTS + 1))
    with pytest.raises(ServiceError) as caught:
        parse_batch(SIMPLE_CT, body)
    assert caught.value.code == "InvalidInput"


def test_part_cap_is_enforced_at_top_level() -> None:
    body = b"--b1\r\n\r\n" * (MAX_PARTS + 5)
    with pytest.raises(ServiceError):
        parse_batch(SIMPLE_CT, body)


def test_exactly_max_parts_are_accepted() -> None:
    batch = parse_batch(SIMPLE_CT, _changeset_body(*[INSERT] * MAX_PARTS))
    assert len(batch.operations) == MAX_PARTS


@pytest.mark.timeout(60)  # a hang guard for quadratic behaviour, not a speed measurement
@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"\n--b1 \t" * 400_000, id="padded-non-delimiters"),
        pytest.param(_changeset_body(b"PUT /t HTTP/1.1\r\nX: a\r\n" + b" b\r\n" * 500_000), id="folds"),
        pytest.param(_changeset_body(b"PUT /t HTTP/1.1\r\n" + b"X: a\r\n" * 500_000 + b"\r\n"), id="headers"),
        pytest.param(b"--b1\r\nContent-Type: " + b";" * 4_000_000, id="semicolons"),
    ],
)
def test_pathological_bodies_are_answered(body: bytes) -> None:
    try:
        batch = parse_batch(SIMPLE_CT, body)
    except ServiceError as error:
        assert error.code == "InvalidInput"
    else:
        assert len(batch.operations) == 1


# --------------------------------------------------------------------------------------------
# Properties of the parser
# --------------------------------------------------------------------------------------------

_BCHARS = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'()+_,-./:=? "
_TOKEN_CHARS = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz"
_TEXT = st.characters(exclude_categories=("Cc", "Cf", "Cs", "Co", "Cn"))


def _boundaries(prefix: str) -> st.SearchStrategy[str]:
    return st.text(_BCHARS, max_size=40).map(lambda suffix: (prefix + suffix).rstrip(" "))


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(_TEXT, max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(_TEXT, max_size=10), children, max_size=4)
    ),
    max_leaves=10,
)
_bodies = st.one_of(
    st.just(b""),
    st.builds(
        lambda value, ascii_only: json.dumps(value, ensure_ascii=ascii_only).encode(),
        _json_values,
        st.booleans(),
    ),
)
_header_fields = st.lists(
    st.tuples(st.text(_TOKEN_CHARS, min_size=1, max_size=20), st.text(_TEXT, max_size=30).map(str.strip)),
    max_size=6,
).map(tuple)
_targets = st.builds(
    lambda origin, path: origin + "/" + path,
    st.sampled_from(["", "http://127.0.0.1:10002", "https://acct.table.core.windows.net"]),
    st.text(st.characters(exclude_categories=("C", "Z")), max_size=60),
)
_content_ids = st.none() | st.text("0123456789abcdefXYZ-._", min_size=1, max_size=8)
_write_methods = st.sampled_from(["POST", "PUT", "PATCH", "MERGE", "DELETE"]) | st.text(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=1, max_size=8
).filter(lambda method: method != "GET")


def _operations(methods: st.SearchStrategy[str]) -> st.SearchStrategy[SubRequest]:
    return st.builds(SubRequest, methods, _targets, _header_fields, _bodies, _content_ids)


_changeset_batches = st.builds(
    BatchRequest,
    _boundaries("batch_"),
    _boundaries("changeset_"),
    st.lists(_operations(_write_methods), min_size=1, max_size=5).map(tuple),
)
_get_batches = st.builds(
    BatchRequest, _boundaries("batch_"), st.none(), _operations(st.just("GET")).map(lambda op: (op,))
)
_batches = _changeset_batches | _get_batches


@given(_batches)
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_render_then_parse_round_trips(batch: BatchRequest) -> None:
    assert parse_batch(*render_batch_request(batch)) == batch


@given(_batches)
@settings(max_examples=100)
def test_round_trip_with_bare_lf(batch: BatchRequest) -> None:
    content_type, body = render_batch_request(batch)
    assert parse_batch(content_type, body.replace(b"\r\n", b"\n")) == batch


def _expect_batch_or_invalid_input(content_type: str, body: bytes) -> None:
    """The fuzz contract: a BatchRequest, or ServiceError("InvalidInput"), nothing else."""
    try:
        result = parse_batch(content_type, body)
    except ServiceError as error:
        assert error.code == "InvalidInput"
    else:
        assert isinstance(result, BatchRequest)
        assert result.operations


@given(
    st.one_of(
        st.text(max_size=80), st.sampled_from([SIMPLE_CT, PY_CONTENT_TYPE, 'multipart/mixed; boundary="'])
    ),
    st.binary(max_size=400),
)
@settings(max_examples=500)
def test_arbitrary_bytes_give_a_batch_or_invalid_input(content_type: str, body: bytes) -> None:
    _expect_batch_or_invalid_input(content_type, body)


_SEEDS = [PY_BODY, JS_BODY, LEGACY_BODY, _changeset_body(INSERT, INSERT)]
_SEED_TYPES = [PY_CONTENT_TYPE, "multipart/mixed; boundary=batch_js1", LEGACY_CONTENT_TYPE, SIMPLE_CT]


@given(
    st.integers(0, len(_SEEDS) - 1),
    st.lists(st.tuples(st.floats(0, 1), st.integers(0, 8), st.binary(max_size=8)), min_size=1, max_size=6),
)
@settings(max_examples=500)
def test_mutated_real_bodies_give_a_batch_or_invalid_input(
    seed: int, edits: list[tuple[float, int, bytes]]
) -> None:
    body = _SEEDS[seed]
    for position, cut, insert in edits:
        at = int(position * len(body))
        body = body[:at] + insert + body[at + cut :]
    _expect_batch_or_invalid_input(_SEED_TYPES[seed], body)


# --------------------------------------------------------------------------------------------
# Rendering responses
# --------------------------------------------------------------------------------------------

SUCCESS_BATCH = "batchresponse_d22a5c62-a401-422d-b668-76c216a17730"
SUCCESS_CHANGESET = "changesetresponse_5fdfc54d-e6e2-42dd-b2f3-fb593bcb684a"
LOCATION = "https://acct.table.core.windows.net/batchTable(PartitionKey='batchTest',RowKey='1')"
AZURE_ETAG = "W/\"datetime'2021-06-04T21%3A59%3A53.7776758Z'\""
NO_CONTENT_HEADERS = (
    ("X-Content-Type-Options", "nosniff"),
    ("Cache-Control", "no-cache"),
    ("Preference-Applied", "return-no-content"),
    ("DataServiceVersion", "3.0;"),
    ("Location", LOCATION),
    ("DataServiceId", LOCATION),
    ("ETag", AZURE_ETAG),
)

# A successful batch response, with its single operation.
SUCCESS_BODY = b"".join(
    [
        b"--batchresponse_d22a5c62-a401-422d-b668-76c216a17730\r\n",
        b"Content-Type: multipart/mixed; boundary=changesetresponse_5fdfc54d-e6e2-42dd-b2f3-fb593bcb684a\r\n",
        b"\r\n",
        b"--changesetresponse_5fdfc54d-e6e2-42dd-b2f3-fb593bcb684a\r\n",
        b"Content-Type: application/http\r\n",
        b"Content-Transfer-Encoding: binary\r\n",
        b"\r\n",
        b"HTTP/1.1 204 No Content\r\n",
        b"X-Content-Type-Options: nosniff\r\n",
        b"Cache-Control: no-cache\r\n",
        b"Preference-Applied: return-no-content\r\n",
        b"DataServiceVersion: 3.0;\r\n",
        b"Location: https://acct.table.core.windows.net/batchTable(PartitionKey='batchTest',RowKey='1')\r\n",
        b"DataServiceId: https://acct.table.core.windows.net/batchTable(PartitionKey='batchTest',RowKey='1')\r\n",
        b"ETag: W/\"datetime'2021-06-04T21%3A59%3A53.7776758Z'\"\r\n",
        b"\r\n",
        b"\r\n",
        b"--changesetresponse_5fdfc54d-e6e2-42dd-b2f3-fb593bcb684a--\r\n",
        b"--batchresponse_d22a5c62-a401-422d-b668-76c216a17730--\r\n",
    ]
)

FAILURE_BATCH = "batchresponse_fe2c3109-0555-4011-abe3-55d0c32a4ca2"
FAILURE_CHANGESET = "changesetresponse_a2395820-82ca-4a23-bd49-290bfa44f306"
MINIMAL_JSON = "application/json;odata=minimalmetadata;streaming=true;charset=utf-8"
ERROR_JSON = (
    b'{"odata.error":{"code":"EntityAlreadyExists","message":{"lang":"en-US","value":'
    b'"1:The specified entity already exists.\\nRequestId:a1f47a48-9bb1-4b3d-8c6d-d49d382153e8'
    b'\\nTime:2014-01-31T10:28:02.5907425Z"}}}'
)
FAILURE_PART = SubResponse(
    409,
    (
        ("X-Content-Type-Options", "nosniff"),
        ("Cache-Control", "no-cache"),
        ("Preference-Applied", "return-no-content"),
        ("DataServiceVersion", "3.0;"),
        ("Content-Type", MINIMAL_JSON),
    ),
    ERROR_JSON,
    "1",
)

# A failed batch response, byte for byte.
FAILURE_BODY = b"".join(
    [
        b"--batchresponse_fe2c3109-0555-4011-abe3-55d0c32a4ca2\r\n",
        b"Content-Type: multipart/mixed; boundary=changesetresponse_a2395820-82ca-4a23-bd49-290bfa44f306\r\n",
        b"\r\n",
        b"--changesetresponse_a2395820-82ca-4a23-bd49-290bfa44f306\r\n",
        b"Content-Type: application/http\r\n",
        b"Content-Transfer-Encoding: binary\r\n",
        b"\r\n",
        b"HTTP/1.1 409 Conflict\r\n",
        b"Content-ID: 1\r\n",
        b"X-Content-Type-Options: nosniff\r\n",
        b"Cache-Control: no-cache\r\n",
        b"Preference-Applied: return-no-content\r\n",
        b"DataServiceVersion: 3.0;\r\n",
        b"Content-Type: application/json;odata=minimalmetadata;streaming=true;charset=utf-8\r\n",
        b"\r\n",
        ERROR_JSON + b"\r\n",
        b"--changesetresponse_a2395820-82ca-4a23-bd49-290bfa44f306--\r\n",
        b"--batchresponse_fe2c3109-0555-4011-abe3-55d0c32a4ca2--\r\n",
    ]
)


def test_success_response_matches_azure_bytes() -> None:
    rendered = render_batch_response(
        [SubResponse(204, NO_CONTENT_HEADERS, b"", None)],
        batch_boundary=SUCCESS_BATCH,
        changeset_boundary=SUCCESS_CHANGESET,
    )
    assert rendered == (f"multipart/mixed; boundary={SUCCESS_BATCH}", SUCCESS_BODY)


def test_failure_response_matches_azure_bytes() -> None:
    rendered = render_batch_response(
        [FAILURE_PART], batch_boundary=FAILURE_BATCH, changeset_boundary=FAILURE_CHANGESET
    )
    assert rendered == (f"multipart/mixed; boundary={FAILURE_BATCH}", FAILURE_BODY)


def test_default_boundaries_are_prefixed_random_uuid4s() -> None:
    content_type, body = render_batch_response([SubResponse(204, (), b"", None)])
    other_type, _ = render_batch_response([SubResponse(204, (), b"", None)])

    match = re.fullmatch(r"multipart/mixed; boundary=batchresponse_([0-9a-f-]{36})", content_type)
    assert match is not None
    assert uuid.UUID(match[1]).version == 4
    assert body.startswith(f"--batchresponse_{match[1]}\r\n".encode())
    assert body.endswith(f"--batchresponse_{match[1]}--\r\n".encode())
    changeset = re.search(rb"boundary=changesetresponse_([0-9a-f-]{36})\r\n", body)
    assert changeset is not None
    assert uuid.UUID(changeset[1].decode()).version == 4
    assert body.count(b"--changesetresponse_" + changeset[1] + b"--\r\n") == 1
    assert other_type != content_type


def test_content_id_is_first_header_after_status_line() -> None:
    _, body = render_batch_response(
        [SubResponse(204, (("ETag", 'W/"a"'),), b"", "0"), SubResponse(204, (("ETag", 'W/"b"'),), b"", "1")]
    )
    assert b'HTTP/1.1 204 No Content\r\nContent-ID: 0\r\nETag: W/"a"\r\n\r\n\r\n--changesetresponse_' in body
    assert b'HTTP/1.1 204 No Content\r\nContent-ID: 1\r\nETag: W/"b"\r\n\r\n\r\n--changesetresponse_' in body


def test_part_without_content_id_has_none() -> None:
    _, body = render_batch_response([SubResponse(204, (), b"", None)])
    assert b"Content-ID" not in body
    assert b"HTTP/1.1 204 No Content\r\n\r\n\r\n--changesetresponse_" in body


def test_body_is_followed_by_crlf_before_the_next_delimiter() -> None:
    entity = b'{"PartitionKey":"p","RowKey":"1"}'
    _, body = render_batch_response(
        [SubResponse(201, (("Content-Type", MINIMAL_JSON), ("ETag", 'W/"e"')), entity, "0")]
    )
    assert b'ETag: W/"e"\r\n\r\n' + entity + b"\r\n--changesetresponse_" in body


def test_header_case_is_preserved() -> None:
    _, body = render_batch_response([SubResponse(204, (("ETag", "x"), ("etag", "y"), ("x-MS-y", "z")), b"")])
    assert b"\r\nETag: x\r\netag: y\r\nx-MS-y: z\r\n" in body


@pytest.mark.parametrize(
    ("status", "line"),
    [
        (200, b"HTTP/1.1 200 OK\r\n"),
        (201, b"HTTP/1.1 201 Created\r\n"),
        (404, b"HTTP/1.1 404 Not Found\r\n"),
        (412, b"HTTP/1.1 412 Precondition Failed\r\n"),
        (413, b"HTTP/1.1 413 Request Entity Too Large\r\n"),
        (599, b"HTTP/1.1 599 \r\n"),
    ],
)
def test_reason_phrases(status: int, line: bytes) -> None:
    _, body = render_batch_response([SubResponse(status, (), b"")], in_changeset=True)
    assert line in body


def test_single_ok_part_is_rendered_outside_a_changeset() -> None:
    entity = b'{"PartitionKey":"p","RowKey":"r"}'
    part = SubResponse(200, (("Content-Type", MINIMAL_JSON), ("ETag", 'W/"g"')), entity, None)
    rendered = render_batch_response([part], batch_boundary="batchresponse_q")
    assert rendered == (
        "multipart/mixed; boundary=batchresponse_q",
        b"--batchresponse_q\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nContent-Type: "
        + MINIMAL_JSON.encode()
        + b'\r\nETag: W/"g"\r\n\r\n'
        + entity
        + b"\r\n--batchresponse_q--\r\n",
    )
    assert parse_batch_response(*rendered) == [part]


def test_failed_bare_get_can_be_forced_outside_a_changeset() -> None:
    part = SubResponse(404, (("Content-Type", MINIMAL_JSON),), b'{"odata.error":{}}', None)
    content_type, body = render_batch_response([part], in_changeset=False)
    assert b"changesetresponse" not in body
    assert parse_batch_response(content_type, body) == [part]


def test_in_changeset_forces_a_single_ok_part_into_a_changeset() -> None:
    _, body = render_batch_response([SubResponse(200, (), b"{}")], in_changeset=True)
    assert b"boundary=changesetresponse_" in body


def test_empty_changeset_response_still_closes() -> None:
    _, body = render_batch_response(
        [], batch_boundary="batchresponse_e", changeset_boundary="changesetresponse_e"
    )
    assert body == (
        b"--batchresponse_e\r\nContent-Type: multipart/mixed; boundary=changesetresponse_e\r\n\r\n"
        b"--changesetresponse_e--\r\n--batchresponse_e--\r\n"
    )


def test_quoted_boundary_is_rendered_when_needed() -> None:
    batch = replace(_py_batch(cased=False), batch_boundary="batch a:b", changeset_boundary='changeset "q"')
    content_type, body = render_batch_request(batch)
    assert content_type == 'multipart/mixed; boundary="batch a:b"'
    assert b'boundary="changeset \\"q\\""\r\n' in body
    assert parse_batch(content_type, body) == batch


# --------------------------------------------------------------------------------------------
# How the SDKs read responses
# --------------------------------------------------------------------------------------------


class _BytesSocket:
    """Just enough of a socket for ``http.client.HTTPResponse`` to read from bytes."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def makefile(self, *_: object) -> io.BytesIO:
        return io.BytesIO(self._data)


def parse_batch_response(content_type: str, body: bytes) -> list[SubResponse]:
    """Read a batch response the way azure-core does: ``email`` for MIME, ``http.client`` for parts."""
    message = email.message_from_bytes(b"Content-Type: " + content_type.encode("ascii") + b"\r\n\r\n" + body)
    return list(_walk_parts(message))


def _walk_parts(message: Message) -> Iterator[SubResponse]:
    payload = message.get_payload()
    # A multipart with no parts comes back as "" (azure-core then iterates nothing).
    assert isinstance(payload, list) or payload == "", "not multipart"
    for part in payload:
        assert isinstance(part, Message)
        kind = part.get_content_type()
        if kind == "multipart/mixed":
            yield from _walk_parts(part)
        else:
            assert kind == "application/http"
            raw = part.get_payload(decode=True)
            assert isinstance(raw, bytes)
            yield _read_http_response(raw)


def _read_http_response(raw: bytes) -> SubResponse:
    response = http.client.HTTPResponse(_BytesSocket(raw))  # type: ignore[arg-type]
    response.begin()
    headers = response.getheaders()
    content_id = next((value for name, value in headers if name.lower() == "content-id"), None)
    others = tuple((name, value) for name, value in headers if name.lower() != "content-id")
    return SubResponse(response.status, others, response.read(), content_id)


def js_transaction_parts(body: bytes) -> list[tuple[int, str | None]]:
    """Read a batch response the way @azure/data-tables does: split, drop the ends, regex."""
    pieces = body.decode().split("--changesetresponse_")[1:-1]
    results = []
    for piece in pieces:
        status = re.search(r"HTTP/1.1 ([0-9]*)", piece)
        assert status is not None
        etag = re.search(r"ETag: (.*)", piece)
        results.append((int(status[1]), etag[1].rstrip("\r") if etag else None))
    return results


def test_stdlib_reads_the_spec_responses() -> None:
    assert parse_batch_response(f"multipart/mixed; boundary={SUCCESS_BATCH}", SUCCESS_BODY) == [
        SubResponse(204, NO_CONTENT_HEADERS, b"", None)
    ]
    assert parse_batch_response(f"multipart/mixed; boundary={FAILURE_BATCH}", FAILURE_BODY) == [FAILURE_PART]


def test_js_rule_reads_status_and_etag_of_every_part() -> None:
    parts = [
        SubResponse(
            204,
            (("ETag", f"W/\"datetime'{i}'\""), ("Location", f"/t(PartitionKey='p',RowKey='{i}')")),
            b"",
            str(i),
        )
        for i in range(3)
    ] + [SubResponse(204, (("DataServiceVersion", "1.0;"),), b"", "3")]
    _, body = render_batch_response(parts)
    assert js_transaction_parts(body) == [
        (204, "W/\"datetime'0'\""),
        (204, "W/\"datetime'1'\""),
        (204, "W/\"datetime'2'\""),
        (204, None),
    ]


def test_js_rule_finds_one_line_error_json() -> None:
    _, body = render_batch_response([FAILURE_PART])
    (piece,) = body.decode().split("--changesetresponse_")[1:-1]
    match = re.search(r"\{(.*)\}", piece)
    assert match is not None
    error = json.loads(match[0])["odata.error"]
    assert error["code"] == "EntityAlreadyExists"
    assert error["message"]["value"].startswith("1:")


_response_header_names = st.text(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-", min_size=1, max_size=16
).filter(
    lambda name: (
        name[0].isalpha() and name.lower() not in {"content-id", "content-length", "transfer-encoding"}
    )
)
_response_header_values = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=30)
_response_parts = st.builds(
    SubResponse,
    st.sampled_from([200, 201, 204, 400, 404, 409, 412, 413, 500]),
    st.lists(st.tuples(_response_header_names, _response_header_values), max_size=5).map(tuple),
    _bodies,
    _content_ids,
).map(lambda part: replace(part, body=b"") if part.status == 204 else part)


@given(st.lists(_response_parts, max_size=6), st.booleans())
@settings(max_examples=200)
def test_rendered_responses_read_back_with_stdlib_and_js_rules(
    parts: list[SubResponse], with_etag: bool
) -> None:
    if with_etag:
        parts = [replace(part, headers=(*part.headers, ("ETag", f'W/"{i}"'))) for i, part in enumerate(parts)]
    content_type, body = render_batch_response(parts, in_changeset=True)

    assert parse_batch_response(content_type, body) == parts
    js = js_transaction_parts(body)
    assert [status for status, _ in js] == [part.status for part in parts]
    if with_etag:
        assert [etag for _, etag in js] == [f'W/"{i}"' for i in range(len(parts))]


# --------------------------------------------------------------------------------------------
# End to end with azure-data-tables (its own request bytes, its own response parsing)
# --------------------------------------------------------------------------------------------

DEV_CONNECTION = (
    "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
    "AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;"
    "TableEndpoint=http://127.0.0.1:10002/devstoreaccount1;"
)


class _SdkTransport(HttpTransport):
    """An in-memory transport: parses the SDK's batch and answers with a rendered response."""

    def __init__(self, reply: Callable[[BatchRequest], tuple[str, bytes]]) -> None:
        self._reply = reply
        self.requests: list[HttpRequest] = []

    def __enter__(self) -> _SdkTransport:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def open(self) -> None:
        return None

    def close(self) -> None:
        return None

    def send(self, request: Any, **kwargs: Any) -> Any:
        # azure-core's own http.client-backed response type (private, but it is exactly the
        # class azure-core uses to rebuild batch parts, so the code path is the real one).
        from azure.core.rest._http_response_impl import RestHttpClientTransportResponse

        self.requests.append(request)
        content_type, body = self._reply(parse_batch(request.headers["Content-Type"], request.body))
        head = f"HTTP/1.1 202 Accepted\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
        raw = http.client.HTTPResponse(_BytesSocket(head.encode() + body), method=request.method)  # type: ignore[arg-type]
        raw.begin()
        response = RestHttpClientTransportResponse(request=request, internal_response=raw)
        response.read()
        return response


def _table_client(transport: _SdkTransport) -> TableClient:
    return TableClient.from_connection_string(DEV_CONNECTION, "sdktable", transport=transport)


def _success(batch: BatchRequest) -> tuple[str, bytes]:
    parts = [
        SubResponse(204, (("ETag", f"W/\"datetime'{i}'\""),), b"", op.content_id)
        for i, op in enumerate(batch.operations)
    ]
    return render_batch_response(parts)


def test_python_sdk_reads_rendered_success() -> None:
    client = _table_client(_SdkTransport(_success))
    result = client.submit_transaction(
        [("upsert", {"PartitionKey": "p", "RowKey": "1"}), ("delete", {"PartitionKey": "p", "RowKey": "2"})]
    )
    assert [dict(item) for item in result] == [{"etag": "W/\"datetime'0'\""}, {"etag": "W/\"datetime'1'\""}]


def test_python_sdk_reads_rendered_failure() -> None:
    def failure(batch: BatchRequest) -> tuple[str, bytes]:
        error = b'{"odata.error":{"code":"EntityNotFound","message":{"lang":"en-US","value":"1:gone"}}}'
        part = SubResponse(404, (("Content-Type", MINIMAL_JSON),), error, batch.operations[1].content_id)
        return render_batch_response([part])

    client = _table_client(_SdkTransport(failure))
    with pytest.raises(TableTransactionError) as caught:
        client.submit_transaction(
            [
                ("upsert", {"PartitionKey": "p", "RowKey": "1"}),
                ("delete", {"PartitionKey": "p", "RowKey": "2"}),
            ]
        )
    assert caught.value.index == 1
    assert caught.value.error_code == "EntityNotFound"  # type: ignore[attr-defined]
