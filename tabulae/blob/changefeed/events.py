"""One change feed record as a value: what the service knows about a change, and its Avro form.

The fields and their spelling follow a record real Azure wrote (the recording named in
``schema.py``): ``subject`` is ``/blobServices/default/containers/<c>/blobs/<b>``, ``topic`` the
account's resource id, ``eventTime`` has seven fractional digits and a ``Z``, ``id`` is a GUID,
``data.sequencer`` is a fixed-width hex string whose order is the order of changes to one blob
(Event Grid's "Azure Blob Storage as an Event Grid source": compare sequencers as strings), and
``data.storageDiagnostics`` is a string map Azure fills with internal ids (``bid``, ``sid``,
``seq``). ``containerVersion`` is set on every event Azure wrote in that recording; the
``blobVersion`` only when versioning is on (assumed from the field being optional).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tabulae.blob.changefeed.schema import APIS, BLOB_TIERS, BLOB_TYPES, EVENT_TYPES, SCHEMA_VERSION

#: The subscription and resource group an emulator's accounts claim: Azure's topic names both.
SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"
RESOURCE_GROUP = "tabulae"


def account_topic(account: str) -> str:
    """The ``topic`` of an account's events: its Azure Resource Manager id."""
    return (
        f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{RESOURCE_GROUP}"
        f"/providers/Microsoft.Storage/storageAccounts/{account}"
    )


def event_time(moment: datetime) -> str:
    """``2025-10-06T19:19:30.9833061Z``: UTC with seven fractional digits, as Azure writes it.

    Python keeps microseconds, so the seventh digit is always 0."""
    if moment.tzinfo is None:
        raise ValueError("event times must be timezone-aware")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "0Z"


def sequencer(number: int) -> str:
    """The 48-hex-digit sequencer Azure writes; string order equals ``number`` order."""
    if not 0 <= number < 16**48:
        raise ValueError("sequencer out of range")
    return f"{number:048X}"


@dataclass(frozen=True, slots=True)
class ChangeEvent:
    """A change to one blob, as the change feed records it.

    ``event_type`` is one of ``schema.EVENT_TYPES`` (``BlobCreated``, ``BlobDeleted``,
    ``BlobPropertiesUpdated``, ``BlobSnapshotCreated``, ``BlobTierChanged``...), ``api`` one of
    ``schema.APIS`` (``PutBlob``, ``PutBlockList``, ``CopyBlob``, ``DeleteBlob``,
    ``SetBlobMetadata``, ``UndeleteBlob``...). ``url`` is the blob's URL as clients address it.
    """

    event_type: str
    api: str
    account: str
    container: str
    blob: str
    time: datetime
    id: str
    request_id: str
    url: str
    sequencer: str
    etag: str = ""
    content_type: str = ""
    content_length: int = 0
    blob_type: str = "BlockBlob"
    client_request_id: str = ""
    container_version: str | None = None
    blob_version: str | None = None
    snapshot: str | None = None
    blob_tier: str | None = None
    previous_info: Mapping[str, str] | None = None
    properties_updated: Mapping[str, tuple[str, str]] | None = None
    tags_updated: Mapping[str, Mapping[str, str]] | None = None
    diagnostics: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for value, allowed, what in (
            (self.event_type, EVENT_TYPES, "event type"),
            (self.api, APIS, "api"),
            (self.blob_type, BLOB_TYPES, "blob type"),
        ):
            if value not in allowed:
                raise ValueError(f"unknown {what}: {value!r}")
        if self.blob_tier is not None and self.blob_tier not in BLOB_TIERS:
            raise ValueError(f"unknown blob tier: {self.blob_tier!r}")
        if self.time.tzinfo is None:
            raise ValueError("event times must be timezone-aware")

    @property
    def subject(self) -> str:
        return f"/blobServices/default/containers/{self.container}/blobs/{self.blob}"

    def record(self) -> dict[str, Any]:
        """The Avro datum, shaped as ``schema.SCHEMA`` and as Microsoft's client returns it."""
        properties = (
            None
            if self.properties_updated is None
            else {k: {"current": cur, "previous": prev} for k, (cur, prev) in self.properties_updated.items()}
        )
        return {
            "schemaVersion": SCHEMA_VERSION,
            "topic": account_topic(self.account),
            "subject": self.subject,
            "eventType": self.event_type,
            "eventTime": event_time(self.time),
            "id": self.id,
            "data": {
                "api": self.api,
                "clientRequestId": self.client_request_id,
                "requestId": self.request_id,
                "etag": self.etag,
                "contentType": self.content_type,
                "contentLength": self.content_length,
                "blobType": self.blob_type,
                "blobVersion": self.blob_version,
                "containerVersion": self.container_version,
                "blobTier": self.blob_tier,
                "url": self.url,
                "sequencer": self.sequencer,
                "previousInfo": None if self.previous_info is None else dict(self.previous_info),
                "snapshot": self.snapshot,
                "blobPropertiesUpdated": properties,
                "asyncOperationInfo": None,
                "blobTagsUpdated": (
                    None if self.tags_updated is None else {k: dict(v) for k, v in self.tags_updated.items()}
                ),
                "restorePointMarker": None,
                "storageDiagnostics": dict(self.diagnostics),
            },
        }
