"""Blob API writes that create a blob (Put Blob, Put Block List, Copy Blob, Put Blob From URL)
on an HNS account: the namespace checks made before anything is stored.

Azure's namespace never holds a path below a file, nor a file with children: a write of
``d/f.txt/g`` when ``d/f.txt`` is a file is 409 ``PathConflict`` (Create Path's answer, which
the parents made for the blob would hit anyway), and a write over a directory that has children
is 409 ``DirectoryIsNotEmpty`` ("This operation is not permitted on a non-empty directory.", the
answer az CLI, azcopy and Storage Explorer users report from the Blob API for a directory with
children; no public source shows a Blob API overwrite of a directory, so this follows Delete
Blob's rule: replacing a directory's blob would leave its children without a parent). An empty
directory is replaced by the blob, as Delete Blob removes an empty directory like a blob.

The checks read before the write: a file created at an ancestor between the check and the write
still makes the parents' creation fail afterwards (the old order's ``PathConflict``)."""

from __future__ import annotations

from tabulae.dfs.paths import ancestors
from tabulae.dfs.service import DataLakeService, is_directory
from tabulae.http.messages import Request
from tabulae.model.blobs import BlobKey
from tabulae.model.errors import ServiceError

# The comp values of the Blob API's PUTs that create or replace a blob (None: Put Blob, Copy
# Blob, Put Blob From URL).
_CREATING = (None, "blocklist")


def applies(request: Request) -> bool:
    """A Blob API PUT that creates or replaces a blob (cheap: no I/O)."""
    return request.method == "PUT" and request.query.get("comp") in _CREATING


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
