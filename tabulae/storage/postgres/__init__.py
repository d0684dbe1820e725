"""The scale-out engine: every service's store over one PostgreSQL or Citus database."""

from __future__ import annotations

from tabulae.storage.postgres import engine
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


async def init_schema(url: str, citus: bool = False) -> None:
    """Create (and with ``citus`` distribute) every store's tables; idempotent."""
    await engine.init_schema(url, SCHEMAS, citus=citus)


class PostgresStores(Stores):
    """The stores of one database; open with ``await PostgresStores.open(url)``."""

    def __init__(self, database: PostgresDatabase) -> None:
        self.database = database
        self.tables = PostgresTables(database)
        self.queues = PostgresQueues(database)
        self.blobs = PostgresBlobs(database)

    @classmethod
    async def open(
        cls, url: str, *, min_size: int = 1, max_size: int = 16, create_schema: bool = True
    ) -> PostgresStores:
        """Connect a pool to ``url``. On a database without our tables, create the plain
        (non-Citus) schema first, so ``serve`` against an empty database just works."""
        database = await PostgresDatabase.open(url, min_size=min_size, max_size=max_size)
        try:
            every_table = [table for schema in SCHEMAS for table in schema.tables]
            if create_schema and await database.missing_tables(every_table):
                await init_schema(url, citus=False)
        except BaseException:
            await database.close()
            raise
        return cls(database)

    async def close(self) -> None:
        await self.database.close()
