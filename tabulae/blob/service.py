"""The Blob service's operations and their rules, above storage and below HTTP.

Each write is a pure ``decide`` function over the blob's state as the store's transaction reads
it (:mod:`tabulae.storage.blobs`): conditions, leases, block lists, limits and snapshots are
decided there, so two front-ends racing for one blob are serialised by the store, never by a
lock here. Uploads are checked before their bytes are streamed (so a doomed 100 MiB upload is
refused at once) and again, authoritatively, in the transaction that commits them.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import time
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import cast

from tabulae.blob import softdeletion, versioning
from tabulae.blob.checked_staging import stage_checked
from tabulae.blob.features import AccountFeatureBook
from tabulae.blob.protection import GuardedStore, deletion_check
from tabulae.blob.rules import blocks, copies, leases, premium, softdelete, tiers
from tabulae.blob.rules import properties as service_properties
from tabulae.blob.rules import tags as tag_rules
from tabulae.blob.rules.checksums import Checksums
from tabulae.blob.rules.conditions import (
    NONE,
    Conditions,
    check,
    check_dates_only,
    check_satisfiable,
    not_met,
)
from tabulae.blob.rules.limits import MAX_COMMITTED_BLOCKS
from tabulae.blob.rules.names import LOGS_CONTAINER, SYSTEM_CONTAINERS, check_blob_name, check_container_name
from tabulae.blob.rules.pages import PageMap, Segment
from tabulae.blob.rules.properties import BlobServiceProperties
from tabulae.blob.rules.softdelete import DeletedContainer
from tabulae.blob.rules.tiers import TierPolicy, TierView
from tabulae.blob.versions_only import VersionsOnlyFold, root_marker_version
from tabulae.model import edm
from tabulae.model.accounts import OFF, AccountFeatures
from tabulae.model.blobs import DELETED_BASE_PREFIX
from tabulae.model.errors import FrontEndRefusal, ServiceError
from tabulae.model.policies import SignedIdentifier
from tabulae.storage.blob_pages import EVERY_PAGE, PageEdit, PageSpan
from tabulae.storage.blobs import (
    BASE,
    JUST_AFTER,
    MAX_UNCOMMITTED_BLOCKS,
    NO_NEEDS,
    VERSION_PREFIX,
    BlobKey,
    BlobRecord,
    BlobState,
    BlobStore,
    BlobWrite,
    ContainerRecord,
    ContentProperties,
    CopyState,
    Extent,
    FileRange,
    FoundBlob,
    Lease,
    Needs,
    Staged,
    TagQuery,
    next_ticks,
    prefix_end,
    stored_version,
)

MAX_RESULTS = 5000
PRECHECK_BYTES = 1024 * 1024  # uploads larger than this are checked before they are read
BLOCK_BLOB, APPEND_BLOB, PAGE_BLOB = "BlockBlob", "AppendBlob", "PageBlob"
BLOB_TYPES = (BLOCK_BLOB, APPEND_BLOB)
ZEROS = bytes(1024 * 1024)  # what unwritten pages read as, sent in pieces of at most this size
_SOFT_DELETED = (b"x-ms-is-soft-deleted", b"true")  # on a 404 for what is soft-deleted


@dataclass(slots=True)
class Upload:
    """The body of a content write as the front-end hands it over, with the client's checksums."""

    chunks: AsyncIterable[bytes]
    length: int
    md5: bytes | None = None
    crc64: bytes | None = None


@dataclass(slots=True)
class LeaseRequest:
    action: str  # acquire | renew | change | release | break
    lease_id: str | None = None
    proposed_id: str | None = None
    duration: int = -1
    break_period: int | None = None


@dataclass(slots=True)
class LeaseOutcome:
    ticks: int  # the resource's unchanged ETag and Last-Modified
    lease: Lease
    break_seconds: int = 0


@dataclass(slots=True)
class BlobPage:
    items: list[BlobRecord | str]  # records and, with a delimiter, prefixes (str)
    next_marker: str | None
    versions_only: frozenset[int] = frozenset()  # indexes of roots of blobs with versions only


class PageContent(list[Extent]):
    """A page blob's content as :meth:`BlobService.get_blob` hands it out: no extents of its own
    (the list is empty, so code that only knows extents sees nothing to read) but the blob's
    page map, which :meth:`BlobService.read` reads pieces of, zeros where nothing was written."""

    def __init__(self, pages: PageMap) -> None:
        super().__init__()
        self.pages = pages


def page_map(spans: Sequence[PageSpan]) -> PageMap:
    """The stored spans of a page blob as the rules' page map (each span's extent is its source)."""
    return PageMap(Segment(s.start, s.end, s.ref, s.offset, s.cleared) for s in spans)


def snapshot_time(ticks: int) -> str:
    """A snapshot's name: its creation time to seven fractional digits, ``…T20:54:05.5866513Z``."""
    seconds, fraction = divmod(ticks, edm.TICKS_PER_SECOND)
    whole = edm.format_datetime(seconds * edm.TICKS_PER_SECOND)[:-1]
    return f"{whole}.{fraction:07d}Z"


def parse_snapshot(value: str | None) -> str:
    """The ``snapshot`` query parameter, normalised to the stored form; BASE when absent."""
    if value is None:
        return BASE
    ticks = edm.parse_datetime(value)
    if ticks is None or not value[:1].isdigit():
        raise FrontEndRefusal(  # refused before the service, as recorded (GetBlockListAsync_Error)
            "InvalidQueryParameterValue",
            fields=(("QueryParameterName", "snapshot"), ("QueryParameterValue", value)),
        )
    return snapshot_time(ticks)


def _encode_pair(first: str, second: str) -> str:
    return base64.urlsafe_b64encode(f"{first}\n{second}".encode("utf-8", "surrogatepass")).decode()


def _decode_pair(marker: str, *, split_at_last: bool) -> tuple[str, str]:
    """The two parts of a marker made by :func:`_encode_pair`, split at the newline the part
    that cannot hold one is next to; any other text is 400 InvalidQueryParameterValue."""
    try:
        text = base64.b64decode(marker.encode("ascii"), altchars=b"-_", validate=True).decode(
            "utf-8", "surrogatepass"
        )
        first, newline, second = text.rpartition("\n") if split_at_last else text.partition("\n")
        if not newline:
            raise ValueError("not a marker")
    except (binascii.Error, ValueError, UnicodeError):
        raise ServiceError(
            "InvalidQueryParameterValue",
            fields=(("QueryParameterName", "marker"), ("QueryParameterValue", marker)),
        ) from None
    return first, second


def encode_marker(name: str, version: str) -> str:
    """List Blobs' marker: the name and stored version to resume after (a version has no newline)."""
    return _encode_pair(name, version)


def decode_marker(marker: str) -> tuple[str, str]:
    return _decode_pair(marker, split_at_last=True)


def encode_found_marker(container: str, name: str) -> str:
    """Find Blobs by Tags' marker: the last blob returned (a container name has no newline)."""
    return _encode_pair(container, name)


def decode_found_marker(marker: str) -> tuple[str, str]:
    return _decode_pair(marker, split_at_last=False)


def _require_base(state: BlobState, *, committed: bool = True) -> BlobRecord:
    base = state.base
    if base is None or (committed and not base.committed):
        raise ServiceError("BlobNotFound")
    return base


class BlobService:
    """The operations of the Blob service over a :class:`BlobStore`."""

    def __init__(
        self,
        store: BlobStore,
        clock: Callable[[], float] = time.time,
        tiering: TierPolicy | None = None,
        features: Callable[[str], AccountFeatures] = lambda account: OFF,
        owner: str | None = None,
    ) -> None:
        self._clock = clock
        self._owner = owner  # "host:pid" of the server process, named by the copies it runs
        self.tiering = tiering or TierPolicy()
        # Each account's features: the settings' (``features``) with run-time changes laid over.
        self.features = AccountFeatureBook(store, features)
        # Every blob write passes the immutability guard and keeps its change feed event.
        self.store: BlobStore = cast(BlobStore, GuardedStore(store, clock, self.features.get))
        self._default_view = TierView(self.tiering.default_tier, True, None, None, None)
        self._with_logs: set[str] = set()  # accounts whose $logs container is known to exist
        self._retention_clock = softdeletion.retention_clock(clock)
        self._retention: dict[str, tuple[float, int | None]] = {}  # account: (read at, days)

    async def _kept_days(self, account: str) -> int | None:
        """The account's blob soft delete retention in days (None: off), read at most once a
        second per worker, like the account's features."""
        now = time.monotonic()
        cached = self._retention.get(account)
        if cached is not None and now - cached[0] < 1.0:
            return cached[1]
        policy = (await self.get_service_properties(account)).delete_retention
        days = policy.days if policy.enabled and policy.days else None
        self._retention[account] = (now, days)
        return days

    async def _keep(self, account: str) -> tuple[float, int] | None:
        """(now, days) of blob soft delete for a write that may keep what it replaces."""
        days = await self._kept_days(account)
        return None if days is None else (self._retention_clock(), days)

    async def _versioning(self, account: str) -> bool:
        """Whether the account keeps versions (its ``blob_versioning`` feature)."""
        return (await self.features.get(account)).blob_versioning

    def clock(self) -> float:
        """Now, in epoch seconds, by the service's clock (injectable in tests)."""
        return self._clock()

    # ------------------------------------------------------------------ tiers

    def tier_view(self, record: BlobRecord, premium_account: bool = False) -> TierView | None:
        """A committed block blob's tier now (a rehydration whose time came is done), or in a
        premium page blob account a page blob's (:mod:`tabulae.blob.rules.premium`); None for
        the blobs that have no tier."""
        if premium_account and record.blob_type == PAGE_BLOB:
            return premium.view(record.tier, record.size)
        if record.blob_type != BLOCK_BLOB or not record.committed:
            return None
        if record.tier is None and record.tier_changed is None:
            return self._default_view  # most blobs: one shared view, nothing to compute
        return tiers.view(tiers.state_of(record, self.tiering.default_tier), self._clock())

    def _check_online(self, record: BlobRecord, now: float) -> None:
        """Reading or changing an archived blob's content, properties or metadata: 409 BlobArchived."""
        if record.blob_type == BLOCK_BLOB:
            tiers.check_readable(tiers.state_of(record, self.tiering.default_tier), now)

    def _new_tier(self, record: BlobRecord, tier: str | None, now: float) -> BlobRecord:
        """A new block blob's record with the tier its upload named (else the default, inferred:
        no tier fields at all, which a new record already has)."""
        if tier is None:
            return record
        return tiers.with_state(record, tiers.initial(tier, self.tiering.default_tier, now))

    def _check_tier_since(self, record: BlobRecord, since: tuple[int | None, int | None]) -> None:
        if since != (None, None) and record.blob_type == BLOCK_BLOB:
            created = (record.created - edm.UNIX_EPOCH_TICKS) / edm.TICKS_PER_SECOND
            tiers.check_change_time(record.tier_changed, created, *since)

    async def set_blob_tier(
        self,
        key: BlobKey,
        snapshot: str,
        tier: str,
        priority: str,
        lease_id: str | None,
        conditions: Conditions = NONE,
    ) -> int:
        """Set Blob Tier on the blob or one of its snapshots: 200, or 202 when it starts (or
        re-prioritises) a rehydration. The ETag and Last-Modified stay as they are."""
        now = self._clock()

        def decide(state: BlobState) -> BlobWrite:
            by_id = snapshot != BASE and state.target is None and versioning.is_version(snapshot)
            if snapshot == BASE:
                target = _require_base(state)
                leases.check_blob_access(target.lease, now, lease_id, write=True)
            elif by_id:
                target = versioning.current_only(state, snapshot)
            elif state.target is None:
                raise ServiceError("BlobNotFound")
            else:
                target = state.target
            check(conditions, target.ticks, read=False, tags=target.tags)
            if premium.is_premium(tier) and target.blob_type == PAGE_BLOB:
                explicit = target.tier if premium.is_premium(target.tier) else None
                kept = replace(target, tier=premium.set_tier(explicit, tier, target.size), tier_changed=None)
                if snapshot == BASE or by_id:
                    return BlobWrite(result=200, base=kept)
                return BlobWrite(result=200, snapshot_record=kept)
            tiers.check_blob_type(target.blob_type)
            current = tiers.state_of(target, self.tiering.default_tier)
            changed, status = tiers.set_tier(current, tier, now, priority, self.tiering.delay)
            record = tiers.with_state(target, changed)
            if snapshot == BASE or by_id:
                return BlobWrite(result=status, base=record)
            return BlobWrite(result=status, snapshot_record=record)

        status: int = await self.store.write_blob(
            key, decide, needs=Needs(snapshot=snapshot) if snapshot != BASE else NO_NEEDS
        )
        return status

    async def seal_blob(
        self, key: BlobKey, conditions: Conditions, lease_id: str | None, append_position: int | None
    ) -> BlobRecord:
        """Append Blob Seal: the blob takes no more appends, for good (a new ETag; sealing a
        sealed blob again succeeds)."""
        now = self._clock()

        def decide(state: BlobState) -> BlobWrite:
            base = _require_base(state)
            if base.blob_type != APPEND_BLOB:
                raise ServiceError("InvalidBlobType")
            leases.check_blob_access(base.lease, now, lease_id, write=True)
            check(conditions, base.ticks, read=False, tags=base.tags)
            if append_position is not None and base.size != append_position:
                raise not_met(412, "AppendPositionConditionNotMet")
            record = replace(base, sealed=True, ticks=state.ticks, lease=leases.after_write(base.lease, now))
            return BlobWrite(result=record, base=record)

        record: BlobRecord = await self.store.write_blob(key, decide)
        return record

    # ------------------------------------------------------------------ service

    async def get_service_properties(self, account: str) -> BlobServiceProperties:
        return service_properties.decode(await self.store.get_service_properties(account))

    async def set_service_properties(self, account: str, properties: BlobServiceProperties) -> None:
        await self.store.set_service_properties(account, service_properties.encode(properties))
        self._retention.pop(account, None)

    # ------------------------------------------------------------------ containers

    async def list_containers(
        self, account: str, prefix: str, marker: str | None, limit: int, *, system: bool = False
    ) -> tuple[list[ContainerRecord], str | None]:
        """A page of containers; the system ones (``$logs``, ``$blobchangefeed``) only with
        ``system``, as ``include=system`` asks. Every account has ``$logs``, made when first asked for."""
        if system:
            await self._ensure_logs(account)
        extra = 0 if system else len(SYSTEM_CONTAINERS)  # room for those left out, so pages stay full
        found = await self.store.list_containers(account, prefix, marker or None, limit + 1 + extra)
        # Soft-deleted containers are named after every live one: none is listed here.
        found = [record for record in found if not record.name.startswith(softdeletion.HIDDEN)]
        if not system:
            found = [record for record in found if record.name not in SYSTEM_CONTAINERS]
        if len(found) > limit:
            return found[:limit], found[limit].name
        return found, None

    async def deleted_containers(
        self, account: str, prefix: str
    ) -> list[tuple[DeletedContainer, int, ContainerRecord]]:
        """The account's soft-deleted containers whose names start with ``prefix``, still in
        retention, with their remaining days and the record kept aside (List Containers
        ``include=deleted`` shows its properties, and its metadata with ``include=metadata``, as
        Azure does)."""
        now = datetime.fromtimestamp(self._retention_clock(), UTC)
        hidden = await self.store.list_containers(account, softdeletion.HIDDEN + prefix, None, MAX_RESULTS)
        found = []
        for record in hidden:
            deleted = softdeletion.parse_hidden(record.name)
            if deleted is not None and not deleted.deletion.purged(now):
                found.append((deleted, deleted.deletion.remaining_days(now), record))
        return found

    async def restore_container(
        self, account: str, name: str, deleted_name: str | None, version: str | None
    ) -> None:
        """Restore Container: the deleted container named and versioned by the headers comes
        back under its name (:func:`tabulae.blob.rules.softdelete.restore_container`)."""
        now = datetime.fromtimestamp(self._retention_clock(), UTC)
        candidates = [d for d, _, _ in await self.deleted_containers(account, name)]
        live = await self.store.get_container(account, name) is not None
        chosen = softdelete.restore_container(name, deleted_name, version, candidates, live, now)
        hidden = (
            f"{softdeletion.HIDDEN}{chosen.name}{softdeletion.HIDDEN}{chosen.version}{softdeletion.HIDDEN}"
        )
        hidden += str(chosen.deletion.days)
        await self.store.rename_container(account, hidden, name, lambda record: None)

    async def _ensure_logs(self, account: str) -> None:
        """Azure makes ``$logs`` with the account; here it is made when first asked for."""
        if account not in self._with_logs:
            with contextlib.suppress(ServiceError):  # it exists already
                await self.store.create_container(account, ContainerRecord(LOGS_CONTAINER, next_ticks(None)))
            self._with_logs.add(account)

    async def create_container(
        self,
        account: str,
        name: str,
        metadata: dict[str, str],
        public_access: str | None,
        *,
        default_scope: str | None = None,
        deny_scope_override: bool = False,
    ) -> ContainerRecord:
        check_container_name(name)
        record = ContainerRecord(name, next_ticks(None), metadata, public_access)
        record.default_scope, record.deny_scope_override = default_scope, deny_scope_override
        await self.store.create_container(account, record)
        return record

    async def get_container(self, account: str, name: str, lease_id: str | None = None) -> ContainerRecord:
        record = await self.store.get_container(account, name)
        if record is None and name == LOGS_CONTAINER and account not in self._with_logs:
            await self._ensure_logs(account)
            record = await self.store.get_container(account, name)
        if record is None:
            raise ServiceError("ContainerNotFound")
        leases.check_container_access(record.lease, self._clock(), lease_id, required=False)
        return record

    async def set_container_metadata(
        self, account: str, name: str, metadata: dict[str, str], conditions: Conditions, lease_id: str | None
    ) -> ContainerRecord:
        now = self._clock()

        def decide(record: ContainerRecord, ticks: int) -> tuple[ContainerRecord, ContainerRecord]:
            leases.check_container_access(record.lease, now, lease_id, required=False)
            check_dates_only(conditions, record.ticks, allow_unmodified=False)
            updated = replace(record, ticks=ticks, metadata=metadata)
            return updated, updated

        result: ContainerRecord = await self.store.update_container(account, name, decide)
        return result

    async def set_container_acl(
        self,
        account: str,
        name: str,
        public_access: str | None,
        identifiers: list[SignedIdentifier],
        conditions: Conditions,
        lease_id: str | None,
    ) -> ContainerRecord:
        now = self._clock()

        def decide(record: ContainerRecord, ticks: int) -> tuple[ContainerRecord, ContainerRecord]:
            leases.check_container_access(record.lease, now, lease_id, required=False)
            check_dates_only(conditions, record.ticks)
            updated = replace(record, ticks=ticks, public_access=public_access, acl=identifiers)
            return updated, updated

        result: ContainerRecord = await self.store.update_container(account, name, decide)
        return result

    async def delete_container(
        self, account: str, name: str, conditions: Conditions, lease_id: str | None
    ) -> None:
        now = self._clock()

        def check_delete(record: ContainerRecord) -> None:
            leases.check_container_access(record.lease, now, lease_id, required=True)
            check_dates_only(conditions, record.ticks)

        features = await self.features.get(account)
        contents = deletion_check(self._clock(), features.version_level_immutability)
        days = features.container_soft_delete
        if days and name not in SYSTEM_CONTAINERS:  # kept, renamed aside, until its retention ends
            hidden = softdeletion.hidden_container(name, self._retention_clock(), days)
            await self.store.rename_container(account, name, hidden, check_delete, contents)
            return
        await self.store.delete_container(account, name, check_delete, contents)

    async def lease_container(
        self, account: str, name: str, request: LeaseRequest, conditions: Conditions
    ) -> LeaseOutcome:
        now = self._clock()

        def decide(record: ContainerRecord, ticks: int) -> tuple[ContainerRecord, LeaseOutcome]:
            check_dates_only(conditions, record.ticks)
            lease, seconds = _lease_action(record.lease, now, request)
            return replace(record, lease=lease), LeaseOutcome(record.ticks, lease, seconds)

        outcome: LeaseOutcome = await self.store.update_container(account, name, decide)
        return outcome

    # ------------------------------------------------------------------ reads

    async def get_blob(
        self,
        key: BlobKey,
        snapshot: str,
        conditions: Conditions,
        lease_id: str | None,
        *,
        content: bool,
    ) -> tuple[BlobRecord, list[Extent] | None]:
        """A blob version (and its extents, to stream) after its read conditions and lease."""
        check_satisfiable(conditions)  # before the blob is looked for, as Azure checks it
        found = await self.store.get_blob(key, snapshot, content=content)
        if found is None and versioning.is_version(snapshot):
            found = await self.store.get_blob(key, BASE, content=content)  # the current version?
            if found is not None and versioning.version_id(found[0]) != snapshot[1:]:
                found = None
        if found is None:
            if await self.store.get_container(key.account, key.container) is None:
                raise ServiceError("ContainerNotFound")
            soft = await self._is_soft_deleted(key, snapshot)
            raise ServiceError("BlobNotFound", headers=[_SOFT_DELETED] if soft else None)
        record, extents = found
        if content and record.blob_type == PAGE_BLOB:  # its spans, read with the record they go with
            paged = await self.store.get_pages(key, snapshot, 0, record.size)
            if paged is None:
                raise ServiceError("BlobNotFound")
            record, extents = paged[0], PageContent(page_map(paged[1]))
        if snapshot == BASE:
            leases.check_blob_access(record.lease, self._clock(), lease_id, write=False)
            if record.copy is not None and record.copy.status == copies.PENDING:
                record = await self.settle_stale_copy(key, record)
        check(conditions, record.ticks, read=True, tags=record.tags)
        if content:
            self._check_online(record, self._clock())
        return record, extents

    async def _is_soft_deleted(self, key: BlobKey, snapshot: str) -> bool:
        """Whether a read that found nothing names a soft-deleted blob, snapshot or version still
        in retention: Azure's 404 BlobNotFound then carries ``x-ms-is-soft-deleted: true`` (the
        Rust SDK's recordings at 2025-11-05 and 2026-04-06: Get Blob of a deleted blob in
        test_undelete_blob, Get Blob Properties of a deleted version in
        test_blob_version_error_cases). Looked for only where soft delete is on: one listed
        record, where a deleted base (``~d`` and its time, after the live base) or that
        snapshot would be."""
        if await self._kept_days(key.account) is None:
            return False
        wanted = DELETED_BASE_PREFIX if snapshot == BASE else snapshot
        listing = await self.store.list_blobs(
            key.account, key.container, prefix=key.name, start=(key.name, wanted), limit=1,
            snapshots=True, uncommitted=False, versions=True, deleted=True,
        )  # fmt: skip
        for record in listing.records:
            matches = record.snapshot.startswith(wanted) if snapshot == BASE else record.snapshot == wanted
            return (
                record.name == key.name
                and matches
                and record.deleted_time is not None
                and not softdeletion.expired(record, self._retention_clock())
            )
        return False

    def read(self, key: BlobKey, extents: Sequence[Extent], start: int, end: int) -> AsyncIterator[bytes]:
        if isinstance(extents, PageContent):
            return self._read_pages(key, extents.pages, start, end)
        return self.store.read(key, extents, start, end)

    async def _read_pages(self, key: BlobKey, pages: PageMap, start: int, end: int) -> AsyncIterator[bytes]:
        """Bytes ``[start, end)`` of a page blob: each written stretch from its extent, zeros between."""
        for piece in pages.pieces(start, end):
            segment = piece.segment
            if segment is None:
                left = piece.end - piece.start
                while left:
                    size = min(left, len(ZEROS))
                    yield ZEROS if size == len(ZEROS) else bytes(size)
                    left -= size
                continue
            low, high = segment.offset, segment.offset + segment.end - segment.start
            async for chunk in self.store.read(key, [Extent(str(segment.source), high)], low, high):
                yield chunk

    def stream(
        self, key: BlobKey, extents: Sequence[Extent], start: int, end: int
    ) -> AsyncIterator[bytes | FileRange]:
        """:meth:`read` for a download: pieces kept in files may come as :class:`FileRange` (a
        page blob's pieces are read, zeros between its written pages)."""
        if isinstance(extents, PageContent):
            return self._read_pages(key, extents.pages, start, end)
        return self.store.stream(key, extents, start, end)

    def remaining_days(self, record: BlobRecord) -> int:
        """``RemainingRetentionDays`` of a soft-deleted record now."""
        return softdeletion.remaining_days(record, self._retention_clock())

    def lease_state(self, lease: Lease) -> tuple[str, str, str | None]:
        """(status, state, duration) of a lease now, for headers and listings."""
        return leases.describe(lease, self._clock())

    async def get_block_list(
        self, key: BlobKey, snapshot: str, lease_id: str | None, conditions: Conditions = NONE
    ) -> tuple[BlobRecord, list[Extent], list[Extent]]:
        if snapshot != BASE:
            found = await self.store.get_blob(key, snapshot, content=True)
            if found is None:
                raise ServiceError("BlobNotFound")
            check(conditions, found[0].ticks, read=False, tags=found[0].tags)
            return found[0], found[1] or [], []
        base, committed, staged = await self.store.list_blocks(key)
        if base is None:
            raise ServiceError("BlobNotFound")
        if base.blob_type != BLOCK_BLOB:
            raise ServiceError("InvalidBlobType")
        if base.committed:
            leases.check_blob_access(base.lease, self._clock(), lease_id, write=False)
        check(conditions, base.ticks, read=False, tags=base.tags)
        return base, committed, staged

    async def list_blobs(
        self,
        account: str,
        container: str,
        *,
        prefix: str,
        delimiter: str | None,
        marker: str | None,
        limit: int,
        snapshots: bool,
        uncommitted: bool,
        versions: bool = False,
        deleted: bool = False,
        with_versions: bool = False,
        start_from: str | None = None,
        end_before: str | None = None,
    ) -> BlobPage:
        """One page: records and prefixes in name order, ``limit`` of them at most, and the marker
        of the first item not on the page (so a page that ends on a prefix resumes after it).
        ``with_versions`` (``include=deletedwithversions``) adds a root for each blob that has
        versions but no current version (:mod:`tabulae.blob.versions_only`). ``start_from``
        (``startFrom``) is the first name the listing may show, and composes with the marker: a
        page resumes after the marker, but never before ``start_from``; names from
        ``end_before`` (``endBefore``) on end the listing."""
        if delimiter and snapshots:
            raise ServiceError(
                "InvalidQueryParameterValue",
                fields=(("QueryParameterName", "include"), ("QueryParameterValue", "snapshots")),
            )
        start = decode_marker(marker) if marker else None
        if start_from and (start is None or start < (start_from, "")):
            start = (start_from, "")  # a name's stored versions all sort after ""
        ended = False  # a name at ``end_before`` or after was reached
        now = self._retention_clock() if deleted else 0.0
        items: list[BlobRecord | str] = []
        first_keys: list[tuple[str, str]] = []  # where each item begins, for the next marker
        fold = VersionsOnlyFold(versions) if with_versions else None
        roots: set[int] = set()

        def add(record: BlobRecord, root: bool) -> None:
            if root:
                roots.add(len(items))
            items.append(record)
            first_keys.append(
                (record.name, root_marker_version() if root else stored_version(record.snapshot))
            )

        while len(items) <= limit:
            listing = await self.store.list_blobs(
                account,
                container,
                prefix=prefix,
                start=start,
                limit=min(MAX_RESULTS, limit + 1 - len(items)),
                snapshots=snapshots,
                uncommitted=uncommitted,
                versions=versions or with_versions,
                deleted=deleted,
            )
            group: str | None = None
            for record in listing.records:
                if end_before is not None and record.name >= end_before:
                    ended = True
                    break
                if group is not None and record.name.startswith(group):
                    continue  # the rest of a prefix already listed
                if record.deleted_time is not None and softdeletion.expired(record, now):
                    continue  # its retention ran out: gone, though not purged yet
                version = stored_version(record.snapshot)
                group = None
                if delimiter:
                    at = record.name.find(delimiter, len(prefix))
                    if at >= 0:
                        group = record.name[: at + len(delimiter)]
                if group is None and fold is not None:
                    for shown, root in fold.feed(record):
                        add(shown, root)
                else:
                    if fold is not None:
                        for shown, root in fold.flush():
                            add(shown, root)
                    items.append(group if group is not None else record)
                    first_keys.append((record.name, version))
                if len(items) > limit:
                    break
            last_page = ended or not listing.records or not listing.more
            if fold is not None and last_page and len(items) <= limit:
                for shown, root in fold.flush():
                    add(shown, root)
            if ended or len(items) > limit or not listing.records:
                break
            if group is not None:
                start = (prefix_end(group), "")  # skip what remains of the prefix
            elif listing.more:
                last = listing.records[-1]
                start = (last.name, stored_version(last.snapshot) + JUST_AFTER)
            else:
                break
        if len(items) > limit:
            name, version = first_keys[limit]
            return BlobPage(
                items[:limit], encode_marker(name, version), frozenset(i for i in roots if i < limit)
            )
        return BlobPage(items, None, frozenset(roots))

    # ------------------------------------------------------------------ uploads

    async def _write_upload(
        self,
        key: BlobKey,
        upload: Upload,
        checksums: Checksums,
        decide: Callable[[BlobState, Checksums, Staged], BlobWrite],
        check_state: Callable[[BlobState], None],
    ) -> object:
        """Stream an upload into a staged extent and commit it with ``decide``. A large upload is
        first checked against the blob as it is (``check_state``), so one bound to fail does so
        before its bytes are read; the transaction that commits it decides again."""
        if upload.length > PRECHECK_BYTES:
            found = await self.store.get_blob(key)
            if found is None and await self.store.get_container(key.account, key.container) is None:
                raise ServiceError("ContainerNotFound")
            base = found[0] if found is not None else None
            check_state(BlobState(base=base, ticks=next_ticks(base.ticks if base else None)))
        staged = await stage_checked(self.store, key, upload.chunks, checksums, upload.md5, upload.crc64)
        return await self.store.write_blob(key, lambda state: decide(state, checksums, staged), staged=staged)

    async def put_blob(
        self,
        key: BlobKey,
        blob_type: str,
        upload: Upload,
        content_properties: ContentProperties,
        metadata: dict[str, str],
        conditions: Conditions,
        lease_id: str | None,
        tags: dict[str, str] | None = None,
        tier: str | None = None,
        protect: Callable[[BlobRecord], BlobRecord] | None = None,
    ) -> tuple[BlobRecord, Checksums]:
        check_blob_name(key.name)
        if tier is not None:
            tiers.check_blob_type(blob_type)
        now = self._clock()
        checksums = Checksums(md5=True, crc64=True)
        versioned = await self._versioning(key.account)
        keep = await self._keep(key.account)

        def check_state(state: BlobState) -> None:
            base = state.base if state.base is not None and state.base.committed else None
            _check_replace(base, conditions, lease_id, now)

        def decide(state: BlobState, sums: Checksums, staged: Staged) -> BlobWrite:
            check_state(state)
            base = state.base if state.base is not None and state.base.committed else None
            stored_md5 = content_properties.content_md5
            if stored_md5 is None and blob_type == BLOCK_BLOB and sums.md5 is not None:
                stored_md5 = base64.b64encode(sums.md5).decode()
            record = BlobRecord(
                name=key.name,
                snapshot=BASE,
                blob_type=blob_type,
                size=staged.extent.length,
                ticks=state.ticks,
                created=base.created if base is not None else state.ticks,
                properties=replace(content_properties, content_md5=stored_md5),
                metadata=metadata,
                lease=leases.after_write(base.lease, now) if base is not None else Lease(),
                block_count=0,
                tags=tags or {},
            )
            if blob_type == BLOCK_BLOB:
                record = self._new_tier(record, tier, now)
                if tier is None and base is not None and base.blob_type == BLOCK_BLOB:
                    record = tiers.kept_on_overwrite(record, base)
            if protect is not None:  # x-ms-immutability-policy-* and x-ms-legal-hold
                record = protect(record)
            content = [staged.extent] if staged.extent.length else []
            write = BlobWrite(result=record, base=record, content=content, drop_staged=True)
            return versioning.stamp(write, state, versioned, keep)

        record = await self._write_upload(key, upload, checksums, decide, check_state)
        assert isinstance(record, BlobRecord)
        return record, checksums

    async def put_block(self, key: BlobKey, block_id: str, upload: Upload, lease_id: str | None) -> Checksums:
        check_blob_name(key.name)
        blocks.check_block_id(block_id)
        now = self._clock()
        checksums = Checksums(md5=upload.md5 is not None, crc64=True)

        def check_state(state: BlobState) -> None:
            base = state.base
            if base is not None and base.blob_type != BLOCK_BLOB:
                raise ServiceError("InvalidBlobType")
            if base is not None and base.committed:
                leases.check_blob_access(base.lease, now, lease_id, write=True)
            elif lease_id is not None:
                raise ServiceError("LeaseNotPresentWithBlobOperation")

        def decide(state: BlobState, sums: Checksums, staged: Staged) -> BlobWrite:
            check_state(state)
            blocks.check_same_length(block_id, state.staged_id_length)
            if state.staged_count >= MAX_UNCOMMITTED_BLOCKS:
                raise ServiceError(
                    "BlockCountExceedsLimit",
                    "The uncommitted block count cannot exceed the maximum limit of 100,000 blocks.",
                )
            write = BlobWrite(stage_block=replace(staged.extent, block_id=block_id))
            if state.base is None:
                write.base = BlobRecord(
                    name=key.name, snapshot=BASE, blob_type=BLOCK_BLOB, size=0, ticks=state.ticks,
                    created=state.ticks, committed=False,
                )  # fmt: skip
            return write

        await self._write_upload(key, upload, checksums, decide, check_state)
        return checksums

    async def put_block_list(
        self,
        key: BlobKey,
        entries: Sequence[tuple[str, str]],
        content_properties: ContentProperties,
        metadata: dict[str, str],
        conditions: Conditions,
        lease_id: str | None,
        tags: dict[str, str] | None = None,
        tier: str | None = None,
        protect: Callable[[BlobRecord], BlobRecord] | None = None,
    ) -> BlobRecord:
        check_blob_name(key.name)
        now = self._clock()
        versioned = await self._versioning(key.account)
        keep = await self._keep(key.account)

        def decide(state: BlobState) -> BlobWrite:
            base = state.base
            committed = base if base is not None and base.committed else None
            if committed is not None and committed.blob_type != BLOCK_BLOB:
                raise ServiceError("InvalidBlobType")
            _check_replace(committed, conditions, lease_id, now)
            content = blocks.resolve(entries, state.content or [], state.staged or {})
            record = BlobRecord(
                name=key.name,
                snapshot=BASE,
                blob_type=BLOCK_BLOB,
                size=sum(extent.length for extent in content),
                ticks=state.ticks,
                created=committed.created if committed is not None else state.ticks,
                properties=content_properties,
                metadata=metadata,
                lease=leases.after_write(committed.lease, now) if committed is not None else Lease(),
                block_count=len(content),
                tags=tags or {},
            )
            record = self._new_tier(record, tier, now)
            if protect is not None:
                record = protect(record)
            write = BlobWrite(result=record, base=record, content=content, drop_staged=True)
            return versioning.stamp(write, state, versioned, keep)

        record: BlobRecord = await self.store.write_blob(key, decide, needs=Needs(content=True, staged=True))
        return record

    async def append_block(
        self,
        key: BlobKey,
        upload: Upload,
        conditions: Conditions,
        lease_id: str | None,
        max_size: int | None,
        append_position: int | None,
    ) -> tuple[BlobRecord, int, Checksums]:
        now = self._clock()
        checksums = Checksums(md5=upload.md5 is not None, crc64=True)

        def check_state(state: BlobState) -> None:
            base = _require_base(state)
            if base.blob_type != APPEND_BLOB:
                raise ServiceError("InvalidBlobType")
            if base.sealed:
                raise ServiceError("BlobIsSealed")
            leases.check_blob_access(base.lease, now, lease_id, write=True)
            check(conditions, base.ticks, read=False, tags=base.tags)
            if max_size is not None and base.size + upload.length > max_size:
                raise not_met(412, "MaxBlobSizeConditionNotMet")
            if append_position is not None and base.size != append_position:
                raise not_met(412, "AppendPositionConditionNotMet")
            if base.block_count >= MAX_COMMITTED_BLOCKS:
                raise ServiceError("BlockCountExceedsLimit")

        def decide(state: BlobState, sums: Checksums, staged: Staged) -> BlobWrite:
            check_state(state)
            base = _require_base(state)
            record = replace(
                base,
                size=base.size + staged.extent.length,
                ticks=state.ticks,
                block_count=base.block_count + 1,
                lease=leases.after_write(base.lease, now),
            )
            return BlobWrite(result=(record, base.size), base=record, append=staged.extent)

        result = await self._write_upload(key, upload, checksums, decide, check_state)
        assert isinstance(result, tuple)
        return result[0], result[1], checksums

    # ------------------------------------------------------------------ other writes

    async def _update_base(
        self,
        key: BlobKey,
        conditions: Conditions,
        lease_id: str | None,
        change: Callable[[BlobRecord, int], BlobRecord],
        *,
        new_version: bool = False,
    ) -> BlobRecord:
        now = self._clock()
        versioned = new_version and await self._versioning(key.account)

        def decide(state: BlobState) -> BlobWrite:
            base = _require_base(state)
            leases.check_blob_access(base.lease, now, lease_id, write=True)
            check(conditions, base.ticks, read=False, tags=base.tags)
            record = change(replace(base, lease=leases.after_write(base.lease, now)), state.ticks)
            write = BlobWrite(result=record, base=record)
            return versioning.stamp(write, state, versioned) if new_version else write

        record: BlobRecord = await self.store.write_blob(key, decide)
        return record

    async def set_blob_properties(
        self,
        key: BlobKey,
        content_properties: ContentProperties,
        conditions: Conditions,
        lease_id: str | None,
    ) -> BlobRecord:
        return await self._update_base(
            key,
            conditions,
            lease_id,
            lambda r, ticks: replace(self._online(r), properties=content_properties, ticks=ticks),
        )

    async def set_blob_metadata(
        self, key: BlobKey, metadata: dict[str, str], conditions: Conditions, lease_id: str | None
    ) -> BlobRecord:
        return await self._update_base(
            key,
            conditions,
            lease_id,
            lambda r, ticks: replace(self._online(r), metadata=metadata, ticks=ticks),
            new_version=True,
        )

    def _online(self, record: BlobRecord) -> BlobRecord:
        self._check_online(record, self._clock())
        return record

    async def delete_blob(
        self,
        key: BlobKey,
        snapshot: str,
        delete_snapshots: str | None,
        conditions: Conditions,
        lease_id: str | None,
        tier_since: tuple[int | None, int | None] = (None, None),
    ) -> bool:
        """``tier_since`` is (access tier modified since, unmodified since), epoch seconds.
        Whether what was deleted is gone for good (``x-ms-delete-type-permanent``): False when
        blob soft delete kept it, and for the blob itself (not a snapshot or version named) on an
        account that keeps versions, its snapshots alone (``only``) included (recorded: the Go
        SDK's TestDeleteBlobWithoutLeaseId and TestAppendBlockPermanentDeleteWithoutPermission
        answer false, its TestDeleteSpecificBlobVersion true for a version, x-ms-version
        2023-11-03, on an account with versioning and without soft delete)."""
        now = self._clock()
        versioned = await self._versioning(key.account)
        keep = await self._keep(key.account)
        if snapshot != BASE:
            if delete_snapshots is not None:
                raise ServiceError(
                    "InvalidQueryParameterValue",
                    fields=(("QueryParameterName", "snapshot"), ("QueryParameterValue", snapshot)),
                )

            def delete_one(state: BlobState) -> BlobWrite:
                if state.target is None and versioning.is_version(snapshot):
                    # The current version named by its id: Azure refuses (403, recorded); the
                    # blob itself is deleted without a versionid.
                    versioning.current_only(state, snapshot)
                    raise ServiceError("OperationNotAllowedOnRootBlob")
                if state.target is None:
                    raise ServiceError("BlobNotFound")
                check(conditions, state.target.ticks, read=False, tags=state.target.tags)
                self._check_tier_since(state.target, tier_since)
                if keep is not None:
                    return BlobWrite(rewrite=[softdeletion.soft(state.target, *keep)])
                return BlobWrite(delete_snapshot=snapshot)

            await self.store.write_blob(key, delete_one, needs=Needs(snapshot=snapshot))
            return keep is None

        def decide(state: BlobState) -> BlobWrite:
            staged = state.base
            if staged is not None and not staged.committed and staged.deleted_time is None:
                # Only staged blocks so far: Azure deletes them (202, as recorded), nothing kept.
                return BlobWrite(delete_base=True)
            base = _require_base(state)
            leases.check_blob_access(base.lease, now, lease_id, write=True)
            check(conditions, base.ticks, read=False, tags=base.tags)
            self._check_tier_since(base, tier_since)
            if keep is not None:
                snapshots = [softdeletion.soft(s, *keep) for s in softdeletion.live_snapshots(state)]
                if delete_snapshots == "only":
                    return BlobWrite(rewrite=snapshots)
                if snapshots and delete_snapshots != "include":
                    raise ServiceError("SnapshotsPresent")
                write = BlobWrite(rewrite=snapshots, delete_base=True)
                if versioned:
                    return versioning.stamp(write, state, versioned)
                aside = replace(base, snapshot=softdeletion.deleted_base_name(state.ticks))
                write.snapshot = softdeletion.soft(aside, *keep)
                return write
            if delete_snapshots == "only":
                return BlobWrite(delete_snapshots=True)
            if state.snapshots and delete_snapshots != "include":
                raise ServiceError("SnapshotsPresent")
            return versioning.stamp(BlobWrite(delete_snapshots=True, delete_base=True), state, versioned)

        needs = Needs(others=True) if keep is not None else Needs(snapshots=True)
        await self.store.write_blob(key, decide, needs=needs)
        return keep is None and not versioned

    async def permanent_delete(self, key: BlobKey, snapshot: str, conditions: Conditions) -> None:
        """Delete Blob with ``deletetype=permanent``: the soft-deleted snapshot or version named
        goes for good, where the account allows it (its ``blob_permanent_delete`` feature, or
        ``AllowPermanentDelete`` in its delete retention policy); see
        :func:`tabulae.blob.softdeletion.permanent`."""
        allowed = (await self.features.get(key.account)).blob_permanent_delete or (
            await self.get_service_properties(key.account)
        ).delete_retention.allow_permanent_delete
        softdeletion.permanent(allowed, snapshot)

        def decide(state: BlobState) -> BlobWrite:
            if versioning.is_current(state, snapshot):  # the current version is never soft-deleted
                raise ServiceError("BlobSnapshotNotSoftDeleted")
            write = softdeletion.purge_now(state, snapshot)
            target = next(r for r in state.others or () if r.snapshot == snapshot)
            check(conditions, target.ticks, read=False, tags=target.tags)
            return write

        await self.store.write_blob(key, decide, needs=Needs(others=True))

    async def undelete_blob(self, key: BlobKey) -> None:
        """Undelete Blob: the blob's soft-deleted snapshots, versions and base come back (see
        :mod:`tabulae.blob.softdeletion`); 404 BlobNotFound when the blob has nothing at all."""
        now = self._retention_clock()

        def decide(state: BlobState) -> BlobWrite:
            live = [r for r in state.others or () if not softdeletion.expired(r, now)]
            if state.base is None and not live:
                raise ServiceError("BlobNotFound")
            in_place, moves = softdeletion.undelete(state, now)
            return BlobWrite(rewrite=in_place, moves=moves)

        await self.store.write_blob(key, decide, needs=Needs(others=True))

    async def purge_deleted(self, batch: int = 500) -> int:
        """Remove for good every soft-deleted record whose retention has run out; how many. Each
        is checked again in the transaction that removes it (it may have been undeleted)."""
        now = self._retention_clock()
        purged = 0
        after: tuple[int, str, str] | None = None
        while True:
            found = await self.store.deleted_records(after, batch)
            for _position, key, record in found:
                if softdeletion.expired(record, now):
                    purged += await self.store.write_blob(
                        key, _purge(record.snapshot, now), needs=Needs(others=True)
                    )
            if len(found) < batch:
                break
            after = found[-1][0]
        moment = datetime.fromtimestamp(now, UTC)
        for account, name in await self.store.containers_from(softdeletion.HIDDEN):
            deleted = softdeletion.parse_hidden(name)
            if deleted is not None and deleted.deletion.purged(moment):
                with contextlib.suppress(ServiceError):  # restored or purged meanwhile
                    await self.store.delete_container(account, name, lambda record: None)
                    purged += 1
        return purged

    async def snapshot_blob(
        self, key: BlobKey, metadata: dict[str, str] | None, conditions: Conditions, lease_id: str | None
    ) -> tuple[BlobRecord, str]:
        now = self._clock()
        versioned = await self._versioning(key.account)

        def decide(state: BlobState) -> BlobWrite:
            base = _require_base(state)
            if lease_id is not None:
                leases.check_blob_access(base.lease, now, lease_id, write=False)
            check(conditions, base.ticks, read=False, tags=base.tags)
            self._check_online(base, now)
            name = snapshot_time(state.ticks)
            frozen = replace(
                base,
                snapshot=name,
                lease=Lease(),
                metadata=base.metadata if metadata is None else metadata,
            )
            if not versioned:
                return BlobWrite(result=(base, name), snapshot=frozen)
            current = replace(base)  # the same blob under a new version id
            write = versioning.stamp(
                BlobWrite(result=(current, name), snapshot=frozen, base=current),
                state,
                True,
                delay=versioning.SNAPSHOT_VERSION_DELAY,
            )
            frozen.version_id = None  # a snapshot is no version
            return write

        result: tuple[BlobRecord, str] = await self.store.write_blob(key, decide)
        return result

    async def lease_blob(self, key: BlobKey, request: LeaseRequest, conditions: Conditions) -> LeaseOutcome:
        now = self._clock()

        def decide(state: BlobState) -> BlobWrite:
            base = _require_base(state)
            check(conditions, base.ticks, read=False, tags=base.tags)
            lease, seconds = _lease_action(base.lease, now, request)
            return BlobWrite(result=LeaseOutcome(base.ticks, lease, seconds), base=replace(base, lease=lease))

        outcome: LeaseOutcome = await self.store.write_blob(key, decide)
        return outcome

    async def copy_blob(
        self,
        source: BlobKey,
        source_snapshot: str,
        dest: BlobKey,
        source_url: str,
        metadata: dict[str, str] | None,
        conditions: Conditions,
        source_conditions: Conditions,
        lease_id: str | None,
        tags: dict[str, str] | None = None,
        tier: str | None = None,
        priority: str = tiers.STANDARD,
        seal: bool | None = None,
        protect: Callable[[BlobRecord], BlobRecord] | None = None,
    ) -> BlobRecord:
        """Copy Blob within the account, completed before the answer (``x-ms-copy-status: success``).

        ``tier`` is the copy's (a block blob's only); an archived source is copied only to a
        named tier, and then the copy is archived until it has rehydrated to it ("Rehydrate an
        archived blob": copy to an online tier). A sealed append blob's copy is sealed unless
        ``seal`` says otherwise (``x-ms-seal-blob``)."""
        check_blob_name(dest.name)
        now = self._clock()
        versioned = await self._versioning(dest.account)
        keep = await self._keep(dest.account)
        if (
            versioning.is_version(source_snapshot)
            and await self.store.get_blob(source, source_snapshot) is None
        ):
            found = await self.store.get_blob(source, BASE)  # the current version, named by its id?
            if found is not None and versioning.version_id(found[0]) == source_snapshot[1:]:
                source_snapshot = BASE

        def decide(state: BlobState) -> BlobWrite:
            origin = state.source
            if origin is None:
                raise ServiceError("CannotVerifyCopySource", "The specified blob does not exist.")
            try:
                check(replace(source_conditions, if_tags=None), origin.ticks, read=False)
            except ServiceError:
                raise not_met(412, "SourceConditionNotMet") from None
            if source_conditions.if_tags is not None:  # unmet: ConditionNotMet, as Azure answers
                check(
                    Conditions(if_tags=source_conditions.if_tags), origin.ticks, read=False, tags=origin.tags
                )
            base = state.base if state.base is not None and state.base.committed else None
            if base is not None:
                copies.check_no_pending(base.copy, state.ticks)
                if base.blob_type != origin.blob_type:
                    raise ServiceError("InvalidBlobType")
            _check_replace(base, conditions, lease_id, now)  # If-None-Match: * is 409, as Put Blob's
            if tier is not None and not (premium.is_premium(tier) and origin.blob_type == PAGE_BLOB):
                tiers.check_blob_type(origin.blob_type)
            archived = origin.blob_type == BLOCK_BLOB and (
                tiers.settle(tiers.state_of(origin, self.tiering.default_tier), now).tier == tiers.ARCHIVE
            )
            if archived and tier is None:
                raise ServiceError("BlobArchived")
            copy = CopyState(str(uuid.uuid4()), source_url, f"{origin.size}/{origin.size}", state.ticks)
            record = BlobRecord(
                name=dest.name,
                snapshot=BASE,
                blob_type=origin.blob_type,
                size=origin.size,
                ticks=state.ticks,
                created=base.created if base is not None else state.ticks,
                properties=origin.properties,
                metadata=origin.metadata if metadata is None else metadata,
                lease=leases.after_write(base.lease, now) if base is not None else Lease(),
                copy=copy,
                block_count=origin.block_count,
                tags=tags or {},
                sealed=origin.sealed if seal is None else seal and origin.blob_type == APPEND_BLOB,
            )
            if archived and tier in tiers.ONLINE:
                pending = tiers.TierState(
                    tiers.ARCHIVE, False, now, tier, priority, now + self.tiering.delay(priority)
                )
                record = tiers.with_state(record, pending)
            elif origin.blob_type == BLOCK_BLOB:
                record = self._new_tier(record, tier, now)
            elif premium.is_premium(tier):  # a premium page blob's copy with a tier of its own
                assert tier is not None
                premium.check_fits(tier, origin.size)
                record.tier = tier
            if protect is not None:
                record = protect(record)
            write = BlobWrite(
                result=record, base=record, content=state.source_content or [], drop_staged=True
            )
            if origin.blob_type == PAGE_BLOB:  # the copy shares (or, on another shard, copies) the pages
                record.sequence_number = origin.sequence_number
                write.pages = PageEdit(0, EVERY_PAGE, state.source_pages or [])
            return versioning.stamp(write, state, versioned, keep)

        record: BlobRecord = await self.store.copy_blob(source, source_snapshot, dest, decide)
        return record

    # ------------------------------------------------------------------ copies from a URL

    async def copy_from_upload(
        self,
        key: BlobKey,
        upload: Upload,
        content_properties: ContentProperties,
        metadata: dict[str, str],
        conditions: Conditions,
        lease_id: str | None,
        copy: CopyState,
        tags: dict[str, str] | None = None,
        tier: str | None = None,
    ) -> tuple[BlobRecord, Checksums]:
        """Copy Blob From URL: the source's bytes (``upload``) become a block blob that records
        the copy, completed before the answer; a write as Put Blob's, with its conditions (and
        the tier the request names)."""
        check_blob_name(key.name)
        now = self._clock()
        checksums = Checksums(md5=True, crc64=True)
        versioned = await self._versioning(key.account)
        keep = await self._keep(key.account)

        def check_state(state: BlobState) -> None:
            base = state.base if state.base is not None and state.base.committed else None
            if base is not None:
                copies.check_no_pending(base.copy, state.ticks)
            _check_replace(base, conditions, lease_id, now)

        def decide(state: BlobState, sums: Checksums, staged: Staged) -> BlobWrite:
            check_state(state)
            base = state.base if state.base is not None and state.base.committed else None
            assert sums.md5 is not None
            record = BlobRecord(
                name=key.name,
                snapshot=BASE,
                blob_type=BLOCK_BLOB,
                size=staged.extent.length,
                ticks=state.ticks,
                created=base.created if base is not None else state.ticks,
                properties=replace(content_properties, content_md5=base64.b64encode(sums.md5).decode()),
                metadata=metadata,
                lease=leases.after_write(base.lease, now) if base is not None else Lease(),
                copy=copies.finished(replace(copy, completed=state.ticks), staged.extent.length, state.ticks),
                tags=tags or {},
            )
            record = self._new_tier(record, tier, now)
            content = [staged.extent] if staged.extent.length else []
            write = BlobWrite(result=record, base=record, content=content, drop_staged=True)
            return versioning.stamp(write, state, versioned, keep)

        record = await self._write_upload(key, upload, checksums, decide, check_state)
        assert isinstance(record, BlobRecord)
        return record, checksums

    async def start_pending_copy(
        self,
        key: BlobKey,
        blob_type: str,
        content_properties: ContentProperties,
        metadata: dict[str, str],
        conditions: Conditions,
        lease_id: str | None,
        source_url: str,
        total: int,
        tags: dict[str, str] | None = None,
        tier: str | None = None,
    ) -> BlobRecord:
        """Copy Blob from outside this store: the destination becomes an empty blob whose copy is
        pending (its bytes come later, :meth:`finish_pending_copy`). Its tags and tier are the
        request's from the start, and the finished copy keeps them; so does its version id."""
        check_blob_name(key.name)
        now = self._clock()
        versioned = await self._versioning(key.account)
        keep = await self._keep(key.account)

        def decide(state: BlobState) -> BlobWrite:
            base = state.base if state.base is not None and state.base.committed else None
            if base is not None:
                copies.check_no_pending(base.copy, state.ticks)
                if base.blob_type != blob_type:
                    raise ServiceError("InvalidBlobType")
            _check_replace(base, conditions, lease_id, now)
            if tier is not None:
                tiers.check_blob_type(blob_type)
            record = BlobRecord(
                name=key.name,
                snapshot=BASE,
                blob_type=blob_type,
                size=0,
                ticks=state.ticks,
                created=base.created if base is not None else state.ticks,
                properties=content_properties,
                metadata=metadata,
                lease=leases.after_write(base.lease, now) if base is not None else Lease(),
                copy=copies.pending(str(uuid.uuid4()), source_url, total, state.ticks, self._owner),
                tags=tags or {},
            )
            if blob_type == BLOCK_BLOB:
                record = self._new_tier(record, tier, now)
            write = BlobWrite(result=record, base=record, content=[], drop_staged=True)
            return versioning.stamp(write, state, versioned, keep)

        record: BlobRecord = await self.store.write_blob(key, decide)
        return record

    async def _pending_write(
        self, key: BlobKey, copy_id: str, change: Callable[[BlobRecord, CopyState, int], BlobWrite]
    ) -> BlobRecord:
        """A write to a blob whose copy ``copy_id`` is still pending; NoPendingCopyOperation when
        it is not (finished, aborted, failed, or the blob was replaced since)."""

        def decide(state: BlobState) -> BlobWrite:
            base = _require_base(state)
            copy = base.copy
            if copy is None or copy.copy_id != copy_id or copy.status != copies.PENDING:
                raise ServiceError("NoPendingCopyOperation")
            return change(base, copy, state.ticks)

        record: BlobRecord = await self.store.write_blob(key, decide)
        return record

    async def pending_copy_progress(self, key: BlobKey, copy_id: str, copied: int) -> None:
        """Record how far a pending copy has come (its heartbeat too); the blob's ETag stays."""

        def change(base: BlobRecord, copy: CopyState, ticks: int) -> BlobWrite:
            record = replace(base, copy=copies.progressed(copy, copied, ticks))
            return BlobWrite(result=record, base=record)

        await self._pending_write(key, copy_id, change)

    async def finish_pending_copy(self, key: BlobKey, copy_id: str, upload: Upload) -> BlobRecord:
        """The bytes of a pending copy, streamed in and committed, if it is still pending."""
        checksums = Checksums(md5=True, crc64=True)

        def check_state(state: BlobState) -> None:
            base = _require_base(state)
            copy = base.copy
            if copy is None or copy.copy_id != copy_id or copy.status != copies.PENDING:
                raise ServiceError("NoPendingCopyOperation")

        def decide(state: BlobState, sums: Checksums, staged: Staged) -> BlobWrite:
            check_state(state)
            base = _require_base(state)
            assert base.copy is not None and sums.md5 is not None
            properties = base.properties
            if properties.content_md5 is None and base.blob_type == BLOCK_BLOB:
                properties = replace(properties, content_md5=base64.b64encode(sums.md5).decode())
            size = staged.extent.length
            record = replace(
                base,
                size=size,
                ticks=state.ticks,
                properties=properties,
                copy=copies.finished(base.copy, size, state.ticks),
                block_count=1 if size and base.blob_type == APPEND_BLOB else 0,
            )
            content = [staged.extent] if size else []
            return BlobWrite(result=record, base=record, content=content)

        record = await self._write_upload(key, upload, checksums, decide, check_state)
        assert isinstance(record, BlobRecord)
        return record

    async def end_pending_copy(
        self, key: BlobKey, copy_id: str, status: str, description: str | None = None
    ) -> BlobRecord:
        """Fail (or abort) a pending copy: the blob stays, empty, with the copy's end recorded."""

        def change(base: BlobRecord, copy: CopyState, ticks: int) -> BlobWrite:
            record = replace(
                base, size=0, ticks=ticks, copy=copies.ended(copy, status, ticks, description), block_count=0
            )
            return BlobWrite(result=record, base=record, content=[])

        return await self._pending_write(key, copy_id, change)

    async def settle_stale_copy(self, key: BlobKey, record: BlobRecord) -> BlobRecord:
        """A record whose pending copy lost its worker, failed now (see ``rules.copies``)."""
        copy = record.copy
        if copy is None or not copies.is_stale(copy, next_ticks(None)):
            return record
        try:
            return await self.end_pending_copy(key, copy.copy_id, copies.FAILED, copies.INTERRUPTED)
        except ServiceError:
            found = await self.store.get_blob(key)
            return found[0] if found is not None else record

    async def abort_copy(self, key: BlobKey, copy_id: str, lease_id: str | None) -> None:
        """Abort a pending copy: the destination stays, empty, its copy ``aborted``. 409
        NoPendingCopyOperation when none is pending, CopyIdMismatch for another copy's id."""
        record, _ = await self.get_blob(key, BASE, NONE, lease_id, content=False)
        copy = record.copy
        if copy is not None and copy.copy_id != copy_id:
            raise ServiceError("CopyIdMismatch")
        if copy is None or copy.status != copies.PENDING:
            raise ServiceError("NoPendingCopyOperation")
        now = self._clock()

        def change(base: BlobRecord, current: CopyState, ticks: int) -> BlobWrite:
            leases.check_blob_access(base.lease, now, lease_id, write=True)
            record = replace(
                base, size=0, ticks=ticks, copy=copies.ended(current, copies.ABORTED, ticks), block_count=0
            )
            return BlobWrite(result=record, base=record, content=[])

        await self._pending_write(key, copy_id, change)

    # ------------------------------------------------------------------ index tags

    async def set_blob_tags(
        self, key: BlobKey, snapshot: str, tags: dict[str, str], conditions: Conditions, lease_id: str | None
    ) -> None:
        """Replace a blob's (or a snapshot's, or a version's) index tags. The blob's ETag and
        Last-Modified stay as they are: tags are not part of what they describe ("Set Blob Tags")."""
        now = self._clock()
        if snapshot != BASE:

            def on_snapshot(state: BlobState) -> BlobWrite:
                target = state.target
                if target is None and versioning.is_current(state, snapshot):
                    base = _require_base(state)  # the current version, named by its id
                    check(conditions, base.ticks, read=False, tags=base.tags)
                    return BlobWrite(base=replace(base, tags=tags))
                if target is None:
                    raise ServiceError("BlobNotFound")
                check(conditions, target.ticks, read=False, tags=target.tags)
                return BlobWrite(snapshot_record=replace(target, tags=tags))

            await self.store.write_blob(key, on_snapshot, needs=Needs(snapshot=snapshot))
            return

        def decide(state: BlobState) -> BlobWrite:
            base = _require_base(state)
            leases.check_blob_access(base.lease, now, lease_id, write=True)
            check(conditions, base.ticks, read=False, tags=base.tags)
            return BlobWrite(base=replace(base, tags=tags, lease=leases.after_write(base.lease, now)))

        await self.store.write_blob(key, decide)

    async def get_blob_tags(
        self, key: BlobKey, snapshot: str, conditions: Conditions, lease_id: str | None
    ) -> dict[str, str]:
        """A blob's (or a snapshot's, or a version's) index tags. Its conditions are on the blob,
        not a cached representation, so an unmet one is 412 as on a write, never 304."""
        found = await self.store.get_blob(key, snapshot)
        if found is None and versioning.is_version(snapshot):  # the current version, by its id
            found = await self.store.get_blob(key, BASE)
            if found is not None and VERSION_PREFIX + (found[0].version_id or "") != snapshot:
                found = None
        if found is None:
            if await self.store.get_container(key.account, key.container) is None:
                raise ServiceError("ContainerNotFound")
            raise ServiceError("BlobNotFound")
        record = found[0]
        if snapshot == BASE:
            leases.check_blob_access(record.lease, self._clock(), lease_id, write=False)
        check(conditions, record.ticks, read=False, tags=record.tags)
        return record.tags

    async def find_blobs_by_tags(
        self, account: str, container: str | None, where: str, marker: str | None, limit: int
    ) -> tuple[list[FoundBlob], str | None]:
        """One page of Find Blobs by Tags (of one container when ``container`` is given): blobs in
        (container, name) order with the tags the expression names, and the next page's marker."""
        node = tag_rules.parse_filter(where, allow_container=container is None)
        comparisons = tag_rules.comparisons(node)
        scopes = {c.value for c in comparisons if c.key == tag_rules.CONTAINER}
        terms = tuple((c.key, c.operator, c.value) for c in comparisons if c.key != tag_rules.CONTAINER)
        if not terms:
            raise ServiceError(
                "InvalidQueryParameterValue",
                "Error parsing query: the expression must have a condition on a tag",
                fields=(("QueryParameterName", "where"), ("QueryParameterValue", where)),
            )
        if len(scopes) > 1:
            return [], None  # two containers at once: nothing is in both
        after = decode_found_marker(marker) if marker else None
        query = TagQuery(terms, next(iter(scopes), None))
        found = await self.store.find_blobs_by_tags(account, container, query, after, limit + 1)
        if len(found) > limit:
            last = found[limit - 1]
            return found[:limit], encode_found_marker(last.container, last.name)
        return found, None


def _purge(snapshot: str, now: float) -> Callable[[BlobState], BlobWrite]:
    def decide(state: BlobState) -> BlobWrite:
        for record in state.others or ():
            if record.snapshot == snapshot and softdeletion.expired(record, now):
                return BlobWrite(result=1, purge=[stored_version(snapshot)])
        return BlobWrite(result=0)

    return decide


def _check_replace(base: BlobRecord | None, conditions: Conditions, lease_id: str | None, now: float) -> None:
    """The rules of a write that replaces a whole blob (Put Blob, Put Block List, copies): its lease,
    then its conditions. "Only if it does not exist" (If-None-Match: *, what the SDKs send
    unless told to overwrite) is 409 BlobAlreadyExists, but does not stop the holder of the
    blob's lease from replacing it: Azure then answers 201, or LeaseLost once the lease ended.
    A request whose SAS may create but not write (``conditions.create_only``) may not replace
    it at all: 403 UnauthorizedBlobOverwrite, as Azure refuses such a token's overwrite
    (AzCopy#833, a Put Blob with an ``sp=rlac`` account SAS; Hadoop ABFS's error table)."""
    create_only = conditions.if_none_match == ("*",) and conditions.if_match is None
    if base is not None:
        if conditions.create_only:
            raise ServiceError("UnauthorizedBlobOverwrite")
        if create_only and lease_id is None:
            raise ServiceError("BlobAlreadyExists")
        leases.check_blob_access(base.lease, now, lease_id, write=True)
    elif lease_id is not None:
        raise ServiceError("LeaseNotPresentWithBlobOperation")
    check(
        replace(conditions, if_none_match=None) if create_only else conditions,
        base.ticks if base else None,
        read=False,
        tags=base.tags if base else None,
    )


def _lease_action(lease: Lease, now: float, request: LeaseRequest) -> tuple[Lease, int]:
    action = request.action
    if action == "acquire":
        return leases.acquire(lease, now, request.duration, request.proposed_id), 0
    if action == "break":
        return leases.break_lease(lease, now, request.break_period)
    if request.lease_id is None:
        raise ServiceError("MissingRequiredHeader", fields=(("HeaderName", "x-ms-lease-id"),))
    if action == "renew":
        return leases.renew(lease, now, request.lease_id), 0
    if action == "release":
        return leases.release(lease, now, request.lease_id), 0
    if request.proposed_id is None:
        raise ServiceError("MissingRequiredHeader", fields=(("HeaderName", "x-ms-proposed-lease-id"),))
    return leases.change(lease, now, request.lease_id, request.proposed_id), 0
