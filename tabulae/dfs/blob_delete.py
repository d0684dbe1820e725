"""Delete Blob of a directory of an HNS account, through the Blob API.

Azure keeps its namespace whole whichever API deletes: an empty directory goes as a blob
would, a directory with children is refused with 409 ``DirectoryIsNotEmpty`` (adlfs, azcopy and
``az storage blob delete-batch`` delete files first and directories deepest first for that
reason). The deletion is Delete Path's, not recursive, so the emptiness check and the removal
are one transaction: a child written meanwhile cannot be left without its parent."""

from __future__ import annotations

from tabulae.blob.api.headers import conditions
from tabulae.blob.rules.leases import parse_lease_id
from tabulae.dfs.service import DataLakeService, is_directory
from tabulae.http.messages import Request, Response
from tabulae.model.blobs import BlobKey
from tabulae.model.errors import ServiceError

# Delete Path's codes for what the Blob API names its own way.
_BLOB_CODES = {
    "DirectoryNotEmpty": "DirectoryIsNotEmpty",
    "PathNotFound": "BlobNotFound",
    "FilesystemNotFound": "ContainerNotFound",
}


def applies(request: Request) -> bool:
    """A plain Delete Blob (no snapshot, version or permanent delete: directories have none)."""
    return request.method == "DELETE" and not request.query.keys() & {"snapshot", "versionid", "deletetype"}


async def delete_directory(dfs: DataLakeService, request: Request, key: BlobKey) -> Response | None:
    """Delete Blob's answer when ``key`` names a directory; None for anything else (a file, a
    missing path), which the Blob API deletes as ever."""
    found = await dfs.store.get_blob(key)
    if found is None or not is_directory(found[0]):
        return None
    headers = request.headers
    lease_id = parse_lease_id(headers.get("x-ms-lease-id") or None, "x-ms-lease-id")
    try:
        done = await dfs.delete(key, False, conditions(headers), lease_id)
    except ServiceError as error:
        code = _BLOB_CODES.get(error.code)
        if code is None:
            raise
        raise ServiceError(code) from None
    if done.deletion_id is None:
        return Response(202, [(b"x-ms-delete-type-permanent", b"true")])
    return Response(
        202, [(b"x-ms-delete-type-permanent", b"false"), (b"x-ms-deletion-id", done.deletion_id.encode())]
    )
