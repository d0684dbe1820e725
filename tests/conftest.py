"""Fixtures shared by every test: a real server process, SDK clients, unique names."""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.backends import CREATED_STORES, backend_names, database_url
from tests.serverproc import DEV_ACCOUNT, ServerProcess
from tests.tls import SelfSignedCert, make_self_signed_cert

# The services' SDK clients and raw-HTTP clients as fixtures, for every test directory.
pytest_plugins = ["tests.service_clients"]

_names = itertools.count()

# Under CI no example database: every run draws afresh, and nothing a machine saved (a .hypothesis
# directory beside a checkout) is replayed. Locally a failure is saved and replayed until fixed.
settings.register_profile("ci", database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

# Every test server is a new interpreter importing the whole package, once per worker process
# too. Where the environment turns bytecode caching off (PYTHONDONTWRITEBYTECODE), each of them
# would compile every module from source again, the better part of a server's start. The
# processes the tests start share a cache of their own instead, kept out of the checkout and
# removed with the session.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None):
    _bytecode = tempfile.mkdtemp(prefix="tabulae-test-pyc-")
    os.environ["PYTHONPYCACHEPREFIX"] = _bytecode
    atexit.register(shutil.rmtree, _bytecode, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def _drop_test_stores() -> Iterator[None]:
    """Drop the databases and schemas the session created, once every server has stopped (an
    autouse session fixture is set up first, so torn down last): the test clusters, Citus's
    above all, are shared between runs and would otherwise fill up with them."""
    yield
    if not CREATED_STORES:
        return
    import psycopg

    for admin_url, statement in reversed(CREATED_STORES):
        try:
            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute(statement)
        except psycopg.Error as exc:  # the cluster went away: nothing left to tidy
            print(f"could not drop a test store ({statement}): {exc}", file=sys.stderr)
    CREATED_STORES.clear()


def fresh_database(base_url: str) -> str:
    """Create an empty database on the test cluster and return its URL."""
    import psycopg

    name = f"tabulae_{os.getpid()}_{next(_names)}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(base_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    CREATED_STORES.append((base_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    return base_url.rsplit("/", 1)[0] + "/" + name


def fresh_schema(base_url: str) -> str:
    """A new empty schema in the database of ``base_url`` (dropped when the session ends), and
    the URL of a store in it (``search_path`` in the URL), not initialised."""
    import psycopg

    name = f"tabulae_{os.getpid()}_{next(_names)}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(base_url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    CREATED_STORES.append((base_url, f'DROP SCHEMA IF EXISTS "{name}" CASCADE'))
    return f"{base_url}{'&' if '?' in base_url else '?'}options=-csearch_path%3D{name}"


def fresh_citus_store(base_url: str) -> str:
    """An empty Tabulae store on the Citus test cluster, distributed by ``db init --citus``, and
    its URL. Each gets a schema of its own in the one database: the coordinator propagates a
    new schema to the workers, where a new database would need the extension created and every
    node registered in it again."""
    url = fresh_schema(base_url)
    init = [sys.executable, "-m", "tabulae", "db", "init", "--citus", "--store", url]
    subprocess.run(init, check=True, capture_output=True)
    return url


def fresh_store(backend: str) -> list[str]:
    """The ``serve`` flags of an empty store of ``backend`` (a name of ``tests/backends.py``):
    none for SQLite (the data directory is the store), a new database for PostgreSQL, a new
    distributed schema for Citus. Skips (fails under CI) when the database is not configured."""
    if backend == "postgres":
        return ["--store", fresh_database(database_url("postgres"))]
    if backend == "citus":
        return ["--store", fresh_citus_store(database_url("citus"))]
    return []


@pytest.fixture(scope="session")
def cert(tmp_path_factory: pytest.TempPathFactory) -> SelfSignedCert:
    """A self-signed certificate for 127.0.0.1, shared by every HTTPS server of the session
    (``--oauth`` needs TLS, as Azure serves tokens over HTTPS only)."""
    return make_self_signed_cert(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="session", params=backend_names())
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """One durable server per storage backend for the session, on a free port.

    Tests that take it run once per backend of ``tests/backends.py``: SQLite, PostgreSQL (a
    fresh database) and, when configured, Citus (distributed with ``db init --citus``).
    """
    extra = fresh_store(request.param)
    process = ServerProcess(tmp_path_factory.mktemp("data"), extra_args=extra, backend=request.param).start()
    yield process
    process.stop()


@pytest.fixture(scope="module", params=backend_names())
def lake(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server whose development account has a hierarchical namespace (``--hns``), one per
    backend for each test module that takes it (modules set account features of their own)."""
    extra = [*fresh_store(request.param), "--hns", DEV_ACCOUNT]
    process = ServerProcess(tmp_path_factory.mktemp("lake"), extra_args=extra, backend=request.param).start()
    yield process
    process.stop()


@pytest.fixture
def fresh_server(tmp_path: Path) -> Iterator[ServerProcess]:
    """A server of the test's own, for tests that restart or kill it."""
    process = ServerProcess(tmp_path / "data").start()
    yield process
    process.stop()


@pytest.fixture
def table_name() -> str:
    """A table name unique within the session (tables outlive tests on the shared server)."""
    return f"t{os.getpid()}x{next(_names)}"
