"""The container-level WORM check of a blob write (rules in :mod:`tabulae.blob.rules.container_worm`),
and the short-lived cache of each container's policy that the write guard reads it through.

A write's decision is judged by its effect on the blob as it is, as the version-level guard
judges it (:mod:`tabulae.blob.protection`): creating a blob passes; deleting it (or its
snapshots) is a delete; adding one extent and nothing else is an append; any other change of the
blob's data, properties or metadata, or a snapshot of it, is an overwrite. The fields Azure lets
change under a policy (lease, tier, tags, the version-level protection, the access time) pass.

The policy is read from the container's record, at most once a second per container and worker:
a change through the admin endpoint applies at once in the worker that took it and within a
second in the others (Azure, too, says policy changes may take a moment to apply).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import replace

from tabulae.blob.rules import container_worm as rules
from tabulae.model import edm
from tabulae.model.blobs import BlobKey, BlobRecord, ContainerRecord, ContainerWorm
from tabulae.storage.blobs import BlobState, BlobWrite

CACHE_SECONDS = 1.0
_CACHE_LIMIT = 10_000  # containers remembered per worker before the cache starts over
#: What an append changes in the blob's record besides adding its extent.
_APPEND_FIELDS = ("size", "ticks", "block_count", "lease")


def _seconds(ticks: int) -> float:
    return (ticks - edm.UNIX_EPOCH_TICKS) / edm.TICKS_PER_SECOND


def _retained(worm: ContainerWorm, record: BlobRecord, now: float) -> bool:
    append_blob = record.blob_type == "AppendBlob"
    return now < rules.retained_until(worm, _seconds(record.created), _seconds(record.ticks), append_blob)


def _only_appends(base: BlobRecord, write: BlobWrite) -> bool:
    if write.append is None or write.content is not None or write.pages is not None or write.base is None:
        return False
    if write.snapshot is not None or write.version is not None or write.delete_base:
        return False
    return replace(write.base, **{name: getattr(base, name) for name in _APPEND_FIELDS}) == base


def check(
    worm: ContainerWorm | None,
    state: BlobState,
    write: BlobWrite,
    now: float,
    changes_data: Callable[[BlobRecord, BlobRecord], bool],
) -> None:
    """Refuse ``write`` with Azure's error if the container's policy or hold forbids it."""
    if worm is None:
        return
    base = state.base if state.base is not None and state.base.committed else None
    if base is not None:
        if write.delete_base:
            rules.check(worm, delete=True, append=False, retained=_retained(worm, base, now))
        elif _only_appends(base, write):
            rules.check(worm, delete=False, append=True, retained=True)
        elif (
            (write.base is not None and changes_data(base, write.base))
            or write.content is not None
            or write.append is not None
            or write.pages is not None
            or write.snapshot is not None
        ):
            rules.check(worm, delete=False, append=False, retained=True)
    target = state.target
    if write.delete_snapshot is not None and target is not None:
        rules.check(worm, delete=True, append=False, retained=_retained(worm, target, now))
    if write.delete_snapshots and state.snapshots and base is not None:
        rules.check(worm, delete=True, append=False, retained=_retained(worm, base, now))


def check_removal(worm: ContainerWorm | None, record: BlobRecord | None, subtree: bool, now: float) -> None:
    """A DFS path renamed away or deleted (``Path - Delete``, ``Path - Create`` with a rename
    source): as Delete Blob for a file; a directory with descendants is refused outright while a
    policy or hold applies ("Container-level WORM policies": no rename or move of an immutable
    blob, and a directory must be empty to be deleted)."""
    if worm is None or record is None or not record.committed:
        return
    if subtree:
        rules.check(worm, delete=False, append=False, retained=True)
    rules.check(worm, delete=True, append=False, retained=_retained(worm, record, now))


class WormCache:
    """Each container's policy, read through ``read`` at most once a second (see the module)."""

    def __init__(self, read: Callable[[str, str], Awaitable[ContainerRecord | None]]) -> None:
        self._read = read
        self._known: dict[tuple[str, str], tuple[float, ContainerWorm | None]] = {}

    async def get(self, key: BlobKey) -> ContainerWorm | None:
        where = (key.account, key.container)
        now = time.monotonic()
        known = self._known.get(where)
        if known is not None and now - known[0] < CACHE_SECONDS:
            return known[1]
        record = await self._read(key.account, key.container)
        worm = record.worm if record is not None else None
        if len(self._known) >= _CACHE_LIMIT:
            self._known.clear()
        self._known[where] = (now, worm)
        return worm

    def forget(self, account: str, container: str) -> None:
        """Read the container's policy afresh at the next write (it was just changed here)."""
        self._known.pop((account, container), None)
