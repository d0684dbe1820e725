"""What the Blob store contract says about page blobs: a page blob's content is a sorted list of
non-overlapping :class:`PageSpan` rows, each naming the extent its bytes are in, so that only
written pages take space (an 8 TiB blob with 1 MiB written keeps 1 MiB).

The spans are the stored form of :class:`tabulae.blob.rules.pages.PageMap` (storage cannot
import the rules; the service converts). A write never rewrites a blob's whole map: the service
loads the spans around the range it changes (``Needs.pages``) and hands back a
:class:`PageEdit` that replaces just those.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

EVERY_PAGE = 2**63 - 1  # a bound past every page of every blob


@dataclass(frozen=True, slots=True)
class PageSpan:
    """Bytes ``[start, end)`` of the blob are bytes ``[offset, offset + end - start)`` of extent
    ``ref``. A ``cleared`` span is a tombstone of a Clear Page: it reads as zeros and takes no
    space, and its ``ref`` (a fresh id, never an extent's) only tells clears apart, so a
    ``prevsnapshot`` diff can report pages cleared since a snapshot."""

    start: int
    end: int
    ref: str
    offset: int = 0
    cleared: bool = False


@dataclass(frozen=True, slots=True)
class PageEdit:
    """Delete the base's spans that start in ``[low, high)``, then insert ``spans`` (which must
    lie inside the bytes the deleted ones covered, or in pages no span covers)."""

    low: int
    high: int
    spans: Sequence[PageSpan] = ()
    # The spans the deletion removes, when the write read them under its lock (those it loaded
    # around its range): the store then needs no answer from its DELETE to know what the edit
    # stopped naming, and sends it with the other writes.
    deleting: Sequence[PageSpan] | None = None
