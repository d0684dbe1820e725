"""Turn a `$filter` into key ranges to scan plus a residual filter to check per entity.

Entities are clustered by (PartitionKey, RowKey), so the conditions on those two keys decide how
much of a table must be read at all: one key (a point query), part of one partition (a row
range), several partitions, or everything. The planner reads those conditions, including
``or``\\ s of them, as a union of *boxes* (a PartitionKey interval times a RowKey interval), turns
the boxes into ``KeyRange``\\ s in key order, and leaves everything else in the residual.

The one rule that matters: **ranges never exclude a matching entity.** Where a box cannot be
expressed exactly as one contiguous key range (a RowKey bound across several partitions) the
range is widened to whole partitions and the whole filter stays in the residual. Where every
key condition is captured exactly, those conditions are dropped from the residual, so a pure
point or range query checks nothing per row.

All string comparisons here use UTF-16 code-unit order, the order the store keeps keys in.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal as TypingLiteral

from tabulae.model import edm
from tabulae.storage.scans import FULL_RANGE, KeyBound, KeyRange
from tabulae.table.query.nodes import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    PARTITION_KEY,
    ROW_KEY,
    And,
    Comparison,
    Literal,
    Node,
    Or,
    all_of,
    conjuncts,
)

__all__ = ["QueryClass", "QueryPlan", "clip_to_range", "plan_query"]

QueryClass = TypingLiteral["point", "row-range", "partition-scan", "table-scan", "index-scan"]

# With at most 15 comparisons the worst case is 3**5 = 243 boxes; past this the planner gives
# up on that sub-expression (scans it whole) rather than spend time on pathological filters.
_MAX_BOXES = 256


@dataclass(frozen=True, slots=True)
class QueryPlan:
    """What to scan and what to check.

    ``ranges`` are sorted in key order and do not overlap; ``()`` means nothing can match.
    ``residual`` is the filter every entity found in the ranges must still pass (``None``: all
    pass). ``query_class`` names the cost class of the partitioning guide:
    ``point`` (at most one key), ``row-range`` (inside one partition), ``partition-scan``
    (PartitionKey bounded, several partitions) or ``table-scan`` (no PartitionKey bound).
    """

    ranges: tuple[KeyRange, ...]
    residual: Node | None
    query_class: QueryClass


# -- intervals of strings in UTF-16 order -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Interval:
    """``lo ..= hi`` over key strings; ``None`` ends are unbounded."""

    lo: str | None = None
    lo_inclusive: bool = True
    hi: str | None = None
    hi_inclusive: bool = True

    @property
    def is_point(self) -> bool:
        return self.lo is not None and self.lo == self.hi and self.lo_inclusive and self.hi_inclusive

    @property
    def is_full(self) -> bool:
        return self.lo is None and self.hi is None

    def is_empty(self) -> bool:
        if self.hi is not None and self.hi == "" and not self.hi_inclusive:
            return True  # nothing sorts below the empty string
        if self.lo is None or self.hi is None:
            return False
        lo, hi = edm.utf16_sort_key(self.lo), edm.utf16_sort_key(self.hi)
        return lo > hi or (lo == hi and not (self.lo_inclusive and self.hi_inclusive))

    def intersect(self, other: _Interval) -> _Interval:
        lo, lo_inclusive = self.lo, self.lo_inclusive
        if other.lo is not None:
            if lo is None or _order(other.lo, lo) > 0:
                lo, lo_inclusive = other.lo, other.lo_inclusive
            elif other.lo == lo:
                lo_inclusive = lo_inclusive and other.lo_inclusive
        hi, hi_inclusive = self.hi, self.hi_inclusive
        if other.hi is not None:
            if hi is None or _order(other.hi, hi) < 0:
                hi, hi_inclusive = other.hi, other.hi_inclusive
            elif other.hi == hi:
                hi_inclusive = hi_inclusive and other.hi_inclusive
        return _Interval(lo, lo_inclusive, hi, hi_inclusive)


def _order(a: str, b: str) -> int:
    """-1, 0 or 1 as ``a`` sorts before, with or after ``b`` in UTF-16 order."""
    key_a, key_b = edm.utf16_sort_key(a), edm.utf16_sort_key(b)
    return (key_a > key_b) - (key_a < key_b)


def _interval(op: str, value: str) -> _Interval:
    if op == EQ:
        return _Interval(value, True, value, True)
    if op == GT:
        return _Interval(lo=value, lo_inclusive=False)
    if op == GE:
        # ``ge ''`` holds for every key: keep the interval recognisably unbounded.
        return _Interval() if value == "" else _Interval(lo=value)
    if op == LT:
        return _Interval(hi=value, hi_inclusive=False)
    assert op == LE
    return _Interval(hi=value)


_FULL = _Interval()

# A box is (PartitionKey interval, RowKey interval).
_Box = tuple[_Interval, _Interval]
_FULL_BOX: _Box = (_FULL, _FULL)


def _intersect_boxes(left: list[_Box], right: list[_Box]) -> list[_Box] | None:
    """Pairwise intersections (``None`` if there would be too many)."""
    if len(left) * len(right) > _MAX_BOXES:
        return None
    out = []
    for pk_a, rk_a in left:
        for pk_b, rk_b in right:
            pk, rk = pk_a.intersect(pk_b), rk_a.intersect(rk_b)
            if not pk.is_empty() and not rk.is_empty():
                out.append((pk, rk))
    return out


def _key_boxes(node: Node) -> tuple[list[_Box], bool]:
    """A union of boxes that contains every key ``node`` can accept, and whether it is exact.

    Exact means the keys in the boxes are precisely the keys for which ``node`` is true, so the
    node need not be checked again. Anything that is not a String comparison on a key (user
    properties, ``ne``, ``not``, other literal types) is approximated by the full box.
    """
    if isinstance(node, Comparison):
        name, op, literal = node.oriented()
        if name in (PARTITION_KEY, ROW_KEY) and literal.edm_type == edm.STRING and op != NE:
            interval = _interval(op, literal.value)
            if interval.is_empty():
                return [], True
            return [(interval, _FULL) if name == PARTITION_KEY else (_FULL, interval)], True
        return [_FULL_BOX], False
    if isinstance(node, Literal) and node.edm_type == edm.BOOLEAN:
        return ([_FULL_BOX] if node.value else []), True
    if isinstance(node, And):
        left, left_exact = _key_boxes(node.left)
        right, right_exact = _key_boxes(node.right)
        both = _intersect_boxes(left, right)
        if both is None:
            return [_FULL_BOX], False
        return both, left_exact and right_exact
    if isinstance(node, Or):
        left, left_exact = _key_boxes(node.left)
        right, right_exact = _key_boxes(node.right)
        if len(left) + len(right) > _MAX_BOXES:
            return [_FULL_BOX], False
        return left + right, left_exact and right_exact
    return [_FULL_BOX], False


# -- key ranges ---------------------------------------------------------------------------------

# A cut is a position between composite keys, as a tuple that sorts in key order: a range holds
# the keys between its lower cut and its upper cut.
_Cut = tuple[int, bytes, int, bytes, int]
_BEFORE_ALL: _Cut = (0, b"", 0, b"", 0)
_AFTER_ALL: _Cut = (2, b"", 0, b"", 0)


def _lower_cut(bound: KeyBound | None) -> _Cut:
    if bound is None:
        return _BEFORE_ALL
    pk = edm.utf16_sort_key(bound.pk)
    if bound.rk is None:  # before the partition's first row, or after its last
        return (1, pk, 0 if bound.inclusive else 2, b"", 0)
    return (1, pk, 1, edm.utf16_sort_key(bound.rk), 0 if bound.inclusive else 1)


def _upper_cut(bound: KeyBound | None) -> _Cut:
    if bound is None:
        return _AFTER_ALL
    pk = edm.utf16_sort_key(bound.pk)
    if bound.rk is None:  # after the partition's last row, or before its first
        return (1, pk, 2 if bound.inclusive else 0, b"", 0)
    return (1, pk, 1, edm.utf16_sort_key(bound.rk), 1 if bound.inclusive else 0)


def _is_empty(key_range: KeyRange) -> bool:
    return _lower_cut(key_range.lower) >= _upper_cut(key_range.upper)


def _intersect_ranges(a: KeyRange, b: KeyRange) -> KeyRange:
    """The keys in both ranges (possibly an empty range)."""
    lower = a.lower if _lower_cut(a.lower) >= _lower_cut(b.lower) else b.lower
    upper = a.upper if _upper_cut(a.upper) <= _upper_cut(b.upper) else b.upper
    return KeyRange(lower, upper)


def _box_range(box: _Box) -> tuple[KeyRange, bool]:
    """The smallest key range containing the box, and whether it holds nothing more."""
    pk, rk = box
    if pk.is_point:
        assert pk.lo is not None
        lower = KeyBound(pk.lo, rk.lo, rk.lo_inclusive) if rk.lo is not None else KeyBound(pk.lo, None, True)
        upper = KeyBound(pk.lo, rk.hi, rk.hi_inclusive) if rk.hi is not None else KeyBound(pk.lo, None, True)
        return KeyRange(lower, upper), True
    lower_pk = KeyBound(pk.lo, None, pk.lo_inclusive) if pk.lo is not None else None
    upper_pk = KeyBound(pk.hi, None, pk.hi_inclusive) if pk.hi is not None else None
    # A RowKey condition across several partitions selects rows from each: not contiguous.
    return KeyRange(lower_pk, upper_pk), rk.is_full


def _merge(ranges: Iterable[KeyRange]) -> tuple[KeyRange, ...]:
    """Sort ranges in key order and merge the ones that overlap or touch; drop empty ones."""
    ordered = sorted((r for r in ranges if not _is_empty(r)), key=lambda r: _lower_cut(r.lower))
    merged: list[KeyRange] = []
    for key_range in ordered:
        if merged and _lower_cut(key_range.lower) <= _upper_cut(merged[-1].upper):
            last = merged[-1]
            if _upper_cut(key_range.upper) > _upper_cut(last.upper):
                merged[-1] = KeyRange(last.lower, key_range.upper)
        else:
            merged.append(key_range)
    return tuple(merged)


def classify(ranges: tuple[KeyRange, ...]) -> QueryClass:
    """The query class of a set of merged ranges (no ranges at all counts as a point query)."""
    if not ranges:
        return "point"
    if any(r.lower is None and r.upper is None for r in ranges):
        return "table-scan"
    if len(ranges) == 1:
        lower, upper = ranges[0].lower, ranges[0].upper
        if lower is not None and lower == upper and lower.rk is not None and lower.inclusive:
            return "point"
    partitions: set[str] = set()
    for r in ranges:
        if r.lower is None or r.upper is None:
            return "partition-scan"
        # ``(pk, None, exclusive)`` is an edge of the partition's far side: it leaves it.
        if (r.lower.rk is None and not r.lower.inclusive) or (r.upper.rk is None and not r.upper.inclusive):
            return "partition-scan"
        partitions.update((r.lower.pk, r.upper.pk))
    return "row-range" if len(partitions) == 1 else "partition-scan"


def plan_query(node: Node | None) -> QueryPlan:
    """Plan a parsed filter (``None``: no filter) against the (PartitionKey, RowKey) index."""
    if node is None:
        return QueryPlan((FULL_RANGE,), None, "table-scan")
    boxes: list[_Box] = [_FULL_BOX]
    unconsumed: list[Node] = []
    for conjunct in conjuncts(node):
        conjunct_boxes, exact = _key_boxes(conjunct)
        narrowed = _intersect_boxes(boxes, conjunct_boxes)
        if narrowed is None:  # too many boxes: leave this conjunct to the per-row check
            narrowed, exact = boxes, False
        boxes = narrowed
        if not exact:
            unconsumed.append(conjunct)
    ranges: list[KeyRange] = []
    representable = True
    for box in boxes:
        key_range, exact = _box_range(box)
        ranges.append(key_range)
        representable = representable and exact
    merged = _merge(ranges)
    residual = all_of(unconsumed) if representable else node
    if not merged:
        residual = None  # nothing to scan, nothing to check
    return QueryPlan(merged, residual, classify(merged))


def clip_to_range(
    plan: QueryPlan,
    spk: str | None,
    srk: str | None,
    epk: str | None,
    erk: str | None,
) -> QueryPlan:
    """Restrict a plan to a table SAS key range (spk/srk to epk/erk); ``None`` marks an absent field.

    An entity is inside iff ``(spk absent or pk > spk or (pk == spk and (srk absent or rk >= srk)))
    and (epk absent or pk < epk or (pk == epk and (erk absent or rk <= erk)))``: exactly the keys
    between the lower bound ``(spk, srk)`` and the upper bound ``(epk, erk)``, both inclusive.
    """
    allowed = KeyRange(
        None if spk is None else KeyBound(spk, srk, True),
        None if epk is None else KeyBound(epk, erk, True),
    )
    ranges = _merge(_intersect_ranges(key_range, allowed) for key_range in plan.ranges)
    return QueryPlan(ranges, plan.residual if ranges else None, classify(ranges))
