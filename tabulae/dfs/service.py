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
import functools
import time
from dataclasses import dataclass, field, replace

from tabulae.blob.rules import leases
from tabulae.blob.rules.conditions import NONE, Conditions, check
from tabulae.blob.rules.names import check_blob_name
from tabulae.blob.service import BLOCK_BLOB, BlobService, BlobState, BlobWrite, Needs, Upload
from tabulae.dfs import acl
from tabulae.dfs.paths import Existing, Kind, ancestors, check_create, check_delete, check_rename, parent
from tabulae.model.blobs import BASE, BlobKey, BlobRecord, ContentProperties, Lease
from tabulae.model.errors import ServiceError
from tabulae.storage.namespace import RenameState, RenameWrite, TreeState

FOLDER = "hdi_isfolder"
MAX_APPEND = 4000 * 1024 * 1024  # Path - Update: an append's body, as a block's


def is_directory(record: BlobRecord) -> bool:
    return any(name.lower() == FOLDER and value.lower() == "true" for name, value in record.metadata.items())


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
        return stored


def posix_of(record: BlobRecord) -> Posix:
    """What a record says, or the defaults of a path made through the Blob API or with Shared
    Key: ``$superuser``, ``rwxr-x---`` for a directory and ``rw-r-----`` for a file."""
    stored = record.posix
    if not stored:
        mode = (acl.DIRECTORY_MODE if is_directory(record) else acl.FILE_MODE) & ~acl.DEFAULT_UMASK
        return Posix(acl.SUPERUSER, acl.SUPERUSER, acl.minimal_acl(mode))
    expiry = stored.get("e")
    return Posix(
        str(stored["o"]),
        str(stored["g"]),
        _entries(str(stored["a"])),
        bool(stored.get("s", False)),
        float(expiry) if expiry is not None else None,
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

    def __init__(self, blobs: BlobService, clock=time.time) -> None:  # type: ignore[no-untyped-def]
        self.blobs = blobs
        self.store = blobs.store
        self._clock = clock

    async def is_hns(self, account: str) -> bool:
        return (await self.blobs.features.get(account)).hns

    async def get(self, key: BlobKey) -> BlobRecord:
        found = await self.store.get_blob(key)
        if found is None or not found[0].committed:
            if await self.store.get_container(key.account, key.container) is None:
                raise ServiceError("FilesystemNotFound")
            raise ServiceError("PathNotFound")
        return found[0]

    async def posix_of_parent(self, key: BlobKey) -> Posix:
        above = parent(key.name)
        if not above:
            return ROOT
        found = await self.store.get_blob(BlobKey(key.account, key.container, above))
        return posix_of(found[0]) if found is not None else ROOT

    # ------------------------------------------------------------------ create

    def _directory_record(self, name: str, ticks: int, posix: Posix, metadata: dict[str, str]) -> BlobRecord:
        return BlobRecord(
            name=name, snapshot=BASE, blob_type=BLOCK_BLOB, size=0, ticks=ticks, created=ticks,
            metadata={**metadata, FOLDER: "true"}, posix=posix.stored(),
        )  # fmt: skip

    async def ensure_directories(self, key: BlobKey) -> Posix:
        """Make every missing directory above ``key``; the posix of its parent. A file in the
        way is 409 ``PathConflict``."""
        above = ROOT
        for name in ancestors(key.name):
            found = await self.store.get_blob(BlobKey(key.account, key.container, name))
            if found is not None and found[0].committed and is_directory(found[0]):
                above = posix_of(found[0])  # most parents exist: a read, not a write
                continue
            inherited = above

            def decide(state: BlobState, name: str = name, inherited: Posix = inherited) -> BlobWrite:
                found = existing(state.base)
                if found is not None:
                    if found.kind is not Kind.DIRECTORY:
                        raise ServiceError("PathConflict")
                    assert state.base is not None
                    return BlobWrite(result=posix_of(state.base))
                new = acl.for_new_path(inherited.entries, directory=True)
                posix = Posix(acl.SUPERUSER, inherited.group, new.acl, new.sticky)
                record = self._directory_record(name, state.ticks, posix, {})
                return BlobWrite(result=posix, base=record, content=[], drop_staged=True)

            above = await self.store.write_blob(BlobKey(key.account, key.container, name), decide)
        return above

    async def create(self, key: BlobKey, request: CreateRequest) -> BlobRecord:
        check_blob_name(key.name)
        if await self.store.get_container(key.account, key.container) is None:
            raise ServiceError("FilesystemNotFound")
        above = await self.ensure_directories(key)
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
            posix = Posix(owner, request.group or above.group, new.acl, new.sticky)
            metadata = dict(request.metadata)
            if request.directory:
                metadata[FOLDER] = "true"
            record = BlobRecord(
                name=key.name, snapshot=BASE, blob_type=BLOCK_BLOB, size=0, ticks=state.ticks,
                created=base.created if base is not None else state.ticks, properties=request.properties,
                metadata=metadata, lease=leases.after_write(base.lease, now) if base is not None else Lease(),
                posix=posix.stored(),
            )  # fmt: skip
            return BlobWrite(result=record, base=record, content=[], drop_staged=True)

        record = await self.store.write_blob(key, decide)
        assert isinstance(record, BlobRecord)
        return record

    # ------------------------------------------------------------------ append and flush

    async def append(self, key: BlobKey, position: int, upload: Upload, lease_id: str | None) -> None:
        now = self._clock()
        offset = block_id(position)

        def decide(state: BlobState) -> BlobWrite:
            base = state.base
            if base is None or not base.committed:
                raise ServiceError("PathNotFound")
            if is_directory(base):
                raise ServiceError("ResourceTypeMismatch")
            leases.check_blob_access(base.lease, now, lease_id, write=True)
            end = base.size
            for block, extent in (state.staged or {}).items():
                start = block_offset(block)
                if start is not None and start >= base.size:
                    end = max(end, start + extent.length)
            if position != end:
                raise ServiceError("InvalidFlushPosition")
            return BlobWrite(stage_block=replace(staged.extent, block_id=offset))

        staged = await self.store.stage(key, upload.chunks, None)
        await self.store.write_blob(key, decide, needs=Needs(staged=True), staged=staged)

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
                check(source_conditions, state.source.ticks, read=False)
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
            record = replace(state.source, name=destination.name, ticks=state.ticks, lease=Lease())
            return RenameWrite(
                result=record,
                record=record,
                replace=effect.value == "replace",
                subtree=found.kind is Kind.DIRECTORY,
            )

        result = await self.store.rename_path(source, destination, parent_key, decide)
        return result if isinstance(result, BlobRecord) else None

    async def delete(
        self, key: BlobKey, recursive: bool | None, conditions: Conditions = NONE, lease_id: str | None = None
    ) -> None:
        now = self._clock()

        def decide(state: TreeState) -> None:
            found = existing(state.base, state.has_children)
            if state.base is not None and found is not None:
                check(conditions, state.base.ticks, read=False)
                leases.check_blob_access(state.base.lease, now, lease_id, write=True)
            check_delete(found, recursive)

        try:
            await self.store.delete_tree(key, decide)
        except ServiceError as error:
            if error.code == "ContainerNotFound":
                raise ServiceError("FilesystemNotFound") from None
            raise

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

        try:
            record = await self.store.write_blob(key, decide)
        except ServiceError as error:
            if error.code == "ContainerNotFound":
                raise ServiceError("FilesystemNotFound") from None
            raise
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
        start: tuple[str, str] | None = _past(after) if after is not None else None
        if begin is not None and after is None:  # beginFrom: a path below the directory, itself included
            start = (prefix + begin, "")
        items: list[BlobRecord] = []
        while len(items) < limit:
            try:
                listing = await self.store.list_blobs(
                    account, filesystem, prefix=prefix, start=start, limit=limit - len(items),
                    snapshots=False, uncommitted=False,
                )  # fmt: skip
            except ServiceError as error:
                if error.code == "ContainerNotFound":
                    raise ServiceError("FilesystemNotFound") from None
                raise
            for record in listing.records:
                rest = record.name[len(prefix) :]
                if recursive or "/" not in rest:
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
