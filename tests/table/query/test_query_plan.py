"""Query planning: key ranges and residual filters, and the rule that ranges never drop a match."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabulae.model import edm
from tabulae.model.edm import Properties
from tabulae.storage.scans import FULL_RANGE, KeyBound, KeyRange
from tabulae.table.query.evaluate import compile_predicate
from tabulae.table.query.nodes import FALSE, TRUE, And, Comparison, Literal, Node, Not, Or, Property
from tabulae.table.query.parser import parse_filter
from tabulae.table.query.plan import QueryPlan, clip_to_range, plan_query


def plan(text: str) -> QueryPlan:
    return plan_query(parse_filter(text))


def point(pk: str, rk: str) -> KeyRange:
    return KeyRange(KeyBound(pk, rk, True), KeyBound(pk, rk, True))


def partition(pk: str) -> KeyRange:
    return KeyRange(KeyBound(pk, None, True), KeyBound(pk, None, True))


# -- classes and ranges -----------------------------------------------------------------------


def test_no_filter_is_a_table_scan() -> None:
    assert plan_query(None) == QueryPlan((FULL_RANGE,), None, "table-scan")
    assert plan("true") == QueryPlan((FULL_RANGE,), None, "table-scan")
    assert plan("") == QueryPlan((FULL_RANGE,), None, "table-scan")


def test_point_query() -> None:
    assert plan("PartitionKey eq 'a' and RowKey eq '1'") == QueryPlan((point("a", "1"),), None, "point")
    assert plan("RowKey eq '1' and PartitionKey eq 'a'") == QueryPlan((point("a", "1"),), None, "point")
    assert plan("'1' eq RowKey and 'a' eq PartitionKey") == QueryPlan((point("a", "1"),), None, "point")


def test_point_query_with_a_residual() -> None:
    result = plan("PartitionKey eq 'a' and Age gt 5 and RowKey eq '1'")
    assert result.ranges == (point("a", "1"),)
    assert result.residual == parse_filter("Age gt 5")
    assert result.query_class == "point"


def test_single_partition() -> None:
    assert plan("PartitionKey eq 'a'") == QueryPlan((partition("a"),), None, "row-range")


def test_row_range() -> None:
    result = plan("PartitionKey eq 'a' and RowKey ge 'x'")
    assert result == QueryPlan(
        (KeyRange(KeyBound("a", "x", True), KeyBound("a", None, True)),), None, "row-range"
    )
    result = plan("PartitionKey eq 'a' and RowKey gt '1' and RowKey lt '5'")
    assert result == QueryPlan(
        (KeyRange(KeyBound("a", "1", False), KeyBound("a", "5", False)),), None, "row-range"
    )
    result = plan("PartitionKey eq 'a' and RowKey le '5'")
    assert result == QueryPlan(
        (KeyRange(KeyBound("a", None, True), KeyBound("a", "5", True)),), None, "row-range"
    )


def test_partition_bounds() -> None:
    assert plan("PartitionKey ge 'a'") == QueryPlan(
        (KeyRange(KeyBound("a", None, True), None),), None, "partition-scan"
    )
    assert plan("PartitionKey gt 'a'") == QueryPlan(
        (KeyRange(KeyBound("a", None, False), None),), None, "partition-scan"
    )
    assert plan("PartitionKey lt 'm'") == QueryPlan(
        (KeyRange(None, KeyBound("m", None, False)),), None, "partition-scan"
    )
    assert plan("PartitionKey ge 'a' and PartitionKey le 'm'") == QueryPlan(
        (KeyRange(KeyBound("a", None, True), KeyBound("m", None, True)),), None, "partition-scan"
    )
    assert plan("PartitionKey ge 'a' and PartitionKey le 'a'") == QueryPlan(
        (partition("a"),), None, "row-range"
    )


def test_row_key_alone_is_a_table_scan_with_residual() -> None:
    node = parse_filter("RowKey eq '1'")
    assert plan_query(node) == QueryPlan((FULL_RANGE,), node, "table-scan")


def test_row_key_bounds_across_partitions_keep_the_whole_filter() -> None:
    node = parse_filter("PartitionKey ge 'a' and PartitionKey lt 'c' and RowKey eq '1' and Age gt 3")
    result = plan_query(node)
    assert result.ranges == (KeyRange(KeyBound("a", None, True), KeyBound("c", None, False)),)
    assert result.residual == node
    assert result.query_class == "partition-scan"


def test_user_properties_only_are_a_table_scan() -> None:
    node = parse_filter("Name eq 'x' and Age gt 5")
    assert plan_query(node) == QueryPlan((FULL_RANGE,), node, "table-scan")


def test_unusable_key_conditions_stay_in_the_residual() -> None:
    for text in [
        "PartitionKey ne 'a'",
        "PartitionKey eq 1",
        "not (PartitionKey eq 'a')",
        "PartitionKey eq null",
    ]:
        node = parse_filter(text)
        assert plan_query(node) == QueryPlan((FULL_RANGE,), node, "table-scan"), text
    result = plan("PartitionKey eq 'a' and RowKey ne '1'")
    assert result == QueryPlan((partition("a"),), parse_filter("RowKey ne '1'"), "row-range")


def test_or_of_points() -> None:
    same = plan("(PartitionKey eq 'a' and RowKey eq '2') or (PartitionKey eq 'a' and RowKey eq '1')")
    assert same == QueryPlan((point("a", "1"), point("a", "2")), None, "row-range")
    different = plan("(PartitionKey eq 'b' and RowKey eq '1') or (PartitionKey eq 'a' and RowKey eq '2')")
    assert different == QueryPlan((point("a", "2"), point("b", "1")), None, "partition-scan")
    repeated = plan("(PartitionKey eq 'a' and RowKey eq '1') or (RowKey eq '1' and PartitionKey eq 'a')")
    assert repeated == QueryPlan((point("a", "1"),), None, "point")


def test_or_distributes_over_and() -> None:
    result = plan("PartitionKey eq 'a' and (RowKey eq '1' or RowKey eq '3')")
    assert result == QueryPlan((point("a", "1"), point("a", "3")), None, "row-range")


def test_overlapping_ranges_merge() -> None:
    assert plan("PartitionKey ge 'a' or PartitionKey ge 'b'") == QueryPlan(
        (KeyRange(KeyBound("a", None, True), None),), None, "partition-scan"
    )
    merged = plan(
        "(PartitionKey ge 'a' and PartitionKey le 'c') or (PartitionKey ge 'b' and PartitionKey le 'd')"
    )
    assert merged.ranges == (KeyRange(KeyBound("a", None, True), KeyBound("d", None, True)),)
    inside = plan("PartitionKey eq 'b' or (PartitionKey ge 'a' and PartitionKey le 'c')")
    assert inside.ranges == (KeyRange(KeyBound("a", None, True), KeyBound("c", None, True)),)


def test_or_with_an_unbounded_branch_is_a_table_scan() -> None:
    node = parse_filter("PartitionKey eq 'a' or Age gt 5")
    assert plan_query(node) == QueryPlan((FULL_RANGE,), node, "table-scan")


def test_or_with_partly_bounded_branches_narrows_but_keeps_the_filter() -> None:
    node = parse_filter("(PartitionKey eq 'a' and Age gt 5) or PartitionKey eq 'b'")
    assert plan_query(node) == QueryPlan((partition("a"), partition("b")), node, "partition-scan")


def test_ranges_sort_in_utf16_order() -> None:
    result = plan("PartitionKey eq '\uffff' or PartitionKey eq '\U0001f600' or PartitionKey eq 'a'")
    assert [r.lower.pk for r in result.ranges if r.lower] == ["a", "\U0001f600", "\uffff"]


def test_contradictions_scan_nothing() -> None:
    for text in [
        "PartitionKey eq 'a' and PartitionKey eq 'b'",
        "PartitionKey gt 'b' and PartitionKey lt 'a'",
        "PartitionKey gt 'a' and PartitionKey lt 'a'",
        "PartitionKey eq 'a' and RowKey gt 'z' and RowKey lt 'b'",
        "RowKey lt ''",
        "false",
        "PartitionKey eq 'a' and false",
        "PartitionKey eq 'a' and RowKey eq '1' and Age gt 5 and PartitionKey eq 'b'",
        # a PartitionKey of U+1F600 sorts below U+FFFF in UTF-16, so this is empty
        "PartitionKey ge '\uffff' and PartitionKey le '\U0001f600'",
    ]:
        assert plan(text) == QueryPlan((), None, "point"), text


def test_constant_true_conjuncts_are_dropped() -> None:
    assert plan("true and PartitionKey eq 'a'") == QueryPlan((partition("a"),), None, "row-range")


def test_row_key_ge_empty_string_is_no_bound() -> None:
    assert plan("PartitionKey gt 'a' and RowKey ge ''") == QueryPlan(
        (KeyRange(KeyBound("a", None, False), None),), None, "partition-scan"
    )


# -- SAS clipping -----------------------------------------------------------------------------


def test_clip_full_scan_to_partitions() -> None:
    clipped = clip_to_range(plan_query(None), "a", None, "m", None)
    assert clipped == QueryPlan(
        (KeyRange(KeyBound("a", None, True), KeyBound("m", None, True)),), None, "partition-scan"
    )


def test_clip_to_a_row_range() -> None:
    clipped = clip_to_range(plan_query(None), "a", "1", "a", "5")
    assert clipped == QueryPlan(
        (KeyRange(KeyBound("a", "1", True), KeyBound("a", "5", True)),), None, "row-range"
    )


def test_clip_keeps_the_residual_and_narrows() -> None:
    base = plan("PartitionKey ge 'c' and Age gt 5")
    clipped = clip_to_range(base, "a", None, "m", "9")
    assert clipped.ranges == (KeyRange(KeyBound("c", None, True), KeyBound("m", "9", True)),)
    assert clipped.residual == parse_filter("Age gt 5")


def test_clip_disjoint_is_empty() -> None:
    assert clip_to_range(plan("PartitionKey eq 'z'"), "a", None, "m", None) == QueryPlan((), None, "point")
    assert clip_to_range(plan("PartitionKey eq 'a' and RowKey eq '0'"), "a", "1", None, None).ranges == ()


def test_clip_with_no_bounds_changes_nothing() -> None:
    base = plan("PartitionKey eq 'a' and Age gt 5")
    assert clip_to_range(base, None, None, None, None) == base


def test_clip_ignores_a_start_row_without_a_start_partition() -> None:
    assert clip_to_range(plan_query(None), None, "5", None, None) == plan_query(None)


# -- the plan never drops a match -------------------------------------------------------------


def u16(text: str) -> bytes:
    return text.encode("utf-16-be", "surrogatepass")


def after_lower(bound: KeyBound | None, pk: str, rk: str) -> bool:
    """Whether (pk, rk) lies at or above a lower bound, from the KeyBound docstring."""
    if bound is None:
        return True
    if u16(pk) != u16(bound.pk):
        return u16(pk) > u16(bound.pk)
    if bound.rk is None:
        return bound.inclusive
    return u16(rk) > u16(bound.rk) or (bound.inclusive and rk == bound.rk)


def before_upper(bound: KeyBound | None, pk: str, rk: str) -> bool:
    if bound is None:
        return True
    if u16(pk) != u16(bound.pk):
        return u16(pk) < u16(bound.pk)
    if bound.rk is None:
        return bound.inclusive
    return u16(rk) < u16(bound.rk) or (bound.inclusive and rk == bound.rk)


def in_ranges(ranges: tuple[KeyRange, ...], pk: str, rk: str) -> bool:
    return any(after_lower(r.lower, pk, rk) and before_upper(r.upper, pk, rk) for r in ranges)


def in_sas_range(
    pk: str, rk: str, spk: str | None, srk: str | None, epk: str | None, erk: str | None
) -> bool:
    """The SAS key-range rule (spk/srk/epk/erk), written out as given."""
    return (spk is None or u16(pk) > u16(spk) or (pk == spk and (srk is None or u16(rk) >= u16(srk)))) and (
        epk is None or u16(pk) < u16(epk) or (pk == epk and (erk is None or u16(rk) <= u16(erk)))
    )


# Keys chosen so that UTF-16 and code-point order disagree (U+1F600 vs U+E000/U+FFFF) and so
# that prefixes and near neighbours meet; every row of the grid is checked in every example.
GRID_KEYS = ["", "a", "aa", "ab", "b", "\ue000", "\uffff", "\U0001f600", "\U0010ffff"]
GRID_KEYS += ["a\U0001f600", "a\ue000"]
GRID = [(pk, rk, (i + j) % 3) for i, pk in enumerate(GRID_KEYS) for j, rk in enumerate(GRID_KEYS)]
KEYS = st.sampled_from([*GRID_KEYS, "\x00", "c", "a\x00"])
OPS = st.sampled_from(["eq", "ne", "gt", "ge", "lt", "le"])


@st.composite
def key_comparisons(draw: st.DrawFn) -> Node:
    choice = draw(st.integers(0, 9))
    if choice == 0:  # something the planner cannot use
        return Comparison(draw(OPS), Property("Age"), Literal(edm.INT32, draw(st.integers(0, 2))))
    if choice == 1:
        return Comparison(draw(OPS), Property("PartitionKey"), Literal(edm.INT32, 1))
    name = Property(draw(st.sampled_from(["PartitionKey", "RowKey"])))
    literal = Literal(edm.STRING, draw(KEYS))
    op = draw(OPS)
    return Comparison(op, name, literal) if draw(st.booleans()) else Comparison(op, literal, name)


KEY_FILTERS = st.recursive(
    st.one_of(key_comparisons(), st.sampled_from([TRUE, FALSE])),
    lambda inner: st.one_of(st.builds(And, inner, inner), st.builds(Or, inner, inner), st.builds(Not, inner)),
    max_leaves=10,
)


def matching(node: Node | None, rows: list[tuple[str, str, int]]) -> set[tuple[str, str]]:
    predicate = compile_predicate(node) if node is not None else None
    out = set()
    for pk, rk, age in rows:
        props: Properties = {"Age": (edm.INT32, age)}
        if predicate is None or predicate(pk, rk, 0, props):
            out.add((pk, rk))
    return out


def assert_well_formed(result: QueryPlan, rows: list[tuple[str, str, int]]) -> None:
    """Ranges are disjoint and in key order (checked on the sample rows), and the class fits them."""
    placed = []
    for pk, rk, _ in rows:
        holders = [i for i, r in enumerate(result.ranges) if in_ranges((r,), pk, rk)]
        assert len(holders) <= 1, (pk, rk, result.ranges)
        if holders:
            placed.append((holders[0], u16(pk), u16(rk)))
    by_key = sorted(placed, key=lambda item: (item[1], item[2]))
    assert [i for i, _, _ in by_key] == sorted(i for i, _, _ in by_key)
    if result.query_class == "point":
        assert len(result.ranges) <= 1
    if result.query_class == "table-scan":
        assert FULL_RANGE in result.ranges
    else:
        assert FULL_RANGE not in result.ranges


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(KEY_FILTERS)
def test_ranges_and_residual_select_exactly_the_matches(node: Node) -> None:
    rows = GRID
    result = plan_query(node)
    assert_well_formed(result, rows)
    found = {(pk, rk) for pk, rk in matching(result.residual, rows) if in_ranges(result.ranges, pk, rk)}
    assert found == matching(node, rows)
    if result.query_class in ("point", "row-range"):
        assert len({pk for pk, _ in found}) <= 1
    if result.query_class == "point":
        assert len(found) <= 1


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    KEY_FILTERS,
    st.none() | KEYS,
    st.none() | KEYS,
    st.none() | KEYS,
    st.none() | KEYS,
)
def test_clipped_plans_select_exactly_the_matches_in_the_sas_range(
    node: Node,
    spk: str | None,
    srk: str | None,
    epk: str | None,
    erk: str | None,
) -> None:
    rows = GRID
    result = clip_to_range(plan_query(node), spk, srk, epk, erk)
    assert_well_formed(result, rows)
    found = {(pk, rk) for pk, rk in matching(result.residual, rows) if in_ranges(result.ranges, pk, rk)}
    expected = {(pk, rk) for pk, rk in matching(node, rows) if in_sas_range(pk, rk, spk, srk, epk, erk)}
    assert found == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(KEYS, KEYS), min_size=1, max_size=4, unique=True))
def test_or_of_points_is_exact(keys: list[tuple[str, str]]) -> None:
    rows = GRID
    text = " or ".join(f"(PartitionKey eq '{pk}' and RowKey eq '{rk}')" for pk, rk in keys)
    result = plan(text)
    assert result.residual is None
    assert result.query_class == (
        "point" if len(keys) == 1 else "row-range" if len({k[0] for k in keys}) == 1 else "partition-scan"
    )
    assert {(pk, rk) for pk, rk, _ in rows if in_ranges(result.ranges, pk, rk)} == {
        (pk, rk) for pk, rk, _ in rows if (pk, rk) in keys
    }
