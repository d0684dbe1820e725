"""A hierarchical namespace stays a tree, whichever API writes: the check every blob write of an
HNS account passes inside its transaction.

A directory is a blob with the metadata ``hdi_isfolder=true`` (how Azure shows directories to
the Blob API); anything else committed is a file. Azure's namespace never holds a path below a
file, nor a file with children, so a write that leaves a record at a name is refused:

- 409 ``PathConflict`` when a directory above it is a file (Create Path's answer; a Blob API
  write of ``d/f.txt/g`` over the file ``d/f.txt`` gets it too);
- 409 ``DirectoryIsNotEmpty`` when it leaves a file where names below exist ("This operation is
  not permitted on a non-empty directory.", the answer az CLI, azcopy and Storage Explorer
  users report from the Blob API for a directory with children; no public source shows a Blob
  API overwrite of a directory, so this follows Delete Blob's rule: replacing a directory's
  blob would leave its children without a parent). An empty directory is replaced by the blob,
  as Delete Blob removes an empty directory like a blob.

The write is judged by its effect, as the immutability guard judges it (:mod:`tabulae.blob.
protection`), so Put Blob, Put Block List, Copy Blob, Put Blob From URL and the DFS writes are
all covered. It reads what ``Needs.namespace`` has the store load in the same transaction, after
the store has made writes along one path wait for each other: a create of ``a/b`` and a Put Blob
of ``a`` racing each other end with one of them refused, never with a file that has children.
"""

from __future__ import annotations

from dataclasses import replace

from tabulae.model.blobs import BlobRecord
from tabulae.model.errors import ServiceError
from tabulae.storage.blobs import BlobState, BlobWrite

FOLDER = "hdi_isfolder"


def is_directory(record: BlobRecord) -> bool:
    return any(name.lower() == FOLDER and value.lower() == "true" for name, value in record.metadata.items())


def keep_directory(state: BlobState, write: BlobWrite) -> None:
    """A write that leaves a directory's content alone leaves it a directory.

    Set Blob Metadata replaces the user's metadata, and clients send only their own
    (``az storage fs directory metadata update``, every SDK's ``set_metadata`` on a directory):
    Azure keeps ``hdi_isfolder=true`` and the path a directory (recorded for the .NET Data Lake
    SDK's ``DirectoryClientTests.SetMetadataAsync``: the Get Properties after it shows the new
    metadata, ``x-ms-meta-hdi_isfolder: true`` and ``x-ms-resource-type: directory``). Without
    this the directory became a file, and one with children refused the write
    (``DirectoryIsNotEmpty``). A write that replaces the content (Put Blob, Copy Blob over the
    directory) is judged by :func:`check` as it is.
    """
    before, after = state.base, write.base
    if before is None or after is None or not before.committed or not is_directory(before):
        return
    if (
        is_directory(after)
        or write.content is not None
        or write.append is not None
        or write.pages is not None
    ):
        return
    kept = replace(after, metadata={**after.metadata, FOLDER: "true"})
    if write.result is after:
        write.result = kept
    write.base = kept


def check(state: BlobState, write: BlobWrite) -> None:
    """Refuse ``write`` when it would break the tree (see the module docstring)."""
    record = write.base
    if record is None or not record.committed:
        return
    if any(
        above is not None and above.committed and not is_directory(above) for above in state.ancestors or ()
    ):
        raise ServiceError("PathConflict")
    if state.has_children and not is_directory(record):
        raise ServiceError("DirectoryIsNotEmpty")
