"""What a scan of a table is made of, in storage's terms: key ranges, the row condition pushed
down to the engine (a ``$filter`` residual without the ``$filter``), and a chunk of scanned rows.

Both the table contract (:mod:`.tables`) and the property indexes (:mod:`.indexes`) speak it, so
it stands on its own and neither imports the other for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tabulae.model.entity import StoredEntity


@dataclass(frozen=True, slots=True)
class KeyBound:
    """One end of a key range.

    With ``rk`` set the bound is the composite key ``(pk, rk)``. With ``rk`` None it is the edge
    of partition ``pk`` as a whole: an inclusive lower bound starts at the partition's first row,
    an exclusive lower bound starts after its last row; likewise for upper bounds.
    """

    pk: str
    rk: str | None
    inclusive: bool


@dataclass(frozen=True, slots=True)
class KeyRange:
    """A contiguous range of composite keys; ``None`` ends are open."""

    lower: KeyBound | None = None
    upper: KeyBound | None = None


FULL_RANGE = KeyRange()


NULL = "Null"
"""The ``edm_type`` of a :class:`PropertyTest` against ``null`` (its ``value`` is ``None``)."""

SYSTEM_NAMES = ("PartitionKey", "RowKey", "Timestamp")


@dataclass(frozen=True, slots=True)
class PropertyTest:
    """``name op literal``, with the comparison rules of the ``$filter`` language.

    ``name`` is a user property or one of the system values (PartitionKey and RowKey compare
    as Edm.String in UTF-16 order, Timestamp as Edm.DateTime ticks). A missing property fails
    every test; a literal of another type fails ``eq``, ``gt`` and ``ge`` and passes ``ne``,
    ``lt`` and ``le`` (after Int32→Int64→Double widening, never narrowing); against ``null``
    (``edm_type`` :data:`NULL`) ``eq`` means missing, ``ne`` present and the order operators
    are false. ``edm_type``/``value`` are typed as in :mod:`tabulae.model.edm`."""

    name: str
    op: str  # eq ne gt ge lt le
    edm_type: str
    value: Any


@dataclass(frozen=True, slots=True)
class AllOf:
    """Every part holds."""

    parts: tuple[Condition, ...]


@dataclass(frozen=True, slots=True)
class AnyOf:
    """At least one part holds."""

    parts: tuple[Condition, ...]


@dataclass(frozen=True, slots=True)
class Negation:
    """The part does not hold (a failed comparison, a missing property included, negates to true)."""

    part: Condition


Condition = PropertyTest | AllOf | AnyOf | Negation | bool
"""A row condition in storage's terms: a ``$filter`` residual without the ``$filter``."""


@dataclass(slots=True)
class ScanChunk:
    """What :meth:`TableStore.scan_filtered` found.

    ``rows`` are the candidates in key order: rows that may pass the condition (exactly those
    that pass when ``exact``). ``examined`` counts the rows of the ranges read to find them,
    ``last_key`` is the key of the last row examined (resume strictly after it) and
    ``exhausted`` says the ranges hold nothing after it.
    """

    rows: list[StoredEntity]
    examined: int
    last_key: tuple[str, str] | None
    exhausted: bool
    exact: bool
