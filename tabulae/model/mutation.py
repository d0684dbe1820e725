"""One entity write as the layers hand it down: the handlers build it, storage applies it."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from tabulae.model.edm import Properties


class MutationKind(enum.Enum):
    INSERT = "insert"  # fails with EntityAlreadyExists if present
    REPLACE = "replace"  # Update / Insert Or Replace
    MERGE = "merge"  # Merge / Insert Or Merge
    DELETE = "delete"


@dataclass(slots=True)  # not frozen: built on every request; frozen ones build slower
class Mutation:
    """One write of an atomic group.

    ``if_match``: ``None`` means unconditional (an upsert for REPLACE/MERGE); ``"*"`` means the
    entity must exist; any other value must equal the stored ETag exactly. INSERT ignores it.
    """

    kind: MutationKind
    pk: str
    rk: str
    properties: Properties | None = None
    if_match: str | None = None
