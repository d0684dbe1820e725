"""Page blob rules: alignment and range checks with Azure's codes, the sparse page map against a
naive byte-array model (Hypothesis), the prevsnapshot diff, listing pages and markers, and the
sequence number conditions and actions."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tabulae.blob.rules import pages
from tabulae.blob.rules.pages import PageMap, SequenceConditions
from tabulae.model.errors import ServiceError

SIZE = 48  # the model works on bytes; the map itself does not care about page alignment


def error_of(action: object) -> ServiceError:
    with pytest.raises(ServiceError) as caught:
        action()  # type: ignore[operator]
    return caught.value


# --------------------------------------------------------------------------- checks


def test_aligned_ranges_pass_and_come_back_half_open() -> None:
    assert pages.check_aligned(0, 511) == (0, 512)
    assert pages.check_aligned(512, 2047) == (512, 2048)


@pytest.mark.parametrize(("start", "end"), [(0, 3), (1, 512), (512, 1022), (0, 0), (1024, 511), (-512, 511)])
def test_misaligned_ranges_are_invalid_header_values_naming_the_header(start: int, end: int) -> None:
    error = error_of(lambda: pages.check_aligned(start, end, "Range"))
    assert (error.status, error.code) == (400, "InvalidHeaderValue")
    assert error.fields == (("HeaderName", "Range"), ("HeaderValue", f"bytes={start}-{end}"))


def test_update_checks_body_length_size_and_the_4_mib_cap() -> None:
    assert pages.check_update(0, 1023, 1024, 4096) == (0, 1024)
    assert error_of(lambda: pages.check_update(0, 1023, 512, 4096)).code == "InvalidHeaderValue"
    past = error_of(lambda: pages.check_update(4096, 4607, 512, 4096))
    assert (past.status, past.code) == (416, "InvalidPageRange")
    big = pages.MAX_PAGE_WRITE + 512
    too_big = error_of(lambda: pages.check_update(0, big - 1, big, 2 * big))
    assert (too_big.status, too_big.code) == (413, "RequestBodyTooLarge")


def test_clear_takes_no_body_and_may_span_the_whole_blob() -> None:
    size = 64 * pages.MAX_PAGE_WRITE
    assert pages.check_clear(0, size - 1, 0, size) == (0, size)
    assert error_of(lambda: pages.check_clear(0, 511, 512, size)).code == "InvalidHeaderValue"
    assert error_of(lambda: pages.check_clear(size, size + 511, 0, size)).code == "InvalidPageRange"


@pytest.mark.parametrize("size", [1, 511, 513, -512, pages.MAX_PAGE_BLOB + 512])
def test_page_blob_sizes_are_page_multiples_up_to_8_tib(size: int) -> None:
    error = error_of(lambda: pages.check_blob_size(size))
    assert error.code == "InvalidHeaderValue"
    assert error.fields[0] == ("HeaderName", "x-ms-blob-content-length")


def test_valid_page_blob_sizes() -> None:
    assert pages.check_blob_size(0) == 0
    assert pages.check_blob_size(pages.MAX_PAGE_BLOB) == pages.MAX_PAGE_BLOB


def test_listing_window_widens_to_pages_and_stops_at_the_size() -> None:
    assert pages.listing_window(None, None, 4096) == (0, 4096)
    assert pages.listing_window(100, 600, 4096) == (0, 1024)
    assert pages.listing_window(1024, 1_000_000, 4096) == (1024, 4096)
    assert pages.listing_window(8192, None, 4096) == (8192, 8192)


# --------------------------------------------------------------------- the page map model

Op = tuple[str, int, int]
ops = st.lists(
    st.tuples(
        st.sampled_from(["write", "clear", "mark", "truncate"]),
        st.integers(0, SIZE),
        st.integers(0, SIZE),
    ),
    max_size=25,
)
# Per byte: ("w", source, offset) written, ("c", mark, offset) cleared with a tombstone, or None.
Cell = tuple[str, object, int] | None


def apply(
    page_map: PageMap, model: list[Cell], operations: list[Op], prefix: str
) -> tuple[PageMap, list[Cell]]:
    """Apply ``operations`` to a map and to the naive model, one cell per byte."""
    model = list(model)
    for number, (kind, a, b) in enumerate(operations):
        start, end = min(a, b), max(a, b)
        name = f"{prefix}{number}"
        if kind == "write":
            page_map = page_map.write(start, end, name, 7)
            for position in range(start, end):
                model[position] = ("w", name, 7 + position - start)
        elif kind == "clear":
            page_map = page_map.clear(start, end)
            for position in range(start, end):
                model[position] = None
        elif kind == "mark":
            page_map = page_map.clear(start, end, name)
            for position in range(start, end):
                model[position] = ("c", name, position - start)
        else:
            page_map = page_map.truncate(a)
            for position in range(a, SIZE):
                model[position] = None
    return page_map, model


def run(operations: list[Op]) -> tuple[PageMap, list[Cell]]:
    return apply(PageMap(), [None] * SIZE, operations, "extent")


def written(cell: Cell) -> bool:
    return cell is not None and cell[0] == "w"


def model_ranges(model: list[Cell], start: int = 0, end: int = SIZE) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for position in range(start, end):
        if not written(model[position]):
            continue
        if out and out[-1][1] == position:
            out[-1] = (out[-1][0], position + 1)
        else:
            out.append((position, position + 1))
    return out


@settings(max_examples=300, deadline=None)
@given(ops)
def test_map_agrees_with_a_byte_array(operations: list[Op]) -> None:
    page_map, model = run(operations)
    segments = page_map.segments
    assert all(a.end <= b.start for a, b in itertools.pairwise(segments))
    assert all(s.start < s.end for s in segments)
    assert page_map.written_bytes == sum(written(entry) for entry in model)
    assert page_map.compact().ranges() == page_map.ranges()
    assert not any(segment.cleared for segment in page_map.compact().segments)
    assert page_map.ranges(0, SIZE) == model_ranges(model)
    for position in range(SIZE):
        found = [p for p in page_map.pieces(position, position + 1) if p.segment is not None]
        entry = model[position]
        if not written(entry):
            assert not found
        else:
            assert entry is not None
            segment = found[0].segment
            assert segment is not None
            assert (segment.source, segment.offset) == entry[1:]


@settings(max_examples=200, deadline=None)
@given(ops, st.integers(0, SIZE), st.integers(0, SIZE))
def test_pieces_tile_the_read_and_ranges_clip_to_it(operations: list[Op], a: int, b: int) -> None:
    page_map, model = run(operations)
    start, end = min(a, b), max(a, b)
    pieces = page_map.pieces(start, end)
    assert [(p.start, p.end) for p in pieces] == [(p.start, p.end) for p in pieces if p.end > p.start]
    if start < end:
        assert pieces[0].start == start and pieces[-1].end == end
        assert all(x.end == y.start for x, y in itertools.pairwise(pieces))
    assert page_map.ranges(start, end) == model_ranges(model, start, end)


@settings(max_examples=300, deadline=None)
@given(ops, ops)
def test_diff_reports_what_changed_since_the_snapshot(before: list[Op], after: list[Op]) -> None:
    older, old_model = run(before)
    newer, new_model = apply(older, old_model, after, "later")
    changed = newer.diff(older)
    expected_pages = [i for i in range(SIZE) if written(new_model[i]) and new_model[i] != old_model[i]]
    expected_clears = [
        i
        for i in range(SIZE)
        if (new_model[i] is not None and not written(new_model[i]) and new_model[i] != old_model[i])
        or (new_model[i] is None and written(old_model[i]))
    ]
    assert bytes_of(changed, "page") == expected_pages
    assert bytes_of(changed, "clear") == expected_clears
    assert [item[0] for item in changed] == sorted(item[0] for item in changed)
    assert older.diff(older) == []


def bytes_of(changes: list[tuple[int, int, str]], kind: str) -> list[int]:
    return [i for start, end, k in changes if k == kind for i in range(start, end)]


def test_diff_as_azure_answered_it() -> None:
    """azure-storage-blob's recorded test_get_page_ranges_diff: a 2048-byte blob, snapshot 1,
    one write of 0-1535, snapshot 2, a clear of 512-1023."""
    snapshot1 = PageMap()
    snapshot2 = snapshot1.write(0, 1536, "put-page-1")
    now = snapshot2.clear(512, 1024, "clear-page-1")
    assert now.diff(snapshot1) == [(0, 512, "page"), (512, 1024, "clear"), (1024, 1536, "page")]
    assert now.diff(snapshot2) == [(512, 1024, "clear")]
    assert now.ranges() == [(0, 512), (1024, 1536)]
    assert pages.page_of(now.diff(snapshot1), None, 2)[0] == [(0, 512, "page"), (512, 1024, "clear")]


def test_listing_clips_to_the_window_as_azure_answered_it() -> None:
    """The recorded test_list_page_ranges_offset: 0-1535 and 2048-2559 written, 1024-2047 asked."""
    page_map = PageMap().write(0, 1536, "a").write(2048, 2560, "b")
    assert page_map.ranges(*pages.listing_window(1024, 2047, 2560)) == [(1024, 1536)]


def test_adjacent_writes_coalesce_in_listings_but_keep_their_sources() -> None:
    page_map = PageMap().write(0, 512, "a").write(512, 1024, "b").write(2048, 2560, "c")
    assert page_map.ranges() == [(0, 1024), (2048, 2560)]
    assert page_map.ranges(coalesce=False) == [(0, 512), (512, 1024), (2048, 2560)]
    assert [s.source for s in page_map.segments] == ["a", "b", "c"]


def test_overwrite_splits_a_segment_with_the_right_offsets() -> None:
    page_map = PageMap().write(0, 2048, "a").write(512, 1024, "b")
    assert [(s.start, s.end, s.source, s.offset) for s in page_map.segments] == [
        (0, 512, "a", 0),
        (512, 1024, "b", 0),
        (1024, 2048, "a", 1024),
    ]


def test_a_sparse_8_tib_blob_keeps_only_what_was_written() -> None:
    size = pages.MAX_PAGE_BLOB
    page_map = PageMap().write(size - 1024 * 1024, size, "tail")
    assert page_map.written_bytes == 1024 * 1024
    read = page_map.pieces(0, size)
    assert [(p.start, p.end, p.segment is None) for p in read] == [
        (0, size - 1024 * 1024, True),
        (size - 1024 * 1024, size, False),
    ]


def test_snapshot_shares_segments_so_an_untouched_blob_has_no_diff() -> None:
    base = PageMap().write(0, 4096, "a")
    assert base.write(0, 0, "ignored") is base
    assert base.diff(base) == []
    assert base.write(0, 512, "b").diff(base) == [(0, 512, "page")]
    assert base.clear(1024, 2048).diff(base) == [(1024, 2048, "clear")]
    assert base.clear(1024, 2048, "c1").diff(base) == [(1024, 2048, "clear")]
    marked = base.clear(1024, 2048, "c1")
    assert marked.diff(marked) == []
    assert marked.write(1024, 1536, "d").diff(marked) == [(1024, 1536, "page")]


def test_overlapping_segments_are_refused() -> None:
    with pytest.raises(ValueError):
        PageMap([pages.Segment(0, 10, "a"), pages.Segment(5, 20, "b")])


# ---------------------------------------------------------------------------- paging


def test_paging_walks_the_ranges_with_markers() -> None:
    items = [(i * 1024, i * 1024 + 512) for i in range(5)]
    seen: list[tuple[int, int]] = []
    marker: str | None = None
    while True:
        chunk, marker = pages.page_of(items, marker, 2)
        seen += chunk
        if marker is None:
            break
    assert seen == items
    assert pages.page_of(items, None, None) == (items, None)
    assert pages.page_of(items, None, 5) == (items, None)


@pytest.mark.parametrize("marker", ["junk", "pr!", "pr!-1", "pr!1e3", "x!12", "pr!99999999999999999"])
def test_a_marker_we_did_not_write_is_refused(marker: str) -> None:
    error = error_of(lambda: pages.decode_range_marker(marker))
    assert (error.status, error.code) == (400, "InvalidQueryParameterValue")
    assert error.fields[0] == ("QueryParameterName", "marker")


# -------------------------------------------------------------------- sequence numbers


def test_sequence_conditions() -> None:
    pages.check_sequence(SequenceConditions(le=5, lt=6, eq=5), 5)
    for conditions in (SequenceConditions(le=4), SequenceConditions(lt=5), SequenceConditions(eq=4)):
        error = error_of(lambda conditions=conditions: pages.check_sequence(conditions, 5))
        assert (error.status, error.code) == (412, "SequenceNumberConditionNotMet")


@pytest.mark.parametrize("value", ["-1", "abc", "", "9223372036854775808", "1.5", "١"])
def test_sequence_number_headers_must_be_non_negative_63_bit(value: str) -> None:
    error = error_of(lambda: pages.parse_sequence_number(value, "x-ms-if-sequence-number-le"))
    assert error.code == "InvalidHeaderValue"


def test_sequence_number_header_bounds() -> None:
    assert pages.parse_sequence_number("0", "x") == 0
    assert pages.parse_sequence_number(" 9223372036854775807 ", "x") == pages.MAX_SEQUENCE_NUMBER


def test_sequence_actions() -> None:
    assert pages.apply_sequence_action("max", 3, 7) == 7
    assert pages.apply_sequence_action("MAX", 9, 7) == 9
    assert pages.apply_sequence_action("update", 3, 7) == 3
    assert pages.apply_sequence_action("increment", None, 7) == 8
    assert pages.apply_sequence_action(None, None, 7) == 7


def test_sequence_action_errors() -> None:
    too_large = error_of(lambda: pages.apply_sequence_action("increment", None, pages.MAX_SEQUENCE_NUMBER))
    assert (too_large.status, too_large.code) == (409, "SequenceNumberIncrementTooLarge")
    assert error_of(lambda: pages.apply_sequence_action("increment", 1, 7)).code == "InvalidHeaderValue"
    missing_value = error_of(lambda: pages.apply_sequence_action("update", None, 7))
    assert missing_value.fields == (("HeaderName", "x-ms-blob-sequence-number"),)
    missing_action = error_of(lambda: pages.apply_sequence_action(None, 3, 7))
    assert missing_action.fields == (("HeaderName", "x-ms-sequence-number-action"),)
    assert error_of(lambda: pages.apply_sequence_action("double", 3, 7)).code == "InvalidHeaderValue"
