"""The records of the Blob service that its front-end, its rules and its stores share: a blob's
key, its record and content properties, its extents, a container's record and a lease.

They are plain data: the storage contract (:mod:`tabulae.storage.blobs`) stores them, the service
decides over them and the front-end renders them, so they live here, below all three.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tabulae.model.policies import SignedIdentifier

BASE = ""  # the snapshot value of a blob's current version (snapshots carry their timestamp)
# A previous version of a blob (versioning) is stored, and named in the service, as this prefix and
# its version id: after every snapshot (their names start with a digit) and before the base (stored
# as "~"), the current version, so a listing gives snapshots, versions oldest first, then the blob.
VERSION_PREFIX = "v"
# A soft-deleted base blob (soft delete without versioning) is moved to this prefix and the time of
# its deletion, after the base, so a new blob of that name can be written beside it.
DELETED_BASE_PREFIX = "~d"


@dataclass(frozen=True, slots=True)
class BlobKey:
    account: str
    container: str
    name: str


@dataclass(slots=True)
class Lease:
    """A lease as stored. ``state`` is ``available``, ``leased``, ``breaking`` or ``broken``; a
    leased one past ``ends`` reads as expired and a breaking one as broken (``rules.leases``)."""

    state: str = "available"
    lease_id: str | None = None
    duration: int = -1  # seconds of a fixed lease; -1 for an infinite one
    ends: float = 0.0  # epoch seconds: a fixed lease's expiry, or when a breaking lease breaks


@dataclass(slots=True)
class ContainerRecord:
    name: str
    ticks: int  # ETag and Last-Modified
    metadata: dict[str, str] = field(default_factory=dict)
    public_access: str | None = None  # "container", "blob" or None (private)
    acl: list[SignedIdentifier] = field(default_factory=list)
    lease: Lease = field(default_factory=Lease)
    posix: dict[str, Any] = field(default_factory=dict)  # an HNS file system's root directory's owner and ACL
    worm: ContainerWorm | None = None  # a container-level immutability policy and legal hold
    default_scope: str | None = None  # x-ms-default-encryption-scope; None: the account's key
    deny_scope_override: bool = False  # x-ms-deny-encryption-scope-override


@dataclass(frozen=True, slots=True)
class ContainerWorm:
    """A container-level WORM policy (Azure keeps it in its management plane): a time-based
    retention of ``days`` since each blob's creation (0: none), unlocked or locked, whether
    append blocks may still be added (``allowProtectedAppendWrites``, ``…All``), and the tags of
    a legal hold (none: no hold)."""

    days: int = 0
    locked: bool = False
    allow_appends: bool = False
    allow_appends_all: bool = False
    hold_tags: tuple[str, ...] = ()
    extensions: int = 0  # how often the policy was extended since it was locked (at most five)


@dataclass(slots=True)
class ContentProperties:
    """The standard HTTP properties a blob keeps and answers reads with."""

    content_type: str | None = None
    content_encoding: str | None = None
    content_language: str | None = None
    content_disposition: str | None = None
    cache_control: str | None = None
    content_md5: str | None = None  # Base64


@dataclass(slots=True)
class CopyState:
    copy_id: str
    source: str
    progress: str  # "copied/total"
    completed: int  # ticks
    status: str = "success"  # pending | success | aborted | failed
    status_description: str | None = None
    incremental: bool = False  # an Incremental Copy of a page blob's snapshot
    destination_snapshot: str | None = None  # that copy's snapshot at the destination
    owner: str | None = None  # while pending: "host:pid" of the server running it, if known


@dataclass(slots=True)
class BlobRecord:
    """A blob version: the base blob (``snapshot`` is ``BASE``) or one of its snapshots.

    ``committed`` is False for a blob that so far has only staged blocks: it exists for Put
    Block List and for listings with uncommitted blobs, and for nothing else."""

    name: str
    snapshot: str
    blob_type: str  # "BlockBlob", "AppendBlob" or "PageBlob"
    size: int
    ticks: int  # ETag and Last-Modified
    created: int  # ticks
    committed: bool = True
    properties: ContentProperties = field(default_factory=ContentProperties)
    metadata: dict[str, str] = field(default_factory=dict)
    lease: Lease = field(default_factory=Lease)
    copy: CopyState | None = None
    block_count: int = 0  # committed blocks (Append Blob reports it)
    # The fields below are stored only when they differ from their defaults, each of which is
    # falsy (see EXTENSIONS): most blobs use none of them and their stored form stays short.
    sequence_number: int = 0  # a page blob's
    # A block blob's explicitly set tier, or a premium page blob's (P4..P80); None follows the
    # account default (a premium page blob: its size).
    tier: str | None = None
    tier_changed: float | None = None  # epoch seconds of the last tier change
    rehydrate_to: str | None = None  # an archived blob's pending rehydration target
    rehydrate_priority: str | None = None
    rehydrate_at: float | None = None  # epoch seconds when that rehydration completes
    tags: dict[str, str] = field(default_factory=dict)  # blob index tags
    sealed: bool = False  # an append blob's
    version_id: str | None = None  # with versioning on: this version's id
    deleted_time: float | None = None  # soft-deleted (epoch seconds); then ``committed`` is False
    retention_days: int = 0  # a soft-deleted record's retention, in force when it was deleted
    immutable_until: float | None = None  # epoch seconds: a time-based retention policy's end
    immutable_mode: str | None = None  # that policy's mode, "Unlocked" or "Locked"
    legal_hold: bool = False
    last_access: float | None = None  # epoch seconds, kept while last access tracking is on
    # In an account with a hierarchical namespace: owner, owning group, ACL text and sticky bit
    # ({"o", "g", "a", "s"}); empty for a path that never had them (the defaults apply).
    posix: dict[str, Any] = field(default_factory=dict)
    encryption_scope: str | None = None  # the encryption scope its writes named (None: the account's key)
    encryption_key_sha256: str | None = None  # Base64 SHA-256 of a customer-provided key it was written with
    # [scope, key SHA-256] of the blocks staged since, where they differ from the blob's own
    staged_encryption: list[str | None] | None = None


#: BlobRecord fields kept in a record's stored form only when set (all default to a falsy value).
EXTENSIONS = (
    "sequence_number", "tier", "tier_changed", "rehydrate_to", "rehydrate_priority", "rehydrate_at",
    "tags", "sealed", "version_id", "deleted_time", "retention_days",
    "immutable_until", "immutable_mode", "legal_hold", "last_access", "posix",
    "encryption_scope", "encryption_key_sha256", "staged_encryption",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Extent:
    """One stored object of bytes: ``ref`` is the engine's name for it. ``block_id`` is the
    block id (Base64, as the client sent it) when the extent is or was a staged block."""

    ref: str
    length: int
    block_id: str | None = None


def block_id_size(block_id: str) -> int:
    """The size in bytes of what a (valid, padded) Base64 block id encodes: the length Azure holds
    a blob's staged ids to. Ids of one Base64 length can differ here (``OQ==`` is one byte,
    ``MTA=`` two), and Azure refuses the second one."""
    padding = len(block_id) - len(block_id.rstrip("="))
    return len(block_id) // 4 * 3 - padding
