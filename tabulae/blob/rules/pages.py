"""Page blob rules: 512-byte alignment, the sparse page map, range listings and sequence numbers
("Put Page", "Get Page Ranges", "Put Blob", "Set Blob Properties", "Blob Storage error codes").

A page blob is a sparse array of 512-byte pages. Only written pages take space; a read of an
unwritten page returns zeros. :class:`PageMap` is that array as an immutable value: sorted,
non-overlapping segments, each saying where its bytes are stored (an opaque ``source``, such as
an extent id, and the offset of the segment's first byte in it). Writing splits and replaces
segments, clearing and truncating remove them, and nothing here touches bytes: the store keeps
the sources and applies what a :class:`PageMap` says.

What Azure answers, and where it was found:

- A Put Page / Clear Page range must start on a page and end one byte before one; otherwise
  400 ``InvalidHeaderValue`` naming the range header (a real Azure answer to ``bytes=0-3`` quoted
  in a public Q&A about ``UploadPages``). A range past the blob's end is 416 ``InvalidPageRange``
  ("Blob Storage error codes").
- An update writes at most 4 MiB; more is 413 ``RequestBodyTooLarge`` ("Put Page").
- A page blob's size is a multiple of 512 ("Put Blob": ``x-ms-blob-content-length``), up to 8 TiB.
- ``x-ms-if-sequence-number-le/lt/eq`` failing is 412 ``SequenceNumberConditionNotMet``;
  ``x-ms-sequence-number-action`` is ``max``, ``update`` or ``increment``; ``increment`` with a
  value is 400; an increment past the largest number is 409 ``SequenceNumberIncrementTooLarge``
  ("Set Blob Properties", "Blob Storage error codes").
- Get Page Ranges lists written ranges sorted, inclusive, non-overlapping; with ``prevsnapshot``
  it lists ``PageRange`` (written since) and ``ClearRange`` (cleared since) ("Get Page Ranges"),
  both kinds counted together by ``maxresults`` (the recorded ``test_list_page_ranges_*`` tests
  of azure-storage-blob, which pin the ranges Azure answered).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from tabulae.model.errors import ServiceError

PAGE = 512
MAX_PAGE_WRITE = 4 * 1024 * 1024
MAX_PAGE_BLOB = 8 * 1024**4
MAX_SEQUENCE_NUMBER = 2**63 - 1

SEQUENCE_ACTIONS = ("max", "update", "increment")

# ----------------------------------------------------------------------------------- checks


def _bad_header(name: str, value: str) -> ServiceError:
    return ServiceError("InvalidHeaderValue", fields=(("HeaderName", name), ("HeaderValue", value)))


def check_blob_size(size: int, header: str = "x-ms-blob-content-length") -> int:
    """A page blob's size: a multiple of 512 from 0 to 8 TiB, else 400 InvalidHeaderValue."""
    if size < 0 or size % PAGE or size > MAX_PAGE_BLOB:
        raise _bad_header(header, str(size))
    return size


def check_aligned(start: int, end: int, header: str = "x-ms-range") -> tuple[int, int]:
    """An inclusive byte range on page boundaries, returned half-open ``(start, end + 1)``."""
    if start < 0 or end < start or start % PAGE or (end + 1) % PAGE:
        raise _bad_header(header, f"bytes={start}-{end}")
    return start, end + 1


def check_update(
    start: int, end: int, content_length: int, size: int, header: str = "x-ms-range"
) -> tuple[int, int]:
    """Put Page (update): aligned, at most 4 MiB, the body as long as the range, inside the blob."""
    begin, stop = check_aligned(start, end, header)
    if stop - begin > MAX_PAGE_WRITE:
        raise ServiceError("RequestBodyTooLarge")
    if content_length != stop - begin:
        raise _bad_header("Content-Length", str(content_length))
    if stop > size:
        raise ServiceError("InvalidPageRange")
    return begin, stop


def check_clear(
    start: int, end: int, content_length: int, size: int, header: str = "x-ms-range"
) -> tuple[int, int]:
    """Put Page (clear): aligned, no body, inside the blob."""
    begin, stop = check_aligned(start, end, header)
    if content_length != 0:
        raise _bad_header("Content-Length", str(content_length))
    if stop > size:
        raise ServiceError("InvalidPageRange")
    return begin, stop


def listing_window(start: int | None, end: int | None, size: int) -> tuple[int, int]:
    """The half-open window Get Page Ranges lists, widened to whole pages and cut at the blob's
    size (assumed: Azure's reference only calls the range optional and inclusive)."""
    begin = 0 if start is None else start - start % PAGE
    stop = size if end is None else min(size, (end // PAGE + 1) * PAGE)
    return begin, max(begin, stop)


# --------------------------------------------------------------------------- the page map


@dataclass(frozen=True, slots=True)
class Segment:
    """Bytes ``[start, end)`` of the blob are bytes ``[offset, offset + end - start)`` of ``source``.

    A ``cleared`` segment is a tombstone: its bytes read as zeros and take no space, and
    ``source`` only names the Clear Page that made it, so that a ``prevsnapshot`` diff can tell
    pages cleared since a snapshot from pages that were never written.
    """

    start: int
    end: int
    source: Hashable
    offset: int = 0
    cleared: bool = False

    def cut(self, start: int, end: int) -> Segment:
        """The part of this segment inside ``[start, end)`` (which must overlap it)."""
        begin, stop = max(start, self.start), min(end, self.end)
        return Segment(begin, stop, self.source, self.offset + begin - self.start, self.cleared)


@dataclass(frozen=True, slots=True)
class Piece:
    """One stretch of a read: ``segment`` says where its bytes are, or None for zeros."""

    start: int
    end: int
    segment: Segment | None


class PageMap:
    """The pages of a page blob, as sorted, non-overlapping, non-empty segments (written ones
    and tombstones of clears).

    Immutable: every change returns a new map, so a snapshot keeps the map it was taken with.
    Lookups bisect over the segments' starts; a change copies the tuple of segments.
    """

    __slots__ = ("_segments", "_starts")

    def __init__(self, segments: Iterable[Segment] = ()) -> None:
        ordered = tuple(sorted((s for s in segments if s.end > s.start), key=lambda s: s.start))
        for before, after in itertools.pairwise(ordered):
            if after.start < before.end:
                raise ValueError("page map segments overlap")
        self._segments = ordered
        self._starts = [s.start for s in ordered]

    @property
    def segments(self) -> tuple[Segment, ...]:
        return self._segments

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PageMap) and self._segments == other._segments

    def __hash__(self) -> int:
        return hash(self._segments)

    def __repr__(self) -> str:
        return f"PageMap({list(self._segments)!r})"

    @property
    def written_bytes(self) -> int:
        """The bytes the map keeps: what a sparse store needs on disk."""
        return sum(s.end - s.start for s in self._segments if not s.cleared)

    def _span(self, start: int, end: int) -> tuple[int, int]:
        """Indexes ``[i, j)`` of the segments overlapping ``[start, end)``."""
        i = bisect.bisect_right(self._starts, start) - 1
        if i < 0 or self._segments[i].end <= start:
            i += 1
        j = bisect.bisect_left(self._starts, end)
        return i, max(i, j)

    def _replace(self, start: int, end: int, middle: Sequence[Segment]) -> PageMap:
        """The map with ``[start, end)`` replaced by ``middle`` (segments inside it)."""
        i, j = self._span(start, end)
        kept: list[Segment] = []
        if i < j:
            first, last = self._segments[i], self._segments[j - 1]
            if first.start < start:
                kept.append(first.cut(first.start, start))
            kept.extend(middle)
            if last.end > end:
                kept.append(last.cut(end, last.end))
        else:
            kept.extend(middle)
        return PageMap._of((*self._segments[:i], *kept, *self._segments[j:]))

    @staticmethod
    def _of(segments: tuple[Segment, ...]) -> PageMap:
        result = PageMap.__new__(PageMap)
        result._segments = segments
        result._starts = [s.start for s in segments]
        return result

    def write(self, start: int, end: int, source: Hashable, offset: int = 0) -> PageMap:
        """Bytes ``[start, end)`` now come from ``source`` at ``offset``: the last write wins."""
        if end <= start:
            return self
        return self._replace(start, end, (Segment(start, end, source, offset),))

    def clear(self, start: int, end: int, mark: Hashable | None = None) -> PageMap:
        """Bytes ``[start, end)`` read as zeros and take no space (Clear Page).

        With a ``mark`` (anything unique to this clear) the range is kept as a tombstone, which
        a later ``prevsnapshot`` diff reports as cleared; without one it simply becomes unwritten.
        """
        if end <= start:
            return self
        middle = () if mark is None else (Segment(start, end, mark, 0, cleared=True),)
        return self._replace(start, end, middle)

    def truncate(self, size: int) -> PageMap:
        """Resize to ``size``: pages at or past it are dropped ("Set Blob Properties"); growing
        changes nothing, the new pages are unwritten."""
        if not self._segments or self._segments[-1].end <= size:
            return self
        return self._replace(size, self._segments[-1].end, ())

    def compact(self) -> PageMap:
        """The map without tombstones: what to keep once no snapshot can be diffed against."""
        if not any(s.cleared for s in self._segments):
            return self
        return PageMap._of(tuple(s for s in self._segments if not s.cleared))

    def pieces(self, start: int, end: int) -> list[Piece]:
        """What a read of ``[start, end)`` is made of, in order; zeros (never written, cleared)
        are pieces without a segment, adjacent ones joined."""
        out: list[Piece] = []
        if end <= start:
            return out
        position = start
        i, j = self._span(start, end)
        for segment in self._segments[i:j]:
            if segment.cleared:
                continue
            part = segment.cut(start, end)
            if part.start > position:
                out.append(Piece(position, part.start, None))
            out.append(Piece(part.start, part.end, part))
            position = part.end
        if position < end:
            out.append(Piece(position, end, None))
        return out

    def ranges(
        self, start: int = 0, end: int | None = None, *, coalesce: bool = True
    ) -> list[tuple[int, int]]:
        """Written ranges inside ``[start, end)``, half-open, clipped to it (the recorded
        ``test_list_page_ranges_offset``). Adjacent ranges are joined unless ``coalesce`` is
        False, which keeps the boundaries between writes as Azurite reports them; whether Azure
        joins them is not recorded anywhere we found."""
        stop = self._segments[-1].end if end is None and self._segments else (end or 0)
        i, j = self._span(start, stop)
        pieces = [(max(s.start, start), min(s.end, stop)) for s in self._segments[i:j] if not s.cleared]
        return _coalesce(pieces) if coalesce else [p for p in pieces if p[1] > p[0]]

    def diff(
        self, older: PageMap, start: int = 0, end: int | None = None
    ) -> list[tuple[int, int, RangeKind]]:
        """What changed since ``older`` (the ``prevsnapshot``), inside ``[start, end)``, sorted by
        start, each kind coalesced:

        - ``page``: written now, and not with the same bytes then (another source or offset);
        - ``clear``: a tombstone now that was not there then (even over pages that were never
          written, as Azure answers: the recorded ``test_get_page_ranges_diff`` of
          azure-storage-blob clears pages written after the snapshot and gets a ClearRange), or
          nothing now where pages were written then (resized away, or cleared without a mark).
        """
        ends = [s.end for s in self._segments] + [s.end for s in older._segments]
        stop = (max(ends) if ends else 0) if end is None else end
        cuts = {start, stop}
        for segment in (*self._segments, *older._segments):
            for point in (segment.start, segment.end):
                if start < point < stop:
                    cuts.add(point)
        points = sorted(cuts)
        updated: list[tuple[int, int]] = []
        cleared: list[tuple[int, int]] = []
        for begin, finish in itertools.pairwise(points):
            now, then = self._at(begin), older._at(begin)
            same = now is not None and then is not None and _origin(now, begin) == _origin(then, begin)
            if now is not None and not now.cleared:
                if not same or then is None or then.cleared:
                    updated.append((begin, finish))
            elif now is not None:
                if not (same and then is not None and then.cleared):
                    cleared.append((begin, finish))
            elif then is not None and not then.cleared:
                cleared.append((begin, finish))
        merged: list[tuple[int, int, RangeKind]] = [(a, b, "page") for a, b in _coalesce(updated)]
        merged += [(a, b, "clear") for a, b in _coalesce(cleared)]
        return sorted(merged)

    def _at(self, position: int) -> Segment | None:
        i = bisect.bisect_right(self._starts, position) - 1
        if i >= 0 and self._segments[i].end > position:
            return self._segments[i]
        return None


RangeKind = Literal["page", "clear"]


def _origin(segment: Segment, position: int) -> tuple[Hashable, int, bool]:
    return segment.source, segment.offset + position - segment.start, segment.cleared


def _coalesce(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for begin, finish in ranges:
        if finish <= begin:
            continue
        if out and out[-1][1] >= begin:
            out[-1] = (out[-1][0], max(out[-1][1], finish))
        else:
            out.append((begin, finish))
    return out


# ------------------------------------------------------------------------------- paging


def _bad_marker(marker: str) -> ServiceError:
    return ServiceError(
        "InvalidQueryParameterValue",
        fields=(("QueryParameterName", "marker"), ("QueryParameterValue", marker)),
    )


_Item = TypeVar("_Item", bound=tuple[Any, ...])


def encode_range_marker(offset: int) -> str:
    """The ``NextMarker`` of a page-range listing: where the next page starts. Opaque to clients."""
    return f"pr!{offset}"


def decode_range_marker(marker: str) -> int:
    """The offset a ``marker`` resumes at; anything we did not write is 400 InvalidQueryParameterValue."""
    prefix, _, digits = marker.partition("!")
    if prefix != "pr" or not digits.isascii() or not digits.isdigit() or len(digits) > 16:
        raise _bad_marker(marker)
    return int(digits)


def page_of(
    items: Sequence[_Item], marker: str | None, max_results: int | None
) -> tuple[list[_Item], str | None]:
    """One page of a Get Page Ranges listing (2020-10-02 and later): the items whose start is
    at or past the marker's offset, at most ``max_results`` of them, and the marker of the rest."""
    begin = 0 if not marker else decode_range_marker(marker)
    i = bisect.bisect_left([item[0] for item in items], begin)
    if max_results is None or i + max_results >= len(items):
        return list(items[i:]), None
    chosen = list(items[i : i + max_results])
    return chosen, encode_range_marker(items[i + max_results][0])


# ----------------------------------------------------------------------- sequence numbers


@dataclass(frozen=True, slots=True)
class SequenceConditions:
    """``x-ms-if-sequence-number-le``, ``-lt`` and ``-eq``, each optional."""

    le: int | None = None
    lt: int | None = None
    eq: int | None = None


def parse_sequence_number(value: str, header: str) -> int:
    """A sequence number header: a decimal integer from 0 to 2^63 - 1, else 400 InvalidHeaderValue."""
    text = value.strip()
    if not text.isascii() or not text.isdigit() or int(text) > MAX_SEQUENCE_NUMBER:
        raise _bad_header(header, value)
    return int(text)


def parse_sequence_condition(value: str, header: str) -> int:
    """``x-ms-if-sequence-number-le``, ``-lt`` or ``-eq`` of a Put Page: a negative integer is 400
    ``InvalidInput`` with no detail (recorded: the Go SDK's TestBlobClearPagesIfSequenceNumber
    EqualNegOne, LTENegOne, LessThanNegOne and TestBlobPutPagesIfSequenceNumberLTENegOne,
    x-ms-version 2023-11-03, each ``-1``); anything else is read as a sequence number."""
    text = value.strip()
    if text.startswith("-") and text[1:].isascii() and text[1:].isdigit() and int(text) < 0:
        raise ServiceError("InvalidInput")
    return parse_sequence_number(value, header)


def check_sequence(conditions: SequenceConditions, current: int) -> None:
    """Every given condition must hold against the blob's sequence number, else 412
    SequenceNumberConditionNotMet ("Put Page")."""
    failed = (
        (conditions.le is not None and not current <= conditions.le)
        or (conditions.lt is not None and not current < conditions.lt)
        or (conditions.eq is not None and current != conditions.eq)
    )
    if failed:
        raise ServiceError("SequenceNumberConditionNotMet")


def apply_sequence_action(action: str | None, value: int | None, current: int) -> int:
    """The sequence number after Set Blob Properties' ``x-ms-sequence-number-action`` with
    ``x-ms-blob-sequence-number`` (``value``).

    - a value without an action: 400 MissingRequiredHeader naming the action (assumed code;
      the reference says the action is then required);
    - ``max`` or ``update`` without a value: 400 MissingRequiredHeader naming the number;
    - ``increment`` with a value: 400 InvalidHeaderValue naming the number (the reference says 400);
    - ``increment`` past 2^63 - 1: 409 SequenceNumberIncrementTooLarge.
    """
    if action is None:
        if value is not None:
            raise ServiceError(
                "MissingRequiredHeader", fields=(("HeaderName", "x-ms-sequence-number-action"),)
            )
        return current
    kind = action.lower()
    if kind not in SEQUENCE_ACTIONS:
        raise _bad_header("x-ms-sequence-number-action", action)
    if kind == "increment":
        if value is not None:
            raise _bad_header("x-ms-blob-sequence-number", str(value))
        if current >= MAX_SEQUENCE_NUMBER:
            raise ServiceError("SequenceNumberIncrementTooLarge")
        return current + 1
    if value is None:
        raise ServiceError("MissingRequiredHeader", fields=(("HeaderName", "x-ms-blob-sequence-number"),))
    return max(current, value) if kind == "max" else value
