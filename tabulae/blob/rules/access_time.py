"""Last access time tracking ("Optimize costs by automatically managing the data lifecycle",
section on last access time; "Get Blob Properties"; "List Blobs").

With tracking on (an account setting of the management plane), a blob's last access time is
set when the blob is read or written, but at most once in 24 hours: Azure updates it only on
the first access after the previous update was a day old, to keep reads cheap. It is returned as
``x-ms-last-access-time`` (REST 2020-02-10 and later) and as ``<LastAccessTime>`` in listings.

Which operations count is assumed from "read or written": the data reads and writes below;
property, metadata and tag reads do not.
"""

from __future__ import annotations

from datetime import datetime, timedelta

INTERVAL = timedelta(hours=24)

ACCESSES = frozenset(
    {
        "GetBlob",
        "PutBlob",
        "PutBlockList",
        "PutBlobFromUrl",
        "AppendBlock",
        "AppendBlockFromUrl",
        "PutPage",
        "PutPageFromUrl",
        "CopyBlob",
        "CopyBlobFromUrl",
    }
)


def touched(operation: str, last_access: datetime | None, now: datetime, tracking: bool) -> datetime | None:
    """The new last access time after ``operation`` at ``now``, or ``None`` if it stays as is."""
    if not tracking or operation not in ACCESSES:
        return None
    if last_access is not None and now - last_access < INTERVAL:
        return None
    return now
