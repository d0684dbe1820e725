"""Reading an Azurite workspace: its LokiJS databases (JSON files) and its extent files.

Azurite keeps each service's metadata in a LokiJS database saved as one JSON document
(``__azurite_db_table__.json``, ``__azurite_db_queue__.json``, ``__azurite_db_blob__.json``):
collections of plain records. Content lives in *extents*, append-only files under
``__blobstorage__`` and ``__queuestorage__`` (the ``__azurite_db_*_extent__.json`` databases map
an extent id to its file), and a record points into them with ``persistency`` (extent id, offset,
count). This module turns those records into the few facts a migration needs and reads content
ranges; it never changes the workspace. Collection and field names are the ones Azurite 3.x
writes; a workspace without a service's database simply has nothing of that service.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

TABLE_DB = "__azurite_db_table__.json"
QUEUE_DB = "__azurite_db_queue__.json"
BLOB_DB = "__azurite_db_blob__.json"
EXTENT_DBS = {"blob": ("__azurite_db_blob_extent__.json", "__blobstorage__"),
              "queue": ("__azurite_db_queue_extent__.json", "__queuestorage__")}  # fmt: skip
# Properties the service sets itself: never written by a client, so never migrated.
SERVER_PROPERTIES = ("Timestamp", "Timestamp@odata.type")


class WorkspaceError(Exception):
    """A workspace this reader cannot use; the message says which file and why."""


@dataclass(frozen=True, slots=True)
class Piece:
    """A range of an extent file: where some content lives."""

    extent: str
    offset: int
    count: int


@dataclass(frozen=True, slots=True)
class Policy:
    """A stored access policy (signed identifier) of a table, queue or container, as Azurite keeps
    it: times in ISO 8601 text, permissions in the service's letters; any part may be absent."""

    id: str
    start: str | None
    expiry: str | None
    permission: str | None


@dataclass(frozen=True, slots=True)
class ServiceSettings:
    """One service's properties of one account (Set Service Properties), in Azurite's field
    names: ``logging``, ``hourMetrics``, ``minuteMetrics``, ``cors``, ``defaultServiceVersion``,
    ``deleteRetentionPolicy``, ``staticWebsite``; only those a client set are present."""

    service: str  # blob, queue or table
    account: str
    properties: dict[str, Any]


@dataclass(slots=True)
class Table:
    account: str
    name: str
    entities: list[dict[str, Any]]  # the service's JSON form, @odata.type annotations included
    acl: list[Policy] = field(default_factory=list)


@dataclass(slots=True)
class Message:
    text: Piece
    visible_at: datetime
    expires_at: datetime
    inserted_at: datetime


@dataclass(slots=True)
class Queue:
    account: str
    name: str
    metadata: dict[str, str]
    messages: list[Message]
    acl: list[Policy] = field(default_factory=list)


@dataclass(slots=True)
class Block:
    name: str  # the block id as the client sent it (base64 text)
    piece: Piece


@dataclass(slots=True)
class Blob:
    account: str
    container: str
    name: str
    kind: str  # BlockBlob, AppendBlob, PageBlob
    size: int
    properties: dict[str, Any]
    metadata: dict[str, str]
    committed: list[Block] = field(default_factory=list)  # in order; a single piece when not in blocks
    uncommitted: list[Block] = field(default_factory=list)
    pages: list[tuple[int, Piece]] = field(default_factory=list)  # (start offset, content)
    whole: Piece | None = None  # content written in one piece (Put Blob)
    is_committed: bool = True


@dataclass(slots=True)
class Container:
    account: str
    name: str
    metadata: dict[str, str]
    public_access: str | None
    blobs: list[Blob]
    snapshots: int = 0  # blob snapshots, not migrated (their ids cannot be kept)
    deleted: int = 0  # soft-deleted blobs, not migrated
    acl: list[Policy] = field(default_factory=list)


def _load(path: Path) -> dict[str, list[dict[str, Any]]]:
    """A Loki database as {collection name: records}; empty when the file is not there."""
    if not path.exists():
        return {}
    try:
        document = orjson.loads(path.read_bytes())
        return {c["name"]: c.get("data", []) for c in document["collections"]}
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise WorkspaceError(f"{path}: not an Azurite (LokiJS) database: {exc}") from None


def _policies(records: Any) -> list[Policy]:
    """Azurite's ``containerAcl``/``queueAcl``/``tableAcl``: ``[{id, accessPolicy: {start,
    expiry, permission}}]`` (``accessPolicy`` may be missing: an identifier with no policy)."""
    policies = []
    for record in records or []:
        policy = record.get("accessPolicy") or {}
        policies.append(
            Policy(str(record["id"]), policy.get("start"), policy.get("expiry"), policy.get("permission"))
        )
    return policies


_SERVICE_FIELDS = (
    "logging", "hourMetrics", "minuteMetrics", "cors", "defaultServiceVersion", "deleteRetentionPolicy",
    "staticWebsite",
)  # fmt: skip


def _piece(record: dict[str, Any] | None) -> Piece | None:
    if not record:
        return None
    return Piece(str(record["id"]), int(record["offset"]), int(record["count"]))


def _time(value: Any) -> datetime:
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value / 1000).astimezone()
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


class Workspace:
    """One Azurite workspace (``azurite --location DIR``), read-only."""

    def __init__(self, location: Path) -> None:
        self.location = location
        if not location.is_dir():
            raise WorkspaceError(f"{location}: no such directory")
        if not any((location / name).exists() for name in (TABLE_DB, QUEUE_DB, BLOB_DB)):
            raise WorkspaceError(f"{location}: no Azurite database files ({TABLE_DB}, {QUEUE_DB}, {BLOB_DB})")
        self._extent_files: dict[str, Path] = {}
        for db, folder in EXTENT_DBS.values():
            for record in _load(location / db).get("$EXTENTS_COLLECTION$", []):
                self._extent_files[str(record["id"])] = (
                    location / folder / str(record.get("path", record["id"]))
                )

    # ------------------------------------------------------------------------------ content

    def read(self, piece: Piece) -> bytes:
        """The bytes of ``piece`` (whole: a message, a block)."""
        return b"".join(self.stream(piece))

    def stream(self, piece: Piece, chunk: int = 4 * 1024 * 1024) -> Iterator[bytes]:
        """The bytes of ``piece`` in chunks, so a large blob is never held whole."""
        path = self._extent_files.get(piece.extent)
        if path is None:
            raise WorkspaceError(
                f"{self.location}: content in extent {piece.extent}, which no database names"
            )
        with open(path, "rb") as handle:
            handle.seek(piece.offset)
            left = piece.count
            while left > 0:
                data = handle.read(min(chunk, left))
                if not data:
                    raise WorkspaceError(f"{path}: ends before offset {piece.offset + piece.count}")
                left -= len(data)
                yield data

    # ------------------------------------------------------------------------------- tables

    def tables(self) -> Iterator[Table]:
        db = _load(self.location / TABLE_DB)
        for record in db.get("$TABLES_COLLECTION$", []):
            account, name = str(record["account"]), str(record["table"])
            entities = []
            for row in db.get(f"{account}${name}", []):
                properties = dict(row.get("properties") or {})
                for key in SERVER_PROPERTIES:
                    properties.pop(key, None)
                for key, kind in list(properties.items()):
                    if kind == "Edm.Guid" and key.endswith("@odata.type"):
                        prop = key[: -len("@odata.type")]
                        properties[prop] = _guid(properties.get(prop))
                properties["PartitionKey"], properties["RowKey"] = row["PartitionKey"], row["RowKey"]
                entities.append(properties)
            entities.sort(key=lambda e: (e["PartitionKey"], e["RowKey"]))
            yield Table(account, name, entities, _policies(record.get("tableAcl")))

    # ----------------------------------------------------------------------- service properties

    def service_settings(self) -> Iterator[ServiceSettings]:
        """Every account's properties of each service that a client set (Azurite keeps a record
        only then)."""
        for service, db in (("blob", BLOB_DB), ("queue", QUEUE_DB), ("table", TABLE_DB)):
            for record in _load(self.location / db).get("$SERVICES_COLLECTION$", []):
                properties = {name: record[name] for name in _SERVICE_FIELDS if record.get(name) is not None}
                if properties:
                    yield ServiceSettings(service, str(record["accountName"]), properties)

    # ------------------------------------------------------------------------------- queues

    def queues(self) -> Iterator[Queue]:
        db = _load(self.location / QUEUE_DB)
        by_queue: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for row in db.get("$MESSAGES_COLLECTION$", []):
            by_queue.setdefault((row["accountName"], row["queueName"]), []).append(row)
        for record in db.get("$QUEUES_COLLECTION$", []):
            account, name = str(record["accountName"]), str(record["name"])
            rows = sorted(
                by_queue.get((account, name), []), key=lambda r: (str(r["insertionTime"]), r["$loki"])
            )
            messages = []
            for row in rows:
                piece = _piece(row.get("persistency")) or Piece("", 0, 0)
                messages.append(
                    Message(
                        piece,
                        _time(row["timeNextVisible"]),
                        _time(row["expirationTime"]),
                        _time(row["insertionTime"]),
                    )
                )
            metadata = dict(record.get("metadata") or {})
            yield Queue(account, name, metadata, messages, _policies(record.get("queueAcl")))

    # -------------------------------------------------------------------------------- blobs

    def containers(self) -> Iterator[Container]:
        db = _load(self.location / BLOB_DB)
        blobs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for row in db.get("$BLOBS_COLLECTION$", []):
            blobs.setdefault((row["accountName"], row["containerName"]), []).append(row)
        staged: dict[tuple[str, str, str], list[Block]] = {}
        for row in sorted(db.get("$BLOCKS_COLLECTION$", []), key=lambda r: r["$loki"]):
            if not row.get("isCommitted"):
                piece = _piece(row.get("persistency"))
                if piece is not None:
                    key = (row["accountName"], row["containerName"], row["blobName"])
                    staged.setdefault(key, []).append(Block(str(row["name"]), piece))
        for record in db.get("$CONTAINERS_COLLECTION$", []):
            account, name = str(record["accountName"]), str(record["name"])
            properties = record.get("properties") or {}
            container = Container(
                account,
                name,
                dict(record.get("metadata") or {}),
                properties.get("publicAccess"),
                [],
                acl=_policies(record.get("containerAcl")),
            )
            for row in sorted(blobs.get((account, name), []), key=lambda r: r["name"]):
                if row.get("deleted"):
                    container.deleted += 1
                elif row.get("snapshot"):
                    container.snapshots += 1
                else:
                    container.blobs.append(self._blob(row, staged.pop((account, name, row["name"]), [])))
            yield container

    @staticmethod
    def _blob(row: dict[str, Any], uncommitted: list[Block]) -> Blob:
        properties = dict(row.get("properties") or {})
        blob = Blob(
            account=row["accountName"],
            container=row["containerName"],
            name=row["name"],
            kind=str(properties.get("blobType", "BlockBlob")),
            size=int(properties.get("contentLength") or 0),
            properties=properties,
            metadata=dict(row.get("metadata") or {}),
            uncommitted=uncommitted,
            whole=_piece(row.get("persistency")),
            is_committed=bool(row.get("isCommitted", True)),
        )
        for block in row.get("committedBlocksInOrder") or []:
            piece = _piece(block.get("persistency"))
            if piece is not None:
                blob.committed.append(Block(str(block.get("name", "")), piece))
        for page in row.get("pageRangesInOrder") or []:
            piece = _piece(page.get("persistency"))
            if piece is not None:
                blob.pages.append((int(page["start"]), piece))
        return blob


_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]=)?")


def _guid(value: Any) -> Any:
    """Azurite stores a Guid's text base64-encoded (so that a plain string search cannot find it)
    and still reads the plain text older versions stored: decoded as it decodes it."""
    if isinstance(value, str) and _BASE64.fullmatch(value):
        try:
            return base64.b64decode(value).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return value
    return value


def content_md5(properties: dict[str, Any]) -> bytes | None:
    """Azurite keeps Content-MD5 as a Node Buffer ({"type": "Buffer", "data": [...]}) or base64."""
    value = properties.get("contentMD5")
    if isinstance(value, dict) and isinstance(value.get("data"), list):
        return bytes(value["data"])
    if isinstance(value, str) and value:
        return base64.b64decode(value)
    return None
