"""The blob change feed in Azure's own on-disk format, as pure functions from events to bytes.

Azure keeps the change feed as ordinary blobs of the ``$blobchangefeed`` container, and
Microsoft's change feed clients read those blobs, not an API: so the only way for them to work
unchanged against Tabulae is to write the same files. Nothing here does I/O; the store calls
these functions and writes the bytes they return ("Change feed support in Azure Blob Storage";
a recording of real Azure in ``Azure/azure-sdk-assets``,
``python/sdk/storage/azure-storage-blob-changefeed/tests/recordings``).

Layout of the container (one segment an hour, one shard by default)::

    meta/segments.json                            lastConsumable: where readers must stop
    idx/segments/YYYY/MM/DD/HH00/meta.json        a segment's manifest, listing its shards
    log/SS/YYYY/MM/DD/HH00/NNNNN.avro             a shard's chunks: Avro object container files
"""

from tabulae.blob.changefeed.avro import append_to_chunk, read_chunk, render_chunk, sync_marker
from tabulae.blob.changefeed.events import ChangeEvent, account_topic, event_time, sequencer
from tabulae.blob.changefeed.layout import (
    CHUNK_CONTENT_TYPE,
    CONTAINER,
    MANIFEST_CONTENT_TYPE,
    SEGMENTS_PATH,
    chunk_path,
    render_segment,
    segment_path,
    segment_start,
    segments_manifest,
    shard_for,
    shard_prefix,
)

__all__ = [
    "CHUNK_CONTENT_TYPE",
    "CONTAINER",
    "MANIFEST_CONTENT_TYPE",
    "SEGMENTS_PATH",
    "ChangeEvent",
    "account_topic",
    "append_to_chunk",
    "chunk_path",
    "event_time",
    "read_chunk",
    "render_chunk",
    "render_segment",
    "segment_path",
    "segment_start",
    "segments_manifest",
    "sequencer",
    "shard_for",
    "shard_prefix",
    "sync_marker",
]
