"""Where the change feed's blobs live and what its two JSON documents say.

Facts from a recording of real Azure (``Azure/azure-sdk-assets``, azure-storage-blob-changefeed
``test_list_changes_with_filter``) and "Change feed support in Azure Blob Storage":

* a segment covers one hour (``intervalSecs`` 3600); its manifest is
  ``idx/segments/YYYY/MM/DD/HH00/meta.json``, a block blob of ``application/json``, with
  ``status`` ``Publishing`` while its hour is open and ``Finalized`` after;
* the manifest's ``chunkFilePaths`` names each shard's folder with the container in front and a
  trailing slash (``$blobchangefeed/log/00/2025/10/06/1900/``); Microsoft's Python reader lists
  the blobs under it and, reading a continuation token, finds a chunk's shard by cutting the last
  ten characters off its name, so chunk names are exactly ``NNNNN.avro``;
* ``meta/segments.json`` holds ``lastConsumable``, the end of the newest finalized segment: the
  Java and .NET readers stop there, the Python one ignores it;
* readers filter segments by the hour in their path, never by the events inside.

Assumed: how Azure spreads blobs over shards (``shardDistFnVersion`` says a function exists, not
which); all events of one blob go to one shard here, so the per-blob order holds.
"""

from __future__ import annotations

import zlib
from datetime import UTC, datetime, timedelta

import orjson

CONTAINER = "$blobchangefeed"
SEGMENTS_PATH = "meta/segments.json"
CHUNK_CONTENT_TYPE = "avro/binary"
MANIFEST_CONTENT_TYPE = "application/json"
SEGMENT_SECONDS = 3600
MAX_CHUNKS = 100_000
MAX_SHARDS = 100


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError("change feed times must be timezone-aware")
    return moment.astimezone(UTC)


def _millis(moment: datetime) -> str:
    """``2025-10-06T19:00:00.000Z``, the form of times in the JSON documents."""
    utc = _utc(moment)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def segment_start(moment: datetime) -> datetime:
    """The start of the hour-long segment that holds an event at ``moment``."""
    return _utc(moment).replace(minute=0, second=0, microsecond=0)


def _hour_folder(begin: datetime) -> str:
    start = segment_start(begin)
    return start.strftime("%Y/%m/%d/%H00")


def segment_path(begin: datetime) -> str:
    """The manifest blob of the segment holding ``begin``."""
    return f"idx/segments/{_hour_folder(begin)}/meta.json"


def shard_prefix(shard: int, begin: datetime) -> str:
    """A shard's folder in a segment, relative to the container, with its trailing slash."""
    if not 0 <= shard < MAX_SHARDS:
        raise ValueError("shard out of range")
    return f"log/{shard:02d}/{_hour_folder(begin)}/"


def chunk_path(shard: int, begin: datetime, index: int = 0) -> str:
    """The ``index``-th chunk of a shard in a segment: ``log/00/2025/10/06/1900/00000.avro``."""
    if not 0 <= index < MAX_CHUNKS:
        raise ValueError("chunk index out of range")
    return f"{shard_prefix(shard, begin)}{index:05d}.avro"


def shard_for(container: str, blob: str, shards: int) -> int:
    """The shard that records every change to one blob (stable across runs and processes)."""
    if not 1 <= shards <= MAX_SHARDS:
        raise ValueError("shard count out of range")
    return zlib.crc32(f"{container}/{blob}".encode()) % shards


def render_segment(
    begin: datetime,
    *,
    shards: int = 1,
    finalized: bool,
    modified: datetime,
    config_etag: str = "0x8d000000000000",
) -> bytes:
    """A segment's manifest (``segment_path(begin)``): its hour, status and shard folders."""
    if not 1 <= shards <= MAX_SHARDS:
        raise ValueError("shard count out of range")
    return orjson.dumps(
        {
            "version": 0,
            "begin": _millis(segment_start(begin)),
            "intervalSecs": SEGMENT_SECONDS,
            "status": "Finalized" if finalized else "Publishing",
            "config": {
                "version": 1,
                "configVersionEtag": config_etag,
                "numShards": shards,
                "recordsFormat": "avro",
                "formatSchemaVersion": 6,
                "shardDistFnVersion": 1,
                "streamAppendType": 3,
            },
            "chunkFilePaths": [f"{CONTAINER}/{shard_prefix(s, begin)}" for s in range(shards)],
            "storageDiagnostics": {"version": 0, "lastModifiedTime": _millis(modified), "data": {}},
        }
    )


def segments_manifest(last_consumable: datetime, *, modified: datetime) -> bytes:
    """``meta/segments.json``: ``lastConsumable`` is the end of the newest finalized segment."""
    return orjson.dumps(
        {
            "version": 0,
            "lastConsumable": _millis(last_consumable),
            "storageDiagnostics": {"version": 0, "lastModifiedTime": _millis(modified), "data": {}},
        }
    )


def segment_end(begin: datetime) -> datetime:
    """Where the segment holding ``begin`` ends: its ``lastConsumable`` once finalized."""
    return segment_start(begin) + timedelta(seconds=SEGMENT_SECONDS)
