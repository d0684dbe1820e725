"""The change feed, live: which event a blob write makes, and the job that publishes kept events
into the ``$blobchangefeed`` container in Azure's own files (:mod:`tabulae.blob.changefeed`).

**Durable by construction.** A write of a blob in an account with the change feed on carries its
event (:attr:`~tabulae.storage.blobs.BlobWrite.change`), and the store keeps it in the same
transaction as the change: a change is never made without its event, nor an event kept for a
change that was rolled back. :class:`FeedPublisher` then moves kept events into the feed: each
batch of one account and hour becomes one append to that hour's chunk, and the write that
appends it also deletes the events it carries (:attr:`~tabulae.storage.blobs.BlobWrite.consume`),
in one transaction. A crash before that commit leaves the events kept and the chunk as it was,
so the next round publishes them; a crash after it leaves nothing to redo. Two workers publishing
the same events cannot both succeed: the second finds them gone and its append is rolled back
(:class:`~tabulae.storage.blobs.ChangesTaken`). So every event appears exactly once.

**Order.** Events of one blob are kept in the order of its writes (the store serialises writes
of a blob, and keeps each write's event at the end of its transaction), published in the order
kept, and go to one shard (there is one), so a reader sees them in order per blob, as Azure
promises; the ``sequencer`` is the write's timestamp, increasing per blob.

**Segments.** The hour's manifest is written (``Publishing``) before its first chunk, so a
crash between the two leaves a segment with no records, which readers skip. Once an hour has
ended (and a minute of grace for writes still in flight), its manifest is rewritten
``Finalized`` and ``meta/segments.json`` moves ``lastConsumable`` to its end.

Which writes make which events: Azure records Put Blob, Put Block List and Copy Blob as
``BlobCreated``, Delete Blob as ``BlobDeleted``, Set Blob Properties and Metadata as
``BlobPropertiesUpdated``, Snapshot Blob as ``BlobSnapshotCreated`` and Set Blob Tier as
``BlobTierChanged`` (the APIs of the feed's schema); it records no Append Block, Put Page or
lease change, and neither does this. The event is read off the write's effect (a new ETag with
new content, a deletion, a new snapshot ...), so every operation that has that effect records
it, whatever code path made it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from tabulae.blob import changefeed as cf
from tabulae.blob.changefeed.layout import segment_end
from tabulae.blob.rules.conditions import etag_of
from tabulae.model import edm
from tabulae.model.errors import ServiceError
from tabulae.storage.blobs import (
    BASE,
    BlobKey,
    BlobRecord,
    BlobState,
    BlobStore,
    BlobWrite,
    ChangesTaken,
    ContainerRecord,
    ContentProperties,
    Extent,
    PendingChange,
    next_ticks,
)

log = logging.getLogger(__name__)

BATCH = 1000  # events read per round
GRACE = timedelta(seconds=60)  # an hour's segment is finalized this long after it ends
_ATTEMPTS = 5


def _moment(ticks: int) -> datetime:
    micros = (ticks - edm.UNIX_EPOCH_TICKS) // 10
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros)


def _kind(state: BlobState, write: BlobWrite) -> tuple[str, str, BlobRecord] | None:
    """(event type, api, the blob as the event describes it) of a write, or None."""
    base = state.base
    old = base if base is not None and base.committed else None
    if write.delete_base:
        return ("BlobDeleted", "DeleteBlob", old) if old is not None else None
    if write.snapshot is not None and old is not None:
        return "BlobSnapshotCreated", "SnapshotBlob", write.snapshot
    new = write.base
    if new is None or not new.committed:
        return None
    if old is None or write.content is not None:
        if write.append is not None or (new.blob_type == "PageBlob" and write.content is None):
            return None
        if new.copy is not None and new.copy.completed == new.ticks:
            return "BlobCreated", "CopyBlob", new
        if new.blob_type == "BlockBlob" and new.block_count:
            return "BlobCreated", "PutBlockList", new
        return "BlobCreated", "PutBlob", new
    if write.append is not None or write.pages is not None:
        return None
    if new.ticks != old.ticks:
        api = "SetBlobMetadata" if new.metadata != old.metadata else "SetBlobProperties"
        return "BlobPropertiesUpdated", api, new
    if new.tier != old.tier:
        return "BlobTierChanged", "SetBlobTier", new
    return None


def event_of(key: BlobKey, state: BlobState, write: BlobWrite) -> bytes | None:
    """The event a write makes (kept as a small JSON document), or None when it makes none."""
    kind = _kind(state, write)
    if kind is None:
        return None
    event_type, api, record = kind
    document: dict[str, Any] = {
        "type": event_type,
        "api": api,
        "container": key.container,
        "blob": key.name,
        "ticks": state.ticks,
        "id": str(uuid.uuid4()),
        "etag": etag_of(record.ticks),
        "contentType": record.properties.content_type or "",
        "length": record.size,
        "blobType": record.blob_type,
    }
    if record.snapshot != BASE:
        document["snapshot"] = record.snapshot
    if record.tier is not None:
        document["tier"] = record.tier
    return orjson.dumps(document)


def change_event(account: str, doc: bytes) -> cf.ChangeEvent:
    """A kept event as the feed's record."""
    d = orjson.loads(doc)
    url = f"https://{account}.blob.core.windows.net/{d['container']}/{d['blob']}"
    return cf.ChangeEvent(
        event_type=d["type"],
        api=d["api"],
        account=account,
        container=d["container"],
        blob=d["blob"],
        time=_moment(d["ticks"]),
        id=d["id"],
        request_id=d["id"],
        url=url,
        sequencer=cf.sequencer(d["ticks"]),
        etag=d["etag"],
        content_type=d["contentType"],
        content_length=d["length"],
        blob_type=d["blobType"],
        snapshot=d.get("snapshot"),
        blob_tier=d.get("tier"),
    )


def _chunk_write(
    path: str, length: int, extent: Extent, expected: int | None, changes: list[PendingChange]
) -> Callable[[BlobState], BlobWrite]:
    """The write that creates or grows a chunk by ``extent`` and drops ``changes``, if the chunk
    is still as read (``expected``: its ETag ticks, None when it did not exist)."""

    def decide(state: BlobState) -> BlobWrite:
        base = state.base
        if (None if base is None else base.ticks) != expected:
            raise _Moved
        if base is None:
            properties = ContentProperties(content_type=cf.CHUNK_CONTENT_TYPE)
            record = BlobRecord(
                path,
                BASE,
                "AppendBlob",
                length,
                state.ticks,
                state.ticks,
                properties=properties,
                block_count=1,
            )
            return BlobWrite(base=record, content=[extent], consume=changes)
        grown = replace(base, size=base.size + length, ticks=state.ticks, block_count=base.block_count + 1)
        return BlobWrite(base=grown, append=extent, consume=changes)

    return decide


class _Moved(Exception):
    """The chunk was created or changed between reading it and writing it: start over."""


async def _one(data: bytes) -> AsyncIterator[bytes]:
    yield data


@dataclass
class FeedPublisher:
    """Moves kept events into each account's ``$blobchangefeed`` (see the module)."""

    store: BlobStore
    clock: Callable[[], float]
    batch: int = BATCH
    # Whether to wait (the data volume is full): a chunk grown then would use the room deletes
    # need, and the events stay kept with their writes until there is room again.
    paused: Callable[[], bool] = lambda: False
    _open: set[tuple[str, datetime]] = field(default_factory=set)  # segments still Publishing
    _containers: set[str] = field(default_factory=set)  # accounts whose feed container exists

    async def publish(self) -> int:
        """One round: publish what is kept (up to a batch), finalize ended hours; how many
        events were published."""
        pending = await self.store.pending_changes(self.batch)
        groups: dict[tuple[str, datetime], list[tuple[PendingChange, cf.ChangeEvent]]] = {}
        for change in pending:
            event = change_event(change.account, change.doc)
            groups.setdefault((change.account, cf.segment_start(event.time)), []).append((change, event))
        published = 0
        for (account, hour), items in groups.items():
            if await self._append(account, hour, items):
                published += len(items)
        await self._finalize(datetime.fromtimestamp(self.clock(), UTC))
        return published

    async def run(self, interval: float = 1.0) -> None:
        """Publish for as long as the server runs; a failed round is logged and retried."""
        while True:
            try:
                while not self.paused() and await self.publish() >= self.batch:
                    pass  # a backlog: keep going without waiting
            except Exception:  # the job must outlive a failing round
                log.exception("change feed publishing failed; retrying")
            await asyncio.sleep(interval)

    async def _ensure_container(self, account: str) -> None:
        if account in self._containers:
            return
        with contextlib.suppress(ServiceError):  # it exists already
            await self.store.create_container(account, ContainerRecord(cf.CONTAINER, next_ticks(None)))
        self._containers.add(account)

    async def _put_json(self, account: str, path: str, data: bytes) -> None:
        """Write a small JSON blob of the feed (a manifest) whole."""
        key = BlobKey(account, cf.CONTAINER, path)
        staged = await self.store.stage(key, _one(data), None)
        properties = ContentProperties(content_type=cf.MANIFEST_CONTENT_TYPE)

        def decide(state: BlobState) -> BlobWrite:
            base = state.base
            record = BlobRecord(
                path, BASE, "BlockBlob", len(data), state.ticks,
                base.created if base is not None else state.ticks, properties=properties,
            )  # fmt: skip
            return BlobWrite(base=record, content=[staged.extent], drop_staged=True)

        await self.store.write_blob(key, decide, staged=staged)

    async def _append(
        self, account: str, hour: datetime, items: list[tuple[PendingChange, cf.ChangeEvent]]
    ) -> bool:
        """Append ``items`` to the hour's chunk and drop them from the kept events, in one
        write; False when another worker published them first."""
        await self._ensure_container(account)
        path = cf.chunk_path(0, hour)
        key = BlobKey(account, cf.CONTAINER, path)
        changes = [change for change, _ in items]
        events = [event for _, event in items]
        for _ in range(_ATTEMPTS):
            found = await self.store.get_blob(key)
            if found is None:
                modified = datetime.fromtimestamp(self.clock(), UTC)
                manifest = cf.render_segment(hour, finalized=False, modified=modified)
                await self._put_json(account, cf.segment_path(hour), manifest)
            data = cf.render_chunk(path, events) if found is None else cf.append_to_chunk(path, events)
            expected = None if found is None else found[0].ticks
            staged = await self.store.stage(key, _one(data), None)

            decide = _chunk_write(path, len(data), staged.extent, expected, changes)
            try:
                await self.store.write_blob(key, decide, staged=staged)
            except ChangesTaken:
                return False
            except _Moved:
                continue
            self._open.add((account, hour))
            return True
        return False

    async def _finalize(self, now: datetime) -> None:
        for account, hour in sorted(self._open):
            end = segment_end(hour)
            if now < end + GRACE:
                continue
            await self._put_json(
                account, cf.segment_path(hour), cf.render_segment(hour, finalized=True, modified=now)
            )
            await self._put_json(account, cf.SEGMENTS_PATH, cf.segments_manifest(end, modified=now))
            self._open.discard((account, hour))
