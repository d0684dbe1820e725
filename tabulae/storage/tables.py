"""The Table storage contract: everything the table layer needs from an engine, and nothing more.

A backend stores tables per account and entities clustered by (table, PartitionKey, RowKey)
in the service's ordinal UTF-16 order. It knows nothing of HTTP, OData or ``$filter``: the
table layer hands it key ranges and mutations, and gets rows and ``ServiceError``\\ s back.

Every engine implements it over its one database (``storage/sqlite``, ``storage/postgres``)
and passes the same conformance suite (``tests/storage``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from tabulae.model.entity import StoredEntity
from tabulae.model.errors import ServiceError
from tabulae.model.mutation import Mutation
from tabulae.storage.indexes import IndexEngine, IndexInfo, IndexProbe
from tabulae.storage.scans import Condition, KeyRange, ScanChunk


class TableStore(ABC):
    """A durable, ordered store of tables and entities for many accounts.

    Table names are matched case-insensitively and kept with the case they were created with.
    All methods are coroutines; a backend may run them on the event loop when they cannot block
    for long, and must move slow or blocking work elsewhere.
    """

    @abstractmethod
    async def create_table(self, account: str, name: str) -> None:
        """Create a table. Raises ``TableAlreadyExists`` if one exists under any case. Durable on return."""

    @abstractmethod
    async def delete_table(self, account: str, name: str) -> None:
        """Delete a table and all its entities atomically. Raises ``ResourceNotFound`` if missing."""

    @abstractmethod
    async def get_table(self, account: str, name: str) -> str | None:
        """The table's stored name (original case), or ``None``."""

    @abstractmethod
    async def list_tables(self, account: str, after: str | None, limit: int) -> list[str]:
        """Up to ``limit`` table names ordered by lower-cased name, strictly after ``after``
        (a lower-cased name) when given."""

    @abstractmethod
    async def get_entity(self, account: str, table: str, pk: str, rk: str) -> StoredEntity | None:
        """One entity or ``None``. Raises ``TableNotFound`` when the table does not exist."""

    @abstractmethod
    async def scan(
        self,
        account: str,
        table: str,
        ranges: Sequence[KeyRange],
        after: tuple[str, str] | None,
        limit: int,
    ) -> list[StoredEntity]:
        """Up to ``limit`` entities in key order that lie in any of ``ranges`` (given in key order,
        not overlapping) and, when ``after`` is set, strictly after that composite key.

        Fewer than ``limit`` rows means the ranges are exhausted. Raises ``TableNotFound``.
        """

    async def scan_filtered(
        self,
        account: str,
        table: str,
        ranges: Sequence[KeyRange],
        after: tuple[str, str] | None,
        examine: int,
        want: int,
        condition: Condition,
    ) -> ScanChunk:
        """Read the ranges from ``after`` in key order, at most ``examine`` rows, and return the
        ones that may pass ``condition``; stop early once ``want`` candidates are found (the
        last of them is then ``last_key``). A backend that evaluates the condition in its
        database returns only the rows that pass, and says whether that is exact: it must never
        leave out a row that passes. Raises ``TableNotFound``. This default filters nothing."""
        found = await self.scan(account, table, ranges, after, examine)
        last = (found[-1].pk, found[-1].rk) if found else None
        return ScanChunk(list(found), len(found), last, len(found) < examine, condition is True)

    @abstractmethod
    async def apply(
        self, account: str, table: str, mutations: Sequence[Mutation]
    ) -> list[StoredEntity | None]:
        """Apply mutations as one atomic, durable group, in order.

        All written entities get one Timestamp: the current time, but strictly later than the
        stored Timestamp of every entity the group touches, so each write yields a new ETag.
        Returns, per mutation, the entity as stored (``None`` for DELETE).

        Raises ``TableNotFound``; otherwise the first failing mutation's error tagged with its
        index (``EntityAlreadyExists``, ``ResourceNotFound``, ``UpdateConditionNotSatisfied``,
        or a limit error of a merged result), in which case nothing was applied.
        """

    # Small per-table and per-account documents, stored as opaque bytes (model.policies encodes them).

    @abstractmethod
    async def get_acl(self, account: str, table: str) -> bytes | None:
        """The table's stored access policies, or ``None`` if never set. Raises ``TableNotFound``."""

    @abstractmethod
    async def set_acl(self, account: str, table: str, acl: bytes) -> None:
        """Replace the table's access policies; durable on return. Raises ``TableNotFound``."""

    @abstractmethod
    async def get_service_properties(self, account: str) -> bytes | None:
        """The account's service properties, or ``None`` if never set."""

    @abstractmethod
    async def set_service_properties(self, account: str, properties: bytes) -> None:
        """Replace the account's service properties; durable on return."""

    # Property indexes: beyond Azure (see storage/indexes.py). An engine with them sets
    # ``indexes``; one without answers NotImplemented to the admin calls and plans every query
    # without an index.

    indexes: IndexEngine | None = None

    def _index_engine(self) -> IndexEngine:
        if self.indexes is None:
            raise ServiceError("NotImplemented")
        return self.indexes

    async def create_index(self, account: str, table: str, prop: str, edm_type: str) -> IndexInfo:
        """Declare an index (durably, state ``building``) and return it; adding one that exists
        with the same type returns it unchanged. Raises ``TableNotFound``, or
        ``IndexAlreadyExists`` for another type. :meth:`build_index` makes it usable."""
        return await self._index_engine().create(account, table, prop, edm_type)

    async def build_index(self, account: str, table: str, prop: str) -> IndexInfo:
        """Build a declared index while reads and writes go on; returns once it is ``ready``
        (or ``failed``). Safe to call again for an index that is already ready."""
        return await self._index_engine().build(account, table, prop)

    async def list_indexes(self, account: str, table: str | None) -> list[IndexInfo]:
        """The account's indexes (of one table when named), by table then property."""
        return await self._index_engine().listing(account, table)

    async def drop_index(self, account: str, table: str, prop: str) -> None:
        """Remove an index. Raises ``TableNotFound`` or ``ResourceNotFound``."""
        await self._index_engine().drop(account, table, prop)

    async def ready_indexes(self, account: str, table: str) -> dict[str, str]:
        """Property -> declared Edm type of the table's complete indexes (may be a moment old)."""
        return {} if self.indexes is None else await self.indexes.ready(account, table)

    async def index_scan(
        self,
        account: str,
        table: str,
        probe: IndexProbe,
        ranges: Sequence[KeyRange],
        after: tuple[str, str] | None,
        limit: int,
    ) -> ScanChunk:
        """Up to ``limit`` candidates of ``probe`` in key order, inside ``ranges`` and after
        ``after``; fewer means there are no more. Every entity that has the property with a
        matching value is among them. Raises ``IndexUnavailable`` if the index is gone."""
        return await self._index_engine().scan(account, table, probe, ranges, after, limit)

    async def index_count(
        self, account: str, table: str, probe: IndexProbe, ranges: Sequence[KeyRange], cap: int
    ) -> int:
        """How many candidates ``probe`` has inside ``ranges``, counting at most ``cap`` index
        entries. Raises ``IndexUnavailable``."""
        return await self._index_engine().count(account, table, probe, ranges, cap)
