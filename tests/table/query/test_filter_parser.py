"""`$filter` parsing: every literal form, every error, and round trips."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabulae.model import edm
from tabulae.model.errors import ServiceError
from tabulae.table.query.nodes import (
    FALSE,
    MAX_COMPARISONS,
    MAX_DEPTH,
    NULL,
    TRUE,
    And,
    Comparison,
    Literal,
    Node,
    Not,
    Or,
    Property,
    comparison_count,
    depth,
)
from tabulae.table.query.parser import ARITHMETIC, FUNCTIONS, KEYWORDS, parse_filter, render_filter

X = Property("X")


def literal_of(text: str) -> Literal:
    """The literal on the right of ``X eq <text>``."""
    node = parse_filter(f"X eq {text}")
    assert isinstance(node, Comparison) and node.left == X and isinstance(node.right, Literal)
    return node.right


def error_of(text: str) -> ServiceError:
    with pytest.raises(ServiceError) as info:
        parse_filter(text)
    return info.value


def ticks(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> int:
    value = edm.parse_datetime(f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}Z")
    assert value is not None
    return value


# -- literals ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("'abc'", Literal(edm.STRING, "abc")),
        ("''", Literal(edm.STRING, "")),
        ("'it''s'", Literal(edm.STRING, "it's")),
        ("''''", Literal(edm.STRING, "'")),
        ("'a b  c'", Literal(edm.STRING, "a b  c")),
        ("'(eq and or)'", Literal(edm.STRING, "(eq and or)")),
        ("'日本\U0001f600'", Literal(edm.STRING, "日本\U0001f600")),
        ("true", Literal(edm.BOOLEAN, True)),
        ("false", Literal(edm.BOOLEAN, False)),
        ("null", Literal(NULL, None)),
        ("0", Literal(edm.INT32, 0)),
        ("123", Literal(edm.INT32, 123)),
        ("-7", Literal(edm.INT32, -7)),
        ("2147483647", Literal(edm.INT32, 2**31 - 1)),
        ("-2147483648", Literal(edm.INT32, -(2**31))),
        ("007", Literal(edm.INT32, 7)),
        ("123L", Literal(edm.INT64, 123)),
        ("123l", Literal(edm.INT64, 123)),
        ("3000000000L", Literal(edm.INT64, 3_000_000_000)),
        ("-9223372036854775808L", Literal(edm.INT64, -(2**63))),
        ("9223372036854775807L", Literal(edm.INT64, 2**63 - 1)),
        ("1.5", Literal(edm.DOUBLE, 1.5)),
        ("-1.5", Literal(edm.DOUBLE, -1.5)),
        ("1e+300", Literal(edm.DOUBLE, 1e300)),
        ("1E+300", Literal(edm.DOUBLE, 1e300)),
        ("1e-05", Literal(edm.DOUBLE, 1e-05)),
        ("2E3", Literal(edm.DOUBLE, 2000.0)),
        ("3d", Literal(edm.DOUBLE, 3.0)),
        ("3D", Literal(edm.DOUBLE, 3.0)),
        ("3.0D", Literal(edm.DOUBLE, 3.0)),
        ("1.5e2d", Literal(edm.DOUBLE, 150.0)),
        ("datetime'2020-01-01T00:00:00.000000Z'", Literal(edm.DATETIME, ticks(2020, 1, 1))),
        ("datetime'2020-09-17T00:00:00.111Z'", Literal(edm.DATETIME, ticks(2020, 9, 17) + 1_110_000)),
        ("datetime'2020-01-01T00:00:00.1234567Z'", Literal(edm.DATETIME, ticks(2020, 1, 1) + 1_234_567)),
        ("datetime'2020-01-01T00:00:00.123456789Z'", Literal(edm.DATETIME, ticks(2020, 1, 1) + 1_234_567)),
        ("datetime'2020-01-01T00:00:00'", Literal(edm.DATETIME, ticks(2020, 1, 1))),
        ("datetime'2020-01-01T01:00:00+01:00'", Literal(edm.DATETIME, ticks(2020, 1, 1))),
        ("datetime'0001-01-01T00:00:00Z'", Literal(edm.DATETIME, 0)),
        ("datetime'9999-12-31T23:59:59.9999999Z'", Literal(edm.DATETIME, edm.MAX_DATETIME_TICKS)),
        ("DateTime'2020-01-01T00:00:00Z'", Literal(edm.DATETIME, ticks(2020, 1, 1))),
        (
            "guid'0F8FAD5B-D9CB-469F-A165-70867728950E'",
            Literal(edm.GUID, "0f8fad5b-d9cb-469f-a165-70867728950e"),
        ),
        (
            "guid'0f8fad5b-d9cb-469f-a165-70867728950e'",
            Literal(edm.GUID, "0f8fad5b-d9cb-469f-a165-70867728950e"),
        ),
        ("X'0a1B'", Literal(edm.BINARY, b"\x0a\x1b")),
        ("X'FFFF'", Literal(edm.BINARY, b"\xff\xff")),
        ("binary'0a1b'", Literal(edm.BINARY, b"\x0a\x1b")),
        ("X''", Literal(edm.BINARY, b"")),
    ],
)
def test_literal_forms(text: str, expected: Literal) -> None:
    assert literal_of(text) == expected
    assert type(literal_of(text).value) is type(expected.value)


def test_literal_kinds_are_exact_python_types() -> None:
    assert literal_of("1").value == 1 and isinstance(literal_of("1").value, int)
    assert isinstance(literal_of("1d").value, float)
    assert isinstance(literal_of("true").value, bool)
    assert isinstance(literal_of("X'00'").value, bytes)


def test_int32_out_of_range_has_azures_message() -> None:
    error = error_of("Value eq 3000000000")
    assert (error.code, error.status) == ("InvalidInput", 400)
    assert error.message == "Unrecognized 'Edm.Int32' literal '3000000000' at '9' in 'Value eq 3000000000'."


@pytest.mark.parametrize("text", ["2147483648", "-2147483649", "99999999999999999999999999999", "1" * 5000])
def test_int32_out_of_range(text: str) -> None:
    error = error_of(f"X eq {text}")
    assert error.code == "InvalidInput"
    assert error.message.startswith(f"Unrecognized 'Edm.Int32' literal '{text}' at '5' in ")


@pytest.mark.parametrize("text", ["9223372036854775808L", "-9223372036854775809L", "1" * 5000 + "L"])
def test_int64_out_of_range(text: str) -> None:
    error = error_of(f"X eq {text}")
    assert error.code == "InvalidInput"
    assert "Edm.Int64" in error.message


@pytest.mark.parametrize(
    "text",
    [
        "1e400",  # overflows a double
        "-1e400",
        "datetime'2020-13-01T00:00:00Z'",
        "datetime'2020-02-30T00:00:00Z'",
        "datetime'0000-01-01T00:00:00Z'",
        "datetime'9999-12-31T23:59:59Z-01:00'",
        "datetime'9999-12-31T23:30:00-01:00'",  # past the .NET maximum once normalised to UTC
        "datetime'not a date'",
        "datetime''",
        "guid'0f8fad5b-d9cb-469f-a165-70867728950'",
        "guid'{0f8fad5b-d9cb-469f-a165-70867728950e}'",
        "guid'zf8fad5b-d9cb-469f-a165-70867728950e'",
        "X'0a1'",
        "X'zz'",
        "binary'0 1'",
    ],
)
def test_invalid_typed_literals(text: str) -> None:
    assert error_of(f"X eq {text}").code == "InvalidInput"


@pytest.mark.parametrize(
    "text",
    ["1.", ".5", "1.5L", "1e5L", "12abc", "1e", "1.5.3", "1x", "foo'a'", "123M", "1_000", "1f"],
)
def test_malformed_numbers_and_prefixes_are_syntax_errors(text: str) -> None:
    error = error_of(f"X eq {text}")
    assert error.code == "InvalidInput"
    assert error.message.startswith("Syntax error at position ")


# -- structure --------------------------------------------------------------------------------


def cmp(name: str, op: str, value: int) -> Comparison:
    return Comparison(op, Property(name), Literal(edm.INT32, value))


def test_precedence_and_binds_tighter_than_or() -> None:
    assert parse_filter("A eq 1 or B eq 2 and C eq 3") == Or(
        cmp("A", "eq", 1), And(cmp("B", "eq", 2), cmp("C", "eq", 3))
    )
    assert parse_filter("A eq 1 and B eq 2 or C eq 3") == Or(
        And(cmp("A", "eq", 1), cmp("B", "eq", 2)), cmp("C", "eq", 3)
    )


def test_chains_are_left_associative() -> None:
    a, b, c = cmp("A", "eq", 1), cmp("B", "eq", 2), cmp("C", "eq", 3)
    assert parse_filter("A eq 1 and B eq 2 and C eq 3") == And(And(a, b), c)
    assert parse_filter("A eq 1 or B eq 2 or C eq 3") == Or(Or(a, b), c)


def test_parentheses_group() -> None:
    a, b, c = cmp("A", "eq", 1), cmp("B", "eq", 2), cmp("C", "eq", 3)
    assert parse_filter("(A eq 1 or B eq 2) and C eq 3") == And(Or(a, b), c)
    assert parse_filter("A eq 1 and (B eq 2 and C eq 3)") == And(a, And(b, c))
    assert parse_filter("((((A eq 1))))") == a
    assert parse_filter("  ( A eq 1 )  ") == a


def test_not_forms() -> None:
    a, b = cmp("A", "eq", 1), cmp("B", "eq", 2)
    assert parse_filter("not (A eq 1)") == Not(a)
    assert parse_filter("not(A eq 1)") == Not(a)
    assert parse_filter("not A eq 1") == Not(a)  # lenient: a bare ``not`` negates the whole comparison
    assert parse_filter("not A eq 1 and B eq 2") == And(Not(a), b)
    assert parse_filter("not (A eq 1 and B eq 2)") == Not(And(a, b))
    assert parse_filter("not not A eq 1") == Not(Not(a))
    assert parse_filter("not IsActive") == Not(Property("IsActive"))


def test_literal_on_the_left_is_kept_as_written() -> None:
    node = parse_filter("5 lt Age")
    assert node == Comparison("lt", Literal(edm.INT32, 5), Property("Age"))
    assert isinstance(node, Comparison) and node.oriented() == ("Age", "gt", Literal(edm.INT32, 5))


def test_bare_booleans_and_constants() -> None:
    assert parse_filter("IsActive") == Property("IsActive")
    assert parse_filter("true") == TRUE
    assert parse_filter("false") == FALSE
    assert parse_filter("IsActive and not Deleted") == And(Property("IsActive"), Not(Property("Deleted")))
    assert parse_filter("true and X eq 1") == And(TRUE, cmp("X", "eq", 1))


@pytest.mark.parametrize("blank", ["", " ", "   "])
def test_blank_filter_means_everything(blank: str) -> None:
    assert parse_filter(blank) == TRUE


def test_keywords_are_case_sensitive() -> None:
    assert parse_filter("True") == Property("True")  # a property, not the constant
    assert error_of("X eq True").code == "NotImplemented"  # property vs property
    assert error_of("X EQ 1").code == "InvalidInput"
    assert error_of("X eq 1 AND Y eq 2").code == "InvalidInput"
    assert error_of("NOT X").code == "InvalidInput"


def test_typical_client_filters() -> None:
    for text in [
        "PartitionKey eq 'x' and Timestamp ge datetime'2020-01-01T00:00:00.0000000Z'",
        "TableName ge 'abc' and TableName lt 'abd'",
        "n ge 1 and Dt lt datetime'2020-01-01T00:00:00.000000Z'",
        "Id eq guid'0f8fad5b-d9cb-469f-a165-70867728950e' and Data eq X'00ff'",
    ]:
        node = parse_filter(text)
        assert isinstance(node, And) and parse_filter(render_filter(node)) == node


# -- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "position"),
    [
        ("(X eq 1", 7),
        # Azure's answer to azure-data-tables' test_query_invalid_filter (x-ms-version 2019-02-02):
        # past the token that follows a whole expression.
        ("aaa bbb ccc", 7),
        ("X eq 1)", 7),
        ("X eq", 4),
        ("eq 1", 0),
        ("X eq 1 and", 10),
        ("and", 0),
        ("()", 1),
        ("X == 1", 2),
        ("X eq 'abc", 5),
        ("X eq 1 eq 2", 9),
        ("X eq 1 Y eq 2", 8),
        ("X eq 1,", 7),
        ("1", 1),
        ("'a'", 3),
        ("null", 4),
        ("X eq 1 or", 9),
        ("not", 3),
        ("X\teq 1", 1),
        ("foo(X)", 0),
        ("X eq 1 and and Y", 11),
        ("X eq and", 5),
    ],
)
def test_syntax_errors_report_the_position(text: str, position: int) -> None:
    error = error_of(text)
    assert (error.code, error.status) == ("InvalidInput", 400)
    assert error.message == f"Syntax error at position {position} in '{text}'."


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_functions_are_not_implemented(name: str) -> None:
    error = error_of(f"{name}(X, 'a') eq true")
    assert (error.code, error.status) == ("NotImplemented", 501)


@pytest.mark.parametrize(
    "text",
    [
        "startswith(PartitionKey, 'a')",
        "substringof('a', Name)",
        "X eq tolower('A')",
        "not endswith(X, 'a')",
        "Tags/any(t: t eq 'a')",
        "Address/City eq 'x'",
    ],
)
def test_function_calls_anywhere_are_not_implemented(text: str) -> None:
    assert error_of(text).code == "NotImplemented"


@pytest.mark.parametrize("op", sorted(ARITHMETIC))
def test_arithmetic_is_not_implemented(op: str) -> None:
    assert error_of(f"X {op} 1 eq 2").code == "NotImplemented"
    assert error_of(f"X eq 1 {op} 2").code == "NotImplemented"


@pytest.mark.parametrize("text", ["-X eq 1", "X eq -Y", "-(X) eq 1"])
def test_unary_minus_on_a_property_is_not_implemented(text: str) -> None:
    assert error_of(text).code == "NotImplemented"


@pytest.mark.parametrize(
    "text", ["X eq Y", "PartitionKey eq RowKey", "1 eq 1", "'a' lt 'b'", "true eq false"]
)
def test_property_vs_property_and_literal_vs_literal(text: str) -> None:
    error = error_of(text)
    assert (error.code, error.status) == ("NotImplemented", 501)


def test_fifteen_comparisons_are_allowed_sixteen_are_not() -> None:
    fifteen = " and ".join(f"P{i} eq {i}" for i in range(MAX_COMPARISONS))
    assert comparison_count(parse_filter(fifteen)) == 15
    assert error_of(fifteen + " and P99 eq 1").code == "InvalidInput"
    assert error_of(fifteen + " or IsActive").code == "InvalidInput"  # a bare property counts
    assert comparison_count(parse_filter(fifteen + " and true and not false")) == 15  # constants do not


def test_nesting_up_to_the_limit() -> None:
    assert parse_filter("(" * MAX_DEPTH + "X" + ")" * MAX_DEPTH) == X
    node = parse_filter("not " * (MAX_DEPTH - 1) + "X")
    assert depth(node) == MAX_DEPTH


@pytest.mark.parametrize(
    "text",
    [
        "(" * (MAX_DEPTH + 1) + "X" + ")" * (MAX_DEPTH + 1),
        "(" * 100_000 + "X" + ")" * 100_000,
        "(" * 100_000,
        "not " * 100_000 + "X",
        "not " * MAX_DEPTH + "X",
        " and ".join(["true"] * (MAX_DEPTH + 1)),
        " or ".join(["false"] * 10_000),
    ],
)
def test_deep_nesting_is_rejected_without_recursion_errors(text: str) -> None:
    assert error_of(text).code == "InvalidInput"


@pytest.mark.timeout(60)  # a hang guard for quadratic behaviour, not a speed measurement
def test_large_inputs_parse_without_blowing_up() -> None:
    node = parse_filter("X eq '" + "a''" * 200_000 + "'")
    assert isinstance(node, Comparison) and node.right == Literal(edm.STRING, "a'" * 200_000)
    for text in ["'" * 200_001, "X eq '" + "''" * 200_000, "X " * 200_000, "(" * 200_000 + ")" * 200_000]:
        with pytest.raises(ServiceError):
            parse_filter(text)


# -- properties -------------------------------------------------------------------------------

NAMES = st.sampled_from(
    ["PartitionKey", "RowKey", "Timestamp", "Age", "Name", "X", "add", "guid", "Ünï_2"]
) | (st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True).filter(lambda s: s not in KEYWORDS))
LITERALS = st.one_of(
    st.text().map(lambda v: Literal(edm.STRING, v)),
    st.booleans().map(lambda v: Literal(edm.BOOLEAN, v)),
    st.just(Literal(NULL, None)),
    st.integers(edm.INT32_MIN, edm.INT32_MAX).map(lambda v: Literal(edm.INT32, v)),
    st.integers(edm.INT64_MIN, edm.INT64_MAX).map(lambda v: Literal(edm.INT64, v)),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda v: Literal(edm.DOUBLE, v)),
    st.integers(0, edm.MAX_DATETIME_TICKS).map(lambda v: Literal(edm.DATETIME, v)),
    st.uuids().map(lambda v: Literal(edm.GUID, str(v))),
    st.binary(max_size=8).map(lambda v: Literal(edm.BINARY, v)),
)
OPS = st.sampled_from(["eq", "ne", "gt", "ge", "lt", "le"])


@st.composite
def comparisons(draw: st.DrawFn) -> Comparison:
    prop, literal, op = Property(draw(NAMES)), draw(LITERALS), draw(OPS)
    return Comparison(op, prop, literal) if draw(st.booleans()) else Comparison(op, literal, prop)


LEAVES = st.one_of(comparisons(), NAMES.map(Property), st.sampled_from([TRUE, FALSE]))
TREES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(st.builds(And, inner, inner), st.builds(Or, inner, inner), st.builds(Not, inner)),
    max_leaves=MAX_COMPARISONS,
).filter(lambda n: depth(n) <= MAX_DEPTH)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TREES)
def test_render_then_parse_round_trips(node: Node) -> None:
    assert parse_filter(render_filter(node)) == node


def test_render_examples() -> None:
    assert render_filter(parse_filter("(A eq 1 or B) and not (C or D)")) == "(A eq 1 or B) and not (C or D)"
    assert render_filter(parse_filter("X eq 'it''s'")) == "X eq 'it''s'"
    assert render_filter(parse_filter("X eq 5l")) == "X eq 5L"
    assert render_filter(parse_filter("X eq guid'0F8FAD5B-D9CB-469F-A165-70867728950E'")) == (
        "X eq guid'0f8fad5b-d9cb-469f-a165-70867728950e'"
    )
    with pytest.raises(ValueError):
        render_filter(Comparison("eq", X, Literal(edm.DOUBLE, float("nan"))))


FILTER_PIECES = st.sampled_from(
    [
        " ", "(", ")", "'", "''", "-", ",", "/", "and", "or", "not", "eq", "ne", "gt", "ge", "lt", "le",
        "true", "false", "null", "X", "PartitionKey", "1", "2147483648", "5L", "1.5", "1e+300", "3d",
        "datetime'2020-01-01T00:00:00Z'", "guid'0f8fad5b-d9cb-469f-a165-70867728950e'", "X'0a'",
        "startswith", "add", "'a b'", "1e999", "datetime'", "\U0001f600", "\x00", "%20",
    ]
)  # fmt: skip
FUZZ_TEXT = st.one_of(
    st.text(max_size=60),
    st.lists(FILTER_PIECES, max_size=30).map(" ".join),
    st.lists(FILTER_PIECES, max_size=30).map("".join),
)


@settings(max_examples=500, deadline=None)
@given(FUZZ_TEXT)
def test_random_text_gives_a_node_or_a_service_error(text: str) -> None:
    try:
        node = parse_filter(text)
    except ServiceError as error:
        assert error.code in {"InvalidInput", "NotImplemented"}
        return
    assert depth(node) <= MAX_DEPTH
    assert comparison_count(node) <= MAX_COMPARISONS
    assert parse_filter(render_filter(node)) == node


def test_guid_literals_use_canonical_lower_case() -> None:
    value = uuid.uuid4()
    assert literal_of(f"guid'{str(value).upper()}'") == Literal(edm.GUID, str(value))
