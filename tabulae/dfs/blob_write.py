"""Blob API writes from a URL (Copy Blob, Copy Blob From URL, Put Blob From URL) on an HNS
account: the namespace refusals answered before the source is read.

The rule itself is :mod:`tabulae.blob.namespace_guard`, checked inside every write's
transaction; a write that copies from a URL reads (and authorises) its source first, so without
this early look a copy below a file would answer the source's trouble (an unreadable source's
401 ``CannotVerifyCopySource``) rather than the namespace's 409. The look reads before the
write: the write's own check is what holds when a concurrent create races it."""

from __future__ import annotations

from tabulae.dfs.paths import ancestors
from tabulae.dfs.service import DataLakeService, is_directory
from tabulae.http.messages import Request
from tabulae.model.blobs import BlobKey
from tabulae.model.errors import ServiceError


def applies(request: Request) -> bool:
    """A Blob API PUT that creates or replaces a blob from a URL (cheap: no I/O)."""
    return (
        request.method == "PUT"
        and "x-ms-copy-source" in request.headers
        and request.query.get("comp") is None
    )


async def check_target(dfs: DataLakeService, key: BlobKey) -> None:
    """Refuse the write when a file stands at an ancestor of ``key`` or ``key`` is a directory
    with children."""
    store = dfs.store
    for name in ancestors(key.name):
        found = await store.get_blob(BlobKey(key.account, key.container, name))
        if found is not None and found[0].committed and not is_directory(found[0]):
            raise ServiceError("PathConflict")
    found = await store.get_blob(key)
    if found is None or not is_directory(found[0]):
        return
    children = await store.list_blobs(
        key.account, key.container, prefix=key.name + "/", start=None, limit=1,
        snapshots=False, uncommitted=True,
    )  # fmt: skip
    if children.records:
        raise ServiceError("DirectoryIsNotEmpty")
