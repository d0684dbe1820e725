"""The Blob store on PostgreSQL, in one SQL dialect that also runs on Citus.

Content is stored in ``blob_chunks`` rows of ``CHUNK_BYTES`` (``bytea``), so front-ends keep no
files and stay stateless. Every row of a blob (its versions, extents, staged blocks, chunks and
garbage) carries ``dkey``, a 64-bit hash of account, container and blob name, which is the
distribution column under Citus: a blob lives on one shard, and every write of one blob is a
single-shard transaction. Containers and service properties are reference tables.

An upload runs in one transaction from its first chunk to the commit of the record that names
it (:class:`PgStaged` holds its connection), so a front-end that dies mid-upload leaves nothing:
the database rolls the transaction back. The commit step runs in a savepoint and is retried on
conflicts without sending the bytes again. Reads fetch one chunk per statement, so a download
holds no connection between chunks and never more than one chunk in memory.

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
import random
import secrets
import struct
import time
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import errors as pg_errors

from tabulae.model.errors import TableError
from tabulae.storage.blobs import (
    BASE,
    GARBAGE_GRACE_SECONDS,
    NO_NEEDS,
    STORED_BASE,
    BlobKey,
    BlobListing,
    BlobRecord,
    BlobState,
    BlobStore,
    BlobWrite,
    ContainerRecord,
    Decide,
    Digest,
    Extent,
    Needs,
    Staged,
    container_missing,
    decode_blob,
    decode_container,
    encode_blob,
    encode_container,
    extent_offsets,
    listing_start,
    next_ticks,
    prefix_end,
    stored_version,
)
from tabulae.storage.postgres.engine import MAX_ATTEMPTS, PostgresDatabase, Restart, Schema, database_error

if TYPE_CHECKING:
    from tabulae.storage.postgres.engine import Connection

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
    CREATE TABLE IF NOT EXISTS blob_chunks (
        dkey bigint NOT NULL,
        ref uuid NOT NULL,
        seq integer NOT NULL,
        data bytea NOT NULL,
        CONSTRAINT blob_chunks_pkey PRIMARY KEY (dkey, ref, seq)
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
    reference=("blob_containers", "blob_service_properties"),
    distributed={
        "blobs": "dkey",
        "blob_extents": "dkey",
        "blob_blocks": "dkey",
        "blob_chunks": "dkey",
        "blob_garbage": "dkey",
    },
)

_DKEY = struct.Struct(">q")
_BLOB_COLUMNS = "name, version, ticks, size, committed, doc"
_B_COLUMNS = "b.name, b.version, b.ticks, b.size, b.committed, b.doc"
_REFERENCED = (
    "SELECT EXISTS (SELECT 1 FROM blob_extents WHERE dkey = %(d)s AND ref = %(r)s)"
    " OR EXISTS (SELECT 1 FROM blob_blocks WHERE dkey = %(d)s AND ref = %(r)s)"
)


def dkey_of(key: BlobKey) -> int:
    """The distribution key of a blob: 64 bits of SHA-256 over account, container and name."""
    digest = hashlib.sha256(f"{key.account}\n{key.container}\n{key.name}".encode("utf-8", "surrogatepass"))
    return int(_DKEY.unpack(digest.digest()[:8])[0])


def container_lock(account: str, name: str) -> int:
    """The key of a container's transaction advisory lock: 64 bits of SHA-256 over a tag, the
    account and the name (the tag keeps it apart from any other lock keyed by a hash)."""
    digest = hashlib.sha256(f"blob-container\n{account}\n{name}".encode("utf-8", "surrogatepass"))
    return int(_DKEY.unpack(digest.digest()[:8])[0])


def _row_to_blob(row: Sequence[Any]) -> BlobRecord:
    name, version, ticks, size, committed, doc = row
    return decode_blob(name, version, ticks, size, committed, bytes(doc))


class PgStaged(Staged):
    """Chunks inserted by a transaction still open on ``conn``; the write that names them
    commits that transaction, and anything else rolls it back."""

    __slots__ = ("conn", "dkey", "extent")

    def __init__(self, extent: Extent, conn: Any, dkey: int) -> None:
        self.extent = extent
        self.conn: Any = conn
        self.dkey = dkey


class PostgresBlobs(BlobStore):
    """The :class:`BlobStore` contract over a :class:`PostgresDatabase`."""

    def __init__(self, database: PostgresDatabase) -> None:
        self._db = database
        self._run = database.run

    # ------------------------------------------------------------------ containers

    async def _container_id(self, conn: Connection, account: str, name: str, *, share: bool = False) -> int:
        """The container's id; with ``share``, first its lock shared (held to the end of the
        transaction), so it is read after any Delete Container that held the lock committed."""
        if share:
            await conn.execute("SELECT pg_advisory_xact_lock_shared(%s)", (container_lock(account, name),))
        sql = "SELECT id FROM blob_containers WHERE account = %s AND name = %s"
        row = await (await conn.execute(sql, (account, name))).fetchone()
        if row is None:
            raise container_missing()
        return int(row[0])

    async def create_container(self, account: str, record: ContainerRecord) -> None:
        async def run(conn: Connection) -> None:
            for _ in range(3):
                try:
                    cursor = await conn.execute(
                        "INSERT INTO blob_containers (account, name, id, ticks, doc)"
                        " VALUES (%s, %s, %s, %s, %b)"
                        " ON CONFLICT (account, name) DO NOTHING",
                        (account, record.name, secrets.randbelow(MAX_CONTAINER_ID) + 1, record.ticks,
                         encode_container(record)),
                    )  # fmt: skip
                except pg_errors.UniqueViolation:
                    continue  # a random id met an existing one: draw again
                if cursor.rowcount == 0:
                    raise TableError("ContainerAlreadyExists")
                return
            raise TableError("InternalError", detail="could not draw a free container id")

        await self._run(run)

    async def get_container(self, account: str, name: str) -> ContainerRecord | None:
        async def run(conn: Connection) -> ContainerRecord | None:
            cursor = await conn.execute(
                "SELECT ticks, doc FROM blob_containers WHERE account = %s AND name = %s", (account, name)
            )
            row = await cursor.fetchone()
            return decode_container(name, row[0], bytes(row[1])) if row else None

        return await self._run(run, idempotent=True)

    async def update_container(
        self, account: str, name: str, decide: Callable[[ContainerRecord, int], tuple[ContainerRecord, Any]]
    ) -> Any:
        async def run(conn: Connection) -> Any:
            async with conn.transaction():
                cursor = await conn.execute(
                    "SELECT ticks, doc FROM blob_containers WHERE account = %s AND name = %s FOR UPDATE",
                    (account, name),
                )
                row = await cursor.fetchone()
                if row is None:
                    raise container_missing()
                record, result = decide(decode_container(name, row[0], bytes(row[1])), next_ticks(row[0]))
                await conn.execute(
                    "UPDATE blob_containers SET ticks = %s, doc = %b WHERE account = %s AND name = %s",
                    (record.ticks, encode_container(record), account, name),
                )
                return result

        return await self._run(run, retry=True)

    async def delete_container(
        self, account: str, name: str, check: Callable[[ContainerRecord], None]
    ) -> None:
        async def run(conn: Connection) -> None:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (container_lock(account, name),))
                cursor = await conn.execute(
                    "SELECT id, ticks, doc FROM blob_containers WHERE account = %s AND name = %s FOR UPDATE",
                    (account, name),
                )
                row = await cursor.fetchone()
                if row is None:
                    raise container_missing()
                check(decode_container(name, row[1], bytes(row[2])))
                cid = row[0]
                await conn.execute(
                    "INSERT INTO blob_garbage (dkey, ref, dropped)"
                    " SELECT dkey, ref, now() FROM blob_extents WHERE container_id = %(c)s"
                    " UNION SELECT dkey, ref, now() FROM blob_blocks WHERE container_id = %(c)s"
                    " ON CONFLICT (dkey, ref) DO UPDATE SET dropped = excluded.dropped",
                    {"c": cid},
                )
                for table in ("blob_extents", "blob_blocks", "blobs"):
                    await conn.execute(f"DELETE FROM {table} WHERE container_id = %s", (cid,))
                await conn.execute("DELETE FROM blob_containers WHERE id = %s", (cid,))

        await self._run(run, retry=True)

    async def list_containers(
        self, account: str, prefix: str, start: str | None, limit: int
    ) -> list[ContainerRecord]:
        sql = "SELECT name, ticks, doc FROM blob_containers WHERE account = %s AND name >= %s"
        args: list[Any] = [account, max(prefix, start or "")]
        if prefix:
            sql += " AND name < %s"
            args.append(prefix_end(prefix))

        async def run(conn: Connection) -> list[ContainerRecord]:
            cursor = await conn.execute(sql + " ORDER BY name LIMIT %s", (*args, limit))
            return [decode_container(r[0], r[1], bytes(r[2])) for r in await cursor.fetchall()]

        return await self._run(run, idempotent=True)

    async def get_service_properties(self, account: str) -> bytes | None:
        return await self._db.account_document("blob_service_properties", account)

    async def set_service_properties(self, account: str, properties: bytes) -> None:
        await self._db.set_account_document("blob_service_properties", account, properties)

    # ------------------------------------------------------------------ content

    async def stage(self, key: BlobKey, chunks: AsyncIterable[bytes], digest: Digest | None) -> Staged:
        dkey = dkey_of(key)
        ref = uuid.uuid4()
        try:
            conn = await self._db.pool.getconn()
        except psycopg.Error as exc:
            raise database_error(exc) from exc
        try:
            await conn.execute("BEGIN")
            piece = bytearray()
            seq = 0
            length = 0
            async for chunk in chunks:
                piece += chunk
                while len(piece) >= CHUNK_BYTES:
                    part = bytes(piece[:CHUNK_BYTES])
                    del piece[:CHUNK_BYTES]
                    await self._insert_chunk(conn, dkey, ref, seq, part, digest)
                    seq += 1
                    length += len(part)
            if piece:
                await self._insert_chunk(conn, dkey, ref, seq, bytes(piece), digest)
                length += len(piece)
        except BaseException:
            await self._give_back(conn, commit=False)
            raise
        return PgStaged(Extent(str(ref), length), conn, dkey)

    async def _insert_chunk(
        self, conn: Any, dkey: int, ref: uuid.UUID, seq: int, data: bytes, digest: Digest | None
    ) -> None:
        """Insert one chunk while the digest's updaters see it on helper threads."""
        loop = asyncio.get_running_loop()
        updaters = digest.updaters() if digest is not None else ()
        hashing = asyncio.gather(*(loop.run_in_executor(None, update, data) for update in updaters))
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
            await self._db.pool.putconn(conn)

    async def discard(self, staged: Staged) -> None:
        assert isinstance(staged, PgStaged)
        conn, staged.conn = staged.conn, None
        if conn is not None:
            await self._give_back(conn, commit=False)

    async def read(
        self, key: BlobKey, extents: Sequence[Extent], start: int, end: int
    ) -> AsyncIterator[bytes]:
        dkey = dkey_of(key)
        for extent, low, high in extent_offsets(extents, start, end):
            position = low
            while position < high:
                seq, offset = divmod(position, CHUNK_BYTES)
                size = min(high - position, CHUNK_BYTES - offset)
                data = await self._chunk(dkey, extent.ref, seq, offset, size)
                if len(data) != size:
                    raise TableError("InternalError", detail="blob content is gone")
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

    async def get_blob(
        self, key: BlobKey, snapshot: str = BASE, *, content: bool = False
    ) -> tuple[BlobRecord, list[Extent] | None] | None:
        dkey = dkey_of(key)
        version = stored_version(snapshot)

        async def run(conn: Connection) -> tuple[BlobRecord, list[Extent] | None] | None:
            async with conn.transaction():
                if content:
                    await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                cursor = await conn.execute(
                    f"SELECT b.container_id, {_B_COLUMNS}"
                    " FROM blobs b WHERE b.dkey = %s AND b.name = %s AND b.version = %s AND b.committed"
                    " AND b.container_id = (SELECT id FROM blob_containers WHERE account = %s AND name = %s)",
                    (dkey, key.name, version, key.account, key.container),
                )
                row = await cursor.fetchone()
                if row is None:
                    return None
                extents = await _extents(conn, dkey, row[0], key.name, version) if content else None
                return _row_to_blob(row[1:]), extents

        return await self._run(run, idempotent=True)

    async def write_blob(
        self, key: BlobKey, decide: Decide, *, needs: Needs = NO_NEEDS, staged: Staged | None = None
    ) -> Any:
        dkey = dkey_of(key)
        if staged is None:

            async def run(conn: Connection) -> Any:
                async with conn.transaction():
                    return await self._write(conn, dkey, key, decide, needs, None, None)

            return await self._run(run, retry=True)
        assert isinstance(staged, PgStaged)
        conn = staged.conn
        staged.conn = None
        committed = False
        try:
            result = await self._with_savepoints(
                conn, lambda c: self._write(c, dkey, key, decide, needs, staged, None)
            )
            committed = True
        finally:
            await self._give_back(conn, commit=committed)
        return result

    async def _with_savepoints(self, conn: Any, step: Callable[[Any], Any]) -> Any:
        """Run ``step`` in a savepoint of the upload's transaction, again on conflicts."""
        for attempt in range(MAX_ATTEMPTS):
            try:
                async with conn.transaction():
                    return await step(conn)
            except (pg_errors.SerializationFailure, pg_errors.DeadlockDetected, Restart):
                if attempt == MAX_ATTEMPTS - 1:
                    raise TableError("ServerBusy", detail="too many concurrent changes") from None
                await asyncio.sleep(random.uniform(0, min(0.05, 0.001 * 2**attempt)))
            except pg_errors.Error as exc:
                raise database_error(exc) from exc
        raise AssertionError("unreachable")

    async def copy_blob(self, source: BlobKey, snapshot: str, dest: BlobKey, decide: Decide) -> Any:
        dkey = dkey_of(dest)

        async def run(conn: Connection) -> Any:
            async with conn.transaction():
                return await self._write(
                    conn, dkey, dest, decide, Needs(), None, (source, stored_version(snapshot))
                )

        return await self._run(run, retry=True)

    async def _write(
        self,
        conn: Any,
        dkey: int,
        key: BlobKey,
        decide: Decide,
        needs: Needs,
        staged: PgStaged | None,
        source: tuple[BlobKey, str] | None,
    ) -> Any:
        cid = await self._container_id(conn, key.account, key.container, share=True)
        state = await _load_state(conn, dkey, cid, key.name, needs)
        source_dkey = None
        if source is not None:
            source_key, version = source
            source_dkey = dkey_of(source_key)
            cursor = await conn.execute(
                f"SELECT b.container_id, {_B_COLUMNS} FROM blobs b"
                " WHERE b.dkey = %s AND b.name = %s AND b.version = %s AND b.committed AND b.container_id ="
                " (SELECT id FROM blob_containers WHERE account = %s AND name = %s)",
                (source_dkey, source_key.name, version, source_key.account, source_key.container),
            )
            row = await cursor.fetchone()
            if row is not None:
                state.source = _row_to_blob(row[1:])
                state.source_content = await _extents(conn, source_dkey, row[0], source_key.name, version)
        write = decide(state)
        if source_dkey is not None and source_dkey != dkey and write.content is not None:
            write.content = [await _copy_extent(conn, source_dkey, dkey, e) for e in write.content]
        await _apply(conn, dkey, cid, key.name, write, state)
        return write.result

    async def list_blocks(self, key: BlobKey) -> tuple[BlobRecord | None, list[Extent], list[Extent]]:
        dkey = dkey_of(key)

        async def run(conn: Connection) -> tuple[BlobRecord | None, list[Extent], list[Extent]]:
            async with conn.transaction():
                await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                cid = await self._container_id(conn, key.account, key.container)
                cursor = await conn.execute(
                    f"SELECT {_BLOB_COLUMNS} FROM blobs WHERE dkey = %s AND container_id = %s AND name = %s"
                    " AND version = %s",
                    (dkey, cid, key.name, STORED_BASE),
                )
                row = await cursor.fetchone()
                if row is None:
                    return None, [], []
                committed = await _extents(conn, dkey, cid, key.name, STORED_BASE)
                staged = await _staged(conn, dkey, cid, key.name)
                return _row_to_blob(row), committed, list(staged.values())

        return await self._run(run, idempotent=True)

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
    ) -> BlobListing:
        low_name, low_version = listing_start(prefix, start)
        where = "container_id = %s AND (name, version) >= (%s, %s)"
        extra: list[Any] = [low_name, low_version]
        if prefix:
            where += " AND name < %s"
            extra.append(prefix_end(prefix))
        if not snapshots:
            where += f" AND version = '{STORED_BASE}'"
        if not uncommitted:
            where += " AND committed"

        async def run(conn: Connection) -> BlobListing:
            cid = await self._container_id(conn, account, container)
            cursor = await conn.execute(
                f"SELECT {_BLOB_COLUMNS} FROM blobs WHERE {where} ORDER BY name, version LIMIT %s",
                (cid, *extra, limit + 1),
            )
            rows = await cursor.fetchall()
            return BlobListing([_row_to_blob(row) for row in rows[:limit]], len(rows) > limit)

        return await self._run(run, idempotent=True)

    # ------------------------------------------------------------------ maintenance

    async def collect_garbage(self) -> int:
        """Delete garbage older than the grace period that nothing references again. Several
        front-ends may run this at once: each garbage row is taken (deleted) by one of them.
        Plain multi-shard DELETE … RETURNING, which Citus runs on every shard."""

        async def run(conn: Connection) -> int:
            async with conn.transaction():
                cursor = await conn.execute(
                    "DELETE FROM blob_garbage WHERE dropped < now() - make_interval(secs => %s)"
                    " RETURNING dkey, ref",
                    (GARBAGE_GRACE_SECONDS,),
                )
                taken = await cursor.fetchall()
                for dkey, ref in taken:
                    referenced = await (await conn.execute(_REFERENCED, {"d": dkey, "r": ref})).fetchone()
                    if referenced is not None and not referenced[0]:
                        await conn.execute(
                            "DELETE FROM blob_chunks WHERE dkey = %s AND ref = %s", (dkey, ref)
                        )
                return len(taken)

        return await self._run(run, retry=True)


async def _extents(conn: Any, dkey: int, cid: int, name: str, version: str) -> list[Extent]:
    cursor = await conn.execute(
        "SELECT ref, length, block_id FROM blob_extents WHERE dkey = %s AND container_id = %s AND name = %s"
        " AND version = %s ORDER BY seq",
        (dkey, cid, name, version),
    )
    return [Extent(str(ref), length, block_id) for ref, length, block_id in await cursor.fetchall()]


async def _staged(conn: Any, dkey: int, cid: int, name: str) -> dict[str, Extent]:
    cursor = await conn.execute(
        "SELECT block_id, ref, length FROM blob_blocks WHERE dkey = %s AND container_id = %s AND name = %s"
        " ORDER BY seq, block_id",
        (dkey, cid, name),
    )
    return {block_id: Extent(str(ref), length, block_id) for block_id, ref, length in await cursor.fetchall()}


async def _load_state(conn: Any, dkey: int, cid: int, name: str, needs: Needs) -> BlobState:
    cursor = await conn.execute(
        f"SELECT {_BLOB_COLUMNS}, staged, staged_id_length FROM blobs WHERE dkey = %s AND container_id = %s"
        " AND name = %s AND version = %s FOR UPDATE",
        (dkey, cid, name, STORED_BASE),
    )
    row = await cursor.fetchone()
    base = _row_to_blob(row[:6]) if row else None
    state = BlobState(base=base, ticks=next_ticks(base.ticks if base else None))
    if base is None:
        return state
    state.staged_count, state.staged_id_length = int(row[6]), row[7]
    if needs.snapshots:
        cursor = await conn.execute(
            "SELECT count(*) FROM blobs WHERE dkey = %s AND container_id = %s AND name = %s"
            " AND version <> %s",
            (dkey, cid, name, STORED_BASE),
        )
        state.snapshots = int((await cursor.fetchone())[0])
    if needs.content:
        state.content = await _extents(conn, dkey, cid, name, STORED_BASE)
    if needs.staged:
        state.staged = await _staged(conn, dkey, cid, name)
    if needs.snapshot is not None:
        cursor = await conn.execute(
            f"SELECT {_BLOB_COLUMNS} FROM blobs WHERE dkey = %s AND container_id = %s AND name = %s"
            " AND version = %s",
            (dkey, cid, name, needs.snapshot),
        )
        target = await cursor.fetchone()
        state.target = _row_to_blob(target) if target else None
    return state


async def _copy_extent(conn: Any, source_dkey: int, dkey: int, extent: Extent) -> Extent:
    """Copy one extent's chunks to the destination blob's shard, under a new ref."""
    ref = uuid.uuid4()
    await conn.execute(
        "INSERT INTO blob_chunks (dkey, ref, seq, data) SELECT %s, %s, seq, data FROM blob_chunks"
        " WHERE dkey = %s AND ref = %s",
        (dkey, ref, source_dkey, extent.ref),
    )
    return Extent(str(ref), extent.length, extent.block_id)


async def _refs(conn: Any, sql: str, args: tuple[Any, ...]) -> set[str]:
    cursor = await conn.execute(sql, args)
    return {str(row[0]) for row in await cursor.fetchall()}


async def _apply(conn: Any, dkey: int, cid: int, name: str, write: BlobWrite, state: BlobState) -> None:
    """Apply ``write`` in the order :class:`BlobWrite` documents, not looking for what ``state``
    says is not there (the blob's extents when it did not exist, staged blocks when none)."""
    existed = state.base is not None
    dropped: set[str] = set()
    key = (dkey, cid, name)
    match_version = "dkey = %s AND container_id = %s AND name = %s AND version = %s"
    match_blob = "dkey = %s AND container_id = %s AND name = %s"
    if write.delete_snapshots:
        others = (*key, STORED_BASE)
        dropped |= await _refs(
            conn, f"SELECT ref FROM blob_extents WHERE {match_blob} AND version <> %s", others
        )
        await conn.execute(f"DELETE FROM blob_extents WHERE {match_blob} AND version <> %s", others)
        await conn.execute(f"DELETE FROM blobs WHERE {match_blob} AND version <> %s", others)
    if write.delete_snapshot is not None:
        one = (*key, write.delete_snapshot)
        dropped |= await _refs(conn, f"SELECT ref FROM blob_extents WHERE {match_version}", one)
        await conn.execute(f"DELETE FROM blob_extents WHERE {match_version}", one)
        await conn.execute(f"DELETE FROM blobs WHERE {match_version}", one)
    base_key = (*key, STORED_BASE)
    if write.snapshot is not None:
        frozen = write.snapshot
        await conn.execute(
            "INSERT INTO blobs (dkey, container_id, name, version, committed, ticks, size, doc)"
            " VALUES (%s, %s, %s, %s, true, %s, %s, %b)",
            (*key, frozen.snapshot, frozen.ticks, frozen.size, encode_blob(frozen)),
        )
        await conn.execute(
            "INSERT INTO blob_extents (dkey, container_id, name, version, seq, ref, length, block_id)"
            " SELECT dkey, container_id, name, %s, seq, ref, length, block_id FROM blob_extents"
            f" WHERE {match_version}",
            (frozen.snapshot, *base_key),
        )
    if write.delete_base:
        dropped |= await _refs(conn, f"SELECT ref FROM blob_extents WHERE {match_version}", base_key)
        dropped |= await _refs(conn, f"SELECT ref FROM blob_blocks WHERE {match_blob}", key)
        await conn.execute(f"DELETE FROM blob_extents WHERE {match_version}", base_key)
        await conn.execute(f"DELETE FROM blob_blocks WHERE {match_blob}", key)
        await conn.execute(f"DELETE FROM blobs WHERE {match_version}", base_key)
    if write.base is not None:
        record = write.base
        values = (record.committed, record.ticks, record.size, encode_blob(record))
        cursor = await conn.execute(
            f"UPDATE blobs SET committed = %s, ticks = %s, size = %s, doc = %b WHERE {match_version}",
            (*values, *base_key),
        )
        if cursor.rowcount == 0:
            cursor = await conn.execute(
                "INSERT INTO blobs (dkey, container_id, name, version, committed, ticks, size, doc)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %b) ON CONFLICT DO NOTHING",
                (*base_key, *values),
            )
            if cursor.rowcount == 0:
                raise Restart  # a concurrent write created the blob: decide again
    referenced: set[str] = set()
    if write.content is not None:
        if existed:
            dropped |= await _refs(conn, f"SELECT ref FROM blob_extents WHERE {match_version}", base_key)
            await conn.execute(f"DELETE FROM blob_extents WHERE {match_version}", base_key)
        if write.content:
            async with conn.cursor() as cursor:
                await cursor.executemany(
                    "INSERT INTO blob_extents (dkey, container_id, name, version, seq, ref, length, block_id)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                    [(*base_key, seq, e.ref, e.length, e.block_id) for seq, e in enumerate(write.content)],
                )
        referenced.update(e.ref for e in write.content)
    if write.append is not None:
        extent = write.append
        await conn.execute(
            "INSERT INTO blob_extents (dkey, container_id, name, version, seq, ref, length, block_id)"
            " SELECT %s, %s, %s, %s, coalesce(max(seq) + 1, 0), %s, %s, %s FROM blob_extents"
            f" WHERE {match_version}",
            (*base_key, extent.ref, extent.length, extent.block_id, *base_key),
        )
        referenced.add(extent.ref)
    if write.drop_staged and state.staged_count:
        dropped |= await _refs(conn, f"SELECT ref FROM blob_blocks WHERE {match_blob}", key)
        await conn.execute(f"DELETE FROM blob_blocks WHERE {match_blob}", key)
        await conn.execute(
            f"UPDATE blobs SET staged = 0, staged_id_length = NULL WHERE {match_version}", base_key
        )
    if write.stage_block is not None:
        block = write.stage_block
        replaced = await _refs(
            conn, f"SELECT ref FROM blob_blocks WHERE {match_blob} AND block_id = %s", (*key, block.block_id)
        )
        dropped |= replaced
        await conn.execute(
            f"UPDATE blobs SET staged = staged + %s, staged_id_length = %s WHERE {match_version}",
            (0 if replaced else 1, len(block.block_id or ""), *base_key),
        )

        await conn.execute(
            "INSERT INTO blob_blocks (dkey, container_id, name, block_id, seq, ref, length)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (dkey, container_id, name, block_id)"
            " DO UPDATE SET seq = excluded.seq, ref = excluded.ref, length = excluded.length",
            (*key, block.block_id, time.time_ns(), block.ref, block.length),
        )
        referenced.add(block.ref)
    for ref in dropped - referenced:
        cursor = await conn.execute(_REFERENCED, {"d": dkey, "r": ref})
        row = await cursor.fetchone()
        if row is not None and not row[0]:
            await conn.execute(
                "INSERT INTO blob_garbage (dkey, ref, dropped) VALUES (%s, %s, now())"
                " ON CONFLICT (dkey, ref) DO UPDATE SET dropped = excluded.dropped",
                (dkey, ref),
            )
