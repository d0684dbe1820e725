"""What an engine hands the services: one store per service over one database."""

from __future__ import annotations

from abc import ABC, abstractmethod

from tabulae.storage.blobs import BlobStore
from tabulae.storage.queues import QueueStore
from tabulae.storage.tables import TableStore
from tabulae.storage.volume import Volume


class Stores(ABC):
    """An engine's open database and a store for each service's contract.

    The stores share the engine's connections and its writer, so there is one thing to open and
    one to close; a service sees only its own contract (``tables`` for the Table service,
    ``queues`` for the Queue service, ``blobs`` for the Blob service).
    """

    tables: TableStore
    queues: QueueStore
    blobs: BlobStore
    kind: str
    volume: Volume
    """Whether the store's disk can take writes (a full one refuses them); see ``volume``."""
    """Which engine: "sqlite", "postgres" or "citus". Design warnings say what the store in use
    does with a pattern, next to what Azure does with it."""

    async def reclaim(self) -> None:  # noqa: B027 (a hook: most engines have nothing to give back)
        """While the volume is full or low, give back what deletes freed (an engine that keeps
        freed room in its files says how); called every second."""

    @abstractmethod
    async def close(self) -> None:
        """Release connections and threads; pending writes are finished first."""
