"""The storage backends every suite runs against, decided in one place.

``sqlite`` always. ``postgres`` against ``TABULAE_TEST_PG_URL`` (``scripts/check`` starts a
throw-away cluster): without it the PostgreSQL cases are skipped locally but fail under CI
(``CI`` set), so a CI that forgot the database cannot pass green. ``citus`` only when
``TABULAE_TEST_CITUS_URL`` names a Citus coordinator with the extension installed.
"""

from __future__ import annotations

import os

import pytest

PG_ENV = "TABULAE_TEST_PG_URL"
CITUS_ENV = "TABULAE_TEST_CITUS_URL"


def backend_names() -> list[str]:
    names = ["sqlite", "postgres"]
    if os.environ.get(CITUS_ENV):
        names.append("citus")
    return names


def database_backends() -> list[str]:
    """The backends several front-ends can share: every one but SQLite, which is one machine's."""
    return [name for name in backend_names() if name != "sqlite"]


def database_url(name: str) -> str:
    """The database URL of ``postgres`` or ``citus``; skips (fails under CI) when it is not set."""
    env = PG_ENV if name == "postgres" else CITUS_ENV
    url = os.environ.get(env)
    if url:
        return url
    if os.environ.get("CI"):
        pytest.fail(f"{env} is not set: CI must start a database (scripts/pg-test-cluster) and export it")
    pytest.skip(f"{env} is not set; start a server with: export {env}=$(scripts/pg-test-cluster DIR)")


CREATED_STORES: list[tuple[str, str]] = []
"""(admin URL, DROP statement) of every database or schema made for tests, dropped when the
session ends. Kept here, not in ``conftest.py``: pytest loads the conftest as a module of its own
while test files import it as ``tests.conftest``, so a list there would come in two copies."""
