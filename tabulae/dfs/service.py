"""The Data Lake (DFS) operations over the Blob service's store: one data set.

A DFS path is the blob of the same name. A file is a block blob; a directory is an empty block
blob with the metadata ``hdi_isfolder=true``, as Azure shows directories to the Blob API. Owner,
owning group, ACL and sticky bit live in the record's ``posix`` field (empty: the defaults of a
path created with Shared Key). Appended data waits as uncommitted blocks, one per append, named
by its offset, until a flush at the file's new length commits the contiguous run of them. A
rename of a file or of a directory with its whole subtree, and a recursive delete, are one
transaction of the store each (:meth:`BlobStore.rename_path`, :meth:`BlobStore.delete_tree`).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from tabulae.blob import encryption_guard, softdeletion
from tabulae.blob.checked_staging import stage_checked
from tabulae.blob.namespace_guard import FOLDER, is_directory
from tabulae.blob.rules import leases
from tabulae.blob.rules.checksums import Checksums
from tabulae.blob.rules.conditions import NONE, Conditions, check, not_met
from tabulae.blob.rules.names import check_blob_name
from tabulae.blob.service import (
    APPEND_BLOB,
    BLOCK_BLOB,
    BlobService,
    BlobState,
    BlobWrite,
    Needs,
    Upload,
    decode_marker,
    encode_marker,
)
from tabulae.dfs import acl, trash
from tabulae.dfs.paths import (
    Existing,
    Kind,
    ancestors,
    check_create,
    check_delete,
    check_rename,
    is_within,
    parent,
)
from tabulae.model.blobs import (
    BASE,
    DELETED_BASE_PREFIX,
    BlobKey,
    BlobRecord,
    ContainerRecord,
    ContentProperties,
    Lease,
)
from tabulae.model.errors import ServiceError
from tabulae.storage.namespace import RenameState, RenameWrite, TreeState, TreeWrite, UndeleteState

DELETE_BATCH = 10_000
DELETE_BATCH_ENV = "TABULAE_TEST_DFS_DELETE_BATCH"
LIST_STEP = 1000  # records read per store call while filtering a listing
#: A path's content type when no ``x-ms-content-type`` names one: Azure stores it for every file
#: and directory Create Path makes (recorded: Get Properties answers it after a create without
#: content headers, and after one with only a language and a disposition).
DEFAULT_CONTENT_TYPE = "application/octet-stream"


@dataclass(frozen=True, slots=True)
class Deletion:
    """What Delete Path did: the deletion's id when the path was kept (soft delete), and whether
    it finished (False: descendants remain; the caller answers with a continuation)."""

    deletion_id: str | None
    finished: bool = True


def _purge_orphan(slot: str) -> Callable[[BlobState], BlobWrite]:
    def decide(state: BlobState) -> BlobWrite:
        there = any(
            record.snapshot == slot and trash.is_moved_descendant(record) for record in state.others or ()
        )
        return BlobWrite(result=1 if there else 0, purge=[slot] if there else [])

    return decide


MAX_APPEND = 4000 * 1024 * 1024  # Path - Update: an append's body, as a block's


@contextlib.contextmanager
def filesystem_errors() -> Iterator[None]:
    """A container the store did not find is, in the DFS API, a file system not found."""
    try:
        yield
    except ServiceError as error:
        if error.code == "ContainerNotFound":
            raise ServiceError("FilesystemNotFound") from None
        raise


def _check_source(conditions: Conditions, ticks: int) -> None:
    """Rename's ``x-ms-source-if-*`` conditions on the source path: unmet, 412
    SourceConditionNotMet, as Azure answers the .NET SDK's RenameAsync_SourceConditionsFail
    (If-Match, If-Modified-Since, If-Unmodified-Since); the destination's own conditions keep
    ConditionNotMet."""
    try:
        check(conditions, ticks, read=False)
    except ServiceError as error:
        if error.code != "ConditionNotMet":
            raise
        raise not_met(412, "SourceConditionNotMet") from None


def existing(record: BlobRecord | None, has_children: bool = False) -> Existing | None:
    if record is None or not record.committed:
        return None
    return Existing(Kind.DIRECTORY if is_directory(record) else Kind.FILE, has_children)


@dataclass(frozen=True, slots=True)
class Posix:
    """A path's owner, owning group, ACL and sticky bit."""

    owner: str
    group: str
    entries: tuple[acl.Entry, ...]
    sticky: bool = False
    expiry: float | None = None  # epoch seconds when a file expires (Set Expiry)
    context: str | None = None  # x-ms-encryption-context, given when the file was created

    @property
    def permissions(self) -> str:
        return _permissions(self.entries, self.sticky)

    @property
    def acl_text(self) -> str:
        return acl.render_acl(self.entries)

    def stored(self) -> dict[str, object]:
        stored: dict[str, object] = {"o": self.owner, "g": self.group, "a": self.acl_text, "s": self.sticky}
        if self.expiry is not None:
            stored["e"] = self.expiry
        if self.context is not None:
            stored["c"] = self.context
        return stored


def posix_of(record: BlobRecord) -> Posix:
    """What a record says, or the defaults of a path made through the Blob API or with Shared
    Key: ``$superuser``, ``rwxr-x---`` for a directory and ``rw-r-----`` for a file."""
    stored = record.posix
    if not stored:
        mode = (acl.DIRECTORY_MODE if is_directory(record) else acl.FILE_MODE) & ~acl.DEFAULT_UMASK
        return Posix(acl.SUPERUSER, acl.SUPERUSER, acl.minimal_acl(mode))
    return _stored_posix(stored)


def root_posix(container: ContainerRecord) -> Posix:
    """A file system's root directory: what was set on it (kept in the container's record, as
    the root is no blob), else ``$superuser`` with ``rwxr-x---``."""
    return _stored_posix(container.posix) if container.posix else ROOT


def _stored_posix(stored: dict[str, Any]) -> Posix:
    expiry = stored.get("e")
    return Posix(
        str(stored["o"]),
        str(stored["g"]),
        _entries(str(stored["a"])),
        bool(stored.get("s", False)),
        float(expiry) if expiry is not None else None,
        stored.get("c"),
    )


# A listing shows thousands of paths that share a handful of ACLs: parse and render each once.
@functools.lru_cache(maxsize=1024)
def _entries(text: str) -> tuple[acl.Entry, ...]:
    return acl.parse_acl(text)


@functools.lru_cache(maxsize=1024)
def _permissions(entries: tuple[acl.Entry, ...], sticky: bool) -> str:
    return acl.render_permissions(acl.mode_of(entries, sticky), extended=acl.is_extended(entries))


ROOT = Posix(acl.SUPERUSER, acl.SUPERUSER, acl.minimal_acl(0o750))


def block_id(offset: int) -> str:
    """The uncommitted block holding the data appended at ``offset``: ids of one length, which
    the Blob API's Get Block List shows as it would any block."""
    return base64.b64encode(f"dfs-{offset:020d}".encode()).decode()


def block_offset(block: str) -> int | None:
    try:
        text = base64.b64decode(block).decode()
    except ValueError:
        return None
    return int(text[4:]) if text.startswith("dfs-") and text[4:].isdigit() else None


@dataclass(slots=True)
class CreateRequest:
    directory: bool
    permissions: int | None = None
    umask: int | None = None
    entries: tuple[acl.Entry, ...] | None = None
    owner: str | None = None
    group: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    properties: ContentProperties = field(default_factory=ContentProperties)
    conditions: Conditions = NONE
    lease_id: str | None = None
    creator: str | None = None  # a token's oid, who owns the parents made on the way
    encryption_context: str | None = None
    append_blob: bool = False  # ``blobtype=appendblob``: a file written by concurrentAppend


@dataclass(slots=True)
class FlushRequest:
    position: int
    retain: bool = False
    close: bool = False
    properties: ContentProperties | None = None
    conditions: Conditions = NONE
    lease_id: str | None = None


class DataLakeService:
    """The DFS operations, over a :class:`BlobService` (and its store)."""

    def __init__(self, blobs: BlobService, clock=time.time, delete_batch: int | None = None) -> None:  # type: ignore[no-untyped-def]
        self.blobs = blobs
        self.store = blobs.store
        self._clock = clock
        self._retention_clock = softdeletion.retention_clock(clock)
        #: The most descendants one recursive Delete Path removes before it answers with a
        #: continuation (``TABULAE_TEST_DFS_DELETE_BATCH`` lowers it for tests).
        self.delete_batch = delete_batch or int(os.environ.get(DELETE_BATCH_ENV) or DELETE_BATCH)

    async def is_hns(self, account: str) -> bool:
        return (await self.blobs.features.get(account)).hns

    async def get(self, key: BlobKey) -> BlobRecord:
        """A live path's record; an expired file is gone (404) before the sweep deletes it."""
        found = await self.store.get_blob(key)
        if found is None or not found[0].committed or trash.has_expired(found[0], self._clock()):
            if await self.store.get_container(key.account, key.container) is None:
                raise ServiceError("FilesystemNotFound")
            raise ServiceError("PathNotFound")
        return found[0]

    async def root(self, account: str, filesystem: str) -> ContainerRecord:
        """The file system's record, which holds its root directory's access control."""
        container = await self.store.get_container(account, filesystem)
        if container is None:
            raise ServiceError("FilesystemNotFound")
        return container

    async def claim_root(self, account: str, filesystem: str, oid: str) -> None:
        """A file system made with a bearer token: its root is the creator's, owner and owning
        group both ("Access control model in Azure Data Lake Storage": the root's owning group is
        the user who created the container with OAuth; ``$superuser`` with Shared Key or SAS).
        The record's ETag stays the one Create Container answered."""

        def decide(record: ContainerRecord, ticks: int) -> tuple[ContainerRecord, None]:
            return replace(record, posix=replace(ROOT, owner=oid, group=oid).stored()), None

        await self.store.update_container(account, filesystem, decide)

    async def update_root(
        self, account: str, filesystem: str, change: Callable[[Posix], Posix], conditions: Conditions = NONE
    ) -> ContainerRecord:
        """Set Access Control on the root directory (``/`` of a file system): its owner, group
        and ACL change in the file system's record, whose ETag changes with them."""

        def decide(record: ContainerRecord, ticks: int) -> tuple[ContainerRecord, ContainerRecord]:
            check(conditions, record.ticks, read=False)
            updated = replace(record, ticks=ticks, posix=change(root_posix(record)).stored())
            return updated, updated

        with filesystem_errors():
            result = await self.store.update_container(account, filesystem, decide)
        assert isinstance(result, ContainerRecord)
        return result

    # ------------------------------------------------------------------ create

    def _directory_record(self, name: str, ticks: int, posix: Posix, metadata: dict[str, str]) -> BlobRecord:
        return BlobRecord(
            name=name, snapshot=BASE, blob_type=BLOCK_BLOB, size=0, ticks=ticks, created=ticks,
            metadata={**metadata, FOLDER: "true"}, posix=posix.stored(),
            properties=ContentProperties(content_type=DEFAULT_CONTENT_TYPE),
        )  # fmt: skip

    async def ensure_directories(
        self, key: BlobKey, root: Posix | None = None, creator: str | None = None
    ) -> Posix:
        """Make every missing directory above ``key``, inheriting default ACLs from the root
        (``root``, read when needed and not given) down; the posix of its parent. They are the
        ``creator``'s (a token's caller), else ``$superuser``. A file in the way is 409
        ``PathConflict``."""
        above = root
        for name in ancestors(key.name):
            found = await self.store.get_blob(BlobKey(key.account, key.container, name))
            if found is not None and found[0].committed and is_directory(found[0]):
                above = posix_of(found[0])  # most parents exist: a read, not a write
                continue
            if above is None:
                above = root_posix(await self.root(key.account, key.container))
            inherited = above

            def decide(state: BlobState, name: str = name, inherited: Posix = inherited) -> BlobWrite:
                found = existing(state.base)
                if found is not None:
                    if found.kind is not Kind.DIRECTORY:
                        raise ServiceError("PathConflict")
                    assert state.base is not None
                    return BlobWrite(result=posix_of(state.base))
                new = acl.for_new_path(inherited.entries, directory=True)
                posix = Posix(creator or acl.SUPERUSER, inherited.group, new.acl, new.sticky)
                record = self._directory_record(name, state.ticks, posix, {})
                return BlobWrite(result=posix, base=record, content=[], drop_staged=True)

            token = encryption_guard.REQUEST.set(encryption_guard.scope_only())  # a parent takes no key
            try:
                above = await self.store.write_blob(BlobKey(key.account, key.container, name), decide)
            finally:
                encryption_guard.REQUEST.reset(token)
        return above if above is not None else root_posix(await self.root(key.account, key.container))

    async def create(self, key: BlobKey, request: CreateRequest) -> BlobRecord:
        check_blob_name(key.name)
        container = await self.root(key.account, key.container)
        above = await self.ensure_directories(key, root_posix(container), request.creator)
        kind = Kind.DIRECTORY if request.directory else Kind.FILE
        now = self._clock()

        def decide(state: BlobState) -> BlobWrite:
            base = state.base if state.base is not None and state.base.committed else None
            if base is not None and request.conditions.if_none_match == ("*",):
                raise ServiceError("PathAlreadyExists")
            check(request.conditions, base.ticks if base else None, read=False)
            check_create(kind, existing(base), False)
            if base is not None:
                leases.check_blob_access(base.lease, now, request.lease_id, write=True)
            elif request.lease_id is not None:
                raise ServiceError("LeaseNotPresentWithBlobOperation")
            new = acl.for_new_path(
                above.entries,
                directory=request.directory,
                permissions=request.permissions,
                umask=request.umask,
                acl=request.entries,
            )
            owner = request.owner or acl.SUPERUSER
            posix = Posix(
                owner, request.group or above.group, new.acl, new.sticky, context=request.encryption_context
            )
            metadata = dict(request.metadata)
            if request.directory:
                metadata[FOLDER] = "true"
            record = BlobRecord(
                name=key.name, snapshot=BASE, blob_type=APPEND_BLOB if request.append_blob else BLOCK_BLOB,
                size=0, ticks=state.ticks,
                created=base.created if base is not None else state.ticks, properties=request.properties,
                metadata=metadata, lease=leases.after_write(base.lease, now) if base is not None else Lease(),
                posix=posix.stored(),
            )  # fmt: skip
            return BlobWrite(result=record, base=record, content=[], drop_staged=True)

        record = await self.store.write_blob(key, decide)
        assert isinstance(record, BlobRecord)
        return record

    # ------------------------------------------------------------------ append and flush

    async def append(self, key: BlobKey, position: int, upload: Upload, lease_id: str | None) -> Checksums:
        """Stage the data at ``position``. A Content-MD5 or x-ms-content-crc64 the request sends
        is checked against what came (the documented 400 for a mismatch: "Path - Update",
        ContentHash), and the MD5 is what the answer echoes."""
        now = self._clock()
        offset = block_id(position)

        def decide(state: BlobState) -> BlobWrite:
            base = state.base
            if base is None or not base.committed:
                raise ServiceError("PathNotFound")
            if is_directory(base):
                raise ServiceError("ResourceTypeMismatch")
            leases.check_blob_access(base.lease, now, lease_id, write=True)
            # Appends may come in any order (the SDK uploads chunks in parallel) and again at
            # the same offset, even one already flushed (Azure takes them; the SDK's lease
            # tests append at 0 to a written file): Flush commits the unbroken run from the
            # file's end to its position, and nothing else, so such data is never read.
            return BlobWrite(stage_block=replace(staged.extent, block_id=offset))

        checksums = Checksums(md5=upload.md5 is not None, crc64=upload.crc64 is not None)
        staged = await stage_checked(self.store, key, upload.chunks, checksums, upload.md5, upload.crc64)
        await self.store.write_blob(key, decide, needs=Needs(staged=True), staged=staged)
        return checksums

    async def flush(self, key: BlobKey, request: FlushRequest) -> BlobRecord:
        now = self._clock()

        def decide(state: BlobState) -> BlobWrite:
            base = state.base
            if base is None or not base.committed:
                raise ServiceError("PathNotFound")
            if is_directory(base):
                raise ServiceError("ResourceTypeMismatch")
            check(request.conditions, base.ticks, read=False)
            leases.check_blob_access(base.lease, now, request.lease_id, write=True)
            by_offset = {}
            for block, extent in (state.staged or {}).items():
                start = block_offset(block)
                if start is not None:
                    by_offset[start] = extent
            chain = []
            at = base.size
            while at < request.position and at in by_offset:
                extent = by_offset[at]
                chain.append(extent)
                at += extent.length
            if at != request.position:
                raise ServiceError("InvalidFlushPosition")
            record = replace(
                base,
                ticks=state.ticks,
                size=at,
                properties=request.properties if request.properties is not None else base.properties,
                lease=leases.after_write(base.lease, now),
            )
            content = [*(state.content or []), *chain]
            return BlobWrite(result=record, base=record, content=content, drop_staged=not request.retain)

        record = await self.store.write_blob(key, decide, needs=Needs(content=True, staged=True))
        assert isinstance(record, BlobRecord)
        return record

    # ------------------------------------------------------------------ rename and delete

    async def rename(
        self,
        source: BlobKey,
        destination: BlobKey,
        source_conditions: Conditions = NONE,
        conditions: Conditions = NONE,
        source_lease: str | None = None,
        lease_id: str | None = None,
    ) -> BlobRecord | None:
        check_blob_name(destination.name)
        for key in (source, destination):
            if await self.store.get_container(key.account, key.container) is None:
                raise ServiceError("FilesystemNotFound")
        above = parent(destination.name)
        parent_key = BlobKey(destination.account, destination.container, above) if above else None
        now = self._clock()

        def decide(state: RenameState) -> RenameWrite:
            found = existing(state.source)
            there = existing(state.destination, state.destination_has_children)
            above_found = existing(state.parent) if parent_key is not None else Existing(Kind.DIRECTORY)
            if found is not None and state.source is not None:
                _check_source(source_conditions, state.source.ticks)
                leases.check_blob_access(state.source.lease, now, source_lease, write=True)
            if state.destination is not None and there is not None:
                if conditions.if_none_match == ("*",):
                    raise ServiceError("PathAlreadyExists")
                check(conditions, state.destination.ticks, read=False)
                leases.check_blob_access(state.destination.lease, now, lease_id, write=True)
            elif conditions.if_match is not None:
                raise ServiceError("ConditionNotMet")
            effect = check_rename(
                source.container,
                source.name,
                found,
                destination.container,
                destination.name,
                there,
                above_found,
            )
            if effect.value == "nothing":
                return RenameWrite(result=state.source, move=False)
            assert state.source is not None and found is not None
            # The lease was on the source path, which is gone (assumed; pyarrow releases it by
            # the old name after its move, which Azure must then find free at the new one).
            # The path keeps its ETag and Last-Modified: Azure answers the rename, and reads at
            # the new name, with the source's (recorded for a file and for a directory).
            record = replace(state.source, name=destination.name, lease=Lease())
            return RenameWrite(
                result=record,
                record=record,
                replace=effect.value == "replace",
                subtree=found.kind is Kind.DIRECTORY,
            )

        result = await self.store.rename_path(source, destination, parent_key, decide)
        return result if isinstance(result, BlobRecord) else None

    async def _kept_days(self, account: str) -> int | None:
        """The account's blob soft delete retention in days (None: off): a path deleted is kept
        as a blob deleted is."""
        policy = (await self.blobs.get_service_properties(account)).delete_retention
        return policy.days if policy.enabled and policy.days else None

    async def delete(
        self, key: BlobKey, recursive: bool | None, conditions: Conditions = NONE, lease_id: str | None = None
    ) -> Deletion:
        """Delete Path: soft when the account keeps deleted blobs (the whole tree at once);
        otherwise a directory's descendants go at most :attr:`delete_batch` at a time, and the
        caller repeats with the continuation until :attr:`Deletion.finished`."""
        now = self._clock()
        days = await self._kept_days(key.account)
        deleted_at = self._retention_clock()

        def decide(state: TreeState) -> TreeWrite:
            found = existing(state.base, state.has_children)
            if state.base is not None and found is not None:
                if trash.has_expired(state.base, now):
                    raise ServiceError("PathNotFound")
                check(conditions, state.base.ticks, read=False)
                leases.check_blob_access(state.base.lease, now, lease_id, write=True)
            check_delete(found, recursive)
            assert state.base is not None
            if days is None:
                return TreeWrite(limit=self.delete_batch)
            slot = softdeletion.deleted_base_name(state.ticks)
            kept = softdeletion.soft(replace(state.base, snapshot=slot), deleted_at, days)
            return TreeWrite(result=trash.deletion_id(slot), kept=kept)

        with filesystem_errors():
            done = await self.store.delete_tree(key, decide)
        return Deletion(done.result, done.finished)

    async def undelete(self, key: BlobKey, deletion: str) -> BlobRecord:
        """Undelete Path: the path deleted as ``deletion`` comes back under its name with every
        descendant deleted with it; its missing parents are made again (assumed: Azure's answer
        for a path whose parent is gone was not recorded). 404 ``PathNotFound`` when no such
        deletion is kept, 409 ``PathAlreadyExists`` when a live path holds the name."""
        slot = trash.slot_of(deletion)
        now = self._retention_clock()
        if await self.store.get_container(key.account, key.container) is None:
            raise ServiceError("FilesystemNotFound")

        def decide(state: UndeleteState) -> BlobRecord:
            deleted = state.deleted
            if deleted is None or deleted.deleted_time is None or softdeletion.expired(deleted, now):
                raise ServiceError("PathNotFound")
            if state.live is not None or state.live_below:
                raise ServiceError("PathAlreadyExists")
            return replace(softdeletion.restored(deleted), snapshot=BASE)

        deleted = await self.store.get_blob(key) is None
        if deleted and parent(key.name):
            await self.ensure_directories(key)
        return await self.store.undelete_tree(key, slot, decide)

    async def list_deleted(
        self, account: str, filesystem: str, prefix: str, marker: str | None, limit: int
    ) -> tuple[list[BlobRecord], str | None]:
        """A page of List Deleted Paths: the paths deleted as themselves and still kept, in name
        order (a directory's descendants deleted with it are restored with it, not listed); the
        marker of the first one not on the page."""
        now = self._retention_clock()
        start = decode_marker(marker) if marker else None
        found: list[BlobRecord] = []
        while len(found) <= limit:
            listing = await self.store.list_blobs(
                account, filesystem, prefix=prefix, start=start, limit=LIST_STEP,
                snapshots=False, uncommitted=False, deleted=True,
            )  # fmt: skip
            for record in listing.records:
                if trash.is_deleted_root(record) and not softdeletion.expired(record, now):
                    found.append(record)
                    if len(found) > limit:
                        break
            if not listing.more or not listing.records:
                break
            last = listing.records[-1]
            start = (last.name, last.snapshot + "\0")
        if len(found) > limit:
            following = found[limit]
            return found[:limit], encode_marker(following.name, following.snapshot)
        return found, None

    async def last_deletion(self, key: BlobKey) -> str | None:
        """The deletion id of a path's newest kept deletion: what Delete Blob on an HNS account
        answers beside its 202 (the DFS SDK deletes files that way on the Blob port)."""
        listing = await self.store.list_blobs(
            key.account, key.container, prefix=key.name, start=(key.name, DELETED_BASE_PREFIX),
            limit=LIST_STEP, snapshots=False, uncommitted=False, deleted=True,
        )  # fmt: skip
        slots = [r.snapshot for r in listing.records if r.name == key.name and trash.is_deleted_root(r)]
        return trash.deletion_id(max(slots)) if slots else None

    # ------------------------------------------------------------------ the sweep

    async def sweep(self) -> int:
        """Delete every expired file of the HNS accounts, and purge the descendants of deleted
        directories whose deleted path is gone (its retention ran out: the Blob service purges
        that path itself); how many paths. A full scan of the HNS accounts' file systems, each
        removal decided again in its own transaction."""
        removed = 0
        now = self._clock()
        hns: dict[str, bool] = {}
        for account, filesystem in await self.store.containers_from(""):
            if filesystem.startswith(softdeletion.HIDDEN):
                continue
            if account not in hns:
                hns[account] = await self.is_hns(account)
            if hns[account]:
                removed += await self._sweep_filesystem(account, filesystem, now)
        return removed

    async def _sweep_filesystem(self, account: str, filesystem: str, now: float) -> int:
        removed = 0
        kept_now = self._retention_clock()
        roots: dict[str, list[str]] = {}  # slot: the deleted paths kept in it, seen so far
        start: tuple[str, str] | None = None
        while True:
            try:
                listing = await self.store.list_blobs(
                    account, filesystem, prefix="", start=start, limit=LIST_STEP,
                    snapshots=False, uncommitted=False, deleted=True,
                )  # fmt: skip
            except ServiceError:
                return removed  # the file system went meanwhile
            for record in listing.records:
                key = BlobKey(account, filesystem, record.name)
                if record.committed and record.snapshot == BASE and trash.has_expired(record, now):
                    removed += await self._remove_expired(key)
                elif trash.is_deleted_root(record) and not softdeletion.expired(record, kept_now):
                    roots.setdefault(record.snapshot, []).append(record.name)
                elif trash.is_moved_descendant(record) and not any(
                    is_within(record.name, root) for root in roots.get(record.snapshot, ())
                ):
                    removed += await self._purge_orphan(key, record.snapshot)
            if not listing.more or not listing.records:
                return removed
            last = listing.records[-1]
            start = (last.name, (last.snapshot or "~") + "\0")

    async def _purge_orphan(self, key: BlobKey, slot: str) -> int:
        try:
            return int(await self.store.write_blob(key, _purge_orphan(slot), needs=Needs(others=True)))
        except ServiceError:  # its file system went meanwhile
            return 0

    async def _remove_expired(self, key: BlobKey) -> int:
        """An expired file goes as a delete would take it (kept when soft delete is on), lease
        or not; unless it was given a new expiry meanwhile."""
        now = self._clock()
        days = await self._kept_days(key.account)
        deleted_at = self._retention_clock()

        def decide(state: TreeState) -> TreeWrite:
            base = state.base
            if base is None or not base.committed or not trash.has_expired(base, now) or state.has_children:
                raise ServiceError("ConditionNotMet")  # changed meanwhile: left alone
            if days is None:
                return TreeWrite(result=1)
            slot = softdeletion.deleted_base_name(state.ticks)
            return TreeWrite(result=1, kept=softdeletion.soft(replace(base, snapshot=slot), deleted_at, days))

        try:
            done = await self.store.delete_tree(key, decide)
        except ServiceError:
            return 0
        return int(done.result or 0)

    # ------------------------------------------------------------------ properties and access control

    async def update(
        self,
        key: BlobKey,
        change,  # type: ignore[no-untyped-def]
        conditions: Conditions = NONE,
        lease_id: str | None = None,
    ) -> BlobRecord:
        """Replace a path's record with ``change(record, ticks)`` after the conditions and lease."""
        now = self._clock()

        def decide(state: BlobState) -> BlobWrite:
            base = state.base
            if base is None or not base.committed:
                raise ServiceError("PathNotFound")
            check(conditions, base.ticks, read=False)
            leases.check_blob_access(base.lease, now, lease_id, write=True)
            record = change(base, state.ticks)
            return BlobWrite(result=record, base=record)

        with filesystem_errors():
            record = await self.store.write_blob(key, decide)
        assert isinstance(record, BlobRecord)
        return record

    async def list_paths(
        self,
        account: str,
        filesystem: str,
        directory: str,
        recursive: bool,
        after: str | None,
        limit: int,
        begin: str | None = None,
    ) -> tuple[list[BlobRecord], str | None]:
        """A page of the paths under ``directory``: every one (``recursive``) or its children,
        in name order; the name to resume after, when more follow."""
        if directory:
            found = await self.store.get_blob(BlobKey(account, filesystem, directory))
            if found is None or not is_directory(found[0]):
                if await self.store.get_container(account, filesystem) is None:
                    raise ServiceError("FilesystemNotFound")
                raise ServiceError("PathNotFound")
        prefix = directory + "/" if directory else ""
        now = self._clock()
        start: tuple[str, str] | None = _past(after) if after is not None else None
        if begin is not None and after is None:  # beginFrom: a path below the directory, itself included
            start = (prefix + begin, "")
        items: list[BlobRecord] = []
        while len(items) < limit:
            with filesystem_errors():
                listing = await self.store.list_blobs(
                    account, filesystem, prefix=prefix, start=start, limit=limit - len(items),
                    snapshots=False, uncommitted=False,
                )  # fmt: skip
            for record in listing.records:
                rest = record.name[len(prefix) :]
                if (recursive or "/" not in rest) and not trash.has_expired(record, now):
                    items.append(record)
                    if len(items) == limit:
                        break
            if not listing.more or not listing.records:
                break
            last = listing.records[-1].name
            rest = last[len(prefix) :]
            if not recursive and "/" in rest:
                child = prefix + rest.split("/", 1)[0]
                start = (child + "0", "")  # past the child's subtree ("0" follows "/")
            else:
                start = _past(last)
        if len(items) < limit:
            return items, None
        more = await self.store.list_blobs(
            account, filesystem, prefix=prefix, start=_past(items[-1].name), limit=1,
            snapshots=False, uncommitted=False,
        )  # fmt: skip
        return items, items[-1].name if more.records else None


def _past(name: str) -> tuple[str, str]:
    """Where a listing resumes after the path ``name``: past its stored base version (names
    cannot hold NUL on PostgreSQL, so no ``name + "\\0"``)."""
    return (name, "~~")
