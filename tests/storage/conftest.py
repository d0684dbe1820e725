"""Backends for the conformance suite.

``sqlite`` always runs. ``postgres`` runs against ``TABULAE_TEST_PG_URL`` (start a throw-away
server with ``scripts/pg-test-cluster DIR``); without it the tests are skipped locally but fail
under CI (``CI`` set), so a CI that forgot the database cannot pass green. ``citus`` runs only
when ``TABULAE_TEST_CITUS_URL`` names a Citus coordinator with the extension installed.

Each test gets an account of its own, so tests never see each other's tables even though the
PostgreSQL database outlives them.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tabulae.storage.tables import Store

PG_ENV = "TABULAE_TEST_PG_URL"
CITUS_ENV = "TABULAE_TEST_CITUS_URL"

_schema_ready: set[str] = set()


@dataclass
class Backend:
    """How a test reaches one backend: ``open`` makes a new store instance over the same data
    (a second front-end), ``run`` runs a coroutine against a fresh instance on a new loop."""

    name: str
    open: Callable[[], Awaitable[Store]]
    account: str

    def run(self, body: Callable[[Store], Awaitable[None]]) -> None:
        async def main() -> None:
            store = await self.open()
            try:
                await body(store)
            finally:
                await store.close()

        asyncio.run(main())


def _backend_params() -> list[str]:
    params = ["sqlite", "postgres"]
    if os.environ.get(CITUS_ENV):
        params.append("citus")
    return params


def _pg_url(name: str) -> str:
    env = PG_ENV if name == "postgres" else CITUS_ENV
    url = os.environ.get(env)
    if url:
        return url
    if os.environ.get("CI"):
        pytest.fail(f"{env} is not set: CI must start a database (scripts/pg-test-cluster) and export it")
    pytest.skip(f"{env} is not set; start a server with: export {env}=$(scripts/pg-test-cluster DIR)")


def _pg_backend(name: str, account: str) -> Backend:
    from tabulae.storage.postgres.tables import PostgresStore, init_schema

    url = _pg_url(name)
    if url not in _schema_ready:
        asyncio.run(init_schema(url, citus=name == "citus"))
        _schema_ready.add(url)

    async def open_store() -> Store:
        return await PostgresStore.open(url, max_size=8)

    return Backend(name, open_store, account)


@pytest.fixture(params=_backend_params())
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    account = f"acct{uuid.uuid4().hex[:16]}"
    if request.param == "sqlite":
        from tabulae.storage.sqlite.tables import SqliteStore

        async def open_store() -> Store:
            return SqliteStore(tmp_path / "data", durable=False)  # fsync is not what is tested

        yield Backend("sqlite", open_store, account)
    else:
        yield _pg_backend(request.param, account)


@pytest.fixture
def pg_url() -> str:
    """The plain PostgreSQL test database, with the schema in place (same skip/fail rule)."""
    from tabulae.storage.postgres.tables import init_schema

    url = _pg_url("postgres")
    if url not in _schema_ready:
        asyncio.run(init_schema(url, citus=False))
        _schema_ready.add(url)
    return url
