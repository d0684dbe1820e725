"""The hierarchical namespace's part of the Blob storage contract: what a rename or a recursive
delete of a DFS path sees and decides inside its transaction (:meth:`BlobStore.rename_path`,
:meth:`BlobStore.delete_tree`; the plans are :mod:`tabulae.storage.blobplan.paths`)."""

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
