"""The scale-out engine: every service's store over one PostgreSQL or Citus database."""

from __future__ import annotations

from collections.abc import Iterable

from tabulae.storage.postgres import engine, rekeying
from tabulae.storage.postgres.blobs import SCHEMA as BLOBS_SCHEMA
from tabulae.storage.postgres.blobs import PostgresBlobs
from tabulae.storage.postgres.engine import PostgresDatabase
from tabulae.storage.postgres.indexes import SCHEMA as INDEXES_SCHEMA
from tabulae.storage.postgres.queues import SCHEMA as QUEUES_SCHEMA
from tabulae.storage.postgres.queues import PostgresQueues
from tabulae.storage.postgres.tables import SCHEMA as TABLES_SCHEMA
from tabulae.storage.postgres.tables import PostgresTables
from tabulae.storage.stores import Stores

SCHEMAS = (TABLES_SCHEMA, INDEXES_SCHEMA, QUEUES_SCHEMA, BLOBS_SCHEMA)


async def init_schema(url: str, citus: bool = False) -> list[str]:
    """Create (and with ``citus`` distribute) every store's tables; idempotent. Returns what it
    did, for the operator; raises :class:`~.engine.SchemaError` when the database does not fit."""
    return await engine.init_schema(url, SCHEMAS, citus=citus)


async def settle_blob_keys(url: str, accounts: Iterable[str], hns: frozenset[str]) -> list[str]:
    """Key the served accounts' blob rows as their namespace setting wants them (those of
    ``hns`` one file system to a key, the others blob by blob); see :mod:`.rekeying`."""
    return await rekeying.settle(url, accounts, hns)


async def check_serving(url: str) -> None:
    """Create the plain schema on an empty PostgreSQL database, or raise
    :class:`~.engine.SchemaError` when Citus is installed but ``db init --citus`` never ran."""
    await engine.check_serving(url, SCHEMAS)


class PostgresStores(Stores):
    """The stores of one database; open with ``await PostgresStores.open(url)``."""

    def __init__(
        self,
        database: PostgresDatabase,
        *,
        citus: bool = False,
        wide_probes: bool = True,
        partition_epoch: bool = False,
        colocated: frozenset[str] = frozenset(),
    ) -> None:
        self.database = database
        self.kind = "citus" if citus else "postgres"
        self.volume = database.volume
        self.tables = PostgresTables(
            database, citus=citus, wide_probes=wide_probes, partition_epoch=partition_epoch
        )
        self.queues = PostgresQueues(database)
        self.blobs = PostgresBlobs(database, citus=citus, colocated=colocated)

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 16,
        create_schema: bool = True,
        colocated: frozenset[str] = frozenset(),
    ) -> PostgresStores:
        """Connect a pool to ``url``. With ``create_schema``, first make the database ready to
        serve (:func:`check_serving`): on plain PostgreSQL create the schema where it is missing,
        so ``serve`` against an empty database just works; with Citus refuse an undistributed one.
        ``colocated`` names the accounts whose containers' blobs are each kept on one key (those
        with a hierarchical namespace, their rows keyed so by :func:`settle_blob_keys`)."""
        if create_schema:
            await check_serving(url)
        database = await PostgresDatabase.open(url, min_size=min_size, max_size=max_size)
        citus = await database.run(engine.citus_present, idempotent=True)
        wide = citus and await database.run(engine.citus_subquery_pushdown, idempotent=True)
        # a schema distributed before the epoch existed lacks it until `db init --citus` runs again
        epoch = citus and await database.run(engine.partition_epoch_present, idempotent=True)
        return cls(database, citus=citus, wide_probes=wide, partition_epoch=epoch, colocated=colocated)

    async def close(self) -> None:
        await self.database.close()
