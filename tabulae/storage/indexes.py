"""Property indexes: the part of the Table storage contract that goes beyond Azure.

Azure indexes only (PartitionKey, RowKey). A Tabulae table may opt in to an index on one user
property of one Edm type family, kept by the engine itself (an expression index on the value
extracted from the stored JSON, partial to the one table), so every write keeps it exact in its
own transaction and nothing of ours maintains it.

An index holds a key for each entity whose property has a type of the index's *family*:

=========  ==========================================  ===========================================
family     Edm types indexed                           key order
=========  ==========================================  ===========================================
string     Edm.String                                  code points (UTF-16 order below U+D800)
number     Edm.Int32, Edm.Int64, Edm.Double            numeric (NaN gets no key)
boolean    Edm.Boolean                                 false < true
datetime   Edm.DateTime                                chronological
guid       Edm.Guid                                    lower-case canonical text
=========  ==========================================  ===========================================

The numeric types share one family because a ``$filter`` literal is compared with wider
property types too (an Int32 literal matches Int64 and Double values): an index over one numeric
type alone could never answer a numeric ``eq``. An index lookup returns *candidates*, a superset
of the matches in key order; the exact filter still decides each one, so values of other types
behave exactly as ``$filter`` says.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tabulae.model.indexes import BUILDING, FAILED, FAMILIES, FAMILY_TYPES, READY, IndexInfo, family_of
from tabulae.storage.scans import KeyRange, ScanChunk

__all__ = [
    "BUILDING",
    "FAILED",
    "FAMILIES",
    "FAMILY_TYPES",
    "READY",
    "IndexEngine",
    "IndexInfo",
    "IndexProbe",
    "IndexUnavailable",
    "family_of",
]


@dataclass(frozen=True, slots=True)
class IndexProbe:
    """What to look up in the index on ``property``: the keys of ``points`` (``eq`` literals),
    or, when ``points`` is empty, the keys between ``lower`` and ``upper`` (``None``: open).

    Values are ``(edm_type, value)`` pairs typed as in :mod:`tabulae.model.edm`, each of a type
    whose compatible property types all lie in the index's family. Bounds are inclusive: an
    engine may widen them (numbers by an ulp) and the exact filter runs on what it returns.
    """

    property: str
    index_type: str
    points: tuple[tuple[str, Any], ...] = ()
    lower: tuple[str, Any] | None = None
    upper: tuple[str, Any] | None = None


class IndexUnavailable(Exception):
    """The index a plan chose is gone (dropped, or its table deleted) or not ready: plan again
    without it."""


class IndexEngine(ABC):
    """One engine's property indexes, in its own SQL. A :class:`~tabulae.storage.tables.TableStore`
    that has one hands it every index call (see the contract's methods of the same purpose), so
    an engine declares its SQL here and nothing else."""

    @abstractmethod
    async def create(self, account: str, table: str, prop: str, edm_type: str) -> IndexInfo:
        """See ``TableStore.create_index``."""

    @abstractmethod
    async def build(self, account: str, table: str, prop: str) -> IndexInfo:
        """See ``TableStore.build_index``."""

    @abstractmethod
    async def listing(self, account: str, table: str | None) -> list[IndexInfo]:
        """See ``TableStore.list_indexes``."""

    @abstractmethod
    async def drop(self, account: str, table: str, prop: str) -> None:
        """See ``TableStore.drop_index``."""

    @abstractmethod
    async def ready(self, account: str, table: str) -> dict[str, str]:
        """See ``TableStore.ready_indexes``."""

    @abstractmethod
    async def scan(
        self,
        account: str,
        table: str,
        probe: IndexProbe,
        ranges: Sequence[KeyRange],
        after: tuple[str, str] | None,
        limit: int,
    ) -> ScanChunk:
        """See ``TableStore.index_scan``."""

    @abstractmethod
    async def count(
        self, account: str, table: str, probe: IndexProbe, ranges: Sequence[KeyRange], cap: int
    ) -> int:
        """See ``TableStore.index_count``."""
