"""The part of a blob store that is nothing but its plans: an engine subclasses
:class:`PlannedBlobs`, says how it runs a read and a write and commits staged bytes, and adds what
only it does (content, container ids, garbage collection)."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from typing import Any, TypeVar

from tabulae.model.blobs import BASE, BlobKey, BlobRecord, ContainerRecord, Extent
from tabulae.storage.blob_pages import PageSpan
from tabulae.storage.blobplan import containers, pages, paths, reads, retained, tags, writes
from tabulae.storage.blobplan.reads import At
from tabulae.storage.blobplan.writes import CopyExtent
from tabulae.storage.blobs import (
    NO_NEEDS,
    BlobListing,
    BlobStore,
    ContentsCheck,
    Decide,
    FoundBlob,
    Needs,
    PendingChange,
    Staged,
    TagQuery,
    stored_version,
)
from tabulae.storage.plan import Plan, Sql

T = TypeVar("T")


class PlannedBlobs(BlobStore):
    """The :class:`BlobStore` operations that an engine only runs."""

    @abstractmethod
    async def _read(self, make: Callable[[], Plan[T]], *, snapshot: bool = False) -> T:
        """Run a read; with ``snapshot`` all its statements see one state of the database."""

    @abstractmethod
    async def _write(self, make: Callable[[], Plan[T]]) -> T:
        """Run a write atomically and durably (``make`` may be called again to retry it)."""

    @abstractmethod
    async def _commit(self, make: Callable[[], Plan[tuple[Any, set[str]]]], staged: Staged | None) -> Any:
        """Run a write as :meth:`_write` does, consuming ``staged`` (see :meth:`write_blob`): the
        plan returns the write's result and the refs it named."""

    rekey: str | None = None
    """SQL for a row's distribution key from ``:account``, ``:dcontainer`` and a new name
    (``{name}``), when the engine has one (a rename moves rows between keys)."""

    reinsert = False
    """Whether a row's distribution key is changed by deleting and inserting it (Citus refuses an
    ``UPDATE`` of it)."""

    copy_extent: CopyExtent | None = None
    """How the engine copies an extent to another blob's distribution key, if it has one."""

    def _at(self, key: BlobKey) -> At:
        """How this engine addresses a blob (its distribution key)."""
        return At(key)

    def _container_key(self, account: str, container: str) -> int | None:
        """The distribution key every blob of the container shares, if the engine keeps them
        together (a file system of an account with a hierarchical namespace)."""
        return None

    def _guard(self, account: str, container: str, *, shared: bool) -> Sql | None:
        """A statement a write into (``shared``) or the deletion of a container runs first."""
        return None

    def _path_locks(self, key: BlobKey) -> tuple[Sql, ...]:
        """Statements a namespace write (``Needs.namespace``) runs first so that writes along one
        path never decide side by side; none where one writer runs every write (SQLite)."""
        return ()

    def _namespace(self, key: BlobKey, needs: Needs) -> tuple[tuple[At, ...], tuple[Sql, ...]]:
        if not needs.namespace:
            return (), ()
        parts = key.name.split("/")
        above = tuple(
            self._at(BlobKey(key.account, key.container, "/".join(parts[:depth])))
            for depth in range(1, len(parts))
        )
        return above, self._path_locks(key)

    async def write_blob(
        self, key: BlobKey, decide: Decide, *, needs: Needs = NO_NEEDS, staged: Staged | None = None
    ) -> Any:
        at, guard = self._at(key), self._guard(key.account, key.container, shared=True)
        above, locks = self._namespace(key, needs)
        return await self._commit(
            lambda: writes.write_blob(at, decide, needs, guard=guard, above=above, path_locks=locks), staged
        )

    async def copy_blob(
        self, source: BlobKey, snapshot: str, dest: BlobKey, decide: Decide, *, needs: Needs = NO_NEEDS
    ) -> Any:
        origin = (self._at(source), stored_version(snapshot))
        at, guard = self._at(dest), self._guard(dest.account, dest.container, shared=True)
        above, locks = self._namespace(dest, needs)
        result, _named = await self._write(
            lambda: writes.write_blob(
                at,
                decide,
                needs,
                source=origin,
                guard=guard,
                copy=self.copy_extent,
                above=above,
                path_locks=locks,
            )
        )
        return result

    async def pending_changes(self, limit: int) -> list[PendingChange]:
        return await self._read(lambda: reads.pending_changes(limit))

    async def rename_path(
        self, source: BlobKey, destination: BlobKey, parent: BlobKey | None, decide: paths.RenameDecide
    ) -> Any:
        src, dst = self._at(source), self._at(destination)
        above = self._at(parent) if parent is not None else None
        rekey, reinsert = self.rekey, self.reinsert
        return await self._write(lambda: paths.rename(src, dst, above, decide, rekey, reinsert=reinsert))

    async def delete_tree(self, key: BlobKey, decide: Callable[[paths.TreeState], Any]) -> paths.TreeDone:
        at = self._at(key)
        return await self._write(lambda: paths.delete_tree(at, decide))

    async def undelete_tree(
        self, key: BlobKey, slot: str, decide: Callable[[paths.UndeleteState], BlobRecord]
    ) -> BlobRecord:
        at = self._at(key)
        return await self._write(lambda: paths.undelete_tree(at, slot, decide))

    async def create_container(self, account: str, record: ContainerRecord) -> None:
        """An engine that numbers containers itself; one with ids of its own overrides this."""
        await self._write(lambda: containers.create(account, record, None))

    async def get_container(self, account: str, name: str) -> ContainerRecord | None:
        return await self._read(lambda: containers.get(account, name))

    async def update_container(
        self, account: str, name: str, decide: Callable[[ContainerRecord, int], tuple[ContainerRecord, Any]]
    ) -> Any:
        return await self._write(lambda: containers.update(account, name, decide))

    async def delete_container(
        self,
        account: str,
        name: str,
        check: Callable[[ContainerRecord], None],
        contents: ContentsCheck | None = None,
    ) -> None:
        guard, dkey = self._guard(account, name, shared=False), self._container_key(account, name)
        await self._write(lambda: containers.delete(account, name, check, guard, contents, dkey))

    async def rename_container(
        self,
        account: str,
        name: str,
        new_name: str,
        check: Callable[[ContainerRecord], None],
        contents: ContentsCheck | None = None,
    ) -> None:
        guard = self._guard(account, name, shared=False)
        await self._write(lambda: containers.rename(account, name, new_name, check, guard, contents))

    async def containers_from(self, low: str) -> list[tuple[str, str]]:
        return await self._read(lambda: containers.every_account(low))

    async def list_containers(
        self, account: str, prefix: str, start: str | None, limit: int
    ) -> list[ContainerRecord]:
        return await self._read(lambda: containers.page(account, prefix, start, limit))

    async def get_blob(
        self, key: BlobKey, snapshot: str = BASE, *, content: bool = False
    ) -> tuple[BlobRecord, list[Extent] | None] | None:
        at, version = self._at(key), stored_version(snapshot)
        return await self._read(lambda: reads.committed(at, version, content), snapshot=content)

    async def get_pages(
        self, key: BlobKey, snapshot: str, start: int, end: int
    ) -> tuple[BlobRecord, list[PageSpan]] | None:
        at, version = self._at(key), stored_version(snapshot)
        return await self._read(lambda: pages.version_spans(at, version, start, end), snapshot=True)

    async def deleted_records(
        self, after: tuple[int, str, str] | None, limit: int
    ) -> list[tuple[tuple[int, str, str], BlobKey, BlobRecord]]:
        cid, name, version = after if after is not None else (-1, "", "")
        params = {"c": cid, "name": name, "version": version, "n": limit}
        rows = await self._read(lambda: _rows(Sql(retained.DELETED, params, "all")))
        return [
            ((int(row[0]), row[3], row[4]), BlobKey(row[1], row[2], row[3]), reads.blob_of(row[3:]))
            for row in rows
        ]

    async def list_blocks(self, key: BlobKey) -> tuple[BlobRecord | None, list[Extent], list[Extent]]:
        at = self._at(key)
        return await self._read(lambda: reads.list_blocks(at), snapshot=True)

    async def list_blobs(
        self,
        account: str,
        container: str,
        *,
        prefix: str,
        start: tuple[str, str] | None,
        limit: int,
        snapshots: bool,
        uncommitted: bool,
        versions: bool = False,
        deleted: bool = False,
    ) -> BlobListing:
        return await self._read(
            lambda: reads.list_blobs(
                account, container, prefix, start, limit, snapshots, uncommitted, versions, deleted
            )
        )

    async def find_blobs_by_tags(
        self, account: str, container: str | None, query: TagQuery, after: tuple[str, str] | None, limit: int
    ) -> list[FoundBlob]:
        return await self._read(lambda: tags.find(account, container, query, after, limit))


def _rows(statement: Sql) -> Plan[list[Any]]:
    rows = yield statement
    return list(rows)
