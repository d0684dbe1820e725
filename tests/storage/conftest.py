"""Backends for the conformance suite (which ones: ``tests/backends.py``).

Each test gets an account of its own, so tests never see each other's tables even though the
PostgreSQL database outlives them.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tabulae.storage.queues import QueueStore
from tabulae.storage.stores import Stores
from tabulae.storage.tables import TableStore
from tests.backends import backend_names, database_url

_schema_ready: set[str] = set()


@dataclass
class Backend:
    """How a test reaches one backend: ``open`` opens the engine again over the same data
    (a second front-end), ``run`` runs a coroutine against the table store of a fresh instance
    on a new loop."""

    name: str
    open: Callable[[], Awaitable[Stores]]
    account: str

    def run(self, body: Callable[[TableStore], Awaitable[None]]) -> None:
        async def main() -> None:
            stores = await self.open()
            try:
                await body(stores.tables)
            finally:
                await stores.close()

        asyncio.run(main())

    def run_queues(self, body: Callable[[QueueStore], Awaitable[None]]) -> None:
        """``run`` for the queue store of a fresh instance."""

        async def main() -> None:
            stores = await self.open()
            try:
                await body(stores.queues)
            finally:
                await stores.close()

        asyncio.run(main())


def _pg_backend(name: str, account: str) -> Backend:
    from tabulae.storage.postgres import PostgresStores, init_schema

    url = database_url(name)
    if url not in _schema_ready:
        asyncio.run(init_schema(url, citus=name == "citus"))
        _schema_ready.add(url)

    async def open_store() -> Stores:
        return await PostgresStores.open(url, max_size=8)

    return Backend(name, open_store, account)


@pytest.fixture(params=backend_names())
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    account = f"acct{uuid.uuid4().hex[:16]}"
    if request.param == "sqlite":
        from tabulae.storage.sqlite import SqliteStores

        async def open_store() -> Stores:
            return SqliteStores(tmp_path / "data", durable=False)  # fsync is not what is tested

        yield Backend("sqlite", open_store, account)
    else:
        yield _pg_backend(request.param, account)


@pytest.fixture
def pg_url() -> str:
    """The plain PostgreSQL test database, with the schema in place (same skip/fail rule)."""
    from tabulae.storage.postgres import init_schema

    url = database_url("postgres")
    if url not in _schema_ready:
        asyncio.run(init_schema(url, citus=False))
        _schema_ready.add(url)
    return url
