"""A row :class:`~tabulae.storage.scans.Condition` as one SQL condition, for every engine.

A filtered scan is fastest when rows that fail never leave the database. This module turns a
condition tree into SQL that decides each row *exactly* as the service's ``$filter`` evaluator
does, wherever SQL can; the engines only say how their SQL reads a stored property
(:class:`Dialect`). The rules below are the evaluator's, restated per stored type:

* Every comparison is a ``CASE`` over the property's stored type: a missing property is false;
  a compatible type (after Int32→Int64→Double widening) compares the values; any other type is
  the mismatch answer (``eq``/``gt``/``ge`` false, ``ne``/``lt``/``le`` true). Each comparison is
  therefore two-valued (never SQL ``NULL``), so ``NOT`` negates exactly, missing properties too.
* Strings order by UTF-16 code units. Byte order of UTF-8 (both engines' binary collation) is
  code point order, which is the same whenever the literal has no character from U+D800 up: an
  order comparison against a literal with such a character is not pushed down.
* Int64 values are stored as decimal text and compared as integers; DateTimes as canonical
  text (fixed-width date, seconds, then the fraction with trailing zeros trimmed), whose order
  without the final ``Z`` is the order of ticks; Guids as canonical lower-case text.
* A Double compared with an integer literal ``L`` is compared with ``f = float(L)``: a double
  other than ``f`` lies on the same side of ``L`` as of ``f``, and ``f`` itself relates to ``L``
  as Python (exact) says. NaN, Infinity and -Infinity are stored as annotated text and answer
  as constants decided here.

What SQL cannot decide exactly (an order comparison on Binary where the engine cannot decode
base64, the string case above, odd property names) is replaced by a bound that keeps every
row that could pass: the condition then is a superset, and the caller runs the exact evaluator
on what comes back. To keep that true under ``not``, every node is translated twice, as a
superset and as a subset of its rows, and a negation swaps them.
"""

from __future__ import annotations

import math
import operator
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tabulae.model import edm
from tabulae.storage.scans import NULL, AllOf, AnyOf, Condition, Negation, PropertyTest

__all__ = ["DOUBLE_SPECIAL", "Dialect", "Fragment", "Translation", "translate"]

DOUBLE_SPECIAL = "Edm.Double/special"
"""The stored kind of a NaN or infinite Double (annotated text), told apart from finite ones."""

# The stored kinds compared with a literal of each type (the evaluator's widening table).
_COMPATIBLE: dict[str, tuple[str, ...]] = {
    edm.STRING: (edm.STRING,),
    edm.BOOLEAN: (edm.BOOLEAN,),
    edm.INT32: (edm.INT32, edm.INT64, edm.DOUBLE, DOUBLE_SPECIAL),
    edm.INT64: (edm.INT64, edm.DOUBLE, DOUBLE_SPECIAL),
    edm.DOUBLE: (edm.DOUBLE, DOUBLE_SPECIAL),
    edm.DATETIME: (edm.DATETIME,),
    edm.GUID: (edm.GUID,),
    edm.BINARY: (edm.BINARY,),
}
_MISMATCH = {"eq": False, "gt": False, "ge": False, "ne": True, "lt": True, "le": True}
_SQL_OPS = {"eq": "=", "ne": "<>", "gt": ">", "ge": ">=", "lt": "<", "le": "<="}
_PYTHON_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": operator.eq,
    "ne": operator.ne,
    "gt": operator.gt,
    "ge": operator.ge,
    "lt": operator.lt,
    "le": operator.le,
}
_SPECIALS = (("NaN", math.nan), ("Infinity", math.inf), ("-Infinity", -math.inf))
# Names SQL can quote safely and JSON paths can address; others are left to the evaluator.
_SIMPLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,49}")


@dataclass(frozen=True, slots=True)
class Fragment:
    """SQL text and its parameters, in the order their placeholders appear."""

    sql: str
    params: tuple[Any, ...] = ()


_Part = Fragment | bool  # a condition, or a constant


class Dialect(ABC):
    """How one engine's SQL reads a stored entity. Every fragment may be evaluated only where
    the property is stored as the named kind (inside the ``CASE`` branch that tested it)."""

    true: str = "TRUE"
    false: str = "FALSE"
    lenient: bool = False
    """Whether a value fragment may run on a property of any stored kind without raising (it
    then merely answers wrongly, or ``NULL``): a comparison can then test the value first and
    the type only on the rows whose value matched, which is most of the work saved."""

    @abstractmethod
    def missing(self, name: str) -> Fragment:
        """True when the row has no property ``name``."""

    @abstractmethod
    def stored_as(self, name: str, kind: str) -> Fragment:
        """True when ``name`` is stored as ``kind`` (an Edm type or :data:`DOUBLE_SPECIAL`)."""

    @abstractmethod
    def compare(self, name: str, kind: str, op: str, value: Any) -> Fragment | None:
        """``name op value`` for a property stored as ``kind``, ``value`` already converted to
        that kind's Python form (an ``int``, a finite or infinite ``float``, a ``str``, ``bytes``);
        ``None`` when this engine cannot compare exactly."""

    @abstractmethod
    def compare_key(self, name: str, op: str, value: str) -> Fragment:
        """PartitionKey or RowKey ``op value`` in UTF-16 order."""

    @abstractmethod
    def compare_ticks(self, op: str, ticks: int) -> Fragment:
        """Timestamp ``op ticks``."""

    @abstractmethod
    def special_text(self, name: str) -> Fragment:
        """The stored text of a NaN or infinite Double: ``NaN``, ``Infinity`` or ``-Infinity``."""


@dataclass(slots=True)
class Translation:
    """The SQL condition for a tree: ``where`` keeps every row that passes (``True``: all,
    ``False``: none), and ``exact`` says it keeps no other."""

    where: _Part
    exact: bool
    names: set[str] = field(default_factory=set)  # user properties the SQL reads


def translate(dialect: Dialect, condition: Condition) -> Translation:
    """Translate ``condition`` for ``dialect`` (see the module's rules)."""
    names: set[str] = set()
    superset, _subset, exact = _node(dialect, condition, names)
    return Translation(superset, exact, names)


def _node(dialect: Dialect, node: Condition, names: set[str]) -> tuple[_Part, _Part, bool]:
    """(a superset, a subset, whether both are the exact rows)."""
    if isinstance(node, bool):
        return node, node, True
    if isinstance(node, PropertyTest):
        leaf = _leaf(dialect, node, names)
        if leaf is None:
            return True, False, False
        return leaf, leaf, True
    if isinstance(node, Negation):
        superset, subset, exact = _node(dialect, node.part, names)
        return _not(dialect, subset), _not(dialect, superset), exact
    if isinstance(node, AllOf | AnyOf):
        combine = _and if isinstance(node, AllOf) else _or
        parts = [_node(dialect, part, names) for part in node.parts]
        return (
            combine(dialect, [p[0] for p in parts]),
            combine(dialect, [p[1] for p in parts]),
            all(p[2] for p in parts),
        )
    raise TypeError(f"not a condition: {node!r}")


def _not(dialect: Dialect, part: _Part) -> _Part:
    if isinstance(part, bool):
        return not part
    return Fragment(f"(NOT {part.sql})", part.params)


def _join(word: str, parts: list[Fragment]) -> Fragment:
    if len(parts) == 1:
        return parts[0]
    return Fragment(
        "(" + f" {word} ".join(p.sql for p in parts) + ")", tuple(v for p in parts for v in p.params)
    )


def _and(dialect: Dialect, parts: list[_Part]) -> _Part:
    if any(p is False for p in parts):
        return False
    kept = [p for p in parts if isinstance(p, Fragment)]
    return _join("AND", kept) if kept else True


def _or(dialect: Dialect, parts: list[_Part]) -> _Part:
    if any(p is True for p in parts):
        return True
    kept = [p for p in parts if isinstance(p, Fragment)]
    return _join("OR", kept) if kept else False


def _constant(dialect: Dialect, value: bool) -> str:
    return dialect.true if value else dialect.false


def _leaf(dialect: Dialect, test: PropertyTest, names: set[str]) -> _Part | None:
    """One comparison, exactly; ``None`` when it cannot be."""
    name, op, edm_type, value = test.name, test.op, test.edm_type, test.value
    if op not in _SQL_OPS:
        return None
    if name in ("PartitionKey", "RowKey", "Timestamp"):
        if edm_type == NULL:
            return op == "ne"  # always present
        if name == "Timestamp":
            return dialect.compare_ticks(op, value) if edm_type == edm.DATETIME else _MISMATCH[op]
        return dialect.compare_key(name, op, value) if edm_type == edm.STRING else _MISMATCH[op]
    if _SIMPLE_NAME.fullmatch(name) is None:
        return None
    names.add(name)
    if edm_type == NULL:
        if op == "eq":
            return dialect.missing(name)
        return _not(dialect, dialect.missing(name)) if op == "ne" else False
    branches: list[tuple[Fragment, _Part]] = []
    for kind in _COMPATIBLE[edm_type]:
        outcome = _value_test(dialect, name, kind, op, edm_type, value)
        if outcome is None:
            return None
        branches.append((dialect.stored_as(name, kind), outcome))
    mismatch = _MISMATCH[op]
    if dialect.lenient and not mismatch and len(branches) == 1:
        when, then = branches[0]
        if isinstance(then, Fragment):
            sql = f"(CASE WHEN {then.sql} THEN {when.sql} ELSE {dialect.false} END)"
            return Fragment(sql, then.params + when.params)
    sql = "(CASE"
    params: list[Any] = []
    if mismatch:
        missing = dialect.missing(name)
        sql += f" WHEN {missing.sql} THEN {dialect.false}"
        params.extend(missing.params)
    for when, then in branches:
        sql += f" WHEN {when.sql} THEN "
        params.extend(when.params)
        if isinstance(then, bool):
            sql += _constant(dialect, then)
        else:
            sql += then.sql
            params.extend(then.params)
    sql += f" ELSE {_constant(dialect, mismatch)} END)"
    return Fragment(sql, tuple(params))


def _value_test(dialect: Dialect, name: str, kind: str, op: str, edm_type: str, value: Any) -> _Part | None:
    """``property op literal`` for a property stored as ``kind`` (a compatible one)."""
    if kind == DOUBLE_SPECIAL:
        answers = [_PYTHON_OPS[op](special, value) for _text, special in _SPECIALS]
        if answers[0] == answers[1] == answers[2]:
            return answers[0]
        text = dialect.special_text(name)
        sql = f"(CASE {text.sql}" + "".join(
            f" WHEN '{label}' THEN {_constant(dialect, answer)}"
            for (label, _), answer in zip(_SPECIALS, answers, strict=True)
        )
        return Fragment(sql + f" ELSE {dialect.false} END)", text.params)
    if kind == edm.DOUBLE:
        if edm_type == edm.DOUBLE:
            if math.isnan(value):
                return op == "ne"
            return dialect.compare(name, kind, op, float(value))
        nearest = float(value)  # an integer literal: compare with the nearest double
        if nearest == value:
            return dialect.compare(name, kind, op, nearest)
        beside = dialect.compare(name, kind, "ne", nearest)
        side = dialect.compare(name, kind, op, nearest)
        if beside is None or side is None:
            return None
        if not _PYTHON_OPS[op](nearest, value):
            return _and(dialect, [beside, side])
        equal = dialect.compare(name, kind, "eq", nearest)
        return None if equal is None else _or(dialect, [side, equal])
    if kind == edm.STRING and op not in ("eq", "ne") and max(value, default="") >= "\ud800":
        return None
    if kind == edm.DATETIME:
        return dialect.compare(name, kind, op, edm.format_datetime(value)[:-1])
    return dialect.compare(name, kind, op, value)


def sql_op(op: str) -> str:
    """The SQL spelling of a ``$filter`` comparison operator."""
    return _SQL_OPS[op]
