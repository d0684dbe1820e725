"""Undelete Blob of a soft-deleted directory of an HNS account, through the Blob API.

Deleting a directory with soft delete on keeps its whole tree as one deletion (the descendants
move to the deleted directory's slot, :mod:`tabulae.dfs.trash`), and Azure's namespace never
holds a directory's children without it nor a directory without its children: so Undelete
Blob of the directory restores what Undelete Path restores, the directory with every
descendant deleted with it, from its newest kept deletion. Anything else (a file, a blob with
live content, a flat account) is the Blob service's Undelete Blob as ever."""

from __future__ import annotations

from tabulae.dfs import trash
from tabulae.dfs.service import DataLakeService, is_directory
from tabulae.http.messages import Request, Response
from tabulae.model.blobs import DELETED_BASE_PREFIX, BlobKey
from tabulae.model.errors import ServiceError

LIST_STEP = 1000


def applies(request: Request) -> bool:
    """Undelete Blob (``comp=undelete`` on a blob; cheap: no I/O)."""
    return request.method == "PUT" and request.query.get("comp") == "undelete"


async def undelete_directory(dfs: DataLakeService, key: BlobKey) -> Response | None:
    """Undelete Blob's answer when ``key`` has no live record and its newest kept deletion is a
    directory; None otherwise."""
    if await dfs.store.get_blob(key) is not None:
        return None
    listing = await dfs.store.list_blobs(
        key.account, key.container, prefix=key.name, start=(key.name, DELETED_BASE_PREFIX),
        limit=LIST_STEP, snapshots=False, uncommitted=False, deleted=True,
    )  # fmt: skip
    roots = [r for r in listing.records if r.name == key.name and trash.is_deleted_root(r)]
    if not roots:
        return None
    newest = max(roots, key=lambda record: record.snapshot)
    if not is_directory(newest):
        return None
    try:
        await dfs.undelete(key, trash.deletion_id(newest.snapshot))
    except ServiceError as error:
        if error.code == "PathNotFound":  # its retention ran out meanwhile
            raise ServiceError("BlobNotFound") from None
        raise
    return Response(200)
