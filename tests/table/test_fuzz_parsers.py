"""Hostile input, in process (issue #7): every parser that reads network bytes answers with a
``ServiceError`` (an Azure error code) or a result, and nothing else ever escapes.

Any other exception reaches the ASGI app's catch-all and becomes a 500 ``InternalError``, which
SDKs retry three times, for a request that can never succeed. Targets, 300 cases each:

* resource paths: ``tabulae.table.api.urls`` (segments, key predicates) and the router, on raw
  paths with percent escapes that decode to invalid UTF-8, quotes, commas and parentheses; and
  keys encoded the way each SDK encodes them come back unchanged;
* entity JSON: ``parse_json_pairs`` then ``entity_from_pairs``, on objects with values of the
  wrong type for their Edm annotation, huge numbers, lone surrogates, duplicate names, too many
  properties, deep nesting, invalid UTF-8;
* ``$batch`` bodies: ``parse_batch`` on changesets mutated byte by byte, then each operation
  through the router and the entity parser as the server does;
* ``$filter``: ``parse_filter`` on grammar-built and mangled filters, then planning, compiling and
  evaluating the result against a few entities (and as a table filter), and SAS key-range clipping;
* SAS: query-string decoding, ``parse_sas`` and ``verify_sas`` (half of the tokens correctly
  signed, so the checks after the signature are reached), then ``SasGrant.check``;
* XML: ``parse_acl`` and ``parse_service_properties``, and storing the result as Set Service
  Properties does;
* Shared Key: ``verify_authorization`` on mangled headers, half of them correctly signed;
* small values from headers and the query: ``Accept``/``$format``, ``$top``, continuation
  tokens, table names.

Inputs are what the wire can deliver: raw paths and headers arrive as latin-1 text, query values
as strict UTF-8, so only JSON ``\\u`` escapes can carry a lone surrogate. Each test prints how many
cases it ran. The HTTP-level fuzzer (``tests/system/test_reliability_fuzz.py``) reuses these
strategies.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote
from xml.sax.saxutils import escape

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tabulae.auth.sas import StoredPolicy, account_sas_string_to_sign, parse_sas
from tabulae.auth.shared_key import verify_authorization
from tabulae.http.addressing import decode_segments
from tabulae.http.documents import parse_acl, parse_service_properties
from tabulae.http.messages import Request
from tabulae.model.entity import encode_properties, entity_from_pairs, parse_json_pairs
from tabulae.model.errors import CATALOGUE, ServiceError
from tabulae.model.names import check_table_name
from tabulae.model.policies import ServiceProperties, encode_service_properties
from tabulae.table.api.batch import parse_batch
from tabulae.table.api.odata import metadata_level
from tabulae.table.api.operations import Operation
from tabulae.table.api.routing import Resource, resolve
from tabulae.table.api.sas import table_sas_string_to_sign, verify_sas
from tabulae.table.api.urls import parse_key_predicate, parse_segment
from tabulae.table.paging import decode_token
from tabulae.table.query.evaluate import compile_predicate, compile_table_predicate
from tabulae.table.query.parser import parse_filter
from tabulae.table.query.plan import clip_to_range, plan_query
from tabulae.table.service import check_top

ACCOUNT = "devstoreaccount1"
KEY_B64 = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
KEY = base64.b64decode(KEY_B64)
ACCOUNTS = {ACCOUNT: [KEY]}
CASES = 300

FUZZ = settings(
    max_examples=CASES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


# --------------------------------------------------------------------------------------------
# Running a target: only ServiceError may escape
# --------------------------------------------------------------------------------------------


@contextmanager
def only_service_errors() -> Iterator[None]:
    """Let a ``ServiceError`` with a catalogued code pass; any other exception fails the case."""
    try:
        yield
    except ServiceError as error:
        assert error.code in CATALOGUE
        assert error.status == CATALOGUE[error.code][0]


def run_counted(name: str, property_test: Callable[[], None], counter: list[int], capsys: Any) -> None:
    """Run a ``@given`` function, then print and check how many cases it ran."""
    property_test()
    with capsys.disabled():
        print(f"\n[fuzz] {name}: {counter[0]} cases")
    assert counter[0] >= CASES


# --------------------------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------------------------


class Blob(bytes):
    """Bytes whose repr stays short in Hypothesis reports (big inputs are the point here)."""

    def __repr__(self) -> str:
        text = bytes.__repr__(self)
        return text if len(text) <= 600 else f"<{len(self)} bytes: {text[:300]}…{text[-100:]}>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


class Text(str):
    """A str with a short repr, for the same reason."""

    __slots__ = ()

    def __repr__(self) -> str:
        text = str.__repr__(self)
        return text if len(text) <= 600 else f"<{len(self)} chars: {text[:300]}…{text[-100:]}>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


class RawJson(str):
    """JSON text written verbatim (numbers that json.dumps cannot write)."""

    __slots__ = ()


def wire(text: str) -> str:
    """What the server sees of text sent as UTF-8 in a request line or header: latin-1 decoded."""
    return text.encode("utf-8", "surrogatepass").decode("latin-1")


def percent(data: bytes) -> str:
    return "".join(f"%{byte:02X}" for byte in data)


def mutate(data: bytes, edits: list[tuple[int, int, bytes]]) -> bytes:
    """Apply byte edits: (kind, position, bytes) with kind 0 insert, 1 delete, 2 overwrite, 3 cut."""
    out = bytearray(data)
    for kind, position, chunk in edits:
        at = position % (len(out) + 1)
        if kind == 0:
            out[at:at] = chunk
        elif kind == 1:
            del out[at : at + max(1, len(chunk))]
        elif kind == 2:
            out[at : at + len(chunk)] = chunk
        else:
            del out[at:]
    return bytes(out)


NASTY_STRINGS = [
    "",
    " ",
    "'",
    "''",
    "'''",
    "(",
    ")",
    "()",
    ",",
    "=",
    "/",
    "\\",
    "#",
    "?",
    "\x00",
    "\x7f",
    "\x85",
    "é",
    "😀",
    "\u202e",
    "\ufeff",
    "²",
    "٣",
    "１",
    "NaN",
    "Infinity",
    "-Infinity",
    "1e309",
    "-0",
    "9" * 40,
    "0x10",
    "true",
    "null",
    "PartitionKey",
    "RowKey",
]
# Lone surrogates reach the server only through JSON \u escapes: URLs, queries and headers are
# decoded as strict UTF-8 or as latin-1, which never yield one.
SURROGATES = ["\ud800", "\udfff", "a\udc80b", "\ud83d"]

text_chars = st.characters(codec="utf-8")  # no lone surrogates (not encodable as UTF-8)
any_chars = st.characters(max_codepoint=0x10FFFF)  # lone surrogates included
# Long values are built by a map, so that strategy reprs (which Hypothesis computes) stay small.
long_text = st.sampled_from([4301, 5000, 40000]).map(lambda n: "9" * n)
short_text = st.one_of(st.text(text_chars, max_size=12), st.sampled_from(NASTY_STRINGS), long_text)
json_text = st.one_of(short_text, st.sampled_from(SURROGATES), st.text(any_chars, max_size=8))
header_text = short_text.map(wire)

byte_edits = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 1 << 20), st.binary(max_size=6)), min_size=1, max_size=3
)
edit_or_not = st.one_of(st.just([]), byte_edits)


# Resource paths ------------------------------------------------------------------------------

NASTY_ESCAPES = [
    "%",
    "%2",
    "%zz",
    "%2F",
    "%5C",
    "%27",
    "%27%27",
    "%00",
    "%0A",
    "%C0%80",
    "%ED%A0%80",
    "%FF",
    "%F4%90%80%80",
    "%E2%80%AE",
    "%EF%BB%BF",
    "%25",
    "%2525",
    "+",
    "%20",
    "%28",
    "%29",
    "%2C",
    "%3D",
]

path_piece = st.one_of(
    st.text(st.sampled_from("abcXYZ019'(),=+-_.~!*$&;:@ "), min_size=1, max_size=6),
    st.binary(min_size=1, max_size=4).map(percent),
    st.sampled_from(NASTY_ESCAPES),
    st.text(text_chars, min_size=1, max_size=3).map(lambda s: quote(s, safe="")),
)
raw_fragment = st.lists(path_piece, max_size=5).map("".join)
table_names = st.one_of(
    st.sampled_from(
        ["fuzztable", "FuzzTable", "Tables", "tables", "ab", "a" * 64, "$batch", "$metadata", ""]
    ),
    st.text(st.sampled_from("abcXYZ019-_"), max_size=10),
    raw_fragment,
)


def _literal(value: str, encode: bool) -> str:
    doubled = value.replace("'", "''")
    return "'" + (quote(doubled, safe="") if encode else doubled) + "'"


BROKEN_PREDICATES = [
    "",
    "''",
    "'x'",
    "PartitionKey='a'",
    "PartitionKey='a',PartitionKey='b'",
    "RowKey='a',RowKey='b',PartitionKey='c'",
    "'a''",
    "PartitionKey='a'RowKey='b'",
    "PartitionKey=a,RowKey=b",
    "PartitionKey='a',RowKey='b',",
    ",,",
    "PartitionKey=='a',RowKey='b'",
    "partitionkey='a',rowkey='b'",
    "PartitionKey='a' , RowKey='b' x",
]


@st.composite
def key_predicates(draw: st.DrawFn) -> str:
    """``(PartitionKey='…',RowKey='…')`` in valid, sloppy and broken shapes (decoded text)."""
    shape = draw(st.integers(0, 5))
    pk, rk = draw(short_text), draw(short_text)
    encode = draw(st.booleans())
    if shape == 0:
        return f"(PartitionKey={_literal(pk, encode)},RowKey={_literal(rk, encode)})"
    if shape == 1:
        ws = draw(st.sampled_from(["", " ", "%20", "  "]))
        return f"({ws}RowKey{ws}={ws}{_literal(rk, encode)}{ws},{ws}PartitionKey={_literal(pk, encode)}{ws})"
    if shape == 2:
        legacy_pk = quote(pk.replace("'", "''"), safe="")
        return f"(PartitionKey=%27{legacy_pk}%27,RowKey=%27{quote(rk, safe='')}%27)"
    if shape == 3:
        return "(" + draw(raw_fragment) + ")"
    if shape == 4:
        return "(" + draw(st.sampled_from(BROKEN_PREDICATES)) + ")"
    return draw(raw_fragment)


@st.composite
def raw_paths(draw: st.DrawFn) -> str:
    """A raw request path, ``/account/resource…``, as the server receives it (latin-1 text)."""
    account = draw(
        st.sampled_from(
            [ACCOUNT, ACCOUNT, ACCOUNT, f"{ACCOUNT}-secondary", "other", "", "%64evstoreaccount1"]
        )
    )
    segments = [draw(table_names) + draw(st.one_of(st.just(""), key_predicates()))]
    if draw(st.integers(0, 6)) == 0:
        segments.append(draw(raw_fragment))
    if draw(st.integers(0, 8)) == 0:
        segments.append("")
    if draw(st.integers(0, 10)) == 0:
        segments = [f"Tables({_literal(draw(short_text), draw(st.booleans()))})"]
    return Text(wire("/" + account + "/" + "/".join(segments)))


hosts = st.one_of(
    st.sampled_from(
        [
            "127.0.0.1:10002",
            "localhost",
            "[::1]:10002",
            "devstoreaccount1.table.core.windows.net",
            "devstoreaccount1-secondary.table.localhost",
            "other.table.core.windows.net",
            "[",
            "[::1",
            "",
            ":",
            "a.b.c.d.e",
            "256.1.1.1",
            "devstoreaccount1",
        ]
    ),
    st.text(st.sampled_from("ab.:[]1-"), max_size=12),
    header_text,
)


# Entity JSON ---------------------------------------------------------------------------------

RAW_NUMBERS = [
    "1e400",
    "-1e400",
    "1E+308",
    "1.7976931348623157E+308",
    "1.8e308",
    "4.9e-324",
    "1e-400",
    "-0",
    "-0.0",
    "0.1",
    "2147483647",
    "2147483648",
    "-2147483649",
    "9223372036854775807",
    "9223372036854775808",
    "1" * 30,
    "1" * 4301,
    "1." + "0" * 400 + "1",
    "123456789012345678901234567890.5",
]
TYPED_EDGES: dict[str | None, list[Any]] = {
    "Edm.Int32": [
        "²",
        "--5",
        "+-5",
        "٣٤",
        "１２",
        "+5",
        " 7 ",
        "-",
        "",
        "9" * 20,
        "9" * 4400,
        "2147483648",
        "-2147483649",
        "0x10",
        "1e3",
        "1.0",
        1.0,
        True,
        None,
        [],
        {},
        RawJson("1" * 4301),
        RawJson("1e400"),
        RawJson("2147483648"),
    ],
    "Edm.Int64": [
        "²",
        "٣٤",
        "９",
        "+5",
        " 7 ",
        "-0",
        "",
        "9" * 19,
        "9" * 4400,
        "9223372036854775808",
        "0b1",
        5,
        5.5,
        False,
        RawJson("1" * 4301),
        RawJson("9223372036854775808"),
        RawJson("1e400"),
    ],
    "Edm.Double": [
        "NaN",
        "Infinity",
        "-Infinity",
        "nan",
        "inf",
        "1e309",
        "-1e309",
        "1e-400",
        "0x1p3",
        "²",
        "1_0",
        "",
        " 1 ",
        "9" * 4400,
        True,
        None,
        RawJson("1e400"),
        RawJson("1" * 4301),
        RawJson("-0.0"),
    ],
    "Edm.DateTime": [
        "0001-01-01T00:00:00Z",
        "1600-12-31T23:59:59.9999999Z",
        "1601-01-01T00:00:00Z",
        "9999-12-31T23:59:59.9999999Z",
        "9999-12-31T23:59:59+00:01",
        "9999-12-31T23:00:00-23:59",
        "0000-01-01T00:00:00Z",
        "2024-02-30T00:00:00Z",
        "2024-01-01T00:00:00+99:99",
        "2024-01-01T24:00:00Z",
        "2024-01-01T00:00:00." + "9" * 50 + "Z",
        "٢٠٢٤-٠١-٠١T٠٠:٠٠:٠٠Z",
        "2024-01-01",
        "",
        5,
        None,
    ],
    "Edm.Guid": [
        "{3f2504e0-4f89-11d3-9a0c-0305e82c3301}",
        "3F2504E0-4F89-11D3-9A0C-0305E82C3301",
        "not-a-guid",
        "٣f2504e0-4f89-11d3-9a0c-0305e82c3301",
        "",
        5,
    ],
    "Edm.Binary": ["AAEC", "AAE=", "AAE", "====", "", "A" * 87384, "A" * 87400, "AA\nEC", "٣", 5, None],
    "Edm.Boolean": ["true", "false", "True", "1", 1, 0, True, None, ""],
    "Edm.String": [
        1,
        True,
        None,
        RawJson("1.5"),
        "x" * 32768,
        "x" * 32769,
        "é" * 16385,
        "😀" * 16385,
        *SURROGATES,
    ],
    None: [
        RawJson("1e400"),
        RawJson("-0"),
        RawJson("1" * 4301),
        RawJson("2147483648"),
        "x" * 32769,
        *SURROGATES,
    ],
}
EDM_TYPES = [t for t in TYPED_EDGES if t is not None] + ["Edm.Byte", "edm.int64", "", "Edm.String "]
KEY_EDGES: list[Any] = [
    "",
    "a/b",
    "a\\b",
    "a#b",
    "a?b",
    "\x00",
    "\x1f",
    "\x7f",
    "\x9f",
    "x" * 1024,
    "x" * 1025,
    "é" * 1025,
    "😀" * 512,
    "😀" * 513,
    *SURROGATES,
    5,
    None,
    True,
    [],
    {},
]

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**25), max_value=10**25),
    st.floats(allow_nan=False, allow_infinity=False),
    json_text,
    st.sampled_from(RAW_NUMBERS).map(RawJson),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=6,
)
property_names = st.one_of(
    st.sampled_from(
        [
            "PartitionKey",
            "RowKey",
            "Timestamp",
            "odata.etag",
            "odata.type",
            "odata.metadata",
            "Name",
            "n",
            "_x",
            "a1",
            "x" * 255,
            "x" * 256,
            "1abc",
            "a-b",
            "a b",
            "é",
            "Ünïcödé",
            "a@b",
            "@odata.type",
            "",
            "\ud800",
        ]
    ),
    st.text(st.sampled_from("abcXY_1é-@."), max_size=8),
)


@st.composite
def typed_property(draw: st.DrawFn) -> list[tuple[str, Any]]:
    """A property, usually with an Edm annotation and an awkward value for that type."""
    name = draw(property_names)
    kind = draw(st.sampled_from([*TYPED_EDGES, *TYPED_EDGES, "Edm.Byte", "", "edm.int64"]))
    edges = TYPED_EDGES.get(kind, TYPED_EDGES[None])
    value = draw(st.one_of(st.sampled_from(edges), st.sampled_from(edges), json_scalars, json_values))
    annotation = [] if kind is None else [(name + "@odata.type", kind)]
    return [*annotation, (name, value)] if draw(st.integers(0, 5)) else [(name, value), *annotation]


entity_keys = st.one_of(st.sampled_from(KEY_EDGES), json_text, json_values)


@st.composite
def json_pairs(draw: st.DrawFn) -> list[tuple[str, Any]]:
    """Members of a JSON object: usually both keys, typed properties, sometimes duplicates."""
    pairs: list[tuple[str, Any]] = []
    if draw(st.integers(0, 5)):
        pairs.append(("PartitionKey", draw(entity_keys)))
    if draw(st.integers(0, 5)):
        pairs.append(("RowKey", draw(entity_keys)))
    if draw(st.integers(0, 6)) == 0:
        pairs.append(
            (
                draw(st.sampled_from(["PartitionKey", "RowKey"])) + "@odata.type",
                draw(st.sampled_from(EDM_TYPES)),
            )
        )
    for _ in range(draw(st.integers(0, 4))):
        pairs.extend(draw(typed_property()))
    if pairs and draw(st.integers(0, 6)) == 0:
        pairs.append(draw(st.sampled_from(pairs)))  # a duplicate name
    if draw(st.integers(0, 20)) == 0:
        pairs.extend((f"p{i}", i) for i in range(draw(st.sampled_from([250, 253, 300]))))
    return pairs


def dump_json(value: Any) -> str:
    if isinstance(value, RawJson):
        return str(value)
    if isinstance(value, list):
        return "[" + ",".join(dump_json(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(json.dumps(k) + ":" + dump_json(v) for k, v in value.items()) + "}"
    return json.dumps(value)


def dump_pairs(pairs: list[tuple[str, Any]]) -> bytes:
    text = "{" + ",".join(json.dumps(name) + ":" + dump_json(value) for name, value in pairs) + "}"
    return text.encode("utf-8", "surrogatepass")


json_bodies = st.one_of(
    json_pairs().map(dump_pairs),
    json_pairs().map(dump_pairs),
    st.builds(mutate, json_pairs().map(dump_pairs), byte_edits),
    st.integers(1, 20000).map(
        lambda depth: b'{"PartitionKey":"p","RowKey":"r","a":' + b"[" * depth + b"]" * depth + b"}"
    ),
    st.integers(1, 20000).map(lambda depth: b'{"a":' * depth + b"1" + b"}" * depth),
    st.sampled_from(
        [
            b"",
            b"null",
            b"[]",
            b"[{}]",
            b"1",
            b'"x"',
            b"{",
            b"}",
            b'{"a":}',
            b"\xff\xfe{}",
            b"\xef\xbb\xbf{}",
            b'{"PartitionKey":"p","RowKey":"r","a":NaN}',
            b'{"PartitionKey":"p","RowKey":"r","a":Infinity}',
            b'{"PartitionKey":"p","RowKey":"r","a":"\xed\xa0\x80"}',
            b'{"PartitionKey":"p","RowKey":"r"}  x',
        ]
    ),
    st.binary(max_size=64),
).map(Blob)


# $batch bodies ---------------------------------------------------------------------------------

boundaries = st.one_of(
    st.uuids().map(lambda u: f"batch_{u}"),
    st.text(st.sampled_from("abc123'()+_,-./:=? "), min_size=1, max_size=20),
    st.sampled_from(["", " ", "a" * 71, "a" * 201, '"q"', "é", "--", "b\r\nx"]),
)
simple_paths = st.builds(
    lambda table, keys, fragment: wire(f"/{ACCOUNT}/{table}{keys}{fragment}"),
    st.sampled_from(["fuzztable", "FuzzTable", "other", "Tables", "$batch", ""]),
    st.one_of(
        st.just(""),
        st.just("()"),
        st.builds(
            lambda pk, rk: f"(PartitionKey={_literal(pk, True)},RowKey={_literal(rk, True)})",
            short_text,
            short_text,
        ),
    ),
    st.one_of(st.just(""), st.just(""), raw_fragment),
)
batch_targets = st.one_of(
    st.builds(lambda p: f"http://127.0.0.1:10002{p}", simple_paths),
    simple_paths,
    st.sampled_from(
        [
            f"http://127.0.0.1:10002/{ACCOUNT}/fuzztable",
            f"http://127.0.0.1:10002/{ACCOUNT}/fuzztable(PartitionKey='p',RowKey='r')",
            f"/{ACCOUNT}/fuzztable(PartitionKey='p',RowKey='r')",
            "http://x",
            "http://",
            "*",
            "fuzztable",
            "",
            f"https://other:1/{ACCOUNT}/fuzztable?$filter=x",
        ]
    ),
)
batch_methods = st.sampled_from(
    ["POST", "PUT", "MERGE", "PATCH", "DELETE", "GET", "HEAD", "OPTIONS", "FOO", "post"]
)
sub_header_lines = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "If-Match: *",
                "If-Match: W/\"datetime'2024-01-01T00%3A00%3A00Z'\"",
                "If-Match: garbage",
                "If-Match:",
                "X-HTTP-Method: MERGE",
                "X-HTTP-Method: DELETE",
                "X-HTTP-Method: GET",
                "Prefer: return-no-content",
                "Prefer: return-content",
                "Accept: application/json;odata=fullmetadata",
                "Accept: application/atom+xml",
                "Content-Type: application/json",
                "Content-Length: 99999",
                "Content-ID: 1",
                " folded",
                "bad header",
                ": empty name",
                "X-Ctl: a\x01b",
            ]
        ),
        st.builds(
            lambda n, v: f"{n}: {v}", st.text(st.sampled_from("abXY-"), min_size=1, max_size=6), short_text
        ),
    ),
    max_size=4,
)


batch_bodies = st.one_of(
    st.just(b""),
    json_pairs().map(dump_pairs),
    st.sampled_from(
        [b"{", b"null", b'{"PartitionKey":"p","RowKey":"r"}', b'{"PartitionKey":"p","RowKey":"\\ud800"}']
    ),
)


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


@st.composite
def batch_requests(draw: st.DrawFn) -> tuple[str, bytes]:
    """(Content-Type, body) of a changeset or a bare GET, then maybe mangled."""
    eol = draw(st.sampled_from(["\r\n", "\r\n", "\n"]))
    outer = draw(boundaries)
    inner = draw(boundaries)
    parts = []
    for index in range(draw(st.integers(0, 3))):
        method = draw(batch_methods)
        target = draw(batch_targets)
        headers = draw(sub_header_lines)
        body = draw(batch_bodies)
        mime = ["Content-Type: application/http", "Content-Transfer-Encoding: binary"]
        if draw(st.booleans()):
            mime.append(f"Content-ID: {index}")
        if draw(st.integers(0, 8)) == 0:
            mime = draw(sub_header_lines)
        head = eol.join([*mime, "", f"{method} {target} HTTP/1.1", *headers])
        parts.append(_utf8(head) + _utf8(eol + eol) + body + _utf8(eol))
    if draw(st.integers(0, 5)) == 0:  # a bare GET outside a changeset
        target = draw(batch_targets)
        get = _utf8(f"Content-Type: application/http{eol}{eol}GET {target} HTTP/1.1{eol}{eol}")
        body = _utf8(f"--{outer}{eol}") + get + _utf8(f"--{outer}--{eol}")
    else:
        changeset = b"".join(_utf8(f"--{inner}{eol}") + part for part in parts) + _utf8(f"--{inner}--{eol}")
        head = _utf8(f"--{outer}{eol}Content-Type: multipart/mixed; boundary={inner}{eol}{eol}")
        body = head + changeset + _utf8(f"{eol}--{outer}--{eol}")
    content_type = draw(
        st.one_of(
            st.just(f"multipart/mixed; boundary={outer}"),
            st.just(f'multipart/mixed; boundary="{outer}"'),
            st.sampled_from(
                [
                    "multipart/mixed",
                    "multipart/mixed; boundary=",
                    "application/json",
                    "",
                    'multipart/mixed; boundary="unterminated',
                    "MULTIPART/MIXED; BOUNDARY=x; charset=utf-8",
                    "multipart/mixed;;boundary=x;",
                ]
            ),
            header_text,
        )
    )
    return Text(wire(content_type)), Blob(mutate(body, draw(edit_or_not)))


# $filter ---------------------------------------------------------------------------------------

filter_properties = st.sampled_from(
    [
        "PartitionKey",
        "RowKey",
        "Timestamp",
        "TableName",
        "n",
        "s",
        "b",
        "d",
        "g",
        "x",
        "big",
        "f",
        "IsActive",
        "Missing",
        "Name/Sub",
        "_p",
        "é",
        "true1",
        "not1",
    ]
)
DATETIME_LITERALS = [
    "2020-01-01T00:00:00Z",
    "2020-09-17T00:00:00.111Z",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59.9999999Z",
    "9999-12-31T23:59:59-23:59",
    "0001-01-01T00:00:00+23:59",
    "2024-02-30T00:00:00Z",
    "2024-01-01T00:00:00+99:99",
    "٢٠٢٤-٠١-٠١T٠٠:٠٠:٠٠Z",
    "2024-01-01",
    "",
    "x",
]
filter_literals = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.integers(-(2**70), 2**70).map(lambda n: f"{n}L"),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(
        [
            "1.5d",
            "1E+300",
            "1e-05",
            "1e999",
            "-1e999",
            "1.",
            ".5",
            "1e",
            "2147483648",
            "-2147483649",
            "9223372036854775808L",
            "0x10",
            "1_000",
            "--1",
            "- 1",
            "١٢",
            "²",
        ]
    ),
    long_text,
    long_text.map(lambda digits: digits + "L"),
    short_text.map(lambda s: "'" + s.replace("'", "''") + "'"),
    st.sampled_from(DATETIME_LITERALS).map(lambda s: f"datetime'{s}'"),
    st.sampled_from(
        [
            "guid'3f2504e0-4f89-11d3-9a0c-0305e82c3301'",
            "guid'x'",
            "X'0a1B'",
            "X'0'",
            "binary''",
            "binary'zz'",
            "x'00'",
            "datetime''",
            "DATETIME'2020-01-01T00:00:00Z'",
            "true",
            "false",
            "null",
            "'unterminated",
            "''''",
        ]
    ),
)
comparisons = st.builds(
    lambda left, op, right, flip: f"{right} {op} {left}" if flip else f"{left} {op} {right}",
    filter_properties,
    st.sampled_from(["eq", "ne", "gt", "ge", "lt", "le", "eq", "ne", "gt", "lt", "EQ", "add", "has", "=="]),
    st.one_of(filter_literals, filter_literals, filter_properties),
    st.booleans(),
)
filter_atoms = st.one_of(
    comparisons,
    comparisons,
    filter_properties,
    st.sampled_from(
        [
            "true",
            "false",
            "startswith(Name,'a')",
            "substringof('a',Name)",
            "length(Name) eq 1",
            "n add 1 eq 2",
            "-n eq 1",
            "not",
            "()",
            "(",
            ")",
            "and",
            "eq",
            "''",
            "any(x: x eq 1)",
        ]
    ),
)
filter_trees = st.recursive(
    filter_atoms,
    lambda sub: st.one_of(
        st.builds(lambda a, b: f"{a} and {b}", sub, sub),
        st.builds(lambda a, b: f"{a} or {b}", sub, sub),
        st.builds(lambda a: f"not {a}", sub),
        st.builds(lambda a: f"not({a})", sub),
        st.builds(lambda a: f"({a})", sub),
        st.builds(lambda a, ws: f"{ws}{a}{ws}", sub, st.sampled_from(["", " ", "  ", "\t"])),
    ),
    max_leaves=20,
)
filter_texts = st.one_of(
    filter_trees,
    filter_trees,
    st.builds(
        lambda tree, edits: mutate(_utf8(tree), edits).decode("utf-8", "replace"), filter_trees, byte_edits
    ),
    st.integers(1, 3000).map(lambda depth: "(" * depth + "n eq 1" + ")" * depth),
    st.integers(1, 3000).map(lambda count: " and ".join(["n eq 1"] * count)),
    st.integers(1, 3000).map(lambda depth: "not " * depth + "n eq 1"),
    st.text(text_chars, max_size=40),
).map(Text)

SAMPLE_ENTITIES = [
    ("p", "r", 638000000000000000, b'{"PartitionKey":"p","RowKey":"r"}'),
    (
        "p'x",
        "",
        504911232000000000,
        b'{"PartitionKey":"p","RowKey":"r","n":1,"s":"x","b":true,"f":1.5,"big@odata.type":"Edm.Int64",'
        b'"big":"9223372036854775807","d@odata.type":"Edm.DateTime","d":"2020-01-01T00:00:00Z",'
        b'"g@odata.type":"Edm.Guid","g":"3f2504e0-4f89-11d3-9a0c-0305e82c3301","x@odata.type":"Edm.Binary",'
        b'"x":"AAE=","IsActive":false}',
    ),
    (
        "😀",
        "\uffff",
        3155378975999999999,
        b'{"PartitionKey":"p","RowKey":"r","n":-2147483648,"f@odata.type":"Edm.Double","f":"NaN","s":""}',
    ),
]


# SAS ---------------------------------------------------------------------------------------------

sas_times = st.one_of(
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)).map(
        lambda moment: moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    ),
    st.sampled_from(
        [
            "2020-01-01",
            "2999-01-01T00:00Z",
            "2999-01-01T00:00:00.1234567Z",
            "2999-01-01T00:00:00+14:00",
            "2999-01-01T00:00:00-99:99",
            "2024-02-30T00:00:00Z",
            "2024-13-01",
            "0000-00-00",
            "9999-12-31T23:59:59-23:59",
            "0001-01-01T00:00:00+23:59",
            "2999-01-01T24:00:00Z",
            "2999-01-01T00:00:00.12345678Z",
            "",
            "now",
            "٢٠٢٤-٠١-٠١",
        ]
    ),
    st.sampled_from(
        [
            "0001-01-01",
            "0001-01-01T00:00Z",
            "0001-01-01T00:04:59Z",
            "0001-01-01T00:00:00-23:59",
            "9999-12-31",
            "9999-12-31T23:59:59Z",
            "9999-12-31T23:59:59.9999999Z",
            "9999-12-31T23:59:59-23:59",
        ]
    ),
)
sas_values: dict[str, Any] = {
    "sv": st.sampled_from(
        ["2019-02-02", "2020-12-06", "2015-04-05", "2099-01-01", "2019-2-2", "", "x", "٢٠١٩-٠٢-٠٢"]
    ),
    "sp": st.one_of(st.text(st.sampled_from("raudlcwxyz"), max_size=6), short_text),
    "st": sas_times,
    "se": sas_times,
    "si": st.one_of(st.sampled_from(["policy1", "missing", ""]), short_text),
    "sip": st.one_of(
        st.sampled_from(
            [
                "127.0.0.1",
                "127.0.0.1-127.0.0.255",
                "127.0.0.2-127.0.0.1",
                "::1",
                "::1-::2",
                "10.0.0.1-::1",
                "::ffff:127.0.0.1",
                "256.0.0.1",
                "1.2.3",
                "",
                "-",
                "1.1.1.1-",
                "fe80::1%eth0",
                "١٢٧.0.0.1",
            ]
        ),
        short_text,
    ),
    "spr": st.sampled_from(["https", "https,http", "http,https", "http", "HTTPS", "", ",", "https,ftp"]),
    "tn": st.one_of(st.sampled_from(["fuzztable", "FuzzTable", "other", ""]), short_text),
    "spk": short_text,
    "srk": short_text,
    "epk": short_text,
    "erk": short_text,
    "ss": st.sampled_from(["t", "bqt", "b", "", "T"]),
    "srt": st.sampled_from(["sco", "o", "c", "s", "", "x"]),
    "ses": short_text,
}


def sign(to_sign: str) -> str:
    return base64.b64encode(hmac.new(KEY, _utf8(to_sign), hashlib.sha256).digest()).decode()


@st.composite
def sas_queries(draw: st.DrawFn) -> dict[str, str]:
    """Decoded SAS query parameters, signed correctly about half the time: either a working
    table or account SAS with one to three fields replaced by fuzzed values, or random fields."""
    if draw(st.booleans()):
        fields = draw(
            st.sampled_from(
                [
                    {"sv": "2019-02-02", "tn": "fuzztable", "sp": "raud", "se": "2999-01-01T00:00:00Z"},
                    {
                        "sv": "2020-12-06",
                        "ss": "t",
                        "srt": "sco",
                        "sp": "rwdlacu",
                        "se": "2999-01-01T00:00:00Z",
                    },
                ]
            )
        )
        checked_late = ["st", "st", "st", "se", "se", "sip", "sip", "spr", "sp", "spk", "epk", "si", "tn"]
        for name in draw(
            st.lists(st.sampled_from([*checked_late, *sorted(sas_values)]), min_size=1, max_size=3)
        ):
            fields[name] = draw(sas_values[name])
    else:
        names = draw(st.lists(st.sampled_from(sorted(sas_values)), unique=True, max_size=len(sas_values)))
        fields = {name: draw(sas_values[name]) for name in names}
        if draw(st.booleans()):
            fields.pop("ss", None)
            fields.pop("srt", None)
    probe = parse_sas({**fields, "sig": "x"})
    assert probe is not None
    if draw(st.integers(0, 3)):
        is_account = probe.is_account
        fields["sig"] = sign(
            account_sas_string_to_sign(probe, ACCOUNT)
            if is_account
            else table_sas_string_to_sign(probe, ACCOUNT)
        )
    else:
        fields["sig"] = draw(st.one_of(st.sampled_from(["", "AAAA", "a b", "%%%", "x" * 45]), short_text))
    query = {}
    for name, value in fields.items():
        query[draw(st.sampled_from([name, name.upper(), name.capitalize()]))] = value
    if draw(st.integers(0, 9)) == 0:
        query[draw(st.sampled_from(["SIG", "Sv", "TN"]))] = "dup"
    return query


query_strings = st.one_of(
    st.lists(
        st.tuples(
            st.one_of(st.sampled_from(["sig", "sv", "$filter", "comp", "NextPartitionKey"]), raw_fragment),
            raw_fragment,
        ),
        max_size=5,
    ).map(lambda pairs: "&".join(f"{k}={v}" for k, v in pairs)),
    st.sampled_from(["&&&", "=", "a=%", "a=%FF", "a=%C0%AF", "sig=%ED%A0%80", "==", "a=1&a=2", "%26=%3D"]),
)


# XML ---------------------------------------------------------------------------------------------

# Characters XML 1.0 allows: most values are well-formed, so that parsing reaches the values.
xml_chars = st.characters(codec="utf-8", exclude_categories=["Cc", "Cs"], exclude_characters="\ufffe\uffff")
xml_text = st.one_of(
    st.text(xml_chars, max_size=12).map(escape),
    st.text(xml_chars, max_size=12).map(escape),
    st.sampled_from(["&amp;", "&#x1F600;", "&#13;", "a,b", " x ", "é"]),
)
XML_BREAKERS = [b"&#0;", b"&bogus;", b"<", b"]]>", b"&#x110000;", b"\x00", b"<!--", b"</x>"]
xml_numbers = st.one_of(
    st.integers(-5, 400).map(str),
    st.sampled_from(
        [
            "0",
            "365",
            "366",
            "2147483648",
            "9" * 19,
            "9" * 30,
            "²",
            "٣",
            "１",
            "",
            " 7",
            "-1",
            "1.5",
            "1e3",
            "18446744073709551616",
        ]
    ),
    long_text,
)
xml_bools = st.sampled_from(["true", "false", "true", "false", "True", "FALSE", "true", "false", "", "yes"])


def _xml_document(draw: st.DrawFn, document: str) -> bytes:
    form = draw(st.sampled_from(["utf-8", "utf-8", "utf-8", "bare", "utf-16", "doctype", "xml11"]))
    if form == "utf-16":
        data = ('<?xml version="1.0" encoding="utf-16"?>' + document).encode("utf-16")
    else:
        prolog = {
            "utf-8": '<?xml version="1.0" encoding="utf-8"?>',
            "bare": "",
            "xml11": '<?xml version="1.1"?>',
            "doctype": '<!DOCTYPE x [<!ENTITY a "b">]>',
        }[form]
        data = (prolog + document).encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 7)) == 0:
        data = mutate(data, [(0, draw(st.integers(0, len(data))), draw(st.sampled_from(XML_BREAKERS)))])
    return mutate(data, draw(st.one_of(st.just([]), st.just([]), st.just([]), byte_edits)))


@st.composite
def acl_documents(draw: st.DrawFn) -> bytes:
    identifiers = []
    for _ in range(draw(st.integers(0, 7))):
        inner = f"<Id>{draw(st.one_of(xml_text, st.sampled_from(['a' * 64, 'a' * 65, 'policy1'])))}</Id>"
        if draw(st.integers(0, 4)):
            policy = ""
            permission = st.one_of(st.text(st.sampled_from("raudx"), max_size=5), xml_text)
            for tag, values in (("Start", sas_times), ("Expiry", sas_times), ("Permission", permission)):
                if draw(st.booleans()):
                    policy += f"<{tag}>{draw(values)}</{tag}>"
            inner += f"<AccessPolicy>{policy}</AccessPolicy>"
        tag = draw(st.sampled_from(["SignedIdentifier", "SignedIdentifier", "Other"]))
        identifiers.append(f"<{tag}>{inner}</{tag}>")
    root = draw(st.sampled_from(["SignedIdentifiers", "SignedIdentifiers", "signedidentifiers"]))
    return _xml_document(draw, f"<{root}>{''.join(identifiers)}</{root}>")


@st.composite
def properties_documents(draw: st.DrawFn) -> bytes:
    def retention() -> str:
        days = f"<Days>{draw(xml_numbers)}</Days>" if draw(st.integers(0, 3)) else ""
        return f"<RetentionPolicy><Enabled>{draw(xml_bools)}</Enabled>{days}</RetentionPolicy>"

    sections = []
    if draw(st.booleans()):
        flags = "".join(f"<{tag}>{draw(xml_bools)}</{tag}>" for tag in ("Delete", "Read", "Write"))
        sections.append(f"<Logging><Version>{draw(xml_text)}</Version>{flags}{retention()}</Logging>")
    for tag in ("HourMetrics", "MinuteMetrics"):
        if draw(st.booleans()):
            include = f"<IncludeAPIs>{draw(xml_bools)}</IncludeAPIs>" if draw(st.booleans()) else ""
            enabled = f"<Enabled>{draw(xml_bools)}</Enabled>"
            sections.append(
                f"<{tag}><Version>{draw(xml_text)}</Version>{enabled}{include}{retention()}</{tag}>"
            )
    if draw(st.booleans()):
        rules = []
        for _ in range(draw(st.integers(0, 6))):
            methods = draw(
                st.sampled_from(
                    ["GET", "GET,PUT", "get, merge", "GET,,POST", "DELETE,OPTIONS", "", "TRACE", "x"]
                )
            )
            origins = draw(st.one_of(st.just("*"), xml_text))
            rules.append(
                f"<CorsRule><AllowedOrigins>{origins}</AllowedOrigins><AllowedMethods>{methods}</AllowedMethods>"
                f"<AllowedHeaders>{draw(xml_text)}</AllowedHeaders><ExposedHeaders>{draw(xml_text)}</ExposedHeaders>"
                f"<MaxAgeInSeconds>{draw(xml_numbers)}</MaxAgeInSeconds></CorsRule>"
            )
        sections.append(f"<Cors>{''.join(rules)}</Cors>")
    return _xml_document(draw, f"<StorageServiceProperties>{''.join(sections)}</StorageServiceProperties>")


xml_oddities = st.one_of(
    st.integers(1, 20000).map(
        lambda depth: b"<SignedIdentifiers>" + b"<a>" * depth + b"</a>" * depth + b"</SignedIdentifiers>"
    ),
    st.sampled_from(
        [
            b"",
            b" ",
            b"<",
            b"<SignedIdentifiers/>",
            b"<StorageServiceProperties/>",
            b"\xff\xfe<\x00",
            b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;">]>'
            b"<SignedIdentifiers>&lol2;</SignedIdentifiers>",
            b'<!DOCTYPE x SYSTEM "file:///etc/passwd"><SignedIdentifiers/>',
        ]
    ),
    st.binary(max_size=40),
)
acl_bodies = st.one_of(acl_documents(), acl_documents(), acl_documents(), xml_oddities).map(Blob)
properties_bodies = st.one_of(
    properties_documents(), properties_documents(), properties_documents(), xml_oddities
).map(Blob)
xml_bodies = st.one_of(acl_bodies, properties_bodies)


# Shared Key --------------------------------------------------------------------------------------

BAD_DATES = [
    "",
    "Mon, 31 Feb 2024 00:00:00 GMT",
    "Fri, 01 Jan 1999 00:00:00 GMT",
    "Mon, 01 Foo 2024 00:00:00 GMT",
    "Sun, 99 Jan 9999 99:99:99 GMT",
    "Mon, 01 Jan 0000 00:00:00 GMT",
    "Mon, ٠١ Jan 2024 00:00:00 GMT",
    "yesterday",
]


@st.composite
def authorization_cases(draw: st.DrawFn) -> dict[str, Any]:
    method = draw(st.sampled_from(["GET", "POST", "PUT", "MERGE", "DELETE", "get", ""]))
    raw_path = draw(simple_paths)
    comp = draw(st.one_of(st.none(), st.sampled_from(["acl", "properties", "stats", ""]), short_text))
    content_type = draw(st.one_of(st.just(""), st.just("application/json"), header_text))
    content_md5 = draw(st.one_of(st.just(""), header_text))
    now = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime())
    date = draw(st.one_of(st.just(now), st.sampled_from(BAD_DATES), header_text))
    scheme = draw(st.sampled_from(["SharedKey", "SharedKeyLite", "sharedkey", "Bearer", "Basic", ""]))
    account = draw(st.sampled_from([ACCOUNT, f"{ACCOUNT}-secondary", "other", ""]))
    resource = f"/{ACCOUNT}{raw_path}" + (f"?comp={comp}" if comp is not None else "")
    if scheme.lower() == "sharedkeylite":
        to_sign = f"{date}\n{resource}"
    else:
        to_sign = f"{method}\n{content_md5}\n{content_type}\n{date}\n{resource}"
    if draw(st.booleans()):
        signature = sign(to_sign)
    else:
        signature = draw(st.one_of(st.sampled_from(["", "AAAA", "!!", "a" * 44 + "=="]), header_text))
    header = draw(
        st.one_of(
            st.just(f"{scheme} {account}:{signature}"),
            st.just(f"  {scheme}   {account} : {signature} "),
            st.sampled_from(
                ["", " ", "SharedKey", "SharedKey :", "SharedKey a:b:c", f"SharedKey\t{ACCOUNT}:AAAA"]
            ),
            header_text,
        )
    )
    return {
        "header": header,
        "method": method,
        "raw_path": raw_path,
        "comp": comp,
        "content_md5": content_md5,
        "content_type": content_type,
        "x_ms_date": draw(st.one_of(st.none(), st.just(date))),
        "date": draw(st.one_of(st.none(), st.just(date), header_text)),
        "skew": draw(st.one_of(st.none(), st.just(900.0))),
    }


header_values = st.one_of(
    header_text,
    st.sampled_from(
        [
            "application/json;odata=nometadata",
            "application/json;odata=fullmetadata",
            "application/json;odata=",
            "application/json;odata",
            "application/atom+xml",
            "*/*",
            "application/*;q=0.5",
            ",,,",
            ";;",
            "application/json; odata = minimalmetadata ; q=1",
            "json",
            "atom",
            "xml",
            "JSON",
            "",
            "0",
            "1000",
            "1001",
            "²",
            "١",
            "-1",
            "+5",
            " 5",
            "1!0!",
            "1!4!YWJj",
            "1!99999999999999999999!x",
            "2!1!YQ",
            "!!",
            "1!-1!",
        ]
    ),
    long_text,
    st.text(st.sampled_from("0123456789!-_aAzZ=+/ "), max_size=12),
)


# --------------------------------------------------------------------------------------------
# Inputs that broke the server once: always tried first (explicit examples), then the fuzz
# --------------------------------------------------------------------------------------------


def _signed_table_sas(**fields: str) -> dict[str, str]:
    token = parse_sas({**fields, "sig": "x"})
    assert token is not None
    return {**fields, "sig": sign(table_sas_string_to_sign(token, ACCOUNT))}


def _properties_with(fragment: str) -> Blob:
    return Blob(f"<StorageServiceProperties>{fragment}</StorageServiceProperties>".encode())


def _cors_rule(max_age: str) -> str:
    return (
        "<Cors><CorsRule><AllowedOrigins>*</AllowedOrigins><AllowedMethods>GET</AllowedMethods>"
        f"<AllowedHeaders></AllowedHeaders><ExposedHeaders></ExposedHeaders><MaxAgeInSeconds>{max_age}"
        "</MaxAgeInSeconds></CorsRule></Cors>"
    )


def _retention_days(days: str) -> str:
    return (
        "<Logging><Version>1.0</Version><Delete>true</Delete><Read>true</Read><Write>true</Write>"
        f"<RetentionPolicy><Enabled>true</Enabled><Days>{days}</Days></RetentionPolicy></Logging>"
    )


LONE_SURROGATE_KEY = Blob(b'{"PartitionKey":"\\ud800","RowKey":"r"}')
SUPERSCRIPT_INT64 = Blob(b'{"PartitionKey":"p","RowKey":"r","n@odata.type":"Edm.Int64","n":"\xc2\xb2"}')
HUGE_INT64 = Blob(b'{"PartitionKey":"p","RowKey":"r","n@odata.type":"Edm.Int64","n":"' + b"9" * 4400 + b'"}')
SUPERSCRIPT_INT32 = Blob(b'{"PartitionKey":"p","RowKey":"r","n@odata.type":"Edm.Int32","n":"\xc2\xb2"}')
DOUBLE_SIGN_INT32 = Blob(b'{"PartitionKey":"p","RowKey":"r","n@odata.type":"Edm.Int32","n":"--5"}')
ACL_OK = Blob(b"<SignedIdentifiers/>")
BATCH_WITH_SURROGATE_KEY = (
    "multipart/mixed; boundary=b",
    Blob(
        b"--b\r\nContent-Type: multipart/mixed; boundary=c\r\n\r\n"
        b"--c\r\nContent-Type: application/http\r\n\r\n"
        b"POST http://127.0.0.1/devstoreaccount1/fuzztable HTTP/1.1\r\n\r\n"
        b'{"PartitionKey":"\\udfff","RowKey":"r"}\r\n--c--\r\n--b--\r\n'
    ),
)


# --------------------------------------------------------------------------------------------
# The tests
# --------------------------------------------------------------------------------------------


def test_fuzz_resource_paths(capsys: pytest.CaptureFixture[str]) -> None:
    count = [0]

    @FUZZ
    @given(raw_paths(), hosts, st.sampled_from(["http", "https"]), key_predicates())
    def check(raw_path: str, host: str, scheme: str, fragment: str) -> None:
        count[0] += 1
        with only_service_errors():
            for segment in decode_segments(raw_path):
                with only_service_errors():
                    parse_segment(segment)
        with only_service_errors():
            parse_key_predicate(fragment.strip("()"))
        with only_service_errors():
            route = resolve(scheme, host, raw_path, ACCOUNTS)
            assert isinstance(route.resource, Resource)
            assert route.account == ACCOUNT

    run_counted("resource paths and key predicates", check, count, capsys)


SDK_KEY_ENCODINGS = {
    "python": lambda v: quote(v.replace("'", "''"), safe=""),
    "javascript": lambda v: quote(v.replace("'", "''"), safe="!*'()"),
    "newer-javascript": lambda v: quote(v.replace("'", "''"), safe=";,:@&=+$!*'()"),
}
url_keys = st.text(
    st.characters(codec="utf-8", exclude_categories=["Cc"], exclude_characters="/\\#?\x7f"), max_size=40
)


def test_fuzz_sdk_encoded_keys_round_trip(capsys: pytest.CaptureFixture[str]) -> None:
    """Keys encoded the way each SDK encodes them are read back exactly."""
    count = [0]

    @FUZZ
    @given(url_keys, url_keys, st.sampled_from(sorted(SDK_KEY_ENCODINGS)), st.sampled_from(["", "%20"]))
    def check(pk: str, rk: str, sdk: str, space: str) -> None:
        count[0] += 1
        encode = SDK_KEY_ENCODINGS[sdk]
        raw_path = f"/{ACCOUNT}/fuzztable(PartitionKey='{encode(pk)}',{space}RowKey='{encode(rk)}')"
        route = resolve("http", "127.0.0.1:10002", raw_path, ACCOUNTS)
        assert (route.resource, route.table, route.pk, route.rk) == (Resource.ENTITY, "fuzztable", pk, rk)

    run_counted("SDK-encoded keys round trip", check, count, capsys)


def test_fuzz_entity_json(capsys: pytest.CaptureFixture[str]) -> None:
    count = [0]

    @FUZZ
    @example(LONE_SURROGATE_KEY, None)  # UnicodeEncodeError in check_body_key (utf16_length)
    @example(SUPERSCRIPT_INT64, None)  # "²".isdigit() but int("²") raises ValueError
    @example(HUGE_INT64, None)  # int() refuses more than 4300 digits
    @example(SUPERSCRIPT_INT32, None)
    @example(DOUBLE_SIGN_INT32, None)  # "--5".lstrip("+-").isdigit() but int("--5") raises
    @given(json_bodies, st.one_of(st.none(), st.tuples(short_text, short_text)))
    def check(body: bytes, url_keys: tuple[str, str] | None) -> None:
        count[0] += 1
        with only_service_errors():
            entity = entity_from_pairs(parse_json_pairs(body), url_keys)
            encode_properties(entity.properties)  # what the store then does with it

    run_counted("entity JSON bodies", check, count, capsys)


def test_fuzz_batch_bodies(capsys: pytest.CaptureFixture[str]) -> None:
    count = [0]

    @FUZZ
    @example(BATCH_WITH_SURROGATE_KEY)
    @given(batch_requests())
    def check(request: tuple[str, bytes]) -> None:
        count[0] += 1
        content_type, body = request
        with only_service_errors():
            batch = parse_batch(content_type, body)
            for operation in batch.operations:
                path = operation.target.split("://", 1)[-1]
                path = path[path.find("/") :] if "/" in path else "/"
                with only_service_errors():
                    resolve("http", "127.0.0.1:10002", path.split("?", 1)[0], ACCOUNTS)
                with only_service_errors():
                    entity_from_pairs(parse_json_pairs(operation.body), None)
                for name, value in operation.headers:
                    if name == "accept":
                        with only_service_errors():
                            metadata_level(value, None)

    run_counted("$batch bodies", check, count, capsys)


def test_fuzz_filters(capsys: pytest.CaptureFixture[str]) -> None:
    count = [0]
    entities = [
        (pk, rk, ticks, entity_from_pairs(parse_json_pairs(blob)).properties)
        for pk, rk, ticks, blob in SAMPLE_ENTITIES
    ]

    @FUZZ
    @given(filter_texts, st.tuples(*[st.one_of(st.none(), short_text)] * 4))
    def check(text: str, key_range: tuple[str | None, str | None, str | None, str | None]) -> None:
        count[0] += 1
        with only_service_errors():
            node = parse_filter(text)
            plan = plan_query(node)
            clip_to_range(plan, *key_range)
            predicate = compile_predicate(node)
            for pk, rk, ticks, properties in entities:
                predicate(pk, rk, ticks, properties)
            if plan.residual is not None:
                residual = compile_predicate(plan.residual)
                for pk, rk, ticks, properties in entities:
                    residual(pk, rk, ticks, properties)
        with only_service_errors():
            table_predicate = compile_table_predicate(parse_filter(text))
            for name in ("fuzztable", "", "Ünï"):
                table_predicate(name)

    run_counted("$filter", check, count, capsys)


def test_fuzz_sas(capsys: pytest.CaptureFixture[str]) -> None:
    count = [0]
    policy_fields = st.tuples(
        st.one_of(st.none(), sas_times),
        st.one_of(st.none(), sas_times),
        st.one_of(st.none(), sas_values["sp"]),
    )

    @FUZZ
    @example(  # st within 5 minutes of 0001-01-01: st - 5 min overflows (OverflowError)
        _signed_table_sas(sv="2019-02-02", tn="fuzztable", sp="r", st="0001-01-01T00:00Z", se="2999-01-01"),
        "",
        None,
        {},
        False,
        None,
        datetime(2024, 1, 1, tzinfo=UTC),
        Operation.QUERY_ENTITIES,
        ("p", "r"),
    )
    @given(
        sas_queries(),
        query_strings,
        st.one_of(st.none(), st.sampled_from(["fuzztable", "FUZZTABLE", "other"])),
        st.dictionaries(st.sampled_from(["policy1", "missing", ""]), policy_fields, max_size=2),
        st.booleans(),
        st.one_of(
            st.none(), st.sampled_from(["127.0.0.1", "::1", "::ffff:127.0.0.5", "garbage", "", "10.0.0.1"])
        ),
        st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)),
        st.sampled_from(list(Operation)),
        st.tuples(short_text, short_text),
    )
    def check(
        query: dict[str, str],
        raw_query: str,
        table: str | None,
        policies: dict[str, tuple[str | None, str | None, str | None]],
        is_https: bool,
        client_ip: str | None,
        now: datetime,
        operation: Operation,
        keys: tuple[str, str],
    ) -> None:
        count[0] += 1
        request = Request("GET", "/", wire(raw_query), {}, "http", None)
        with only_service_errors():
            parse_sas(request.query)
            request.query_ci("sig")
        with only_service_errors():
            token = parse_sas(query)
            assert token is not None
            lookup = {name: StoredPolicy(*fields) for name, fields in policies.items()}
            grant = verify_sas(
                token,
                account=ACCOUNT,
                keys=[KEY],
                table=table,
                policy_lookup=lookup.get,
                is_https=is_https,
                client_ip=client_ip,
                now=now,
            )
            grant.check(operation, pk=keys[0], rk=keys[1])
            grant.check(operation)
            clip_to_range(plan_query(None), *grant.key_range)

    run_counted("SAS query strings", check, count, capsys)


def test_fuzz_xml_bodies(capsys: pytest.CaptureFixture[str]) -> None:
    count = [0]

    @FUZZ
    @example(ACL_OK, _properties_with(_cors_rule("\u00b2")))  # int("²")
    @example(ACL_OK, _properties_with(_cors_rule("18446744073709551616")))  # orjson: beyond 64 bits
    @example(ACL_OK, _properties_with(_cors_rule("9" * 5000)))  # int() digit limit
    @example(ACL_OK, _properties_with(_retention_days("\u00b2")))
    @example(b'<?xml version="1.0" encoding="tf-8"?><SignedIdentifiers/>', ACL_OK)  # LookupError
    @given(acl_bodies, properties_bodies)
    def check(acl: bytes, properties: bytes) -> None:
        count[0] += 1
        with only_service_errors():
            parse_acl(acl)
        with only_service_errors():
            parsed = parse_service_properties(properties, ServiceProperties())
            encode_service_properties(parsed)  # what Set Service Properties stores

    run_counted("ACL and service-properties XML", check, count, capsys)


def test_fuzz_shared_key_headers(capsys: pytest.CaptureFixture[str]) -> None:
    count = [0]

    @FUZZ
    @given(authorization_cases())
    def check(case: dict[str, Any]) -> None:
        count[0] += 1
        with only_service_errors():
            verify_authorization(
                case["header"],
                method=case["method"],
                raw_path=case["raw_path"],
                comp=case["comp"],
                content_md5=case["content_md5"],
                content_type=case["content_type"],
                x_ms_date=case["x_ms_date"],
                date=case["date"],
                account=ACCOUNT,
                keys=[KEY],
                max_skew_seconds=case["skew"],
            )

    run_counted("Shared Key Authorization headers", check, count, capsys)


def test_fuzz_header_and_query_values(capsys: pytest.CaptureFixture[str]) -> None:
    count = [0]

    @FUZZ
    @example("", None, Text("9" * 4301), "", "")  # $top: int() digit limit
    @example("", None, "\u00b2", "", "")  # $top: "²".isdigit()
    @given(header_values, st.one_of(st.none(), header_values), header_values, header_values, header_values)
    def check(accept: str, format_param: str | None, top: str, token: str, name: str) -> None:
        count[0] += 1
        with only_service_errors():
            metadata_level(accept, format_param)
        with only_service_errors():
            check_top(top)
        with only_service_errors():
            decode_token(token)
        with only_service_errors():
            check_table_name(name)

    run_counted("Accept, $format, $top, continuation tokens, table names", check, count, capsys)
