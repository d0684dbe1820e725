"""Choose a property index for a `$filter`: which conjunct it can answer, and how.

The key-range plan (:mod:`.plan`) still decides the key bounds and the residual; an index only
replaces *how the candidates are found*. A conjunct qualifies when every entity it accepts has
the property with a value of the index's family, so looking the value up in the index cannot
miss a match:

* ``P eq v`` (and an ``or`` of such on the same property): a *point* probe, always used: each
  value's index entries are already in (PartitionKey, RowKey) order.
* ``P gt/ge v``, with any ``P lt/le w`` beside it: a *range* probe, used only when the store
  counts few candidates (:data:`RANGE_CAP`), since its candidates must be sorted.

A literal qualifies when all the property types it is compared with (``COMPATIBLE``: an Int32
literal also matches Int64 and Double values) lie in the index's family. ``ne``, ``lt`` and
``le`` alone never qualify: under ``$filter`` semantics they also accept values of other types.
String range bounds qualify only below U+D800, where code-point order (the engines' text order)
is UTF-16 order. NaN never qualifies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tabulae.model import edm
from tabulae.model.indexes import FAMILIES, FAMILY_TYPES, family_of
from tabulae.storage.indexes import IndexProbe
from tabulae.table.query.evaluate import COMPATIBLE, SYSTEM_PROPERTIES
from tabulae.table.query.nodes import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    TRUE,
    Comparison,
    Literal,
    Node,
    Or,
    Property,
    conjuncts,
)

RANGE_CAP = 2000  # a range probe is used when it has fewer candidates than this

_Typed = tuple[str, Any]


@dataclass(frozen=True, slots=True)
class IndexChoice:
    """The probe to run; ``points`` probes need no estimate."""

    probe: IndexProbe

    @property
    def is_range(self) -> bool:
        return not self.probe.points


def _usable(literal: Literal, family: str) -> bool:
    if literal.value is None or literal.edm_type not in COMPATIBLE:
        return False
    if not COMPATIBLE[literal.edm_type] <= FAMILY_TYPES[family]:
        return False
    return not (isinstance(literal.value, float) and math.isnan(literal.value))


def _leaf(node: Node) -> tuple[str, str, Literal] | None:
    if isinstance(node, Comparison):
        return node.oriented()
    if isinstance(node, Property):
        return node.name, EQ, TRUE
    return None


def _points(node: Node, indexes: dict[str, str]) -> tuple[str, list[_Typed]] | None:
    """``(property, eq literals)`` when ``node`` is an eq, or an ``or`` of eqs, on one indexed property."""
    if isinstance(node, Or):
        left = _points(node.left, indexes)
        right = _points(node.right, indexes)
        if left is None or right is None or left[0] != right[0]:
            return None
        return left[0], left[1] + right[1]
    leaf = _leaf(node)
    if leaf is None:
        return None
    name, op, literal = leaf
    if op != EQ or name in SYSTEM_PROPERTIES or name not in indexes:
        return None
    if not _usable(literal, family_of(indexes[name])):
        return None
    return name, [(literal.edm_type, literal.value)]


def _orderable(literal: Literal) -> bool:
    """Whether engines order this bound exactly as ``$filter`` does (see the module docstring)."""
    if literal.edm_type == edm.STRING:
        return all(ord(c) < 0xD800 for c in literal.value)
    if literal.edm_type == edm.BOOLEAN:
        return False
    return not (isinstance(literal.value, float) and math.isinf(literal.value))


def _range(name: str, index_type: str, leaves: list[tuple[str, str, Literal]]) -> IndexProbe | None:
    """A range probe on ``name`` from the conjuncts' comparisons, anchored by a gt/ge one."""
    family = family_of(index_type)
    anchors = [lit for _n, op, lit in leaves if op in (GT, GE) and _usable(lit, family)]
    if not anchors:
        return None
    # Every candidate has a type the narrowest anchor is compared with; a bound holds for all
    # of them when its literal is compared with each of those types.
    narrowest = min((COMPATIBLE[lit.edm_type] for lit in anchors), key=len)
    lower: Literal | None = None
    upper: Literal | None = None
    for _n, op, literal in leaves:
        if literal.value is None or literal.edm_type not in COMPATIBLE or not _orderable(literal):
            continue
        if not narrowest <= COMPATIBLE[literal.edm_type]:
            continue
        if op in (GT, GE) and (lower is None or literal.value > lower.value):
            lower = literal
        elif op in (LT, LE) and (upper is None or literal.value < upper.value):
            upper = literal
    return IndexProbe(
        name,
        index_type,
        lower=None if lower is None else (lower.edm_type, lower.value),
        upper=None if upper is None else (upper.edm_type, upper.value),
    )


def choose_index(node: Node | None, indexes: dict[str, str]) -> IndexChoice | None:
    """The probe of the first qualifying conjunct (points before ranges), or ``None``."""
    if node is None or not indexes:
        return None
    parts = conjuncts(node)
    for part in parts:
        found = _points(part, indexes)
        if found is not None:
            name, values = found
            unique = tuple(dict.fromkeys(values))
            return IndexChoice(IndexProbe(name, indexes[name], points=unique))
    by_name: dict[str, list[tuple[str, str, Literal]]] = {}
    for part in parts:
        leaf = _leaf(part)
        if leaf is not None and leaf[0] in indexes and leaf[0] not in SYSTEM_PROPERTIES:
            by_name.setdefault(leaf[0], []).append(leaf)
    for name, leaves in by_name.items():
        probe = _range(name, indexes[name], leaves)
        if probe is not None:
            return IndexChoice(probe)
    return None


def _eq_leaves(node: Node) -> list[tuple[str, str, Literal]] | None:
    """The leaves of an ``or`` tree when every one is an ``eq`` comparison, else ``None``."""
    if isinstance(node, Or):
        left, right = _eq_leaves(node.left), _eq_leaves(node.right)
        return None if left is None or right is None else left + right
    leaf = _leaf(node)
    return [leaf] if leaf is not None and leaf[1] == EQ else None


def indexable_property(node: Node | None) -> tuple[str, str] | None:
    """``(property, Edm type)`` of the first conjunct an index on that property could serve
    (an ``eq``, an ``or`` of ``eq``\\ s on one property, or a ``gt``/``ge``): what to suggest
    indexing when a table keeps being scanned for few matches."""
    if node is None:
        return None
    for part in conjuncts(node):
        leaves = _eq_leaves(part) if isinstance(part, Or) else None
        leaf = _leaf(part) if leaves is None else leaves[0]
        if leaves is not None and len({name for name, _op, _lit in leaves}) != 1:
            continue
        if leaf is None:
            continue
        name, op, literal = leaf
        if name in SYSTEM_PROPERTIES or op not in (EQ, GT, GE) or literal.value is None:
            continue
        if literal.edm_type in FAMILIES:
            return name, literal.edm_type
    return None
