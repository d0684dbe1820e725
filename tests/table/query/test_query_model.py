"""A model test of Query Entities THROUGH THE SERVER.

Hypothesis draws a small set of entities (mixed Edm types, missing properties, unicode, astral
and empty keys) and random `$filter` texts from a grammar (comparisons on PartitionKey, RowKey
and user properties against literals of every type and spelling, literal on either side, bare
booleans, constants, ``and``/``or``/``not``). Each filter is run over raw HTTP with a small
``$top``, following the continuation tokens. The keys returned must equal, in UTF-16 ordinal key
order, the keys an independent reference evaluator written here selects.

The reference follows the spec's rules, not the server's code:

* a missing property makes every comparison false, ``ne`` included; ``not`` negates;
* the literal type must match the property type after widening (Int32 → Int64/Double,
  Int64 → Double), never narrowing; on a mismatch eq/gt/ge are false and ne/lt/le true;
* ``literal op property`` means ``property op' literal`` with the operator flipped;
* strings compare by UTF-16 code units; DateTime by 100 ns ticks, literals normalised to UTC and
  truncated beyond 7 fraction digits; Guids by their canonical lower-case text (not settled against Azure);
  Binary bytewise; Boolean false < true; Doubles by IEEE rules (NaN false except ``ne``);
* ``X eq null`` is true when X is missing, ``X ne null`` when present;
* a bare property ``X`` is ``X eq true``.

Int64 literals against Double properties are drawn so that converting the literal to a double
and comparing exactly give the same answer (the spec does not say which is meant).
"""

from __future__ import annotations

import base64
import itertools
import math
import os
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.rawhttp import RawClient
from tests.serverproc import ServerProcess

STRING, BOOLEAN, INT32, INT64, DOUBLE = "Edm.String", "Edm.Boolean", "Edm.Int32", "Edm.Int64", "Edm.Double"
DATETIME, GUID, BINARY, NULL = "Edm.DateTime", "Edm.Guid", "Edm.Binary", "null"

OPS = ("eq", "ne", "gt", "ge", "lt", "le")
FLIP = {"eq": "eq", "ne": "ne", "gt": "lt", "ge": "le", "lt": "gt", "le": "ge"}

USER_NAMES = ["a", "A", "X"]
FILTER_NAMES = ["PartitionKey", "RowKey", *USER_NAMES, "nosuch"]

KEYS = ["", "a", "B", "b", "ab", "O'N", " ", "100%", "+", "é", "\ue000", "\ufffd", "\U0001f600", "\U00010000"]
STRINGS = [*KEYS, "true", "1", "x"]
INT32S = [-(2**31), -7, -1, 0, 1, 5, 7, 2**31 - 1]
INT64S = [-(2**63), -(2**40), -1, 0, 5, 7, 2**40, 2**63 - 1]
DOUBLES = [-1e300, -1.5, -0.0, 0.0, 1.0, 1.5, 5.0, 7.0, float(2**40), 1e300]
SPECIAL_DOUBLES = [math.nan, math.inf, -math.inf]
GUIDS = [
    uuid.UUID("00000000-0000-0000-0000-000000000000"),
    uuid.UUID("c9da6455-213d-42c9-9a79-3e9149a57833"),
    uuid.UUID("C9DA6455-213D-42C9-9A79-3E9149A57834"),
    uuid.UUID("ffffffff-ffff-ffff-ffff-ffffffffffff"),
]
BINARIES = [b"", b"\x00", b"\x00\x01", b"\x01", b"\xff", b"\x00\xff"]

TICKS_PER_SECOND = 10**7
_EPOCH = datetime(1, 1, 1)


def ticks_of(moment: datetime, extra_ticks: int = 0) -> int:
    return (moment - _EPOCH) // timedelta(microseconds=1) * 10 + extra_ticks


DATETIMES = [
    ticks_of(datetime(1601, 1, 1)),
    ticks_of(datetime(2000, 1, 1)),
    ticks_of(datetime(2020, 6, 15, 12, 30, 45, 123456), 7),
    ticks_of(datetime(2020, 6, 15, 12, 30, 45, 123456), 8),
    ticks_of(datetime(9999, 12, 31, 23, 59, 59, 999999), 9),
]
MIDDLE_DATETIMES = DATETIMES[1:4]  # safe to shift by a zone offset


def utf16(text: str) -> bytes:
    return text.encode("utf-16-be", "surrogatepass")


def format_ticks(ticks: int, *, trim: bool = False, extra: str = "", offset_minutes: int = 0) -> str:
    """ISO 8601 text for ``ticks`` (UTC), written in a zone ``offset_minutes`` east of UTC."""
    seconds, fraction = divmod(ticks + offset_minutes * 60 * TICKS_PER_SECOND, TICKS_PER_SECOND)
    moment = _EPOCH + timedelta(seconds=seconds)
    text = f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T{moment:%H:%M:%S}"
    digits = f"{fraction:07d}"
    if trim:
        digits = digits.rstrip("0")
    elif extra:
        digits += extra  # beyond 100 ns: the server truncates
    if digits:
        text += "." + digits
    if offset_minutes == 0:
        return text + "Z"
    sign = "+" if offset_minutes > 0 else "-"
    hours, minutes = divmod(abs(offset_minutes), 60)
    return f"{text}{sign}{hours:02d}:{minutes:02d}"


# ------------------------------------------------------------------------------- entities


@dataclass(frozen=True)
class Value:
    edm: str
    value: Any


def json_fields(name: str, prop: Value, style: int) -> dict[str, Any]:
    """The JSON members that store ``prop`` (annotated where the type needs it)."""
    kind, value = prop.edm, prop.value
    if kind == STRING:
        return {f"{name}@odata.type": STRING, name: value} if style else {name: value}
    if kind == BOOLEAN:
        return {name: value}
    if kind == INT32:
        return {f"{name}@odata.type": INT32, name: value} if style else {name: value}
    if kind == INT64:
        return {f"{name}@odata.type": INT64, name: str(value)}
    if kind == DOUBLE:
        if math.isnan(value):
            wire: Any = "NaN"
        elif math.isinf(value):
            wire = "Infinity" if value > 0 else "-Infinity"
        else:
            wire = value
        return {f"{name}@odata.type": DOUBLE, name: wire}
    if kind == DATETIME:
        return {f"{name}@odata.type": DATETIME, name: format_ticks(value)}
    if kind == GUID:
        text = str(value)
        return {f"{name}@odata.type": GUID, name: text.upper() if style else text}
    assert kind == BINARY
    return {f"{name}@odata.type": BINARY, name: base64.b64encode(value).decode("ascii")}


values = st.one_of(
    st.sampled_from(STRINGS).map(lambda v: Value(STRING, v)),
    st.booleans().map(lambda v: Value(BOOLEAN, v)),
    st.sampled_from(INT32S).map(lambda v: Value(INT32, v)),
    st.sampled_from(INT64S).map(lambda v: Value(INT64, v)),
    st.sampled_from(DOUBLES + SPECIAL_DOUBLES).map(lambda v: Value(DOUBLE, v)),
    st.sampled_from(DATETIMES).map(lambda v: Value(DATETIME, v)),
    st.sampled_from(GUIDS).map(lambda v: Value(GUID, v)),
    st.sampled_from(BINARIES).map(lambda v: Value(BINARY, v)),
)


@dataclass(frozen=True)
class Entity:
    pk: str
    rk: str
    props: dict[str, Value]
    style: int

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"PartitionKey": self.pk, "RowKey": self.rk}
        for name, prop in self.props.items():
            out.update(json_fields(name, prop, self.style))
        return out

    def get(self, name: str) -> Value | None:
        if name == "PartitionKey":
            return Value(STRING, self.pk)
        if name == "RowKey":
            return Value(STRING, self.rk)
        return self.props.get(name)


entities = st.builds(
    Entity,
    pk=st.sampled_from(KEYS),
    rk=st.sampled_from(KEYS),
    props=st.dictionaries(st.sampled_from(USER_NAMES), values, max_size=3),
    style=st.integers(0, 1),
)
entity_sets = st.lists(entities, max_size=9, unique_by=lambda e: (e.pk, e.rk))


# ------------------------------------------------------------------------------ literals


@dataclass(frozen=True)
class Lit:
    edm: str
    value: Any
    text: str


@st.composite
def datetime_literals(draw: st.DrawFn) -> Lit:
    ticks = draw(st.sampled_from(DATETIMES))
    style = draw(st.sampled_from(["full", "trim", "extra", "offset"]))
    if style == "offset" and ticks in MIDDLE_DATETIMES:
        offset = draw(st.sampled_from([60, -270, 330, -720]))
        text = format_ticks(ticks, offset_minutes=offset, trim=draw(st.booleans()))
    elif style == "extra":
        text = format_ticks(ticks, extra=draw(st.sampled_from(["0", "99", "123456"])))
    else:
        text = format_ticks(ticks, trim=style == "trim")
    return Lit(DATETIME, ticks, f"datetime'{text}'")


@st.composite
def guid_literals(draw: st.DrawFn) -> Lit:
    value = draw(st.sampled_from(GUIDS))
    text = str(value).upper() if draw(st.booleans()) else str(value)
    return Lit(GUID, value, f"guid'{text}'")


@st.composite
def binary_literals(draw: st.DrawFn) -> Lit:
    value = draw(st.sampled_from(BINARIES))
    digits = value.hex().upper() if draw(st.booleans()) else value.hex()
    prefix = draw(st.sampled_from(["X", "binary"]))
    return Lit(BINARY, value, f"{prefix}'{digits}'")


@st.composite
def double_literals(draw: st.DrawFn) -> Lit:
    value = draw(st.sampled_from(DOUBLES))
    spellings = [repr(value)]
    if value == 1.5:
        spellings += ["15E-1", "1.5d", "0.15e1"]
    elif value == 5.0:
        spellings += ["5d", "5D", "5.0E0", "50e-1"]
    elif value == 1e300:
        spellings += ["1E300", "1e+300", "1.0e300d"]
    elif value == -1e300:
        spellings += ["-1E+300"]
    return Lit(DOUBLE, value, draw(st.sampled_from(spellings)))


def string_literal(value: str) -> Lit:
    return Lit(STRING, value, "'" + value.replace("'", "''") + "'")


literals = st.one_of(
    st.sampled_from(STRINGS).map(string_literal),
    st.booleans().map(lambda v: Lit(BOOLEAN, v, "true" if v else "false")),
    st.sampled_from(INT32S).map(lambda v: Lit(INT32, v, str(v))),
    st.tuples(st.sampled_from(INT64S), st.sampled_from("Ll")).map(
        lambda t: Lit(INT64, t[0], f"{t[0]}{t[1]}")
    ),
    double_literals(),
    datetime_literals(),
    guid_literals(),
    binary_literals(),
)
key_literals = st.sampled_from(KEYS).map(string_literal)


# ------------------------------------------------------------------------------- filters


@dataclass(frozen=True)
class Cmp:
    name: str
    op: str  # as written
    lit: Lit
    literal_left: bool


@dataclass(frozen=True)
class Bare:
    name: str


@dataclass(frozen=True)
class Const:
    value: bool


@dataclass(frozen=True)
class Not:
    operand: Any


@dataclass(frozen=True)
class Bin:
    op: str  # "and" / "or"
    left: Any
    right: Any


@st.composite
def comparisons(draw: st.DrawFn) -> Cmp:
    name = draw(st.sampled_from(FILTER_NAMES))
    if draw(st.booleans()):
        return Cmp(name, draw(st.sampled_from(("eq", "ne"))), Lit(NULL, None, "null"), draw(st.booleans()))
    if name in ("PartitionKey", "RowKey") and draw(st.integers(0, 3)):
        lit = draw(key_literals)  # mostly strings, so that the planner's key ranges get exercised
    else:
        lit = draw(literals)
    return Cmp(name, draw(st.sampled_from(OPS)), lit, draw(st.integers(0, 3)) == 0)


leaves = st.one_of(
    comparisons(),
    comparisons(),
    comparisons(),
    st.sampled_from(FILTER_NAMES).map(Bare),
    st.booleans().map(Const),
)
filters = st.recursive(
    leaves,
    lambda children: st.one_of(
        children.map(Not),
        st.builds(Bin, st.sampled_from(("and", "or")), children, children),
    ),
    max_leaves=8,
)


def render(node: Any, spaces: str = " ") -> str:
    """Filter text; parentheses only where the spec's precedence needs them (and binds tighter)."""
    if isinstance(node, Cmp):
        if node.literal_left:
            return f"{node.lit.text}{spaces}{node.op}{spaces}{node.name}"
        return f"{node.name}{spaces}{node.op}{spaces}{node.lit.text}"
    if isinstance(node, Bare):
        return node.name
    if isinstance(node, Const):
        return "true" if node.value else "false"
    if isinstance(node, Not):
        inner = render(node.operand, spaces)
        if isinstance(node.operand, Bare | Const):
            return f"not {inner}"
        return f"not ({inner})"
    assert isinstance(node, Bin)
    parts = []
    for child in (node.left, node.right):
        text = render(child, spaces)
        # ``a or b`` inside ``and`` must be grouped; everything else may stand bare.
        if isinstance(child, Bin) and child.op == "or" and node.op == "and":
            text = f"({text})"
        parts.append(text)
    return f"{parts[0]}{spaces}{node.op}{spaces}{parts[1]}"


def count_comparisons(node: Any) -> int:
    if isinstance(node, Cmp | Bare):
        return 1
    if isinstance(node, Not):
        return count_comparisons(node.operand)
    if isinstance(node, Bin):
        return count_comparisons(node.left) + count_comparisons(node.right)
    return 0


# ----------------------------------------------------------------- the reference evaluator

# The property types a literal of each type is compared with.
COMPATIBLE = {
    STRING: {STRING},
    BOOLEAN: {BOOLEAN},
    INT32: {INT32, INT64, DOUBLE},
    INT64: {INT64, DOUBLE},
    DOUBLE: {DOUBLE},
    DATETIME: {DATETIME},
    GUID: {GUID},
    BINARY: {BINARY},
}
MISMATCH = {"eq": False, "gt": False, "ge": False, "ne": True, "lt": True, "le": True}


def comparable(kind: str, value: Any) -> Any:
    if kind == STRING:
        return utf16(value)
    if kind == BOOLEAN:
        return int(value)
    if kind == GUID:
        return str(value).lower()
    return value  # ints, floats, ticks, bytes compare natively


def apply(op: str, left: Any, right: Any) -> bool:
    if op == "eq":
        return bool(left == right)
    if op == "ne":
        return bool(left != right)
    if op == "gt":
        return bool(left > right)
    if op == "ge":
        return bool(left >= right)
    if op == "lt":
        return bool(left < right)
    return bool(left <= right)


def compare(entity: Entity, name: str, op: str, lit: Lit) -> bool:
    """``name op lit`` with the property on the left."""
    prop = entity.get(name)
    if lit.edm == NULL:
        assert op in ("eq", "ne")
        return (prop is None) if op == "eq" else (prop is not None)
    if prop is None:
        return False
    if prop.edm not in COMPATIBLE[lit.edm]:
        return MISMATCH[op]
    literal = lit.value
    if prop.edm == DOUBLE:
        literal = float(literal)  # widening Int32/Int64 → Double
    return apply(op, comparable(prop.edm, prop.value), comparable(prop.edm, literal))


def matches(entity: Entity, node: Any) -> bool:
    if isinstance(node, Cmp):
        op = FLIP[node.op] if node.literal_left else node.op
        return compare(entity, node.name, op, node.lit)
    if isinstance(node, Bare):
        return compare(entity, node.name, "eq", Lit(BOOLEAN, True, "true"))
    if isinstance(node, Const):
        return node.value
    if isinstance(node, Not):
        return not matches(entity, node.operand)
    assert isinstance(node, Bin)
    if node.op == "and":
        return matches(entity, node.left) and matches(entity, node.right)
    return matches(entity, node.left) or matches(entity, node.right)


def expected_keys(stored: list[Entity], node: Any) -> list[tuple[str, str]]:
    selected = [(e.pk, e.rk) for e in stored if matches(e, node)]
    return sorted(selected, key=lambda key: (utf16(key[0]), utf16(key[1])))


def test_reference_evaluator_agrees_with_the_spec_examples() -> None:
    """Pin the reference itself on the spec's own examples before trusting it against the server."""
    entity = Entity(
        "p", "r", {"i": Value(INT32, 5), "d": Value(DOUBLE, math.nan), "b": Value(BOOLEAN, True)}, 0
    )
    assert not matches(entity, Cmp("x", "ne", Lit(INT32, 1, "1"), False))  # missing: false even for ne
    assert matches(entity, Not(Cmp("x", "eq", Lit(INT32, 1, "1"), False)))
    assert matches(entity, Cmp("i", "lt", string_literal("a"), False))  # mismatch: lt true
    assert not matches(entity, Cmp("i", "lt", string_literal("a"), True))  # 'a' lt i = i gt 'a'
    assert not matches(entity, Cmp("i", "eq", Lit(DOUBLE, 5.0, "5.0"), False))  # never narrowed
    assert not matches(entity, Cmp("i", "eq", Lit(INT64, 5, "5L"), False))  # nor an Int64 literal
    assert matches(entity, Cmp("d", "ne", Lit(INT32, 1, "1"), False))  # NaN: only ne
    assert not matches(entity, Cmp("d", "eq", Lit(DOUBLE, 0.0, "0.0"), False))
    assert not matches(entity, Cmp("d", "ge", Lit(INT32, 1, "1"), False))
    assert matches(entity, Bare("b")) and not matches(entity, Bare("i"))
    assert matches(entity, Cmp("x", "eq", Lit(NULL, None, "null"), False))
    assert matches(entity, Cmp("PartitionKey", "ne", Lit(NULL, None, "null"), True))
    assert sorted(["\ue000", "\U0001f600"], key=utf16) == ["\U0001f600", "\ue000"]


# -------------------------------------------------------------------------- the property

_tables = itertools.count()


def query_all(raw: RawClient, table: str, text: str, top: int) -> list[tuple[str, str]]:
    base = f"{table}()?$filter={quote(text, safe='')}&$top={top}"
    target, keys = base, []
    for _ in range(200):
        response = raw.request("GET", target)
        assert response.status == 200, (text, response)
        rows = response.json()["value"]
        assert len(rows) <= top, (text, rows)
        keys.extend((row["PartitionKey"], row["RowKey"]) for row in rows)
        npk = response.header("x-ms-continuation-NextPartitionKey")
        nrk = response.header("x-ms-continuation-NextRowKey")
        assert (npk is None) == (nrk is None), (text, response)
        if npk is None:
            return keys
        assert npk and nrk and " " not in npk + nrk, (text, response)
        target = f"{base}&NextPartitionKey={npk}&NextRowKey={nrk}"
    raise AssertionError(f"continuations never end for {text!r}")


@settings(
    max_examples=25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    stored=entity_sets,
    queries=st.lists(
        st.tuples(filters, st.sampled_from([1, 2, 3]), st.sampled_from([" ", "  "])), min_size=1, max_size=5
    ),
)
def test_query_results_match_the_reference_model(
    server: ServerProcess, stored: list[Entity], queries: list[tuple[Any, int, str]]
) -> None:
    raw = RawClient(server.port)
    table = f"qmodel{os.getpid()}x{next(_tables)}"
    assert raw.create_table(table).status == 201
    try:
        for entity in stored:
            response = raw.insert(table, entity.body())
            assert response.status == 201, (entity, response)
        for node, top, spaces in queries:
            assert count_comparisons(node) <= 15
            text = render(node, spaces)
            assert query_all(raw, table, text, top) == expected_keys(stored, node), text
    finally:
        raw.request("DELETE", f"Tables('{table}')")
