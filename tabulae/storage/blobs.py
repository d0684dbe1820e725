"""The Blob storage contract: containers, blobs and their content, for every engine alike.

A blob is a record (properties, metadata, lease, ETag ticks) and its *content*: an ordered list
of extents, each a whole immutable object of bytes the engine stored once (a Put Blob body, a
staged block, an appended block). Committing a block list, snapshotting, and (on one database)
copying a blob only rearrange references to extents; bytes are written once, when they arrive.

Writes are read-modify-write inside the engine's transaction: the engine loads the blob's
current :class:`BlobState`, calls the service's pure ``decide`` function, and applies the
:class:`BlobWrite` it returns, atomically and durably, before returning. ``decide`` holds every
rule (conditions, leases, limits, block lists); the engine only stores. ``decide`` may run more
than once (engines retry on conflicts), so it must not have side effects; it raises
``ServiceError`` to refuse, and then nothing is applied.

New bytes arrive through :meth:`BlobStore.stage`, which stores a stream as one extent before any
record names it (on disk and synced, or inside the transaction that will commit it) and returns
a :class:`Staged` handle; the write that names it commits it, and a refused write discards it.
Content is never held whole in memory: it goes in and out in chunks.

An extent that no record references any longer is not deleted at once: a download that began
before may still be reading it. It becomes garbage, and :meth:`BlobStore.collect_garbage`
deletes garbage older than a grace period, and bytes a crash left unreferenced.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterable, AsyncIterator, Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple, Protocol

import orjson

from tabulae.model.blobs import BASE as BASE  # the records live in the model, shared with the service
from tabulae.model.blobs import DELETED_BASE_PREFIX as DELETED_BASE_PREFIX
from tabulae.model.blobs import EXTENSIONS, ContainerWorm
from tabulae.model.blobs import VERSION_PREFIX as VERSION_PREFIX
from tabulae.model.blobs import BlobKey as BlobKey
from tabulae.model.blobs import BlobRecord as BlobRecord
from tabulae.model.blobs import ContainerRecord as ContainerRecord
from tabulae.model.blobs import ContentProperties as ContentProperties
from tabulae.model.blobs import CopyState as CopyState
from tabulae.model.blobs import Extent as Extent
from tabulae.model.blobs import Lease as Lease
from tabulae.model.edm import now_ticks
from tabulae.model.errors import ServiceError
from tabulae.model.policies import SignedIdentifier
from tabulae.storage.blob_pages import PageEdit, PageSpan
from tabulae.storage.namespace import RenameDecide, TreeDone, TreeState, UndeleteState

STORED_BASE = "~"  # how engines store BASE: after every timestamp, so snapshots list first
# Appended to a stored version, the least string after it that a listing can resume from: no
# stored version has a control character, and PostgreSQL's text cannot hold NUL ("\0").
JUST_AFTER = "\x01"
GARBAGE_GRACE_SECONDS = 300.0  # unreferenced extents stay readable this long for running downloads
# ... and this long while the data volume is low on space: a download holds the file it is sending
# open (a deleted file stays readable through its descriptor), so the grace only has to cover the
# moment between reading a blob's extents and opening a file, and files a long download has yet
# to reach (those end it early, as a read of content overwritten meanwhile would)
LOW_GARBAGE_GRACE_SECONDS = 10.0
# Garbage rows one collecting transaction takes: a backlog (a large container deleted, rows
# re-keyed) is collected in many short transactions rather than one that holds every row.
GARBAGE_BATCH = 500
MAX_UNCOMMITTED_BLOCKS = 100_000


def stored_version(snapshot: str) -> str:
    return STORED_BASE if snapshot == BASE else snapshot


def public_version(version: str) -> str:
    return BASE if version == STORED_BASE else version


@dataclass(slots=True)
class BlobState:
    """What ``decide`` sees of a blob, read inside the write's transaction."""

    base: BlobRecord | None  # the current version, committed or not
    ticks: int  # this write's timestamp: now, and later than the base's (so ETags always change)
    snapshots: int = 0  # how many snapshots the blob has, when asked for
    staged_count: int = 0  # kept by the engine as blocks come and go, so reading it costs nothing
    staged_id_length: int | None = None  # every staged block id encodes this many bytes
    content: list[Extent] | None = None  # the base's extents, when asked for
    staged: dict[str, Extent] | None = None  # staged blocks by id, when asked for
    target: BlobRecord | None = None  # the snapshot asked for, if it exists
    source: BlobRecord | None = None  # copy_blob: the source version
    source_content: list[Extent] | None = None  # copy_blob: its extents
    pages: list[PageSpan] | None = None  # a page blob's spans in the range ``Needs.pages`` asked for
    source_pages: list[PageSpan] | None = None  # copy_blob from a page blob: all its spans
    others: list[BlobRecord] | None = None  # every record of the blob but the base, when asked for
    ancestors: list[BlobRecord | None] | None = None  # Needs.namespace: each base above, outermost first
    has_children: bool = False  # Needs.namespace: a base (committed or staged) below the blob


@dataclass(slots=True)
class BlobWrite:
    """What a write does, applied in this order. Fields left at their defaults change nothing."""

    result: Any = None  # handed back to the caller of the write
    delete_snapshots: bool = False  # with Needs(snapshots=True), so snapshots' page spans are found
    delete_snapshot: str | None = None  # one snapshot, by its timestamp
    snapshot: BlobRecord | None = None  # a new snapshot sharing the base's current extents
    version: BlobRecord | None = None  # a new previous version, likewise (versioning)
    delete_base: bool = False  # the base blob, its extents and its staged blocks
    base: BlobRecord | None = None  # the base's new record (inserted or replaced)
    content: Sequence[Extent] | None = None  # the base's new extents
    append: Extent | None = None  # one more extent at the end of the base's content
    drop_staged: bool = False
    stage_block: Extent | None = None  # stage a block (replacing one of the same id)
    snapshot_record: BlobRecord | None = None  # an existing snapshot's new record (Set Blob Tier, Tags)
    pages: PageEdit | None = None  # a page blob's spans to replace (after ``base``)
    snapshot_after: BlobRecord | None = None  # a snapshot of the base as this write leaves it
    # Soft delete: records (snapshots, versions, deleted bases) rewritten where they are (to
    # soft-delete or undelete them); records moved from one stored version to another with their
    # extents (a base soft-deleted aside, or brought back); stored versions deleted for good.
    rewrite: Sequence[BlobRecord] = ()
    moves: Sequence[tuple[str, BlobRecord]] = ()  # (stored version it leaves, record where it goes)
    purge: Sequence[str] = ()

    change: bytes | None = None  # a change feed event, kept in this write's transaction
    consume: Sequence[PendingChange] = ()  # kept events this write publishes (all, or it fails)


@dataclass(frozen=True, slots=True)
class TagQuery:
    """Find Blobs by Tags in storage terms: every term ``(tag, operator, value)`` must hold
    (operators ``=``, ``>``, ``>=``, ``<``, ``<=``, ordinal on strings; a blob without the tag
    fails), and ``container`` limits an account-wide search to one container."""

    terms: tuple[tuple[str, str, str], ...]
    container: str | None = None


class FoundBlob(NamedTuple):
    """A blob Find Blobs by Tags found, with the values of the tags its query names."""

    container: str
    name: str
    tags: dict[str, str]


@dataclass(frozen=True, slots=True)
class PendingChange:
    """A change feed event kept by the write that made it, not yet written into the feed."""

    dkey: int  # the distribution key of the blob it is about
    seq: int  # order of keeping: the events of one blob are kept in the order of its writes
    account: str
    doc: bytes


class ChangesTaken(Exception):
    """A write meant to publish kept events found some already gone (another worker published
    them); nothing of it was applied."""


@dataclass(frozen=True, slots=True)
class Needs:
    """What a write's ``decide`` needs loaded besides the base record and counts."""

    content: bool = False
    staged: bool = False
    snapshot: str | None = None
    snapshots: bool = False  # count them
    pages: tuple[int, int] | None = None  # a page blob's spans overlapping these bytes
    others: bool = False  # load every record of the blob but the base (``state.others``)
    # A path of a hierarchical namespace: the records of the directories above it
    # (``state.ancestors``) and whether names below it exist (``state.has_children``), read
    # after the engine has serialised this write with every other namespace write on the same
    # path (an ancestor's write, or a write below the blob), so the namespace stays a tree.
    namespace: bool = False


NO_NEEDS = Needs()
Decide = Callable[[BlobState], BlobWrite]


class Digest(Protocol):
    """Something that watches the bytes of an upload go by (MD5 and CRC64 checks)."""

    def update(self, data: bytes) -> None:
        """See the next bytes (:meth:`light` and every updater of :meth:`updaters`)."""

    def updaters(self) -> Sequence[Callable[[bytes], None]]:
        """Independent functions that each must see every byte, in order: an engine may run
        them on threads of their own, beside each other and beside its own writing."""

    def light(self) -> Callable[[bytes], None] | None:
        """One more function that must see every byte, in order, but costs less than handing
        the bytes to another thread does: an engine calls it where it already is."""


class Staged(ABC):
    """New bytes stored as one extent that no record names yet. A write that names
    :attr:`extent` commits it; otherwise it must be given to :meth:`BlobStore.discard`."""

    extent: Extent


class FileRange:
    """``count`` bytes of an open file from ``offset``: a piece of a download that the HTTP layer
    may send from the file without reading it (``sendfile``), or read through :meth:`chunks`
    where it cannot (TLS). The file stays open, and its bytes readable even if the collector
    unlinks it, until the stream that yielded the piece is resumed or closed."""

    __slots__ = ("_chunks", "count", "fd", "offset")

    def __init__(self, fd: int, offset: int, count: int, chunks: Callable[[], AsyncIterator[bytes]]) -> None:
        self.fd = fd
        self.offset = offset
        self.count = count
        self._chunks = chunks

    def chunks(self) -> AsyncIterator[bytes]:
        """The same bytes, read in pieces of bounded size."""
        return self._chunks()


@dataclass(slots=True)
class BlobListing:
    """One page of List Blobs: records in (name, snapshots oldest first, base) order."""

    records: list[BlobRecord]
    more: bool  # whether records follow the last one


@dataclass(frozen=True, slots=True)
class ContentsCheck:
    """What a container's deletion is judged by besides its record (immutability: a container
    holding protected blob versions is not deleted). The store pages through the records that
    carry a retention date or a legal hold until ``protects`` says one still protects, then calls
    ``check(container, any_blob, protected)``: ``any_blob`` says whether it holds any record
    at all (a current, previous, snapshot, soft-deleted or uncommitted one), ``protected`` is the
    first protected record found or None. ``check`` raises to refuse."""

    protects: Callable[[BlobRecord], bool]
    check: Callable[[ContainerRecord, bool, BlobRecord | None], None]


class BlobStore(ABC):
    """A durable store of containers and blobs for many accounts.

    Container names are stored as given (the service lower-cases nothing: Azure's names are
    lower-case already). Blob names order by their UTF-8 bytes, as the service lists them.
    Every write is durable on return; reads never see a write half-applied.
    """

    # ------------------------------------------------------------------ containers

    @abstractmethod
    async def create_container(self, account: str, record: ContainerRecord) -> None:
        """Create a container. Raises ``ContainerAlreadyExists``."""

    @abstractmethod
    async def get_container(self, account: str, name: str) -> ContainerRecord | None: ...

    @abstractmethod
    async def update_container(
        self, account: str, name: str, decide: Callable[[ContainerRecord, int], tuple[ContainerRecord, Any]]
    ) -> Any:
        """Replace a container's record with what ``decide(record, ticks)`` returns (with the
        write's timestamp ``ticks``), atomically; returns its second item. ``decide`` is pure
        and may raise. Raises ``ContainerNotFound``."""

    @abstractmethod
    async def delete_container(
        self,
        account: str,
        name: str,
        check: Callable[[ContainerRecord], None],
        contents: ContentsCheck | None = None,
    ) -> None:
        """Delete a container with every blob and block in it, atomically, if ``check`` (and
        ``contents``, in the same transaction) passes. Their extents become garbage. Raises
        ``ContainerNotFound``."""

    @abstractmethod
    async def rename_container(
        self,
        account: str,
        name: str,
        new_name: str,
        check: Callable[[ContainerRecord], None],
        contents: ContentsCheck | None = None,
    ) -> None:
        """Rename a container with everything in it, atomically, if ``check`` (and ``contents``)
        passes. Raises ``ContainerNotFound``, or ``ContainerAlreadyExists`` when ``new_name``
        is taken."""

    @abstractmethod
    async def containers_from(self, low: str) -> list[tuple[str, str]]:
        """(account, name) of every container of every account named ``low`` or after."""

    @abstractmethod
    async def list_containers(
        self, account: str, prefix: str, after: str | None, limit: int
    ) -> list[ContainerRecord]:
        """Up to ``limit`` containers whose names start with ``prefix``, in name order, strictly
        after ``after`` when given."""

    @abstractmethod
    async def get_service_properties(self, account: str) -> bytes | None: ...

    @abstractmethod
    async def set_service_properties(self, account: str, properties: bytes) -> None: ...

    @abstractmethod
    async def get_account_features(self, account: str) -> bytes | None:
        """The account's features changed at run time (``/-/accounts``), as set; None if never."""

    @abstractmethod
    async def set_account_features(self, account: str, features: bytes) -> None: ...

    # ------------------------------------------------------------------ content

    @abstractmethod
    async def stage(self, key: BlobKey, chunks: AsyncIterable[bytes], digest: Digest | None) -> Staged:
        """Store the bytes of ``chunks`` as one new extent, durably before any record names it,
        feeding every byte to ``digest``. On any error nothing is left behind."""

    @abstractmethod
    async def discard(self, staged: Staged) -> None:
        """Give up staged bytes that no write named; idempotent."""

    @abstractmethod
    def read(self, key: BlobKey, extents: Sequence[Extent], start: int, end: int) -> AsyncIterator[bytes]:
        """The bytes ``start`` to ``end`` (exclusive) of the concatenation of ``extents``, in chunks
        of bounded size. Extents stay readable for the garbage grace period after a write drops them."""

    def stream(
        self, key: BlobKey, extents: Sequence[Extent], start: int, end: int
    ) -> AsyncIterator[bytes | FileRange]:
        """What :meth:`read` yields, except that an engine keeping content in files may hand a
        piece over as a :class:`FileRange` instead of reading it, for a download to send
        straight from the file. Engines without files stream :meth:`read`'s bytes."""
        return self.read(key, extents, start, end)

    # ------------------------------------------------------------------ blobs

    @abstractmethod
    async def get_blob(
        self, key: BlobKey, snapshot: str = BASE, *, content: bool = False
    ) -> tuple[BlobRecord, list[Extent] | None] | None:
        """A committed blob version and, with ``content``, its extents read in the same snapshot
        of the store; None when the container, blob or snapshot does not exist."""

    @abstractmethod
    async def write_blob(
        self, key: BlobKey, decide: Decide, *, needs: Needs = NO_NEEDS, staged: Staged | None = None
    ) -> Any:
        """Apply ``decide(state)`` to the blob atomically and durably; return its ``result``.

        ``staged`` (if given) is consumed: committed when the write names its extent, discarded
        otherwise, and discarded when ``decide`` raises. Raises ``ContainerNotFound``, or what
        ``decide`` raises."""

    @abstractmethod
    async def pending_changes(self, limit: int) -> list[PendingChange]:
        """Up to ``limit`` kept change feed events (:attr:`BlobWrite.change`), oldest first."""

    @abstractmethod
    async def copy_blob(
        self, source: BlobKey, snapshot: str, dest: BlobKey, decide: Decide, *, needs: Needs = NO_NEEDS
    ) -> Any:
        """As :meth:`write_blob` on ``dest``, with ``state.source`` and ``state.source_content``
        holding the source version (None when it does not exist) read in the same transaction.
        Extents of the source that the write names are shared or copied, as the engine needs."""

    @abstractmethod
    async def get_pages(
        self, key: BlobKey, snapshot: str, start: int, end: int
    ) -> tuple[BlobRecord, list[PageSpan]] | None:
        """A committed version and its page spans overlapping ``[start, end)``, read in one
        snapshot of the store; None when the container, blob or snapshot does not exist."""

    @abstractmethod
    async def list_blocks(self, key: BlobKey) -> tuple[BlobRecord | None, list[Extent], list[Extent]]:
        """The base blob (committed or not), its committed extents and its staged blocks (in
        staging order). Raises ``ContainerNotFound``."""

    @abstractmethod
    async def list_blobs(
        self,
        account: str,
        container: str,
        *,
        prefix: str,
        start: tuple[str, str] | None,
        limit: int,
        snapshots: bool,
        uncommitted: bool,
        versions: bool = False,
        deleted: bool = False,
    ) -> BlobListing:
        """Up to ``limit`` records whose names start with ``prefix``, from ``start`` (a name and
        stored version, inclusive) on. Snapshots, previous versions and uncommitted blobs only
        when asked for.
        Raises ``ContainerNotFound``."""

    @abstractmethod
    async def find_blobs_by_tags(
        self, account: str, container: str | None, query: TagQuery, after: tuple[str, str] | None, limit: int
    ) -> list[FoundBlob]:
        """Up to ``limit`` current committed blobs of the account (of ``container`` when given)
        whose index tags satisfy ``query``, in (container, name) order strictly after ``after``;
        looked up in the engine's tag index, which every write keeps in its own transaction.
        Raises ``ContainerNotFound`` for a ``container`` that does not exist."""

    # ------------------------------------------------------------------ hierarchical namespace

    @abstractmethod
    async def rename_path(
        self, source: BlobKey, destination: BlobKey, parent: BlobKey | None, decide: RenameDecide
    ) -> Any:
        """Rename a path (and, when ``decide`` says so, every blob below it as a directory) to
        ``destination`` in one transaction that copies no content; ``parent`` is the
        destination's parent directory to load for ``decide`` (None: the root). Returns the
        decision's result. Raises ``ContainerNotFound``, or what ``decide`` raises."""

    @abstractmethod
    async def delete_tree(self, key: BlobKey, decide: Callable[[TreeState], Any]) -> TreeDone:
        """Delete a path and every blob below it in one transaction once ``decide`` allows it;
        when ``decide`` answers a :class:`TreeWrite`, soft-delete the tree or delete a piece of
        it as that says."""

    @abstractmethod
    async def undelete_tree(
        self, key: BlobKey, slot: str, decide: Callable[[UndeleteState], BlobRecord]
    ) -> BlobRecord:
        """Restore a path soft-deleted by :meth:`delete_tree` (or a blob soft-deleted by Delete
        Blob) from its deleted ``slot`` with its descendants, in one transaction; the path's
        record becomes what ``decide`` returns. Raises ``ContainerNotFound``, or what ``decide``
        raises."""

    # ------------------------------------------------------------------ maintenance

    @abstractmethod
    async def deleted_records(
        self, after: tuple[int, str, str] | None, limit: int
    ) -> list[tuple[tuple[int, str, str], BlobKey, BlobRecord]]:
        """Up to ``limit`` soft-deleted records of every account (snapshots, versions and
        deleted bases that are not committed), in a stable order strictly after the position
        ``after``; each with its position, for the next call, and its blob's key."""

    @abstractmethod
    async def collect_garbage(self, grace: float = GARBAGE_GRACE_SECONDS, batch: int = GARBAGE_BATCH) -> int:
        """Delete extents unreferenced for longer than ``grace`` seconds (less while the volume
        is low or full), ``batch`` garbage rows a transaction until none has expired, and bytes
        a crash left behind; safe to run from several processes at once. Returns how many were
        deleted."""


# --------------------------------------------------------------------------- stored forms
# What both engines store besides the columns they index: one JSON document per record.


def next_ticks(previous: int | None) -> int:
    """A write's timestamp: now, but later than the version it replaces, so the ETag changes
    even for two writes in one clock tick or from two processes with differing clocks."""
    now = now_ticks()
    return now if previous is None or now > previous else previous + 1


def encode_container(record: ContainerRecord) -> bytes:
    doc: dict[str, Any] = {
        "metadata": record.metadata,
        "public_access": record.public_access,
        "acl": [asdict(identifier) for identifier in record.acl],
        "lease": asdict(record.lease),
    }
    if record.posix:  # only an HNS file system whose root's access control was set
        doc["posix"] = record.posix
    if record.worm is not None:  # only when set: a container stored before it has none
        doc["worm"] = asdict(record.worm)
    if record.default_scope is not None:  # only when set: a container stored before has none
        doc["scope"] = [record.default_scope, record.deny_scope_override]
    return orjson.dumps(doc)


def decode_container(name: str, ticks: int, doc: bytes) -> ContainerRecord:
    data = orjson.loads(doc)
    worm = data.get("worm")
    scope, deny = data.get("scope") or (None, False)
    return ContainerRecord(
        name=name,
        ticks=ticks,
        metadata=data["metadata"],
        public_access=data["public_access"],
        acl=[SignedIdentifier(**item) for item in data["acl"]],
        lease=Lease(**data["lease"]),
        posix=data.get("posix") or {},
        worm=None if worm is None else ContainerWorm(**{**worm, "hold_tags": tuple(worm["hold_tags"])}),
        default_scope=scope,
        deny_scope_override=deny,
    )


def encode_blob(record: BlobRecord) -> bytes:
    """Everything but the indexed columns (name, version, ticks, size, committed), as a JSON
    array in field order: listings decode thousands of these, and arrays decode fastest. The
    fields of ``EXTENSIONS`` that are set follow as one object, by name; a record that sets none
    (and a record stored before they existed) has no eighth element."""
    p, lease, copy = record.properties, record.lease, record.copy
    doc: list[Any] = [
        record.blob_type,
        record.created,
        [p.content_type, p.content_encoding, p.content_language, p.content_disposition,
         p.cache_control, p.content_md5],
        record.metadata,
        [lease.state, lease.lease_id, lease.duration, lease.ends],
        _encode_copy(copy) if copy else None,
        record.block_count,
    ]  # fmt: skip
    extensions = {name: value for name in EXTENSIONS if (value := getattr(record, name))}
    if extensions:
        doc.append(extensions)
    return orjson.dumps(doc)


def tags_of(doc: bytes) -> dict[str, str]:
    """The index tags of a stored record, read from its document alone (a plan restoring many
    records' index rows needs nothing else of them)."""
    fields = orjson.loads(doc)
    return dict(fields[7].get("tags") or {}) if len(fields) > 7 else {}


def _encode_copy(copy: CopyState) -> list[Any]:
    fields = [copy.copy_id, copy.source, copy.progress, copy.completed, copy.status]
    if (
        copy.status_description is not None
        or copy.incremental
        or copy.destination_snapshot is not None
        or copy.owner is not None
    ):
        fields += [copy.status_description, copy.incremental, copy.destination_snapshot]
    if copy.owner is not None:
        fields.append(copy.owner)
    return fields


def decode_blob(name: str, version: str, ticks: int, size: int, committed: bool, doc: bytes) -> BlobRecord:
    blob_type, created, properties, metadata, lease, copy, blocks, *extensions = orjson.loads(doc)
    return BlobRecord(
        name,
        BASE if version == STORED_BASE else version,
        blob_type,
        size,
        ticks,
        created,
        bool(committed),
        ContentProperties(*properties),
        metadata,
        Lease(*lease),
        CopyState(*copy) if copy is not None else None,
        blocks,
        **(extensions[0] if extensions else {}),
    )


def listing_start(prefix: str, start: tuple[str, str] | None) -> tuple[str, str]:
    """Where a listing begins: at ``start`` (name, stored version), but never before ``prefix``."""
    name, version = start if start is not None else ("", "")
    return (prefix, "") if prefix > name else (name, version)


def prefix_end(prefix: str) -> str:
    """The smallest name greater than every name that starts with (non-empty) ``prefix``."""
    last = ord(prefix[-1])
    return prefix[:-1] + chr(last + 1) if last < 0x10FFFF else prefix + "\U0010ffff"


def container_missing() -> ServiceError:
    return ServiceError("ContainerNotFound")


def extent_offsets(extents: Sequence[Extent], start: int, end: int) -> list[tuple[Extent, int, int]]:
    """The extents overlapping ``[start, end)`` with the range to read inside each."""
    spans: list[tuple[Extent, int, int]] = []
    offset = 0
    for extent in extents:
        low, high = offset, offset + extent.length
        offset = high
        if high <= start or extent.length == 0:
            continue
        if low >= end:
            break
        spans.append((extent, max(start, low) - low, min(end, high) - low))
    return spans
