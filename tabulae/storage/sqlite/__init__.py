"""The embedded engine: every service's store over one SQLite database (see :mod:`.engine`)."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path

from tabulae.storage.sqlite.blobs import SCHEMA as BLOBS_SCHEMA
from tabulae.storage.sqlite.blobs import SqliteBlobs
from tabulae.storage.sqlite.engine import SqliteDatabase
from tabulae.storage.sqlite.queues import SCHEMA as QUEUES_SCHEMA
from tabulae.storage.sqlite.queues import SqliteQueues
from tabulae.storage.sqlite.tables import SCHEMA as TABLES_SCHEMA
from tabulae.storage.sqlite.tables import SqliteTables
from tabulae.storage.sqlite.vacuum import convert_at_start
from tabulae.storage.stores import Stores
from tabulae.storage.volume import Volume

STORE_FILES = ("tabulae.db", "tabulae.db-wal", "tabulae.db-shm", "tabulae.db-journal")


def check_store(directory: Path) -> None:
    """Open the store once and close it again, in the parent process before any worker starts:
    a new one gets its schema here, so a store that cannot be made (a full volume) stops the
    server before it announces itself, and removes what it began, so that nothing half-made is
    left for the next start. A small store made before ``auto_vacuum = INCREMENTAL`` is
    converted here too (:mod:`.vacuum`), before anyone waits for it. Raises the engine's error."""
    new = not (directory / "tabulae.db").exists()
    volume = Volume(directory)
    try:
        database = SqliteDatabase(directory, TABLES_SCHEMA + QUEUES_SCHEMA + BLOBS_SCHEMA, volume=volume)
        asyncio.run(database.close())
        if not new:
            convert_at_start(directory / "tabulae.db")
    except (OSError, sqlite3.Error) as exc:
        if new:
            for name in STORE_FILES:
                with contextlib.suppress(FileNotFoundError):
                    (directory / name).unlink()
        elif volume.is_full_error(exc):
            return  # a store already there, on a full volume: it is served, refusing writes
        raise


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

    async def reclaim(self) -> None:
        await self.database.reclaim()

    async def close(self) -> None:
        await self._blobs.close()
        await self.database.close()
