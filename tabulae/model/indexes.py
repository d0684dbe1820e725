"""Property indexes as users declare and see them: the Edm type families an index may cover,
its states, and the record of one index. A Tabulae extension of the Table service; the admin
endpoint, the service and the stores share these (the engines' SQL is in ``storage/``)."""

from __future__ import annotations

from dataclasses import dataclass

from tabulae.model import edm

FAMILIES: dict[str, str] = {
    edm.STRING: "string",
    edm.INT32: "number",
    edm.INT64: "number",
    edm.DOUBLE: "number",
    edm.BOOLEAN: "boolean",
    edm.DATETIME: "datetime",
    edm.GUID: "guid",
}
"""The Edm types an index may be declared with, and the family each one indexes."""

FAMILY_TYPES: dict[str, frozenset[str]] = {
    family: frozenset(t for t, f in FAMILIES.items() if f == family) for family in set(FAMILIES.values())
}

BUILDING, READY, FAILED = "building", "ready", "failed"


def family_of(edm_type: str) -> str:
    """The family of an index declared with ``edm_type`` (a key of :data:`FAMILIES`)."""
    return FAMILIES[edm_type]


@dataclass(frozen=True, slots=True)
class IndexInfo:
    """One declared index as users see it.

    ``state`` is ``building`` until the engine's index is complete (only then do queries use
    it), ``ready`` after, or ``failed`` (``error`` says why; adding it again retries).
    ``done``/``total`` are entities processed so far and in all, where the engine reports them.
    """

    table: str
    property: str
    edm_type: str
    state: str
    done: int | None = None
    total: int | None = None
    error: str | None = None
