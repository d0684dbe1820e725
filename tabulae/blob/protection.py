"""Immutable storage and last access times over the :class:`~tabulae.blob.service.BlobService`'s
store: the write guard every blob write passes, the immutability operations, and the once-a-day
last access update.

**The guard.** Rather than teach every operation about protection, the service's store is
wrapped (:class:`GuardedStore`): each write's decision is checked against what it would do to a
protected version. A decision that deletes a protected version, or replaces its content,
properties or metadata, is refused with Azure's code; one that only changes what Azure lets
change under a policy or hold (lease, tier, tags, the protection itself, the last access time)
passes. Judging by the decision's effect, not by the operation's name, covers operations added
later without a list to keep up to date, and a blob that is not protected costs one attribute
test per write.

Azure lets Put Blob, Put Block List and Copy Blob overwrite a protected current version, since
with versioning on (which version-level immutability requires there) the protected data stays as
a previous version that keeps its policy and hold, and the new current version has none of its
own ("Version-level WORM policies", Scenarios); Set Blob Metadata, Put Page and Delete Blob stay
refused. The guard allows exactly that: a write that replaces the content while keeping the
protected record, unchanged, as a previous version. Tabulae does not require versioning to be on
(it has no management plane to enable "version-level immutability support" on a container, so
policies may be set on any blob): without a version to keep the protected data, replacing it is
refused like any other change, which keeps the promise a policy makes.

Deleting a blob with its snapshots must not remove a protected snapshot, but the write sees only
how many snapshots there are. So the first decision asks for them (:class:`_SnapshotsNeeded`),
the guard reads them, and decides again knowing which are protected; the second decision checks
the count it was given still holds. Blobs without snapshots never take this path.

**Last access time.** Written at most once per 24 hours per blob (``rules.access_time``), by a
small write of its own after a read that finds the stored time a day old; a write of the blob is
an access too, and its Last-Modified already says when, so writes store nothing extra.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from tabulae.blob import encryption_guard, namespace_guard, worm_guard
from tabulae.blob.feed import event_of
from tabulae.blob.rules import access_time, container_worm
from tabulae.blob.rules import immutability as rules
from tabulae.blob.rules.names import SYSTEM_CONTAINERS
from tabulae.model import edm
from tabulae.model.accounts import AccountFeatures
from tabulae.model.blobs import ContainerRecord, ContainerWorm
from tabulae.model.errors import ServiceError
from tabulae.storage.blobs import (
    BASE,
    JUST_AFTER,
    NO_NEEDS,
    VERSION_PREFIX,
    BlobKey,
    BlobRecord,
    BlobState,
    BlobStore,
    BlobWrite,
    ContentsCheck,
    Decide,
    Needs,
    Staged,
)
from tabulae.storage.namespace import RenameState, RenameWrite, TreeState

#: Fields a protected version may still change (Azure allows lease, tier and tag operations on
#: immutable blobs, and the protection and access time are not the version's data).
_FREE_FIELDS = (
    "lease", "tier", "tier_changed", "rehydrate_to", "rehydrate_priority", "rehydrate_at", "tags",
    "immutable_until", "immutable_mode", "legal_hold", "last_access",
)  # fmt: skip
_DAY_SECONDS = 86_400.0
_SNAPSHOT_ROUNDS = 3  # how often the snapshots of a blob being deleted are read before giving up


def protection(record: BlobRecord) -> rules.Protection:
    """What protects ``record``, in the rules' terms."""
    policy = None
    if record.immutable_until is not None:
        until = datetime.fromtimestamp(record.immutable_until, UTC)
        policy = rules.Policy(until, record.immutable_mode or rules.UNLOCKED)
    return rules.Protection(policy, record.legal_hold)


def is_protected(record: BlobRecord, now: datetime) -> bool:
    """Whether a policy in force or a legal hold protects ``record``."""
    if record.legal_hold:
        return True
    return record.immutable_until is not None and now.timestamp() < record.immutable_until


def refuse(record: BlobRecord, now: datetime) -> None:
    """Raise Azure's error for changing or deleting ``record``, if it is protected."""
    if is_protected(record, now):
        rules.check("DeleteBlob", protection(record), now)


def _changes_data(old: BlobRecord, new: BlobRecord) -> bool:
    """Whether ``new`` differs from ``old`` in anything but the fields a protected version may change."""
    if new.ticks != old.ticks:
        return True
    kept = replace(new, **{name: getattr(old, name) for name in _FREE_FIELDS})
    return kept != old


def _kept_as_version(base: BlobRecord, write: BlobWrite) -> bool:
    """Whether ``write`` overwrites the content of ``base`` (Put Blob, Put Block List, Copy Blob)
    and keeps ``base`` whole as a previous version, its protection with it."""
    kept = write.version
    if kept is None or write.content is None or write.base is None or write.delete_base:
        return False
    return replace(kept, snapshot=base.snapshot, lease=base.lease, version_id=base.version_id) == base


def deletion_check(seconds: float, version_level: bool) -> ContentsCheck:
    """What Delete Container checks in its transaction: the container's WORM policy and hold
    (:func:`~tabulae.blob.rules.container_worm.check_container_delete`), then its blob versions:
    one still under a legal hold or a retention date in the future (any version, snapshot or
    soft-deleted record) refuses the deletion with 409
    ``ContainerImmutableStorageWithVersioningEnabled``, as does any blob at all in an account
    with version-level immutability (``version_level``: Azure's "must delete all blobs in the
    container before you can delete the container")."""
    now = datetime.fromtimestamp(seconds, UTC)

    def check(container: ContainerRecord, any_blob: bool, protected: BlobRecord | None) -> None:
        container_worm.check_container_delete(container.worm, any_blob)
        if protected is not None or (version_level and any_blob):
            raise ServiceError("ContainerImmutableStorageWithVersioningEnabled")

    return ContentsCheck(lambda record: is_protected(record, now), check)


class _SnapshotsNeeded(Exception):
    """A decision deletes snapshots whose protection the guard has not read yet."""


@dataclass(frozen=True, slots=True)
class _Snapshots:
    count: int
    protected: BlobRecord | None  # one protected snapshot, if any


def check_write(state: BlobState, write: BlobWrite, now: datetime, snapshots: _Snapshots | None) -> None:
    """Refuse ``write`` if it would change or delete a protected version (see the module)."""
    base = state.base
    if base is not None and base.committed and is_protected(base, now) and not _kept_as_version(base, write):
        changed = write.base is not None and _changes_data(base, write.base)
        if write.delete_base or changed or write.content is not None or write.append is not None:
            refuse(base, now)
        if write.pages is not None:
            refuse(base, now)
    target = state.target
    if write.delete_snapshot is not None and target is not None:
        refuse(target, now)
    if (
        write.snapshot_record is not None
        and target is not None
        and _changes_data(target, write.snapshot_record)
    ):
        refuse(target, now)
    if write.delete_snapshots and state.snapshots:
        if snapshots is None or snapshots.count != state.snapshots:
            raise _SnapshotsNeeded
        if snapshots.protected is not None:
            refuse(snapshots.protected, now)


class GuardedStore:
    """A :class:`BlobStore` whose blob writes pass :func:`check_write`; everything else is the
    wrapped store's, untouched."""

    def __init__(
        self,
        store: BlobStore,
        clock: Callable[[], float],
        features: Callable[[str], Awaitable[AccountFeatures]] | None = None,
    ) -> None:
        self._store = store
        self._clock = clock
        self._features = features
        self.worms = worm_guard.WormCache(store.get_container)  # container-level WORM policies

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def _feeds(self, key: BlobKey) -> bool:
        """Whether writes of ``key`` keep change feed events (blob/feed.py): the feed's own
        container and the other system containers never do."""
        if self._features is None or key.container in SYSTEM_CONTAINERS:
            return False
        return (await self._features(key.account)).blob_change_feed

    async def _namespace(self, key: BlobKey, needs: Needs) -> Needs:
        """``needs`` with the namespace loaded when ``key`` is a path of an HNS account (its
        writes pass :func:`namespace_guard.check`)."""
        if self._features is None or key.container in SYSTEM_CONTAINERS:
            return needs
        if not (await self._features(key.account)).hns:
            return needs
        return replace(needs, namespace=True)

    def _guarded(
        self,
        decide: Decide,
        snapshots: _Snapshots | None,
        key: BlobKey | None = None,
        worm: ContainerWorm | None = None,
        namespace: bool = False,
    ) -> Decide:
        seconds = self._clock()
        now = datetime.fromtimestamp(seconds, UTC)
        encryption = encryption_guard.REQUEST.get()  # here, in the request's context

        def guarded(state: BlobState) -> BlobWrite:
            write = decide(state)
            if namespace:
                namespace_guard.keep_directory(state, write)
            encryption_guard.check(state, write, encryption)
            check_write(state, write, now, snapshots)
            worm_guard.check(worm, state, write, seconds, _changes_data)
            if namespace:
                namespace_guard.check(state, write)
            if key is not None:
                write.change = event_of(key, state, write)
            return write

        return guarded

    async def write_blob(
        self, key: BlobKey, decide: Decide, *, needs: Needs = NO_NEEDS, staged: Staged | None = None
    ) -> Any:
        snapshots: _Snapshots | None = None
        feed = key if await self._feeds(key) else None
        worm = await self.worms.get(key)
        needs = await self._namespace(key, needs)
        for _ in range(_SNAPSHOT_ROUNDS):
            try:
                return await self._store.write_blob(
                    key,
                    self._guarded(decide, snapshots, feed, worm, needs.namespace),
                    needs=needs,
                    staged=staged,
                )
            except _SnapshotsNeeded:
                snapshots = await self._snapshots(key)
        raise ServiceError("OperationTimedOut")  # snapshots kept coming and going

    async def copy_blob(
        self, source: BlobKey, snapshot: str, dest: BlobKey, decide: Decide, *, needs: Needs = NO_NEEDS
    ) -> Any:
        feed = dest if await self._feeds(dest) else None
        worm = await self.worms.get(dest)
        needs = await self._namespace(dest, needs)
        guarded = self._guarded(decide, None, feed, worm, needs.namespace)
        return await self._store.copy_blob(source, snapshot, dest, guarded, needs=needs)

    async def rename_path(
        self, source: BlobKey, destination: BlobKey, parent: BlobKey | None, decide: Any
    ) -> Any:
        """A DFS rename, refused where a container's WORM policy protects what it moves or replaces."""
        worm = await self.worms.get(source)
        there = await self.worms.get(destination)
        if worm is None and there is None:
            return await self._store.rename_path(source, destination, parent, decide)
        now = self._clock()

        def guarded(state: RenameState) -> RenameWrite:
            write = decide(state)
            if write.move:
                worm_guard.check_removal(worm, state.source, write.subtree, now)
                if write.replace:
                    worm_guard.check_removal(there, state.destination, state.destination_has_children, now)
            return write

        return await self._store.rename_path(source, destination, parent, guarded)

    async def delete_tree(self, key: BlobKey, decide: Callable[[TreeState], Any]) -> Any:
        """A DFS delete, refused where the container's WORM policy protects the path."""
        worm = await self.worms.get(key)
        if worm is None:
            return await self._store.delete_tree(key, decide)
        now = self._clock()

        def guarded(state: TreeState) -> Any:
            result = decide(state)
            worm_guard.check_removal(worm, state.base, state.has_children, now)
            return result

        return await self._store.delete_tree(key, guarded)

    async def _snapshots(self, key: BlobKey) -> _Snapshots:
        """How many snapshots ``key`` has, and one that is protected now if any."""
        now = datetime.fromtimestamp(self._clock(), UTC)
        count, protected, start = 0, None, (key.name, "")
        while True:
            listing = await self._store.list_blobs(
                key.account, key.container, prefix=key.name, start=start, limit=1000, snapshots=True,
                uncommitted=False,
            )  # fmt: skip
            for record in listing.records:
                if record.name != key.name:
                    return _Snapshots(count, protected)
                if record.snapshot != BASE:
                    count += 1
                    if protected is None and is_protected(record, now):
                        protected = record
            if not listing.more or not listing.records:
                return _Snapshots(count, protected)
            last = listing.records[-1]
            start = (last.name, (last.snapshot or "~") + JUST_AFTER)


# ---------------------------------------------------------------------------- the operations


def _target(state: BlobState, snapshot: str) -> BlobRecord:
    record = state.base if snapshot == BASE else state.target
    if record is None and snapshot.startswith(VERSION_PREFIX):
        record = _current(state, snapshot)  # the current version, named by its id
    if record is None or not record.committed:
        raise ServiceError("BlobNotFound")
    return record


def _current(state: BlobState, snapshot: str) -> BlobRecord | None:
    base = state.base
    if base is not None and base.version_id is not None and VERSION_PREFIX + base.version_id == snapshot:
        return base
    return None


def _written(snapshot: str, record: BlobRecord) -> BlobWrite:
    if record.snapshot == BASE:
        return BlobWrite(result=record, base=record)
    return BlobWrite(result=record, snapshot_record=record)


def _needs(snapshot: str) -> Needs:
    return NO_NEEDS if snapshot == BASE else Needs(snapshot=snapshot)


async def set_policy(
    store: BlobStore,
    key: BlobKey,
    snapshot: str,
    until: datetime,
    mode: str,
    unmodified_since: int | None,
    clock: Callable[[], float],
) -> BlobRecord:
    """Set Blob Immutability Policy on the blob or a snapshot; the ETag stays as it is.
    ``unmodified_since`` (epoch seconds) is the one condition Azure takes here."""
    now = datetime.fromtimestamp(clock(), UTC)

    def decide(state: BlobState) -> BlobWrite:
        record = _target(state, snapshot)
        _check_unmodified(record, unmodified_since)
        changed = rules.set_policy(protection(record), until, mode, now)
        assert changed.policy is not None
        return _written(snapshot, replace(record, immutable_until=until.timestamp(), immutable_mode=mode))

    result: BlobRecord = await store.write_blob(key, decide, needs=_needs(snapshot))
    return result


async def delete_policy(store: BlobStore, key: BlobKey, snapshot: str, clock: Callable[[], float]) -> None:
    now = datetime.fromtimestamp(clock(), UTC)

    def decide(state: BlobState) -> BlobWrite:
        record = _target(state, snapshot)
        rules.delete_policy(protection(record), now)
        return _written(snapshot, replace(record, immutable_until=None, immutable_mode=None))

    await store.write_blob(key, decide, needs=_needs(snapshot))


async def set_legal_hold(store: BlobStore, key: BlobKey, snapshot: str, hold: bool) -> BlobRecord:
    def decide(state: BlobState) -> BlobWrite:
        return _written(snapshot, replace(_target(state, snapshot), legal_hold=hold))

    result: BlobRecord = await store.write_blob(key, decide, needs=_needs(snapshot))
    return result


def _check_unmodified(record: BlobRecord, since: int | None) -> None:
    if since is None:
        return
    modified = (record.ticks - edm.UNIX_EPOCH_TICKS) // edm.TICKS_PER_SECOND
    if modified > since:
        raise ServiceError("ConditionNotMet")


def initial(
    record: BlobRecord, until: datetime | None, mode: str | None, hold: bool | None, now: datetime
) -> BlobRecord:
    """A new version with the protection its upload asked for (``x-ms-immutability-policy-*``,
    ``x-ms-legal-hold``); raises Azure's error for a policy that could not be set."""
    if until is not None:
        rules.set_policy(rules.Protection(), until, mode or rules.UNLOCKED, now)
        record = replace(record, immutable_until=until.timestamp(), immutable_mode=mode or rules.UNLOCKED)
    if hold:
        record = replace(record, legal_hold=True)
    return record


def by_default(record: BlobRecord, days: int, mode: str) -> BlobRecord:
    """A new version under the account's default policy: protected ``days`` from its creation
    (its Last-Modified), in ``mode``."""
    created = (record.ticks - edm.UNIX_EPOCH_TICKS) / edm.TICKS_PER_SECOND
    return replace(record, immutable_until=created + days * _DAY_SECONDS, immutable_mode=mode)


# ---------------------------------------------------------------------------- last access time


def last_access(record: BlobRecord) -> float:
    """When ``record`` was last accessed as far as is known: its stored access time or, when
    later, its last write."""
    modified = (record.ticks - edm.UNIX_EPOCH_TICKS) / edm.TICKS_PER_SECOND
    stored = record.last_access
    return modified if stored is None or stored < modified else stored


def stale(record: BlobRecord, now: float) -> bool:
    """Whether a read at ``now`` should store a new access time (at most once a day)."""
    moment = datetime.fromtimestamp(now, UTC)
    known = datetime.fromtimestamp(last_access(record), UTC)
    return access_time.touched("GetBlob", known, moment, True) is not None


async def touch(store: BlobStore, key: BlobKey, now: float) -> None:
    """Store ``now`` as the blob's last access time, unless another read did within the day.
    Never changes the ETag; a blob gone meanwhile is left alone."""

    def decide(state: BlobState) -> BlobWrite:
        base = state.base
        if base is None or not base.committed or not stale(base, now):
            return BlobWrite()
        return BlobWrite(base=replace(base, last_access=now))

    with contextlib.suppress(ServiceError):  # the container went away: the read still succeeded
        await store.write_blob(key, decide)
