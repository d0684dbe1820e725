"""The Blob store on PostgreSQL, in one SQL dialect that also runs on Citus.

Every operation is a shared plan (:mod:`tabulae.storage.blobplan`) run in a pooled transaction;
this module holds what only PostgreSQL does: content as chunk rows, the distribution key, the
container advisory locks, and the copy of an extent to another blob's shard.

Content is stored in ``blob_chunks`` rows of ``CHUNK_BYTES`` (``bytea``), so front-ends keep no
files and stay stateless. Every row of a blob (its versions, extents, staged blocks, chunks and
garbage) carries ``dkey``, a 64-bit hash of account, container and blob name (for an account with
a hierarchical namespace, of account and container: :mod:`.blob_keys`), which is the
distribution column under Citus: a blob lives on one shard, and every write of one blob is a
single-shard transaction (its ``blob_tags`` index rows too). Containers and service properties
are reference tables.

An upload runs in one transaction from its first chunk to the commit of the record that names
it (:class:`PgStaged` holds its connection), so a front-end that dies mid-upload leaves nothing:
the database rolls the transaction back. The commit step runs in a savepoint and is retried on
conflicts without sending the bytes again. Content of one chunk or less (a Put Page, a block,
a small blob) is held in memory instead and inserted by the write's own transaction. Writes run
in pipeline mode (:mod:`~tabulae.storage.postgres.pipelined`): a round trip per read, and one
for the COMMIT. Reads fetch one chunk per statement, so a download holds no connection between
chunks and never more than one chunk in memory.

Writes lock the blob's current row (``SELECT … FOR UPDATE``), or insert it with ``ON CONFLICT
DO NOTHING`` and start over when a concurrent insert won. A write holds its container's
transaction advisory lock shared, and Delete Container holds it exclusively, so a container
cannot be deleted under a write into it. Not a row lock on ``blob_containers``: that is a Citus
reference table, and Citus serialises row locks on reference tables through shard locks that
two concurrent ``SELECT … FOR SHARE`` take in an order that deadlocks (eight threads staging
blocks into one blob met it tens of thousands of times). The advisory lock is taken by a
statement that reads no table, so it runs on the node the front-ends connect to (the
coordinator), the same node for every front-end. Extents a write stops
referencing become garbage, deleted by :meth:`PostgresBlobs.collect_garbage` after the grace
period (a download that started before may still read them).
"""

from __future__ import annotations

import asyncio
import hashlib
import struct
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from tabulae.model.errors import ServiceError
from tabulae.storage.blobplan import containers, paths, reads
from tabulae.storage.blobplan.garbage import collect
from tabulae.storage.blobplan.reads import At
from tabulae.storage.blobplan.store import PlannedBlobs
from tabulae.storage.blobs import (
    GARBAGE_BATCH,
    GARBAGE_GRACE_SECONDS,
    BlobKey,
    BlobListing,
    ContainerRecord,
    Digest,
    Extent,
    Staged,
    extent_offsets,
)
from tabulae.storage.namespace import RenameDecide
from tabulae.storage.plan import Plan, Sql
from tabulae.storage.postgres.blob_keys import BLOB_DKEY_SQL, BlobKeys
from tabulae.storage.postgres.engine import PostgresDatabase, Schema

if TYPE_CHECKING:
    from tabulae.storage.postgres.engine import Connection

T = TypeVar("T")
CHUNK_BYTES = 4 * 1024 * 1024
MAX_CONTAINER_ID = 2**63 - 1

_STATEMENTS = (
    """
    CREATE TABLE IF NOT EXISTS blob_containers (
        account text COLLATE "C" NOT NULL,
        name text COLLATE "C" NOT NULL,
        id bigint NOT NULL,
        ticks bigint NOT NULL,
        doc bytea NOT NULL,
        CONSTRAINT blob_containers_pkey PRIMARY KEY (account, name),
        CONSTRAINT blob_containers_id_key UNIQUE (id)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS blob_service_properties (
        account text COLLATE "C" NOT NULL,
        properties bytea NOT NULL,
        CONSTRAINT blob_service_properties_pkey PRIMARY KEY (account)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS blob_account_features (
        account text COLLATE "C" NOT NULL,
        properties bytea NOT NULL,
        CONSTRAINT blob_account_features_pkey PRIMARY KEY (account)
    )
    """,
    # How each account's blob rows are keyed (rekeying.py): absent, spread one blob at a time.
    """
    CREATE TABLE IF NOT EXISTS blob_key_modes (
        account text COLLATE "C" NOT NULL,
        colocated boolean NOT NULL,
        settled boolean NOT NULL,
        CONSTRAINT blob_key_modes_pkey PRIMARY KEY (account)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS blobs (
        dkey bigint NOT NULL,
        container_id bigint NOT NULL,
        name text COLLATE "C" NOT NULL,
        version text COLLATE "C" NOT NULL,
        committed boolean NOT NULL,
        ticks bigint NOT NULL,
        size bigint NOT NULL,
        doc bytea NOT NULL,
        staged integer NOT NULL DEFAULT 0,
        staged_id_length integer,
        CONSTRAINT blobs_pkey PRIMARY KEY (dkey, container_id, name, version)
    )
    """,
    "CREATE INDEX IF NOT EXISTS blobs_listing ON blobs (container_id, name, version)",
    """
    CREATE TABLE IF NOT EXISTS blob_extents (
        dkey bigint NOT NULL,
        container_id bigint NOT NULL,
        name text COLLATE "C" NOT NULL,
        version text COLLATE "C" NOT NULL,
        seq integer NOT NULL,
        ref uuid NOT NULL,
        length bigint NOT NULL,
        block_id text,
        CONSTRAINT blob_extents_pkey PRIMARY KEY (dkey, container_id, name, version, seq)
    )
    """,
    "CREATE INDEX IF NOT EXISTS blob_extents_ref ON blob_extents (dkey, ref)",
    "CREATE INDEX IF NOT EXISTS blob_extents_container ON blob_extents (container_id)",
    """
    CREATE TABLE IF NOT EXISTS blob_blocks (
        dkey bigint NOT NULL,
        container_id bigint NOT NULL,
        name text COLLATE "C" NOT NULL,
        block_id text COLLATE "C" NOT NULL,
        seq bigint NOT NULL,
        ref uuid NOT NULL,
        length bigint NOT NULL,
        CONSTRAINT blob_blocks_pkey PRIMARY KEY (dkey, container_id, name, block_id)
    )
    """,
    "CREATE INDEX IF NOT EXISTS blob_blocks_ref ON blob_blocks (dkey, ref)",
    "CREATE INDEX IF NOT EXISTS blob_blocks_container ON blob_blocks (container_id)",
    """
    CREATE TABLE IF NOT EXISTS blob_tags (
        dkey bigint NOT NULL,
        container_id bigint NOT NULL,
        name text COLLATE "C" NOT NULL,
        tag text COLLATE "C" NOT NULL,
        value text COLLATE "C" NOT NULL,
        CONSTRAINT blob_tags_pkey PRIMARY KEY (dkey, container_id, name, tag)
    )
    """,
    "CREATE INDEX IF NOT EXISTS blob_tags_lookup ON blob_tags (tag, value, container_id, name)",
    "CREATE INDEX IF NOT EXISTS blob_tags_container ON blob_tags (container_id)",
    """
    CREATE TABLE IF NOT EXISTS blob_pages (
        dkey bigint NOT NULL,
        container_id bigint NOT NULL,
        name text COLLATE "C" NOT NULL,
        version text COLLATE "C" NOT NULL,
        page_start bigint NOT NULL,
        page_end bigint NOT NULL,
        ref uuid NOT NULL,
        ref_offset bigint NOT NULL,
        cleared boolean NOT NULL,
        CONSTRAINT blob_pages_pkey PRIMARY KEY (dkey, container_id, name, version, page_start)
    )
    """,
    "CREATE INDEX IF NOT EXISTS blob_pages_ref ON blob_pages (dkey, ref)",
    "CREATE INDEX IF NOT EXISTS blob_pages_container ON blob_pages (container_id)",
    """
    CREATE TABLE IF NOT EXISTS blob_chunks (
        dkey bigint NOT NULL,
        ref uuid NOT NULL,
        seq integer NOT NULL,
        data bytea NOT NULL,
        CONSTRAINT blob_chunks_pkey PRIMARY KEY (dkey, ref, seq)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS blob_changes (
        dkey bigint NOT NULL,
        seq bigserial NOT NULL,
        account text COLLATE "C" NOT NULL,
        doc bytea NOT NULL,
        CONSTRAINT blob_changes_pkey PRIMARY KEY (dkey, seq)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS blob_garbage (
        dkey bigint NOT NULL,
        ref uuid NOT NULL,
        dropped timestamptz NOT NULL,
        CONSTRAINT blob_garbage_pkey PRIMARY KEY (dkey, ref)
    )
    """,
)
SCHEMA = Schema(
    _STATEMENTS,
    reference=("blob_containers", "blob_service_properties", "blob_account_features", "blob_key_modes"),
    distributed={
        "blobs": "dkey",
        "blob_extents": "dkey",
        "blob_blocks": "dkey",
        "blob_tags": "dkey",
        "blob_pages": "dkey",
        "blob_chunks": "dkey",
        "blob_garbage": "dkey",
        "blob_changes": "dkey",
    },
)

_DKEY = struct.Struct(">q")


def container_lock(account: str, name: str) -> int:
    """The key of a container's transaction advisory lock: 64 bits of SHA-256 over a tag, the
    account and the name (the tag keeps it apart from any other lock keyed by a hash)."""
    digest = hashlib.sha256(f"blob-container\n{account}\n{name}".encode("utf-8", "surrogatepass"))
    return int(_DKEY.unpack(digest.digest()[:8])[0])


def listing_lock(account: str, name: str) -> int:
    """The key of a container's listing lock on Citus (see :meth:`PostgresBlobs.list_blobs`),
    tagged apart from :func:`container_lock`."""
    digest = hashlib.sha256(f"blob-listing\n{account}\n{name}".encode("utf-8", "surrogatepass"))
    return int(_DKEY.unpack(digest.digest()[:8])[0])


def path_lock(account: str, container: str, name: str) -> int:
    """The key of a namespace path's transaction advisory lock (see
    :meth:`PostgresBlobs._path_locks`), tagged apart from the others."""
    digest = hashlib.sha256(f"blob-path\n{account}\n{container}\n{name}".encode("utf-8", "surrogatepass"))
    return int(_DKEY.unpack(digest.digest()[:8])[0])


def copy_extent(source: int, dkey: int, extent: Extent) -> Plan[Extent]:
    """Copy one extent's chunks to the destination blob's shard, under a new ref."""
    ref = str(uuid.uuid4())
    yield Sql(
        "INSERT INTO blob_chunks (dkey, ref, seq, data) SELECT :dkey, :ref::uuid, seq, data FROM blob_chunks"
        " WHERE dkey = :source AND ref = :old",
        {"dkey": dkey, "ref": ref, "source": source, "old": extent.ref},
    )
    return Extent(ref, extent.length, extent.block_id)


class PgStaged(Staged):
    """Chunks inserted by a transaction still open on ``conn``; the write that names them
    commits that transaction, and anything else rolls it back. Content of one chunk or less
    is not inserted yet (``conn`` is None): ``pending`` holds it, and the write that names it
    inserts it in its own transaction."""

    __slots__ = ("conn", "dkey", "extent", "pending")

    def __init__(self, extent: Extent, conn: Any, dkey: int, pending: bytes | None = None) -> None:
        self.extent = extent
        self.conn: Any = conn
        self.dkey = dkey
        self.pending = pending


_INSERT_CHUNK = "INSERT INTO blob_chunks (dkey, ref, seq, data) VALUES (:dkey, :ref, 0, :data)"


def _after(first: Sql, make: Callable[[], Plan[T]]) -> Plan[T]:
    """``first``, then the plan ``make`` returns."""
    yield first
    return (yield from make())


class PostgresBlobs(PlannedBlobs):
    """The :class:`BlobStore` contract over a :class:`PostgresDatabase`."""

    def __init__(
        self, database: PostgresDatabase, *, citus: bool = False, colocated: frozenset[str] = frozenset()
    ) -> None:
        """``colocated``: the accounts whose containers are each kept on one key (those with a
        hierarchical namespace; :mod:`.blob_keys`)."""
        self._db = database
        self._run = database.run
        self._citus = citus
        self.reinsert = citus
        self.keys = BlobKeys(colocated)

    async def _read(self, make: Callable[[], Plan[T]], *, snapshot: bool = False) -> T:
        return await self._db.run_plan(
            make, idempotent=True, transaction=snapshot, isolation="REPEATABLE READ"
        )

    async def _write(self, make: Callable[[], Plan[T]]) -> T:
        return await self._db.run_plan(make, retry=True, transaction=True, pipeline=True)

    rekey = BLOB_DKEY_SQL  # a flat account's rows that a rename moves (paths.rename)

    async def rename_path(
        self, source: BlobKey, destination: BlobKey, parent: BlobKey | None, decide: RenameDecide
    ) -> Any:
        """As the plan does on PostgreSQL. Citus refuses to update a distribution column, so there
        the rows move by delete and insert in one distributed transaction, which Citus commits on
        every node or on none; but each node's shards make the commit visible at their own
        moment, so the rename holds its containers' listing locks exclusively (see
        :meth:`list_blobs`) until every node has committed. A file system kept on one key needs
        neither: within it a rename is a single-shard transaction that changes names in place."""
        if not self._citus or source.account in self.keys.colocated:
            return await super().rename_path(source, destination, parent, decide)
        src, dst = self._at(source), self._at(destination)
        above = self._at(parent) if parent is not None else None
        guards = tuple(
            Sql("SELECT pg_advisory_xact_lock(:lock)", {"lock": lock})
            for lock in sorted({listing_lock(key.account, key.container) for key in (source, destination)})
        )
        return await self._write(
            lambda: paths.rename(src, dst, above, decide, self.rekey, reinsert=True, guards=guards)
        )

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
        """As the plan does; on Citus under the container's listing lock held shared, since a
        listing reads every shard, each in a snapshot of its own, and would otherwise see a
        rename committed on some nodes and not yet on others (half of each tree). A container
        kept on one key is listed from its shard alone, in one snapshot."""
        dkey = self.keys.container(account, container)
        page = partial(
            reads.list_blobs,
            account,
            container,
            prefix,
            start,
            limit,
            snapshots,
            uncommitted,
            versions,
            deleted,
            dkey,
        )
        if not self._citus or dkey is not None:
            return await self._read(page)
        lock = Sql("SELECT pg_advisory_xact_lock_shared(:lock)", {"lock": listing_lock(account, container)})

        def guarded() -> Plan[BlobListing]:
            yield lock
            return (yield from page())

        return await self._db.run_plan(guarded, idempotent=True, transaction=True)

    def _at(self, key: BlobKey) -> At:
        return self.keys.at(key)

    def _container_key(self, account: str, container: str) -> int | None:
        return self.keys.container(account, container)

    def _guard(self, account: str, container: str, *, shared: bool) -> Sql | None:
        """The container's transaction advisory lock: shared by writes into it, exclusive for its
        deletion, so a container cannot be deleted under a write (see the module docstring)."""
        function = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
        return Sql(f"SELECT {function}(:lock)", {"lock": container_lock(account, container)})

    def _path_locks(self, key: BlobKey) -> tuple[Sql, ...]:
        """A namespace write holds each directory above it shared and its own name exclusively
        (transaction advisory locks, by name: a directory that does not exist yet has no row to
        lock). So a write of ``a`` and one of ``a/b`` take turns, and the second decides over
        what the first committed (a file ``a`` is then a conflict for ``a/b``, and ``a/b`` a
        child that a file ``a`` may not have), while writes below one directory share it. Taken
        outermost first, so two writes never wait on each other in a cycle."""
        parts = key.name.split("/")
        shared = [
            Sql("SELECT pg_advisory_xact_lock_shared(:lock)",
                {"lock": path_lock(key.account, key.container, "/".join(parts[:depth]))})
            for depth in range(1, len(parts))
        ]  # fmt: skip
        own = Sql(
            "SELECT pg_advisory_xact_lock(:lock)", {"lock": path_lock(key.account, key.container, key.name)}
        )
        return (*shared, own)

    async def _commit(self, make: Callable[[], Plan[tuple[Any, set[str]]]], staged: Staged | None) -> Any:
        if staged is None:
            result, _named = await self._write(make)
            return result
        assert isinstance(staged, PgStaged)
        if staged.conn is None:  # small content: inserted by the write's own transaction
            data, staged.pending = staged.pending, None
            if data is None:
                result, _named = await self._write(make)
                return result
            insert = Sql(
                _INSERT_CHUNK, {"dkey": staged.dkey, "ref": uuid.UUID(staged.extent.ref), "data": data}
            )
            result, _named = await self._write(lambda: _after(insert, make))
            return result
        conn, staged.conn = staged.conn, None
        try:
            result, _named = await self._db.commit_in(conn, make)
        except BaseException:
            await self._give_back(conn, commit=False)
            raise
        await self._db.give_back(conn)
        return result

    copy_extent = staticmethod(copy_extent)

    # ------------------------------------------------------------------ containers

    async def create_container(self, account: str, record: ContainerRecord) -> None:
        await self._db.run_with_new_id(partial(containers.create, account, record), limit=MAX_CONTAINER_ID)

    async def get_service_properties(self, account: str) -> bytes | None:
        return await self._db.account_document("blob_service_properties", account)

    async def set_service_properties(self, account: str, properties: bytes) -> None:
        await self._db.set_account_document("blob_service_properties", account, properties)

    async def get_account_features(self, account: str) -> bytes | None:
        return await self._db.account_document("blob_account_features", account)

    async def set_account_features(self, account: str, features: bytes) -> None:
        await self._db.set_account_document("blob_account_features", account, features)

    # ------------------------------------------------------------------ content

    async def stage(self, key: BlobKey, chunks: AsyncIterable[bytes], digest: Digest | None) -> Staged:
        """Content of more than one chunk is inserted chunk by chunk in a transaction of its
        own, left open for the write that names it; up to one chunk is kept in memory instead
        (it was in memory anyway), so that write inserts it with no round trip of its own."""
        dkey = self.keys.of(key)
        ref = uuid.uuid4()
        conn = None
        try:
            piece = bytearray()
            seq = 0
            length = 0
            async for chunk in chunks:
                piece += chunk
                while len(piece) > CHUNK_BYTES:
                    part = bytes(piece[:CHUNK_BYTES])
                    del piece[:CHUNK_BYTES]
                    if conn is None:
                        conn = await self._db.take()
                        await conn.execute("BEGIN")
                    await self._insert_chunk(conn, dkey, ref, seq, part, digest)
                    seq += 1
                    length += len(part)
            if conn is None:
                data = bytes(piece)
                await _see(data, digest)
                return PgStaged(Extent(str(ref), len(data)), None, dkey, data if data else None)
            if piece:
                await self._insert_chunk(conn, dkey, ref, seq, bytes(piece), digest)
                length += len(piece)
        except BaseException:
            if conn is not None:
                await self._give_back(conn, commit=False)
            raise
        return PgStaged(Extent(str(ref), length), conn, dkey)

    async def _insert_chunk(
        self, conn: Any, dkey: int, ref: uuid.UUID, seq: int, data: bytes, digest: Digest | None
    ) -> None:
        """Insert one chunk while the digest's updaters see it on helper threads."""
        hashing = _see(data, digest)
        try:
            await conn.execute(
                "INSERT INTO blob_chunks (dkey, ref, seq, data) VALUES (%s, %s, %s, %b)",
                (dkey, ref, seq, data),
            )
        finally:
            await hashing

    async def _give_back(self, conn: Any, *, commit: bool) -> None:
        try:
            await conn.execute("COMMIT" if commit else "ROLLBACK")
        finally:
            await self._db.give_back(conn)

    async def discard(self, staged: Staged) -> None:
        assert isinstance(staged, PgStaged)
        staged.pending = None
        conn, staged.conn = staged.conn, None
        if conn is not None:
            await self._give_back(conn, commit=False)

    async def read(
        self, key: BlobKey, extents: Sequence[Extent], start: int, end: int
    ) -> AsyncIterator[bytes]:
        dkey = self.keys.of(key)
        for extent, low, high in extent_offsets(extents, start, end):
            position = low
            while position < high:
                seq, offset = divmod(position, CHUNK_BYTES)
                size = min(high - position, CHUNK_BYTES - offset)
                data = await self._chunk(dkey, extent.ref, seq, offset, size)
                if len(data) != size:
                    raise ServiceError("InternalError", detail="blob content is gone")
                position += size
                yield data

    async def _chunk(self, dkey: int, ref: str, seq: int, offset: int, size: int) -> bytes:
        async def run(conn: Connection) -> bytes:
            cursor = conn.cursor(binary=True)
            if offset == 0 and size == CHUNK_BYTES:
                await cursor.execute(
                    "SELECT data FROM blob_chunks WHERE dkey = %s AND ref = %s AND seq = %s", (dkey, ref, seq)
                )
            else:
                await cursor.execute(
                    "SELECT substring(data FROM %s FOR %s) FROM blob_chunks WHERE dkey = %s AND ref = %s"
                    " AND seq = %s",
                    (offset + 1, size, dkey, ref, seq),
                )
            row = await cursor.fetchone()
            return bytes(row[0]) if row else b""

        return await self._run(run, idempotent=True)

    # ------------------------------------------------------------------ blobs

    # ------------------------------------------------------------------ maintenance

    async def collect_garbage(self, grace: float = GARBAGE_GRACE_SECONDS, batch: int = GARBAGE_BATCH) -> int:
        """Delete garbage older than ``grace`` seconds that nothing references again, ``batch``
        rows a transaction (with their chunks) until fewer are left. Several front-ends may run
        this at once: each garbage row is taken (deleted) by one of them. A multi-shard DELETE …
        RETURNING, which Citus runs on every shard after picking the batch."""
        total = 0
        while True:
            taken = await self._db.run_plan(partial(_collect, grace, batch), retry=True, transaction=True)
            total += taken
            if taken < batch:
                return total


SMALL_DIGEST = 64 * 1024  # content hashed on the event loop's thread: a thread's hand-off costs more


def _see(data: bytes, digest: Digest | None) -> asyncio.Future[Any]:
    """Let ``digest`` see ``data``: its light part now, its updaters on helper threads (the
    future they complete), or now too when ``data`` is small."""
    loop = asyncio.get_running_loop()
    if digest is None:
        done = loop.create_future()
        done.set_result(None)
        return done
    light = digest.light()
    if light is not None:
        light(data)
    updaters = digest.updaters()
    if len(data) <= SMALL_DIGEST:
        for update in updaters:
            update(data)
        updaters = ()
    return asyncio.gather(*(loop.run_in_executor(None, update, data) for update in updaters))


def _collect(grace: float, batch: int) -> Plan[int]:
    taken, free = yield from collect(
        "dropped < now() - make_interval(secs => :grace)", {"grace": grace}, batch
    )
    for dkey, ref in free:
        yield Sql("DELETE FROM blob_chunks WHERE dkey = :dkey AND ref = :ref", {"dkey": dkey, "ref": ref})
    return taken
