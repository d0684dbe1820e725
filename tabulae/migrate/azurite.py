"""``tabulae migrate azurite``: an Azurite workspace's data, written into Tabulae.

The workspace is read with :mod:`tabulae.migrate.workspace`; everything is written through the
storage REST API with Microsoft's SDKs, to a Tabulae server started for the purpose on the target
(a data directory or ``--store``) or to one that runs (``--connection-string``). Writing as a
client does means every rule of the services applies to migrated data as to any other, and the
migration works against any store Tabulae has.

What moves: tables and their entities (every Edm type, sent in the service's JSON form, never
converted), queues with metadata and messages (text, remaining visibility timeout and time to
live), containers with metadata and public access, blobs of every type with their properties,
metadata, committed blocks (block ids kept) and uncommitted blocks; page blobs are reported and
left (reading Azurite's page ranges from its workspace is not written yet). What cannot keep
its identity is reported, not faked: ETags, Last-Modified and entity Timestamps are the new
server's; message ids, pop receipts, insertion times and dequeue counts are new; blob snapshots
(their ids are times the new server would have to invent) and soft-deleted blobs are counted and
left behind; expired messages are dropped, as the service would drop them.

**Resuming.** Progress is recorded in a file (``--progress``, by default in the workspace) after
every entity group transaction, message and blob. Run again after an interruption, the command
skips what is recorded and continues. Entities and blobs are written idempotently (upserts,
overwrites), so repeating the unit that was under way changes nothing; a message sent just
before an interruption and not yet recorded is sent again (queues are at-least-once anyway).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from tabulae.config import accounts_from
from tabulae.migrate.workspace import Blob, Container, Piece, Queue, Table, Workspace, content_md5
from tabulae.testing.server import TabulaeServer
from tabulae.tools.transfer import ResumeFile
from tabulae.tools.wire import BATCH_BYTES, BATCH_OPERATIONS, TableWire, with_retries

PAGE_CHUNK = 4 * 1024 * 1024  # bytes per Put Page / Append Block request
MAX_TTL_SECONDS = 7 * 24 * 3600  # a visibility timeout may not exceed seven days
NEVER = datetime(9999, 1, 1, tzinfo=UTC)  # Azurite's "never expires" is 9999-12-31


class MigrationError(Exception):
    """A workspace or target the migration cannot use; the message says what to do."""


@dataclass(slots=True)
class Report:
    """What was written (and what was found already written by an earlier run), by kind."""

    written: dict[str, int] = field(default_factory=dict)
    resumed: dict[str, int] = field(default_factory=dict)  # already done by an earlier run
    left: dict[str, int] = field(default_factory=dict)  # not migrated, by reason

    def add(self, kind: str, count: int = 1) -> None:
        self.written[kind] = self.written.get(kind, 0) + count

    def skip(self, kind: str, count: int = 1) -> None:
        self.resumed[kind] = self.resumed.get(kind, 0) + count

    def leave(self, reason: str, count: int = 1) -> None:
        if count:
            self.left[reason] = self.left.get(reason, 0) + count

    def lines(self) -> list[str]:
        kinds = ("tables", "entities", "queues", "messages", "containers", "blobs", "blocks", "bytes")
        out = []
        for kind in kinds:
            written, resumed = self.written.get(kind, 0), self.resumed.get(kind, 0)
            if written or resumed:
                out.append(
                    f"{kind:<11} {written:>12,}"
                    + (f"  (+{resumed:,} from an earlier run)" if resumed else "")
                )
        out += [f"not moved: {count:,} {reason}" for reason, count in self.left.items()]
        return out


class Progress:
    """The units done, by key, kept in a resume file (written after every unit)."""

    def __init__(self, resume: ResumeFile, restart: bool) -> None:
        self.resume = resume
        if restart:
            resume.clear()
        self.done: dict[str, int] = dict(resume.load() or {})

    def get(self, key: str) -> int:
        return self.done.get(key, 0)

    def set(self, key: str, value: int) -> None:
        """Record a unit as done: renamed into place (a killed process leaves the old record or
        the new one), not synced (a power cut may forget the last units, which are then written
        again); :meth:`close` syncs."""
        self.done[key] = value
        temporary = self.resume.path.with_name(self.resume.path.name + ".tmp")
        temporary.write_bytes(orjson.dumps({"identity": self.resume.identity, "position": self.done}))
        os.replace(temporary, self.resume.path)

    def close(self) -> None:
        self.resume.save(self.done)


class Migration:
    """Writes a workspace into the server at ``target``, one account's endpoints at a time."""

    def __init__(
        self,
        workspace: Workspace,
        target: TabulaeServer,
        keys: dict[str, str],
        progress: Progress,
        say: Callable[[str], None] = lambda line: None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.workspace = workspace
        self.target = target
        self.keys = keys  # account -> base64 key, of every account the target serves
        self.progress = progress
        self.report = Report()
        self.say = say
        self.now = now

    def connection_string(self, account: str) -> str:
        if account not in self.keys:
            raise MigrationError(
                f"the workspace has data of account {account!r}, which the target does not serve: set "
                "AZURITE_ACCOUNTS (or TABULAE_ACCOUNTS) as for Azurite"
            )
        endpoints = {s: url.rsplit("/", 1)[0] + "/" + account for s, url in self.target.endpoints.items()}
        return TabulaeServer(endpoints, account, self.keys[account]).connection_string

    def run(self) -> Report:
        for table in self.workspace.tables():
            self.table(table)
        for queue in self.workspace.queues():
            self.queue(queue)
        for container in self.workspace.containers():
            self.container(container)
        self.progress.close()
        return self.report

    # ------------------------------------------------------------------------------- tables

    def table(self, table: Table) -> None:
        from azure.core.exceptions import ResourceExistsError
        from azure.data.tables import TableServiceClient

        key = f"table/{table.account}/{table.name}"
        done = self.progress.get(key)
        with TableServiceClient.from_connection_string(self.connection_string(table.account)) as service:
            if not done:
                with contextlib.suppress(ResourceExistsError):
                    service.create_table(table.name)
                self.report.add("tables")
                self.progress.set(key, 1)
                done = 1
            else:
                self.report.skip("tables")
                self.report.skip("entities", done - 1)
            wire = TableWire(service.get_table_client(table.name))
            position = done - 1  # entities written so far
            for batch in _batches(table.entities, position):
                bodies = [(e["PartitionKey"], e["RowKey"], orjson.dumps(e)) for e in batch]
                with_retries(lambda bodies=bodies: wire.upsert_batch(bodies))  # type: ignore[misc]
                position += len(batch)
                self.report.add("entities", len(batch))
                self.progress.set(key, position + 1)
        self.say(f"table {table.account}/{table.name}: {len(table.entities):,} entities")

    # ------------------------------------------------------------------------------- queues

    def queue(self, queue: Queue) -> None:
        from azure.core.exceptions import ResourceExistsError
        from azure.storage.queue import QueueServiceClient

        key = f"queue/{queue.account}/{queue.name}"
        done = self.progress.get(key)
        with QueueServiceClient.from_connection_string(self.connection_string(queue.account)) as service:
            client = service.get_queue_client(queue.name)
            if not done:
                try:
                    client.create_queue(metadata=queue.metadata)
                except ResourceExistsError:
                    client.set_queue_metadata(queue.metadata)
                self.report.add("queues")
                self.progress.set(key, 1)
                done = 1
            else:
                self.report.skip("queues")
                self.report.skip("messages", done - 1)
            for index in range(done - 1, len(queue.messages)):
                message = queue.messages[index]
                now = self.now()
                if message.expires_at <= now:
                    self.report.leave("expired messages")
                else:
                    ttl = (
                        -1 if message.expires_at >= NEVER else int((message.expires_at - now).total_seconds())
                    )
                    hidden = max(0, int((message.visible_at - now).total_seconds() + 0.999))
                    hidden = min(hidden, MAX_TTL_SECONDS, ttl - 1 if ttl > 0 else MAX_TTL_SECONDS)
                    text = self.workspace.read(message.text).decode("utf-8") if message.text.count else ""
                    client.send_message(text, visibility_timeout=hidden, time_to_live=ttl)
                    self.report.add("messages")
                self.progress.set(key, index + 2)
        self.say(f"queue {queue.account}/{queue.name}: {len(queue.messages):,} messages")

    # -------------------------------------------------------------------------------- blobs

    def container(self, container: Container) -> None:
        from azure.core.exceptions import ResourceExistsError
        from azure.storage.blob import BlobServiceClient

        key = f"container/{container.account}/{container.name}"
        self.report.leave("blob snapshots", container.snapshots)
        self.report.leave("soft-deleted blobs", container.deleted)
        with BlobServiceClient.from_connection_string(self.connection_string(container.account)) as service:
            client = service.get_container_client(container.name)
            if not self.progress.get(key):
                try:
                    client.create_container(
                        metadata=container.metadata, public_access=container.public_access
                    )
                except ResourceExistsError:
                    client.set_container_metadata(container.metadata)
                    client.set_container_access_policy({}, public_access=container.public_access)
                self.report.add("containers")
                self.progress.set(key, 1)
            else:
                self.report.skip("containers")
            for blob in container.blobs:
                if blob.kind == "PageBlob":  # Azurite's page ranges are not read from its workspace yet
                    self.report.leave("page blobs (not migrated yet)")
                    continue
                blob_key = f"blob/{blob.account}/{blob.container}/{blob.name}"
                if self.progress.get(blob_key):
                    self.report.skip("blobs")
                    continue
                self.blob(client.get_blob_client(blob.name), blob)
                self.report.add("blobs")
                self.progress.set(blob_key, 1)
        self.say(f"container {container.account}/{container.name}: {len(container.blobs):,} blobs")

    def blob(self, client: Any, blob: Blob) -> None:
        from azure.storage.blob import BlobBlock, ContentSettings

        p = blob.properties
        settings = ContentSettings(
            content_type=p.get("contentType"),
            content_encoding=p.get("contentEncoding"),
            content_language=p.get("contentLanguage"),
            content_disposition=p.get("contentDisposition"),
            cache_control=p.get("cacheControl"),
            content_md5=content_md5(p),  # type: ignore[arg-type]
        )
        metadata = blob.metadata or None
        if blob.kind == "AppendBlob":
            client.create_append_blob(content_settings=settings, metadata=metadata)
            for block in blob.committed:
                for data in self.workspace.stream(block.piece, PAGE_CHUNK):
                    client.append_block(data)
                    self.report.add("bytes", len(data))
        elif not blob.is_committed:
            pass  # only staged blocks: there is no committed blob to write
        elif blob.committed and all(_client_id(b.name) is not None for b in blob.committed):
            for block in blob.committed:
                client.stage_block(_client_id(block.name), self.workspace.read(block.piece))
                self.report.add("bytes", block.piece.count)
            ids = [BlobBlock(block_id=str(_client_id(block.name))) for block in blob.committed]
            client.commit_block_list(ids, content_settings=settings, metadata=metadata)
            self.report.add("blocks", len(ids))
        else:  # written whole (Put Blob), or blocks whose ids the SDK cannot send: the content
            pieces = [blob.whole] if blob.whole is not None else [b.piece for b in blob.committed]
            length = sum(piece.count for piece in pieces)
            client.upload_blob(
                _chain(self.workspace, pieces),
                length=length,
                overwrite=True,
                content_settings=settings,
                metadata=metadata,
            )
            self.report.add("bytes", length)
        for block in blob.uncommitted:  # staged after the commit, so they stay uncommitted
            block_id = _client_id(block.name)
            if block_id is None:
                self.report.leave("uncommitted blocks with ids the SDK cannot send")
                continue
            client.stage_block(block_id, self.workspace.read(block.piece))
            self.report.add("blocks")


def _chain(workspace: Workspace, pieces: list[Piece]) -> Iterator[bytes]:
    for piece in pieces:
        yield from workspace.stream(piece)


def _client_id(wire_id: str) -> str | None:
    """The block id the SDK takes (it base64-encodes what it is given) for the id on the wire."""
    try:
        return base64.b64decode(wire_id, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def _batches(entities: list[dict[str, Any]], start: int) -> Iterator[list[dict[str, Any]]]:
    """Entity group transactions from ``start`` on: one partition, at most 100 entities and 4 MiB."""
    batch: list[dict[str, Any]] = []
    size = 0
    for entity in entities[start:]:
        length = len(orjson.dumps(entity)) + 300
        if batch and (
            entity["PartitionKey"] != batch[0]["PartitionKey"]
            or len(batch) == BATCH_OPERATIONS
            or size + length > BATCH_BYTES
        ):
            yield batch
            batch, size = [], 0
        batch.append(entity)
        size += length
    if batch:
        yield batch


def account_keys(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The accounts the target serves (``AZURITE_ACCOUNTS``/``TABULAE_ACCOUNTS``, else the
    development account), with their first key in base64, as a connection string wants it."""
    accounts = accounts_from([], dict(os.environ) if environ is None else environ)
    return {name: base64.b64encode(keys[0]).decode() for name, keys in accounts.items()}


def progress_file(location: Path, given: Path | None) -> Path:
    return given if given is not None else location / "tabulae-migrate.progress"
