"""Paths in a hierarchical namespace: what a DFS path is, its parents, what a rename may do,
and in which order the long-running operations (recursive delete, recursive ACL changes) walk
a tree so a continuation can resume them.

A DFS path is the blob name of the same data ("one data set": a file written through DFS reads as
a block blob), so the Blob API's name rules apply unchanged (``blob.rules.names``: 1 to 1,024
characters, fewer than 254 ``/``, no control characters). On top of them, as a namespace of real
directories, and assumed where Azure's answer was not recorded:

- leading and trailing ``/`` are dropped and empty segments collapse (``/a//b/`` is ``a/b``), as
  HDFS paths do; a path that is empty after that names the file system's root;
- ``.`` and ``..`` segments are resolved, as Azure does (the JS SDK's recorded "create directory
  path with directory dots under a dir": ``dir/./a/../b/.././sub`` is ``dir/sub``, and a ``..``
  may climb to the root); one that would climb above the root is refused with 400
  ``InvalidResourceName`` (assumed: not recorded).

Rename ("Path - Create" with ``x-ms-rename-source``; codes from the DFS REST reference's list,
the overwrite of an existing file from the .NET SDK's live test ``RenameAsync_DestinationConditions``):
a missing source is 404 ``SourcePathNotFound``; a missing destination parent 404
``RenameDestinationParentPathNotFound``; a destination inside the source directory, or the
source directory itself, 409 ``InvalidRenameSourcePath``; a destination of the other type 409
``InvalidSourceOrDestinationResourceType``; a file replaces an existing file; a directory
replaces an empty directory, also in another file system of the account (the python SDK's live
``test_rename_to_an_existing_directory_in_another_file_system``), and a non-empty one is refused
(its ``test_rename_directory_to_non_empty_directory`` is skipped because Azure refuses it; the
code, 409 ``DirectoryNotEmpty`` as POSIX's ENOTEMPTY, is assumed); a file in the way of a
destination's parent chain is 409 ``InvalidDestinationPath``. Renaming a file onto itself
changes nothing (assumed, as HDFS).

A directory is at most 60 segments deep: creating one at segment 61 is 409 ``PathIsTooDeep``
(the Go SDK's recording ``go/sdk/storage/azdatalake/testdata/recordings/Test/
TestCreateDirWithPathTooDeep.json``, x-ms-version 2026-02-06, creates ``seg1`` to ``seg60`` one
by one and is refused at ``seg61``). Whether a file, a rename or a Blob API write that deep is
refused too is not recorded; only Create Path of a directory checks it.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import parse_qsl

from tabulae.blob.rules.names import check_blob_name
from tabulae.http.addressing import decode_segments
from tabulae.model.errors import ServiceError

_INVALID_NAME = "The specified resource name contains invalid characters."


def normalize(path: str) -> str:
    """The canonical form of a DFS path (see the module docstring); ``""`` is the root. Raises
    the Blob API's name errors and 400 ``InvalidResourceName`` for a ``..`` above the root."""
    segments: list[str] = []
    for segment in path.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if not segments:
                raise ServiceError("InvalidResourceName", _INVALID_NAME)
            segments.pop()
        else:
            segments.append(segment)
    canonical = "/".join(segments)
    if canonical:
        check_blob_name(canonical)
    return canonical


MAX_DIRECTORY_DEPTH = 60


def check_directory_depth(path: str) -> None:
    """409 ``PathIsTooDeep`` for a directory (canonical path) deeper than Azure makes one."""
    if path.count("/") >= MAX_DIRECTORY_DEPTH:
        raise ServiceError("PathIsTooDeep")


def parent(path: str) -> str:
    """The parent directory of a canonical path; ``""`` (the root) for a top-level one."""
    return path.rpartition("/")[0]


def basename(path: str) -> str:
    return path.rpartition("/")[2]


def ancestors(path: str) -> list[str]:
    """Every directory above a canonical path, outermost first, the root left out:
    ``a/b/c`` -> ``["a", "a/b"]``. Create Path makes the missing ones; an access check wants X on
    each."""
    segments = path.split("/")
    return ["/".join(segments[:depth]) for depth in range(1, len(segments))]


def depth(path: str) -> int:
    return path.count("/") + 1 if path else 0


def is_within(path: str, directory: str) -> bool:
    """Whether ``path`` is ``directory`` itself or below it (the root holds everything)."""
    return not directory or path == directory or path.startswith(directory + "/")


def relocate(path: str, source: str, destination: str) -> str:
    """Where ``path`` (``source`` or a descendant of it) lands when ``source`` is renamed to
    ``destination``: a directory rename moves its whole subtree by changing this prefix only."""
    if path == source:
        return destination
    if not path.startswith(source + "/"):
        raise ValueError(f"{path!r} is not within {source!r}")
    return destination + path[len(source) :]


def listing_key(path: str) -> tuple[str, ...]:
    """The order of a recursive List Paths: each directory followed by its subtree, siblings by
    name (recorded: ``dir10``, ``dir10/subdir``, ``dir10/subdir/file``, ``dir10/subdir/subsub``,
    ``dir11``). Comparing segment tuples differs from comparing whole names only for names with
    characters below ``/`` (``a-b`` against ``a/c``), where the tree order is assumed."""
    return tuple(path.split("/"))


# --- x-ms-rename-source ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RenameSource:
    filesystem: str
    path: str  # canonical
    sas: dict[str, str]  # the source's SAS fields, form-decoded; empty without one


def parse_rename_source(value: str) -> RenameSource:
    """``x-ms-rename-source: /{filesystem}/{path}[?{sas}]``, percent-encoded ("Path - Create").
    The SDK appends its own SAS token (re-encoded, ``:`` as ``%3A``) when the client holds one:
    its fields come back form-decoded for the caller to verify against the source. A value
    without a file system and a path, or not UTF-8 once decoded, is 400 ``InvalidSourceUri``."""
    location, _, query = value.partition("?")
    try:
        if not location.isascii():
            raise ValueError(value)
        segments = decode_segments(location.removeprefix("/"))
        sas = dict(parse_qsl(query, keep_blank_values=True, errors="strict")) if query else {}
    except (ServiceError, UnicodeDecodeError, ValueError) as exc:
        raise ServiceError("InvalidSourceUri") from exc
    filesystem, rest = segments[0], "/".join(segments[1:])
    if not filesystem or not rest.strip("/"):
        raise ServiceError("InvalidSourceUri")
    return RenameSource(filesystem, normalize(rest), sas)


# --- rename rules ------------------------------------------------------------------------------


class Kind(enum.Enum):
    FILE = "file"
    DIRECTORY = "directory"


class RenameEffect(enum.Enum):
    MOVE = "move"  # the destination did not exist
    REPLACE = "replace"  # an existing file, or an empty directory, is replaced
    NOTHING = "nothing"  # a file renamed onto itself


@dataclass(frozen=True, slots=True)
class Existing:
    """What a rename finds at a path: its kind and, for a directory, whether it has children."""

    kind: Kind
    has_children: bool = False


def check_rename(
    source_filesystem: str,
    source: str,
    source_found: Existing | None,
    destination_filesystem: str,
    destination: str,
    destination_found: Existing | None,
    destination_parent: Existing | None,
) -> RenameEffect:
    """Decide a rename from what the store found, inside the transaction that will apply it
    (module docstring). ``destination_parent`` is what is at the destination's parent path; None
    when nothing is there (the root always exists: pass a directory)."""
    if source_found is None:
        raise ServiceError("SourcePathNotFound")
    same_filesystem = source_filesystem == destination_filesystem
    if same_filesystem and source_found.kind is Kind.DIRECTORY and is_within(destination, source):
        raise ServiceError("InvalidRenameSourcePath")
    if same_filesystem and source == destination:
        return RenameEffect.NOTHING
    if destination_parent is None:
        raise ServiceError("RenameDestinationParentPathNotFound")
    if destination_parent.kind is not Kind.DIRECTORY:
        raise ServiceError("InvalidDestinationPath")
    if destination_found is None:
        return RenameEffect.MOVE
    if destination_found.kind is not source_found.kind:
        raise ServiceError("InvalidSourceOrDestinationResourceType")
    if destination_found.kind is Kind.DIRECTORY and destination_found.has_children:
        raise ServiceError("DirectoryNotEmpty")
    return RenameEffect.REPLACE


def check_create(kind: Kind, found: Existing | None, blocking_ancestor: bool) -> bool:
    """Create Path over what is there: whether it creates (True) or finds the directory already
    made (False: Create Directory is idempotent and a file is overwritten, which the caller does
    as a write). An ancestor that is a file, or an existing path of the other kind, is 409
    ``PathConflict`` (the reference's message for both; assumed)."""
    if blocking_ancestor:
        raise ServiceError("PathConflict")
    if found is None:
        return True
    if found.kind is not kind:
        raise ServiceError("PathConflict")
    return kind is Kind.FILE


def check_delete(found: Existing | None, recursive: bool | None) -> None:
    """Delete Path: 404 ``PathNotFound``; a non-empty directory without ``recursive=true`` is 409
    ``DirectoryNotEmpty`` ("Path - Delete"; the SDK always sends ``recursive=true`` for
    directories and nothing for files, captured)."""
    if found is None:
        raise ServiceError("PathNotFound")
    if found.kind is Kind.DIRECTORY and found.has_children and not recursive:
        raise ServiceError("DirectoryNotEmpty")


# --- walking a tree in pieces ------------------------------------------------------------------


def delete_order(paths: Iterable[str]) -> list[str]:
    """Children before their parents (deepest first, then in listing order), so a recursive
    delete cut short between two pieces leaves a tree, never an orphan."""
    return sorted(paths, key=lambda path: (-depth(path), listing_key(path)))


@dataclass(frozen=True, slots=True)
class Piece:
    """One invocation's share of a long operation: the paths to do now, and where the next
    invocation resumes (None: this piece finishes the operation)."""

    paths: tuple[str, ...]
    resume_after: str | None


def next_piece(ordered: Sequence[str], after: str | None, limit: int) -> Piece:
    """The next ``limit`` paths of ``ordered`` (a walk in :func:`listing_key` order: Set Access
    Control Recursive with ``maxRecords`` and its continuation) after the path ``after`` (None:
    from the start). Paths are compared by key, so one added or removed between two pieces
    neither repeats nor hides the others."""
    if limit < 1:
        raise ValueError("limit must be positive")
    start = 0
    if after is not None:
        mark = listing_key(after)
        start = next((index for index, path in enumerate(ordered) if listing_key(path) > mark), len(ordered))
    chunk = tuple(ordered[start : start + limit])
    more = start + limit < len(ordered)
    return Piece(chunk, chunk[-1] if more and chunk else None)


def delete_piece(remaining: Iterable[str], limit: int) -> Piece:
    """The next piece of a recursive delete: the ``limit`` deepest of the paths still under the
    directory (what was deleted is gone, so no position is needed); ``resume_after`` is the
    last path of the piece while more remain, for the continuation token."""
    if limit < 1:
        raise ValueError("limit must be positive")
    ordered = delete_order(remaining)
    chunk = tuple(ordered[:limit])
    return Piece(chunk, chunk[-1] if len(ordered) > limit else None)
