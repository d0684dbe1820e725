"""The embedded engine: every service's store over one SQLite database (see :mod:`.engine`)."""

from __future__ import annotations

from pathlib import Path

from tabulae.storage.sqlite.blobs import SCHEMA as BLOBS_SCHEMA
from tabulae.storage.sqlite.blobs import SqliteBlobs
from tabulae.storage.sqlite.engine import SqliteDatabase
from tabulae.storage.sqlite.queues import SCHEMA as QUEUES_SCHEMA
from tabulae.storage.sqlite.queues import SqliteQueues
from tabulae.storage.sqlite.tables import SCHEMA as TABLES_SCHEMA
from tabulae.storage.sqlite.tables import SqliteTables
from tabulae.storage.stores import Stores
from tabulae.storage.volume import Volume


class SqliteStores(Stores):
    """The stores of ``directory/tabulae.db`` (blob content in ``directory/blobs``);
    ``durable=False`` skips fsync (in-memory mode)."""

    kind = "sqlite"

    def __init__(self, directory: Path, *, durable: bool = True, volume: Volume | None = None) -> None:
        self.volume = volume or Volume(directory)
        self.database = SqliteDatabase(
            directory, TABLES_SCHEMA + QUEUES_SCHEMA + BLOBS_SCHEMA, durable=durable, volume=self.volume
        )
        self.tables = SqliteTables(self.database)
        self.queues = SqliteQueues(self.database)
        self._blobs = SqliteBlobs(self.database, directory, durable=durable)
        self.blobs = self._blobs

    def reclaim(self) -> None:
        self.database.reclaim()

    async def close(self) -> None:
        await self._blobs.close()
        await self.database.close()
