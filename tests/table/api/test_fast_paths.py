"""The fast paths of the request path read exactly what the exact paths read.

``entity_from_body`` parses common bodies with orjson and falls back to the duplicate-preserving
standard parser otherwise; ``multipart.split_head`` finds the blank line with ``bytes.find`` where a
regular expression used to. Each is checked against its exact counterpart on the fuzzers' inputs
and on hand-picked bodies that sit on the boundary between the two paths.
"""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tabulae.http import multipart
from tabulae.model import entity as entity_module
from tabulae.model.entity import Entity, entity_from_body, entity_from_pairs, parse_json_pairs
from tabulae.model.errors import ServiceError
from tests.table.test_fuzz_parsers import (
    EDM_TYPES,
    FUZZ,
    dump_pairs,
    json_bodies,
    json_pairs,
    json_scalars,
    short_text,
)


def _outcome(read: Any) -> tuple[str, Any]:
    try:
        entity: Entity = read()
    except ServiceError as error:
        return "error", (error.code, error.message)
    properties = {
        name: (kind, "NaN" if isinstance(value, float) and math.isnan(value) else value)
        for name, (kind, value) in entity.properties.items()
    }
    return "entity", (entity.pk, entity.rk, properties)


def _same_reading(body: bytes, url_keys: tuple[str, str] | None) -> None:
    entity_module._SHAPES.clear()  # a full shape cache would leave the planning path untested
    exact = _outcome(lambda: entity_from_pairs(parse_json_pairs(body), url_keys))
    first = _outcome(lambda: entity_from_body(body, url_keys))  # may plan the body's shape
    again = _outcome(lambda: entity_from_body(body, url_keys))  # reads it by its planned shape
    assert first == exact
    assert again == exact
    fast = again
    for kind, value in (fast[1][2] if fast[0] == "entity" else {}).values():
        if isinstance(value, float):
            assert kind == "Edm.Double"  # orjson's floats are typed as the exact path types them


BOUNDARY_BODIES = [
    b'{"PartitionKey":"p","RowKey":"r","a":1,"a":2}',  # a repeated name orjson would fold
    b'{"PartitionKey":"p","RowKey":"r","a" : 1, "a"\n:\t2}',  # repeated, whitespace before colons
    b'{"PartitionKey":"p","RowKey":"r","a@odata.type":"Edm.Int64","a@odata.type":"Edm.Int64","a":"1"}',
    b'{"PartitionKey":"p:q","RowKey":"r","t":"12:00:00","a":1}',  # colons inside strings
    b'{"PartitionKey":"p","RowKey":"r","t":"12:00","t":"13:00"}',  # repeated, colons in values
    b'{"PartitionKey":"p","RowKey":"r","a":1,"a":"\\u003a"}',  # repeated, kept one escapes a colon
    b'{"PartitionKey":"p","RowKey":"r","a:b":"c:d","n":{"x":"1:2"}}',  # colons and a nested object
    b'{"PartitionKey":"p","RowKey":"r","u":"http://h/x","a":"1","u":"x"}',  # dropped value held one
    b'{"PartitionKey":"p","RowKey":"r","x\\"y":1}',  # an escaped quote inside a name
    b'{"PartitionKey":"p","RowKey":"r","s":"a\\\\","b":"\\":"}',  # escapes next to quotes
    b'{"PartitionKey":"p","RowKey":"r","n":{"a":1,"a":2}}',  # nested object (invalid anyway)
    b'{"PartitionKey":"p","RowKey":"r","n":99999999999999999999}',  # past 64 bits
    b'{"PartitionKey":"p","RowKey":"r","n":18446744073709551615}',
    b'{"PartitionKey":"p","RowKey":"r","n@odata.type":"Edm.Int64","n":9223372036854775808}',
    b'{"PartitionKey":"p","RowKey":"r","d":1e400}',  # overflows a double
    b'{"PartitionKey":"p","RowKey":"r","d":5.0,"e":-0.0,"f":1E5,"g":-0}',
    b'{"PartitionKey":"p","RowKey":"r","d@odata.type":"Edm.Double","d":5}',
    b'{"PartitionKey":"p","RowKey":"r","i@odata.type":"Edm.Int32","i":5.0}',
    b'{"PartitionKey":"p","RowKey":"r","s@odata.type":"Edm.String","s":5.5}',
    b'{"PartitionKey":5.5,"RowKey":"r"}',
    b'{"PartitionKey":"\\ud800","RowKey":"r"}',  # a lone surrogate: orjson refuses, exact path decides
    b'\xef\xbb\xbf{"PartitionKey":"p","RowKey":"r"}',
    b'[{"PartitionKey":"p","RowKey":"r"}]',
    b'{"PartitionKey":"p","RowKey":"r","odata.etag":"x","a@odata.type":"Edm.String","a":"v"}',
    b'{"PartitionKey":"p","RowKey":"r","Timestamp":"2024-01-01T00:00:00Z","a":null}',
]


@pytest.mark.parametrize("body", BOUNDARY_BODIES)
@pytest.mark.parametrize("url_keys", [None, ("k1", "k2")])
def test_fast_entity_path_reads_boundary_bodies_as_the_exact_path(
    body: bytes, url_keys: tuple[str, str] | None
) -> None:
    _same_reading(body, url_keys)


def test_repeated_name_is_still_reported() -> None:
    with pytest.raises(ServiceError) as caught:
        entity_from_body(b'{"PartitionKey":"p","RowKey":"r","a":1,"a":2}')
    assert caught.value.code == "DuplicatePropertiesSpecified"


@FUZZ
@given(json_bodies, st.one_of(st.none(), st.tuples(short_text, short_text)))
def test_fast_entity_path_reads_fuzzed_bodies_as_the_exact_path(
    body: bytes, url_keys: tuple[str, str] | None
) -> None:
    _same_reading(body, url_keys)


@st.composite
def same_names_new_values(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """Two bodies with the same member names in the same order and (mostly) other values."""
    pairs = draw(json_pairs())
    changed = []
    for name, value in pairs:
        if name.endswith("@odata.type"):
            value = value if draw(st.integers(0, 3)) else draw(st.sampled_from(EDM_TYPES))
        elif draw(st.integers(0, 3)):
            value = draw(json_scalars)
        changed.append((name, value))
    return dump_pairs(pairs), dump_pairs(changed)


@FUZZ
@given(same_names_new_values(), st.one_of(st.none(), st.tuples(short_text, short_text)))
def test_a_planned_shape_reads_other_values_as_the_exact_path(
    bodies: tuple[bytes, bytes], url_keys: tuple[str, str] | None
) -> None:
    first, second = bodies
    entity_module._SHAPES.clear()
    _outcome(lambda: entity_from_body(first, url_keys))  # plans the shape from the first body
    fast = _outcome(lambda: entity_from_body(second, url_keys))
    exact = _outcome(lambda: entity_from_pairs(parse_json_pairs(second), url_keys))
    assert fast == exact


def test_common_bodies_are_read_by_their_planned_shape() -> None:
    entity_module._SHAPES.clear()
    body = b'{"PartitionKey":"p","RowKey":"r","n@odata.type":"Edm.Int64","n":"5","s":"x"}'
    first = entity_from_body(body)
    assert len(entity_module._SHAPES) == 1
    again = entity_from_body(body.replace(b'"5"', b'"6"'))
    assert first.properties["n"] == ("Edm.Int64", 5)
    assert again.properties == {"n": ("Edm.Int64", 6), "s": ("Edm.String", "x")}


_BLANK_LINE = re.compile(rb"\r?\n\r?\n")
_LEADING_EOL = re.compile(rb"\r?\n")


def _split_head_by_regex(data: bytes) -> tuple[bytes, bytes]:
    """The splitter as it was written first, with regular expressions: the reference."""
    leading = _LEADING_EOL.match(data)
    if leading is not None:
        return b"", data[leading.end() :]
    blank = _BLANK_LINE.search(data)
    if blank is None:
        return data.removesuffix(b"\n").removesuffix(b"\r"), b""
    return data[: blank.start()], data[blank.end() :]


@FUZZ
@given(st.lists(st.sampled_from([b"\r", b"\n", b"\r\n", b"a", b": ", b"X-H", b" "]), max_size=24))
def test_head_splitter_matches_the_regex_reference(pieces: list[bytes]) -> None:
    data = b"".join(pieces)
    assert multipart.split_head(data) == _split_head_by_regex(data)


def _operation_outcome(read: Any) -> tuple[str, Any]:
    try:
        return "ok", read()
    except ServiceError as error:
        return "error", (error.code, error.message)


_PART_PIECES = [
    b"\r",
    b"\n",
    b"\r\n",
    b"\r\n\r\n",
    b"Content-Type: application/http\r\n",
    b"Content-Transfer-Encoding: binary\r\n",
    b"Content-ID: 7\r\n",
    b"POST http://127.0.0.1:10002/devstoreaccount1/t HTTP/1.1\r\n",
    b"DELETE /devstoreaccount1/t(PartitionKey='a',RowKey='b') HTTP/1.1\n",
    b"Accept: application/json\r\n",
    b"If-Match: *\r\n",
    b" folded\r\n",
    b'{"PartitionKey": "a", "RowKey": "b"}',
    b" ",
    b"\x00",
]


_EOLS = st.sampled_from([b"\r\n"] * 12 + [b"\n", b"\r", b""])  # mostly as clients write them
_MIME_LINES = st.sampled_from(
    [
        b"Content-Type: application/http",
        b"Content-Transfer-Encoding: binary",
        b"Content-ID: 7",
        b"X: \x01",
        b" folded",
    ]
)
_REQUEST_LINES = st.sampled_from(
    [
        b"POST http://127.0.0.1:10002/devstoreaccount1/t HTTP/1.1",
        b"GET /devstoreaccount1/t(PartitionKey='a',RowKey='b') HTTP/1.1",
        b"Accept: application/json",
        b"If-Match: *",
        b" folded",
        b"bad line",
    ]
)


@st.composite
def _operation_parts(draw: st.DrawFn) -> bytes:
    """Parts shaped like real ones (header block, blank line, request, blank line, body), with
    line breaks of every kind, so both the cut by index and its fall-backs are reached."""
    mime = b"".join(line + draw(_EOLS) for line in draw(st.lists(_MIME_LINES, min_size=1, max_size=4)))
    lead = draw(st.sampled_from([b""] * 4 + [b"\r\n", b"\n"]))
    request = b"".join(line + draw(_EOLS) for line in draw(st.lists(_REQUEST_LINES, min_size=1, max_size=4)))
    body = draw(st.sampled_from([b"", b'{"PartitionKey": "a", "RowKey": "b"}', b" \r\n{}\r\n"]))
    return mime + draw(_EOLS) + lead + request + draw(_EOLS) + body + draw(_EOLS)


@FUZZ
@given(
    st.one_of(_operation_parts(), st.lists(st.sampled_from(_PART_PIECES), max_size=16).map(b"".join)),
    st.binary(max_size=4),
    st.binary(max_size=4),
)
def test_an_operation_part_cut_by_index_reads_as_the_general_path(
    part: bytes, before: bytes, after: bytes
) -> None:
    body = before + part + after
    start, end = len(before), len(before) + len(part)
    by_index = _operation_outcome(lambda: multipart.parse_operation_at(body, start, end))
    assert by_index == _operation_outcome(lambda: multipart.parse_operation_part(part))


def test_the_usual_operation_part_is_cut_by_index() -> None:
    part = (
        b"Content-Type: application/http\r\nContent-Transfer-Encoding: binary\r\nContent-ID: 3\r\n\r\n"
        b"POST http://127.0.0.1:10002/devstoreaccount1/t HTTP/1.1\r\nAccept: application/json\r\n\r\n"
        b'{"PartitionKey": "a", "RowKey": "b"}\r\n'
    )
    body = b"--x\r\n" + part + b"--x--"
    operation = multipart.parse_operation_at(body, 5, 5 + len(part))
    assert operation == multipart.parse_operation_part(part)
    assert (operation.method, operation.content_id) == ("POST", "3")
    assert operation.body == b'{"PartitionKey": "a", "RowKey": "b"}'


def _request_head_read_whole(head: bytes) -> tuple[str, str, tuple[tuple[str, str], ...]]:
    """The reference: the head decoded and checked whole, then its first line matched."""
    lines = multipart.decode_head(head)
    match = multipart.REQUEST_LINE_RE.fullmatch(lines[0]) if lines else None
    if match is None:
        raise multipart.invalid("bad request line")
    return match[1], match[2], multipart.parse_fields(lines[1:])


@st.composite
def _request_heads(draw: st.DrawFn) -> bytes:
    """A request line and header lines, with line breaks of every kind between them."""
    lines = draw(st.lists(_REQUEST_LINES, min_size=1, max_size=4))
    return lines[0] + b"".join(draw(_EOLS) + line for line in lines[1:]) + draw(st.sampled_from([b"", b"\n"]))


@FUZZ
@given(
    st.one_of(
        _request_heads(),
        st.lists(
            st.sampled_from([*_PART_PIECES, b"\r\r", b"\xc3", b"\xa9", b"GET / HTTP/1.0"]), max_size=10
        ).map(b"".join),
    )
)
def test_a_request_head_read_in_two_pieces_reads_as_the_whole(head: bytes) -> None:
    whole = _operation_outcome(lambda: _request_head_read_whole(head))
    assert _operation_outcome(lambda: multipart.parse_request_head(head)) == whole
