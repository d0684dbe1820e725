"""Page blobs: creation, Put Page (update and clear), Get Page Ranges and their diff, resizing
and sequence numbers, and Incremental Copy, over the :class:`~tabulae.blob.service.BlobService`'s
store.

A page blob's content is its page map (:mod:`tabulae.blob.rules.pages`), stored as spans
(:mod:`tabulae.storage.blob_pages`) that name extents. A Put Page stages its body as one extent,
like any upload, and its write replaces only the spans around its range: the store loads those
(``Needs.pages``), the decision rewrites them with the rules' page map. So an 8 TiB blob with
1 MiB written keeps 1 MiB, and a 4 KiB write costs the same however many pages the blob has.

Every write is a pure decision inside the store's transaction, as the other blob writes are.
A Clear Page leaves a tombstone only while the blob has snapshots (the only time a
``prevsnapshot`` diff can ask what was cleared); otherwise the pages simply become unwritten.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterable, Callable, Sequence
from dataclasses import dataclass, replace
from urllib.parse import parse_qs, unquote, urlsplit

from tabulae.blob import versioning
from tabulae.blob.checked_staging import stage_checked
from tabulae.blob.rules import leases, premium
from tabulae.blob.rules.checksums import Checksums
from tabulae.blob.rules.conditions import Conditions, check
from tabulae.blob.rules.names import check_blob_name
from tabulae.blob.rules.pages import (
    PageMap,
    RangeKind,
    SequenceConditions,
    apply_sequence_action,
    check_blob_size,
    check_sequence,
    page_of,
)
from tabulae.blob.service import (
    PAGE_BLOB,
    BlobService,
    _check_replace,
    _require_base,
    page_map,
    parse_snapshot,
    snapshot_time,
)
from tabulae.model.errors import ServiceError
from tabulae.storage.blob_pages import EVERY_PAGE, PageEdit, PageSpan
from tabulae.storage.blobs import (
    BASE,
    BlobKey,
    BlobRecord,
    BlobState,
    BlobWrite,
    ContentProperties,
    CopyState,
    Lease,
    Needs,
    Staged,
)

PageRange = tuple[int, int, RangeKind]  # first byte, last byte (inclusive), kind


@dataclass(slots=True)
class PageRanges:
    """One answer of Get Page Ranges: the version listed and a page of its ranges."""

    record: BlobRecord
    ranges: list[PageRange]
    next_marker: str | None


@dataclass(frozen=True, slots=True)
class PageWrite:
    """What a Put Page asks besides its range: its conditions, sequence number conditions and lease."""

    conditions: Conditions
    sequence: SequenceConditions
    lease_id: str | None


def spans_of(pages: PageMap) -> list[PageSpan]:
    return [PageSpan(s.start, s.end, str(s.source), s.offset, s.cleared) for s in pages.segments]


def _edit(loaded: Sequence[PageSpan], start: int, end: int, changed: PageMap) -> PageEdit:
    """Replace the spans loaded for ``[start, end)`` (the first may begin before it) with those
    of ``changed``, the map they made after the write. The deletion removes exactly the spans
    loaded: those start in ``[low, end)``, and any other span starting there would overlap the
    range, so it was loaded too."""
    low = min(start, loaded[0].start) if loaded else start
    return PageEdit(low, end, spans_of(changed), deleting=loaded)


def _page_blob(state: BlobState) -> BlobRecord:
    base = _require_base(state)
    if base.blob_type != PAGE_BLOB:
        raise ServiceError("InvalidBlobType")
    if base.copy is not None and base.copy.incremental:
        raise ServiceError("OperationNotAllowedOnIncrementalCopyBlob")
    return base


class PageBlobs:
    """The page blob operations of one :class:`BlobService` (made per request: two attributes)."""

    __slots__ = ("_clock", "service", "store")

    def __init__(self, service: BlobService) -> None:
        self.service = service
        self.store = service.store
        self._clock = service._clock

    # ------------------------------------------------------------------ creation

    async def create(
        self,
        key: BlobKey,
        size: int,
        sequence_number: int,
        content_properties: ContentProperties,
        metadata: dict[str, str],
        conditions: Conditions,
        lease_id: str | None,
        tags: dict[str, str] | None = None,
        protect: Callable[[BlobRecord], BlobRecord] | None = None,
        tier: str | None = None,
    ) -> BlobRecord:
        """Put Blob of a page blob: an empty blob of ``size`` bytes (every page unwritten),
        replacing whatever blob had the name, as Put Blob does (with versioning on, a new
        version, the one it replaces kept as a previous version with its pages). ``tier``: a
        premium page blob tier the request named, which must hold ``size``."""
        check_blob_name(key.name)
        check_blob_size(size)
        if tier is not None:
            premium.check_fits(tier, size)
        now = self._clock()
        versioned = await self.service._versioning(key.account)
        keep = await self.service._keep(key.account)

        def decide(state: BlobState) -> BlobWrite:
            base = state.base if state.base is not None and state.base.committed else None
            _check_replace(base, conditions, lease_id, now)
            record = BlobRecord(
                name=key.name,
                snapshot=BASE,
                blob_type=PAGE_BLOB,
                size=size,
                ticks=state.ticks,
                created=base.created if base is not None else state.ticks,
                properties=content_properties,
                metadata=metadata,
                lease=leases.after_write(base.lease, now) if base is not None else Lease(),
                sequence_number=sequence_number,
                tags=tags or {},
                tier=tier,
            )
            if protect is not None:
                record = protect(record)
            write = BlobWrite(result=record, base=record, content=[], drop_staged=True)
            if state.base is not None:
                write.pages = PageEdit(0, EVERY_PAGE)
            return versioning.stamp(write, state, versioned, keep)

        record: BlobRecord = await self.store.write_blob(key, decide)
        return record

    # ------------------------------------------------------------------ Put Page

    async def upload_pages(
        self,
        key: BlobKey,
        start: int,
        end: int,
        chunks: AsyncIterable[bytes],
        md5: bytes | None,
        crc64: bytes | None,
        request: PageWrite,
    ) -> tuple[BlobRecord, Checksums]:
        """Put Page (update): the body becomes bytes ``[start, end)`` (aligned, checked by the
        caller against the body's length). Its bytes are staged first, then committed by
        :meth:`write_staged`."""
        checksums = Checksums(md5=md5 is not None, crc64=True)
        staged = await stage_checked(self.store, key, chunks, checksums, md5, crc64)
        return await self.write_staged(key, start, end, staged, request), checksums

    async def write_staged(
        self, key: BlobKey, start: int, end: int, staged: Staged, request: PageWrite
    ) -> BlobRecord:
        """Commit staged bytes as pages ``[start, end)`` of the blob, or discard them when the
        blob's state refuses the write. Put Page From URL stages the source's bytes and ends here."""
        now = self._clock()

        def decide(state: BlobState) -> BlobWrite:
            base = self._check_write(state, request, now, end)
            loaded = state.pages or []
            changed = page_map(loaded).write(start, end, staged.extent.ref)
            record = replace(base, ticks=state.ticks, lease=leases.after_write(base.lease, now))
            return BlobWrite(result=record, base=record, pages=_edit(loaded, start, end, changed))

        record: BlobRecord = await self.store.write_blob(
            key, decide, needs=Needs(pages=(start, end)), staged=staged
        )
        return record

    async def clear_pages(self, key: BlobKey, start: int, end: int, request: PageWrite) -> BlobRecord:
        """Put Page (clear): bytes ``[start, end)`` read as zeros again and take no space."""
        now = self._clock()

        def decide(state: BlobState) -> BlobWrite:
            base = self._check_write(state, request, now, end)
            loaded = state.pages or []
            mark = str(uuid.uuid4()) if state.snapshots else None
            changed = page_map(loaded).clear(start, end, mark)
            record = replace(base, ticks=state.ticks, lease=leases.after_write(base.lease, now))
            return BlobWrite(result=record, base=record, pages=_edit(loaded, start, end, changed))

        record: BlobRecord = await self.store.write_blob(
            key, decide, needs=Needs(pages=(start, end), snapshots=True)
        )
        return record

    @staticmethod
    def _check_write(state: BlobState, request: PageWrite, now: float, end: int) -> BlobRecord:
        base = _page_blob(state)
        leases.check_blob_access(base.lease, now, request.lease_id, write=True)
        check(request.conditions, base.ticks, read=False, tags=base.tags)
        check_sequence(request.sequence, base.sequence_number)
        if end > base.size:
            raise ServiceError("InvalidPageRange")
        return base

    # ------------------------------------------------------------------ Set Blob Properties

    async def set_properties(
        self,
        key: BlobKey,
        content_properties: ContentProperties | None,
        size: int | None,
        action: str | None,
        sequence_number: int | None,
        conditions: Conditions,
        lease_id: str | None,
    ) -> BlobRecord:
        """Set Blob Properties with a page blob's own headers: a new size (pages past it are
        dropped), a sequence number action, and the content properties when any were given."""
        if size is not None:
            check_blob_size(size)
        now = self._clock()

        def decide(state: BlobState) -> BlobWrite:
            base = _page_blob(state)
            leases.check_blob_access(base.lease, now, lease_id, write=True)
            check(conditions, base.ticks, read=False, tags=base.tags)
            if size is not None:
                premium.check_resize(base.tier, size)
            record = replace(
                base,
                ticks=state.ticks,
                lease=leases.after_write(base.lease, now),
                sequence_number=apply_sequence_action(action, sequence_number, base.sequence_number),
                properties=base.properties if content_properties is None else content_properties,
            )
            write = BlobWrite(result=record, base=record)
            if size is not None:
                record.size = size
                loaded = state.pages or []
                if loaded:
                    write.pages = _edit(loaded, size, EVERY_PAGE, page_map(loaded).truncate(size))
            return write

        needs = Needs(pages=(size, EVERY_PAGE)) if size is not None else Needs()
        record: BlobRecord = await self.store.write_blob(key, decide, needs=needs)
        return record

    # ------------------------------------------------------------------ Get Page Ranges

    async def get_ranges(
        self,
        key: BlobKey,
        snapshot: str,
        previous: str | None,
        window: tuple[int, int | None] | None,
        conditions: Conditions,
        lease_id: str | None,
        marker: str | None,
        max_results: int | None,
    ) -> PageRanges:
        """The written ranges of a version inside ``window`` (first byte, last byte or None), or
        with ``previous`` (a snapshot) what changed since it; a page of them from ``marker``. A
        window that starts at or past the end of a blob with pages is 416 InvalidRange, as Azure's
        emulator answers it and as Get Blob does."""
        if previous is not None and snapshot != BASE and previous >= snapshot:
            raise ServiceError("PreviousSnapshotCannotBeNewer")
        low = window[0] - window[0] % 512 if window else 0
        high = EVERY_PAGE if window is None or window[1] is None else (window[1] // 512 + 1) * 512
        found = await self.store.get_pages(key, snapshot, low, high)
        if found is None:
            if await self.store.get_container(key.account, key.container) is None:
                raise ServiceError("ContainerNotFound")
            raise ServiceError("BlobNotFound")
        record, spans = found
        if record.blob_type != PAGE_BLOB:
            raise ServiceError("InvalidBlobType")
        if snapshot == BASE:
            leases.check_blob_access(record.lease, self._clock(), lease_id, write=False)
        check(conditions, record.ticks, read=True, tags=record.tags)
        if window is not None and 0 < record.size <= window[0]:  # a range starting past the end
            raise ServiceError("InvalidRange")
        high = min(high, record.size)
        pages = page_map(spans)
        items: list[PageRange]
        if previous is None:
            items = [(a, b - 1, "page") for a, b in pages.ranges(low, max(low, high))]
        else:
            older = await self.store.get_pages(key, previous, low, high)
            if older is None:
                raise ServiceError("PreviousSnapshotNotFound")
            items = [(a, b - 1, kind) for a, b, kind in pages.diff(page_map(older[1]), low, max(low, high))]
        chosen, next_marker = page_of(items, marker, max_results)
        return PageRanges(record, chosen, next_marker)

    # ------------------------------------------------------------------ Incremental Copy

    async def incremental_copy(
        self,
        source: BlobKey,
        source_snapshot: str,
        dest: BlobKey,
        source_url: str,
        conditions: Conditions,
        lease_id: str | None,
    ) -> BlobRecord:
        """Incremental Copy Blob from a snapshot of a page blob of this account: the destination
        (new, or an earlier incremental copy of the same blob) gets the snapshot's pages, and a
        snapshot of its own that keeps them (``x-ms-copy-destination-snapshot``), and the
        snapshot's metadata, as Copy Blob gives its source's. Completed before the answer: the
        pages are shared, not moved."""
        check_blob_name(dest.name)
        if source_snapshot == BASE:
            raise ServiceError("IncrementalCopySourceMustBeSnapshot")
        now = self._clock()
        source_path = _source_path(source_url)

        def decide(state: BlobState) -> BlobWrite:
            origin = state.source
            if origin is None:
                raise ServiceError("CannotVerifyCopySource", "The specified blob does not exist.")
            if origin.blob_type != PAGE_BLOB:
                raise ServiceError("InvalidSourceBlobType")
            base = state.base if state.base is not None and state.base.committed else None
            if base is not None:
                copied = base.copy
                if base.blob_type != PAGE_BLOB or copied is None or not copied.incremental:
                    raise ServiceError("InvalidBlobType")
                if _source_path(copied.source) != source_path:
                    raise ServiceError("IncrementalCopyBlobMismatch")
                if _copied_snapshot(copied) >= source_snapshot:
                    raise ServiceError("IncrementalCopyOfEarlierVersionSnapshotNotAllowed")
                leases.check_blob_access(base.lease, now, lease_id, write=True)
            elif lease_id is not None:
                raise ServiceError("LeaseNotPresentWithBlobOperation")
            check(conditions, base.ticks if base else None, read=False, tags=base.tags if base else None)
            name = snapshot_time(state.ticks)
            copy = CopyState(
                str(uuid.uuid4()), source_url, f"{origin.size}/{origin.size}", state.ticks,
                incremental=True, destination_snapshot=name,
            )  # fmt: skip
            record = BlobRecord(
                name=dest.name,
                snapshot=BASE,
                blob_type=PAGE_BLOB,
                size=origin.size,
                ticks=state.ticks,
                created=base.created if base is not None else state.ticks,
                properties=origin.properties,
                metadata=origin.metadata,  # the snapshot's, as Azure's recorded copies show
                lease=leases.after_write(base.lease, now) if base is not None else Lease(),
                copy=copy,
                sequence_number=origin.sequence_number,
            )
            return BlobWrite(
                result=record,
                base=record,
                content=[],
                pages=PageEdit(0, EVERY_PAGE, state.source_pages or []),
                snapshot_after=replace(record, snapshot=name, lease=Lease()),
            )

        record: BlobRecord = await self.store.copy_blob(source, source_snapshot, dest, decide)
        return record


def _source_path(url: str) -> str:
    """The blob a copy source URL names (its path, decoded; the query left out), for comparing
    the sources of two incremental copies."""
    return unquote(urlsplit(url).path)


def _copied_snapshot(copy: CopyState) -> str:
    """The source snapshot an incremental copy last copied (the ``snapshot`` of its source URL)."""
    values = parse_qs(urlsplit(copy.source).query).get("snapshot")
    return parse_snapshot(values[0]) if values else BASE
