"""`$filter` evaluation, case by case and against an independent reference evaluator."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabulae.model import edm
from tabulae.model.edm import Properties
from tabulae.model.errors import ServiceError
from tabulae.table.query.evaluate import (
    compile_predicate,
    compile_table_predicate,
    references_user_properties,
)
from tabulae.table.query.nodes import FALSE, NULL, TRUE, And, Comparison, Literal, Node, Not, Or, Property
from tabulae.table.query.parser import parse_filter

TS = edm.parse_datetime("2021-06-09T16:21:44.199509Z") or 0
GUID = "0f8fad5b-d9cb-469f-a165-70867728950e"

ENTITY: Properties = {
    "S": (edm.STRING, "hello"),
    "B": (edm.BOOLEAN, True),
    "F": (edm.BOOLEAN, False),
    "I": (edm.INT32, 5),
    "L": (edm.INT64, 5),
    "D": (edm.DOUBLE, 5.0),
    "Half": (edm.DOUBLE, 2.5),
    "T": (edm.DATETIME, edm.parse_datetime("2020-01-01T00:00:00Z")),
    "G": (edm.GUID, GUID),
    "Bin": (edm.BINARY, b"\x01\x02"),
    "NaN": (edm.DOUBLE, math.nan),
    "Inf": (edm.DOUBLE, math.inf),
    "Astral": (edm.STRING, "\U0001f600"),
    "Private": (edm.STRING, "\ue000"),
}


def matches(text: str, props: Properties | None = None, pk: str = "pk", rk: str = "rk", ts: int = TS) -> bool:
    return compile_predicate(parse_filter(text))(pk, rk, ts, ENTITY if props is None else props)


# -- system properties ------------------------------------------------------------------------


def test_keys_are_strings_and_timestamp_is_a_datetime() -> None:
    assert matches("PartitionKey eq 'pk' and RowKey eq 'rk'")
    assert matches("PartitionKey gt 'a' and RowKey lt 'z'")
    assert not matches("PartitionKey eq 'PK'")  # case-sensitive
    assert matches("Timestamp ge datetime'2021-06-09T16:21:44.199509Z'")
    assert not matches("Timestamp gt datetime'2021-06-09T16:21:44.199509Z'")
    assert matches("Timestamp lt datetime'2021-06-09T16:21:44.1995091Z'")
    assert matches("Timestamp eq datetime'2021-06-09T17:21:44.199509+01:00'")


def test_system_property_type_mismatch() -> None:
    assert not matches("PartitionKey eq 1")
    assert matches("PartitionKey ne 1")
    assert matches("PartitionKey lt 1")
    assert not matches("PartitionKey ge 1")
    assert not matches("Timestamp eq 'x'")
    assert matches("Timestamp le 'x'")
    assert not matches("RowKey")  # bare: RowKey eq true → mismatch


def test_system_properties_are_never_missing() -> None:
    assert not matches("PartitionKey eq null")
    assert matches("PartitionKey ne null")
    assert matches("Timestamp ne null")


def test_system_names_are_not_looked_up_in_properties() -> None:
    props: Properties = {"PartitionKey": (edm.STRING, "other")}
    assert matches("PartitionKey eq 'pk'", props)


# -- missing properties -----------------------------------------------------------------------


@pytest.mark.parametrize("op", ["eq", "ne", "gt", "ge", "lt", "le"])
@pytest.mark.parametrize("literal", ["1", "'a'", "1.5", "5L", "true", "X'00'", f"guid'{GUID}'"])
def test_missing_property_fails_every_comparison(op: str, literal: str) -> None:
    assert not matches(f"Missing {op} {literal}")
    assert not matches(f"{literal} {op} Missing")
    assert matches(f"not (Missing {op} {literal})")


def test_missing_bare_boolean() -> None:
    assert not matches("Missing")
    assert matches("not Missing")


# -- widening and mismatches ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I eq 5", True),
        ("L eq 5", True),  # Int32 literal widens to Int64
        ("D eq 5", True),  # Int32 literal widens to Double
        ("Half gt 2", True),
        ("Half lt 3", True),
        ("L eq 5L", True),
        ("D eq 5L", True),  # Int64 literal widens to Double
        ("I eq 5L", False),  # never narrowed: Int64 literal vs Int32 property is a mismatch
        ("I ne 5L", True),
        ("I eq 5.0", False),  # Double literal vs Int32 property
        ("I lt 5.0", True),
        ("L eq 5.0", False),
        ("D eq 5.0", True),
        ("D eq 5d", True),
    ],
)
def test_numeric_widening(text: str, expected: bool) -> None:
    assert matches(text) is expected


@pytest.mark.parametrize(
    ("op", "expected"),
    [("eq", False), ("gt", False), ("ge", False), ("ne", True), ("lt", True), ("le", True)],
)
@pytest.mark.parametrize(
    "comparison",
    [
        "I {op} 'a'",  # string literal vs Int32 property
        "S {op} 1",
        "G {op} '0f8fad5b-d9cb-469f-a165-70867728950e'",  # a Guid is not a String
        "S {op} guid'0f8fad5b-d9cb-469f-a165-70867728950e'",
        "B {op} 1",
        "T {op} 'x'",
        "Bin {op} 'x'",
        "S {op} true",
        "I {op} datetime'2020-01-01T00:00:00Z'",
        "D {op} X'00'",
    ],
)
def test_type_mismatch(comparison: str, op: str, expected: bool) -> None:
    assert matches(comparison.format(op=op)) is expected


# -- per-type ordering ------------------------------------------------------------------------


def test_strings_are_ordinal() -> None:
    props: Properties = {"S": (edm.STRING, "a")}
    assert matches("S gt 'B'", props)  # 'a' > 'B': no collation
    assert matches("S lt 'b'", props)
    assert matches("S gt ''", props)
    assert not matches("S eq 'A'", props)
    assert matches("S lt 'aa'", props)


def test_strings_order_by_utf16_code_units() -> None:
    # U+1F600 is D83D DE00 in UTF-16: below U+E000 and U+FFFF, unlike its code point.
    assert matches("Astral lt '\ue000'")
    assert matches("Astral lt '\uffff'")
    assert not matches("Astral gt '\uffff'")
    assert matches("Private gt '\U0001f600'")
    assert matches("Private ge '\U0001f600'")
    assert matches("Astral gt '\ud7ff'")
    assert matches("PartitionKey lt '\ue000'", pk="\U0001f600")
    assert matches("RowKey gt '\U0001f600'", rk="\uffff")
    assert matches("Astral eq '\U0001f600'")


def test_datetimes_are_chronological() -> None:
    assert matches("T eq datetime'2020-01-01T00:00:00.0000000Z'")
    assert matches("T lt datetime'2020-01-01T00:00:00.0000001Z'")
    assert matches("T gt datetime'2019-12-31T23:59:59.9999999Z'")
    assert matches("T eq datetime'2019-12-31T19:00:00-05:00'")


def test_guids() -> None:
    assert matches(f"G eq guid'{GUID.upper()}'")
    assert not matches(f"G ne guid'{GUID}'")
    assert matches("G gt guid'00000000-0000-0000-0000-000000000000'")
    assert matches("G lt guid'f0000000-0000-0000-0000-000000000000'")
    assert matches("G lt guid'AAAAAAAA-0000-0000-0000-000000000000'")  # canonical lower-case order


def test_binary_is_bytewise() -> None:
    assert matches("Bin eq X'0102'")
    assert matches("Bin gt X'01'")
    assert matches("Bin lt X'02'")
    assert matches("Bin gt X''")
    assert matches("Bin lt binary'0103'")


def test_booleans() -> None:
    assert matches("B eq true") and matches("F eq false")
    assert matches("F lt true") and matches("B gt false")
    assert matches("B") and not matches("F")
    assert matches("not F")
    assert not matches("I")  # a bare non-boolean property: I eq true → mismatch


def test_doubles_follow_ieee() -> None:
    for op in ("eq", "gt", "ge", "lt", "le"):
        assert not matches(f"NaN {op} 1.0")
        assert not matches(f"NaN {op} 1")
    assert matches("NaN ne 1.0")
    assert matches("Inf gt 1e+300")
    assert matches("D eq 5.0")
    assert matches("Zero eq 0.0", {"Zero": (edm.DOUBLE, -0.0)})


def test_null_literal() -> None:
    assert matches("Missing eq null")
    assert not matches("Missing ne null")
    assert not matches("S eq null")
    assert matches("S ne null")
    assert matches("null eq Missing")
    for op in ("gt", "ge", "lt", "le"):
        assert not matches(f"S {op} null")
        assert not matches(f"Missing {op} null")


def test_literal_on_the_left_is_mirrored() -> None:
    assert matches("4 lt I") and not matches("5 lt I") and matches("5 le I")
    assert matches("'a' lt S") and matches("6 gt I") and not matches("5 gt I")


def test_constants_and_connectives() -> None:
    assert matches("true") and not matches("false")
    assert matches("I eq 5 and S eq 'hello'")
    assert not matches("I eq 5 and S eq 'x'")
    assert matches("I eq 4 or S eq 'hello'")
    assert matches("not (I eq 4 or S eq 'x')")


def test_compiled_predicate_is_reusable() -> None:
    predicate = compile_predicate(parse_filter("Age ge 18 and PartitionKey eq 'p'"))
    rows = [("p", str(age), {"Age": (edm.INT32, age)}) for age in range(15, 22)]
    assert [rk for pk, rk, props in rows if predicate(pk, rk, 0, props)] == ["18", "19", "20", "21"]


def test_references_user_properties() -> None:
    assert not references_user_properties(parse_filter("PartitionKey eq 'a' and RowKey gt 'b'"))
    assert not references_user_properties(parse_filter("Timestamp ge datetime'2020-01-01T00:00:00Z'"))
    assert not references_user_properties(parse_filter("true"))
    assert references_user_properties(parse_filter("PartitionKey eq 'a' and Age gt 5"))
    assert references_user_properties(parse_filter("not IsActive"))
    assert references_user_properties(parse_filter("5 lt Age"))


# -- Query Tables -----------------------------------------------------------------------------


def test_table_predicate() -> None:
    exists = compile_table_predicate(parse_filter("TableName eq 'mytable'"))
    assert exists("mytable") and not exists("MyTable") and not exists("other")
    prefix = compile_table_predicate(parse_filter("TableName ge 'abc' and TableName lt 'abd'"))
    assert [n for n in ["ab", "abc", "abcz", "abd", "b"] if prefix(n)] == ["abc", "abcz"]
    assert compile_table_predicate(parse_filter("true"))("x")
    assert compile_table_predicate(parse_filter("not (TableName eq 'x')"))("y")


@pytest.mark.parametrize(
    "text", ["PartitionKey eq 'a'", "Name eq 'x'", "TableName eq 'a' or Other", "IsActive"]
)
def test_table_predicate_rejects_other_properties(text: str) -> None:
    with pytest.raises(ServiceError) as info:
        compile_table_predicate(parse_filter(text))
    assert info.value.code == "InvalidInput"


# -- against a reference evaluator ------------------------------------------------------------

_FLIP = {"eq": "eq", "ne": "ne", "gt": "lt", "ge": "le", "lt": "gt", "le": "ge"}
_WIDENS_TO = {edm.INT32: {edm.INT32, edm.INT64, edm.DOUBLE}, edm.INT64: {edm.INT64, edm.DOUBLE}}


def _compare(op: str, a: Any, b: Any) -> bool:
    return {
        "eq": a == b,
        "ne": a != b,
        "gt": a > b,
        "ge": a >= b,
        "lt": a < b,
        "le": a <= b,
    }[op]


def reference(node: Node, entity: dict[str, tuple[str, Any]]) -> bool:
    """The evaluation rules read literally, one rule at a time, with no attention to speed."""
    if isinstance(node, Literal):
        return bool(node.value)
    if isinstance(node, Property):
        return reference(Comparison("eq", node, TRUE), entity)
    if isinstance(node, Not):
        return not reference(node.operand, entity)
    if isinstance(node, And):
        return reference(node.left, entity) and reference(node.right, entity)
    if isinstance(node, Or):
        return reference(node.left, entity) or reference(node.right, entity)
    assert isinstance(node, Comparison)
    if isinstance(node.left, Property):
        name, op, literal = node.left.name, node.op, node.right
    else:
        name, op, literal = node.right.name, _FLIP[node.op], node.left  # type: ignore[union-attr]
    assert isinstance(literal, Literal)
    prop = entity.get(name)
    if literal.edm_type == NULL:
        return {"eq": prop is None, "ne": prop is not None}.get(op, False)
    if prop is None:
        return False
    prop_type, value = prop
    if prop_type not in _WIDENS_TO.get(literal.edm_type, {literal.edm_type}):
        return op in ("ne", "lt", "le")
    other = literal.value
    if prop_type == edm.STRING:
        value, other = value.encode("utf-16-be", "surrogatepass"), other.encode("utf-16-be", "surrogatepass")
    return _compare(op, value, other)


KEY_TEXT = st.text(
    alphabet=st.sampled_from(["a", "b", "B", "\ue000", "\uffff", "\U0001f600", "\U00010000"]), max_size=3
)
VALUES: dict[str, st.SearchStrategy[Any]] = {
    edm.STRING: KEY_TEXT,
    edm.BOOLEAN: st.booleans(),
    edm.INT32: st.integers(-3, 3),
    edm.INT64: st.integers(-3, 3) | st.just(2**40),
    edm.DOUBLE: st.sampled_from([-3.0, -0.0, 0.0, 1.5, 2.0, 1e300, math.inf, -math.inf, math.nan]),
    edm.DATETIME: st.integers(0, 3),
    edm.GUID: st.sampled_from(
        [GUID, "00000000-0000-0000-0000-000000000000", "ffffffff-0000-0000-0000-000000000000"]
    ),
    edm.BINARY: st.sampled_from([b"", b"\x00", b"\x01", b"\x00\xff"]),
}
LITERAL_VALUES = {**VALUES, edm.DOUBLE: st.sampled_from([-3.0, -0.0, 0.0, 1.5, 2.0, 1e300])}
USER_NAMES = ["A", "B", "C"]
ALL_NAMES = ["PartitionKey", "RowKey", "Timestamp", *USER_NAMES]


# Types the widening and UTF-16 rules are about come up more often.
WEIGHTED_TYPES = [edm.STRING, edm.STRING, edm.STRING, edm.INT32, edm.INT32, edm.INT64, edm.INT64, edm.DOUBLE]
WEIGHTED_TYPES += [edm.DOUBLE, edm.BOOLEAN, edm.DATETIME, edm.GUID, edm.BINARY]


@st.composite
def typed_values(draw: st.DrawFn, pool: dict[str, st.SearchStrategy[Any]]) -> tuple[str, Any]:
    edm_type = draw(st.sampled_from(WEIGHTED_TYPES))
    return edm_type, draw(pool[edm_type])


@st.composite
def entities(draw: st.DrawFn) -> tuple[str, str, int, Properties]:
    props = draw(st.dictionaries(st.sampled_from(USER_NAMES), typed_values(VALUES)))
    return draw(KEY_TEXT), draw(KEY_TEXT), draw(st.integers(0, 3)), props


@st.composite
def comparisons(draw: st.DrawFn) -> Comparison:
    prop = Property(draw(st.sampled_from(ALL_NAMES)))
    if draw(st.integers(0, 9)) == 0:
        literal = Literal(NULL, None)
    else:
        literal = Literal(*draw(typed_values(LITERAL_VALUES)))
    op = draw(st.sampled_from(["eq", "ne", "gt", "ge", "lt", "le"]))
    return Comparison(op, prop, literal) if draw(st.booleans()) else Comparison(op, literal, prop)


FILTERS = st.recursive(
    st.one_of(comparisons(), st.sampled_from(ALL_NAMES).map(Property), st.sampled_from([TRUE, FALSE])),
    lambda inner: st.one_of(st.builds(And, inner, inner), st.builds(Or, inner, inner), st.builds(Not, inner)),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FILTERS, st.lists(entities(), min_size=1, max_size=8))
def test_compiled_predicate_agrees_with_reference(
    node: Node, rows: list[tuple[str, str, int, Properties]]
) -> None:
    predicate = compile_predicate(node)
    for pk, rk, ts, props in rows:
        entity = {
            **props,
            "PartitionKey": (edm.STRING, pk),
            "RowKey": (edm.STRING, rk),
            "Timestamp": (edm.DATETIME, ts),
        }
        assert predicate(pk, rk, ts, props) is reference(node, entity), (node, entity)


SAMPLES: dict[str, list[Any]] = {
    edm.STRING: ["", "a", "B", "ab", "\ue000", "\uffff", "\U0001f600", "a\U0001f600", "a\uffff"],
    edm.BOOLEAN: [False, True],
    edm.INT32: [-3, 0, 2, 3],
    edm.INT64: [-3, 0, 2, 2**40],
    edm.DOUBLE: [-3.0, -0.0, 0.0, 1.5, 2.0, 1e300, math.inf, -math.inf, math.nan],
    edm.DATETIME: [0, 1, edm.MAX_DATETIME_TICKS],
    edm.GUID: [GUID, "00000000-0000-0000-0000-000000000000"],
    edm.BINARY: [b"", b"\x00", b"\x00\xff", b"\x01"],
}


def test_every_type_pair_agrees_with_reference() -> None:
    """Exhaustive over sample values: every literal type x property type x operator x side."""
    literals = [Literal(NULL, None)] + [
        Literal(kind, value)
        for kind, values in SAMPLES.items()
        for value in values
        if not (kind == edm.DOUBLE and not math.isfinite(value))
    ]
    properties: list[Properties] = [{}] + [
        {"A": (kind, value)} for kind, values in SAMPLES.items() for value in values
    ]
    keys = SAMPLES[edm.STRING]
    checked = 0
    for literal in literals:
        for op in ("eq", "ne", "gt", "ge", "lt", "le"):
            for name in ("A", "PartitionKey", "RowKey", "Timestamp"):
                for node in (
                    Comparison(op, Property(name), literal),
                    Comparison(op, literal, Property(name)),
                ):
                    predicate = compile_predicate(node)
                    if name == "A":
                        for props in properties:
                            assert predicate("", "", 0, props) is reference(node, props), (node, props)
                            checked += 1
                    else:
                        for key in keys:
                            entity = {
                                "PartitionKey": (edm.STRING, key),
                                "RowKey": (edm.STRING, key[::-1]),
                                "Timestamp": (edm.DATETIME, len(key)),
                            }
                            assert predicate(key, key[::-1], len(key), {}) is reference(node, entity), node
                            checked += 1
    assert checked > 10_000


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["eq", "ne", "gt", "ge", "lt", "le"]), KEY_TEXT, KEY_TEXT, st.booleans())
def test_table_predicate_agrees_with_reference(op: str, literal: str, name: str, literal_left: bool) -> None:
    prop, lit = Property("TableName"), Literal(edm.STRING, literal)
    node = Comparison(op, lit, prop) if literal_left else Comparison(op, prop, lit)
    assert compile_table_predicate(node)(name) is reference(node, {"TableName": (edm.STRING, name)})


def test_false_constant_filter() -> None:
    assert compile_predicate(FALSE)("a", "b", 0, {}) is False
