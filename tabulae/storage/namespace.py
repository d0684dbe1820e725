"""The hierarchical namespace's part of the Blob storage contract: what a rename or a recursive
delete of a DFS path sees and decides inside its transaction (:meth:`BlobStore.rename_path`,
:meth:`BlobStore.delete_tree`, :meth:`BlobStore.undelete_tree`; the plans are
:mod:`tabulae.storage.blobplan.paths`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tabulae.model.blobs import BlobRecord


@dataclass(slots=True)
class RenameState:
    """What a rename's ``decide`` sees, read (and locked) inside its transaction."""

    source: BlobRecord | None
    destination: BlobRecord | None
    parent: BlobRecord | None  # the destination's parent directory; None for the root or when missing
    destination_has_children: bool
    ticks: int


@dataclass(slots=True)
class RenameWrite:
    """What a rename does: replace the destination (``replace``), then move the source (and with
    ``subtree`` its descendants) to the destination's name, its record becoming ``record``."""

    result: Any = None
    record: BlobRecord | None = None
    replace: bool = False
    subtree: bool = False
    move: bool = True  # False: nothing to do (a file renamed onto itself)


RenameDecide = Callable[[RenameState], RenameWrite]


@dataclass(slots=True)
class TreeState:
    """What a recursive delete's ``decide`` sees: the directory (or file) and whether it has
    descendants."""

    base: BlobRecord | None
    has_children: bool
    ticks: int = 0  # the delete's timestamp (a soft delete's slot is named by it)


@dataclass(slots=True)
class TreeWrite:
    """What a recursive delete does, as its ``decide`` answers (anything else: delete it all).

    ``kept`` soft-deletes instead: the path becomes that record (not committed, its ``snapshot``
    the deleted slot, its deletion time set) and every descendant moves to the same slot as it
    is, so the tree can be restored whole. Otherwise ``limit`` bounds a hard delete to the
    descendants with the ``limit`` greatest names: what remains is still a tree (a path's parent
    is a prefix of it, so sorts before it), and the path itself goes with the last piece."""

    result: Any = None
    kept: BlobRecord | None = None
    limit: int | None = None


@dataclass(slots=True)
class TreeDone:
    """What a recursive delete did: the decision's result, and whether it finished (False: a
    piece was deleted and descendants remain)."""

    result: Any
    finished: bool = True


@dataclass(slots=True)
class UndeleteState:
    """What an undelete's ``decide`` sees: the live path of that name, if any, and the
    soft-deleted record in the slot asked for, if it is there."""

    live: BlobRecord | None
    deleted: BlobRecord | None
    ticks: int
    live_below: bool = False  # a committed path below it (written since, through the Blob API)
