"""Compile a `$filter` tree into a predicate over stored entities.

A query may test thousands of rows, so the tree is turned once into nested closures: every
decision that depends only on the filter (operand order, widening, the type-mismatch answer,
which string comparison is exact) is taken at compile time, and a row costs a dict lookup, a
type check and one comparison per condition. No tree is walked per row.

Semantics, in one place so that they can change together (not all of them are confirmed against Azure):

* PartitionKey and RowKey are Edm.String values, Timestamp an Edm.DateTime (ticks); every other
  name is looked up in the entity's user properties.
* A missing property makes every comparison false, ``ne`` included; ``not`` still negates.
* The literal's type must match the property's after widening: Int32 literal → Int64 or Double
  property, Int64 literal → Double property; never narrowing. Numbers compare exactly.
* A type mismatch answers ``eq``/``gt``/``ge`` false and ``ne``/``lt``/``le`` true.
* Strings order by UTF-16 code units, DateTimes by ticks, Guids by their lower-case canonical
  text, Binary bytewise, Booleans false < true, Doubles by IEEE rules (NaN only ``ne``).
* ``null``: ``X eq null`` is true when X is missing, ``X ne null`` when present; an ordering
  operator against ``null`` is always false (as in .NET's lifted comparisons).
* A bare boolean property ``X`` means ``X eq true``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from functools import partial
from typing import Any

from tabulae.model import edm
from tabulae.model.edm import Properties
from tabulae.model.errors import ServiceError
from tabulae.table.query.nodes import (
    EQ,
    FLIPPED,
    GE,
    GT,
    LE,
    LT,
    NE,
    NULL,
    PARTITION_KEY,
    ROW_KEY,
    TABLE_NAME,
    TIMESTAMP,
    TRUE,
    And,
    Comparison,
    Literal,
    Node,
    Not,
    Or,
    Property,
    property_names,
)

__all__ = [
    "Predicate",
    "compile_predicate",
    "compile_table_predicate",
    "references_user_properties",
]

Predicate = Callable[[str, str, int, Properties], bool]
"""``(PartitionKey, RowKey, Timestamp ticks, user properties) -> matches``."""

ValueTest = Callable[[Any], bool]

SYSTEM_PROPERTIES = frozenset({PARTITION_KEY, ROW_KEY, TIMESTAMP})

# The property types a literal of each type is compared with, widening included.
COMPATIBLE: dict[str, frozenset[str]] = {
    edm.STRING: frozenset({edm.STRING}),
    edm.BOOLEAN: frozenset({edm.BOOLEAN}),
    edm.INT32: frozenset({edm.INT32, edm.INT64, edm.DOUBLE}),
    edm.INT64: frozenset({edm.INT64, edm.DOUBLE}),
    edm.DOUBLE: frozenset({edm.DOUBLE}),
    edm.DATETIME: frozenset({edm.DATETIME}),
    edm.GUID: frozenset({edm.GUID}),
    edm.BINARY: frozenset({edm.BINARY}),
}
# The answer of a comparison whose operand types do not match.
MISMATCH = {EQ: False, GT: False, GE: False, NE: True, LT: True, LE: True}
_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    EQ: operator.eq,
    NE: operator.ne,
    GT: operator.gt,
    GE: operator.ge,
    LT: operator.lt,
    LE: operator.le,
}
# Below U+D800 a code point is one UTF-16 unit that sorts exactly like the code point. Python
# compares strings by code point, which differs from UTF-16 order only where a surrogate pair
# (U+10000 and up) meets a unit from U+D800 to U+FFFF; a literal made of characters below
# U+D800 can never be one side of such a meeting, so plain ``str`` comparison is then exact.
_FAST_STRING_LIMIT = "\ud800"


def _value_test(op: str, literal: Literal) -> ValueTest:
    """A test ``value op literal`` for a property value already known to be of a compatible type."""
    value = literal.value
    if literal.edm_type == edm.STRING and op not in (EQ, NE) and max(value, default="") >= _FAST_STRING_LIMIT:
        key = edm.utf16_sort_key(value)
        compare = _OPERATORS[op]
        sort_key = edm.utf16_sort_key
        return lambda candidate: compare(sort_key(candidate), key)
    # ``partial(gt, literal)(v)`` is ``literal > v``, i.e. ``v lt literal``: hence the flip.
    return partial(_OPERATORS[FLIPPED[op]], value)


def _constant(result: bool) -> Predicate:
    return lambda pk, rk, ts, props: result


def _slot_predicate(slot: int, test: ValueTest) -> Predicate:
    """A predicate reading one of the positional system values (0 PartitionKey, 1 RowKey, 2 Timestamp)."""
    if slot == 0:
        return lambda pk, rk, ts, props: test(pk)
    if slot == 1:
        return lambda pk, rk, ts, props: test(rk)
    return lambda pk, rk, ts, props: test(ts)


def _user_predicate(name: str, op: str, literal: Literal) -> Predicate:
    if literal.edm_type == NULL:
        if op == EQ:
            return lambda pk, rk, ts, props: name not in props
        if op == NE:
            return lambda pk, rk, ts, props: name in props
        return _constant(False)
    compatible = COMPATIBLE[literal.edm_type]
    test = _value_test(op, literal)
    mismatch = MISMATCH[op]

    def predicate(pk: str, rk: str, ts: int, props: Properties) -> bool:
        prop = props.get(name)
        if prop is None:
            return False
        if prop[0] in compatible:
            return test(prop[1])
        return mismatch

    return predicate


class _Compiler:
    """Turns a tree into closures, given which names are positional system values."""

    def __init__(self, system: dict[str, tuple[int, str]], allow_user_properties: bool) -> None:
        self.system = system
        self.allow_user_properties = allow_user_properties

    def compile(self, node: Node) -> Predicate:
        if isinstance(node, Comparison):
            return self._comparison(*node.oriented())
        if isinstance(node, Property):
            return self._comparison(node.name, EQ, TRUE)
        if isinstance(node, Literal):
            return _constant(bool(node.value))
        if isinstance(node, Not):
            inner = self.compile(node.operand)
            return lambda pk, rk, ts, props: not inner(pk, rk, ts, props)
        if isinstance(node, And):
            left, right = self.compile(node.left), self.compile(node.right)
            return lambda pk, rk, ts, props: left(pk, rk, ts, props) and right(pk, rk, ts, props)
        if isinstance(node, Or):
            left, right = self.compile(node.left), self.compile(node.right)
            return lambda pk, rk, ts, props: left(pk, rk, ts, props) or right(pk, rk, ts, props)
        raise TypeError(f"not a filter node: {node!r}")

    def _comparison(self, name: str, op: str, literal: Literal) -> Predicate:
        system = self.system.get(name)
        if system is None:
            if not self.allow_user_properties:
                message = f"The $filter may only reference {TABLE_NAME}, not '{name}'."
                raise ServiceError("InvalidInput", message)
            return _user_predicate(name, op, literal)
        slot, edm_type = system
        if literal.edm_type == NULL:  # a system value is always present
            return _constant(op == NE)
        if edm_type not in COMPATIBLE[literal.edm_type]:
            return _constant(MISMATCH[op])
        return _slot_predicate(slot, _value_test(op, literal))


_ENTITY_COMPILER = _Compiler(
    {PARTITION_KEY: (0, edm.STRING), ROW_KEY: (1, edm.STRING), TIMESTAMP: (2, edm.DATETIME)},
    allow_user_properties=True,
)
_TABLE_COMPILER = _Compiler({TABLE_NAME: (0, edm.STRING)}, allow_user_properties=False)
_NO_PROPERTIES: Properties = {}


def compile_predicate(node: Node) -> Predicate:
    """The entity predicate for ``node``; compile once per query, call once per candidate row."""
    return _ENTITY_COMPILER.compile(node)


def compile_table_predicate(node: Node) -> Callable[[str], bool]:
    """A predicate over table names for Query Tables, where only ``TableName`` may be referenced
    (anything else → 400 ``InvalidInput``). Names compare as stored, case-sensitively."""
    predicate = _TABLE_COMPILER.compile(node)
    return lambda name: predicate(name, "", 0, _NO_PROPERTIES)


def references_user_properties(node: Node) -> bool:
    """Whether evaluating ``node`` needs user properties; if not, rows need not be decoded."""
    return not property_names(node) <= SYSTEM_PROPERTIES
