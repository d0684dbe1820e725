"""The records of the Blob service that its front-end, its rules and its stores share: a blob's
key, its record and content properties, its extents, a container's record and a lease.

They are plain data: the storage contract (:mod:`tabulae.storage.blobs`) stores them, the service
decides over them and the front-end renders them, so they live here, below all three.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tabulae.model.policies import SignedIdentifier

BASE = ""  # the snapshot value of a blob's current version (snapshots carry their timestamp)


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
    status: str = "success"


@dataclass(slots=True)
class BlobRecord:
    """A blob version: the base blob (``snapshot`` is ``BASE``) or one of its snapshots.

    ``committed`` is False for a blob that so far has only staged blocks: it exists for Put
    Block List and for listings with uncommitted blobs, and for nothing else."""

    name: str
    snapshot: str
    blob_type: str  # "BlockBlob" or "AppendBlob"
    size: int
    ticks: int  # ETag and Last-Modified
    created: int  # ticks
    committed: bool = True
    properties: ContentProperties = field(default_factory=ContentProperties)
    metadata: dict[str, str] = field(default_factory=dict)
    lease: Lease = field(default_factory=Lease)
    copy: CopyState | None = None
    block_count: int = 0  # committed blocks (Append Blob reports it)


@dataclass(frozen=True, slots=True)
class Extent:
    """One stored object of bytes: ``ref`` is the engine's name for it. ``block_id`` is the
    block id (Base64, as the client sent it) when the extent is or was a staged block."""

    ref: str
    length: int
    block_id: str | None = None
