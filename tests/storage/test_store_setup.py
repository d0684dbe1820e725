"""``serve`` and ``db init`` refuse a database they would leave half-done, with a message saying
what to run, and change nothing.

On plain PostgreSQL (always, CI included) a database without Citus is refused by
``db init --citus``, and a database that looks like Citus (a stand-in of its catalog: the
extension cannot be installed here) is refused by ``serve`` and by ``db init`` without
``--citus``. With ``TABULAE_TEST_CITUS_URL`` the same is checked on a real coordinator, and
``db init --citus`` over tables an earlier plain ``db init`` created moves their rows to the shards.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from azure.data.tables import TableServiceClient

from tabulae.storage.postgres import SCHEMAS
from tests.backends import CITUS_ENV, database_url
from tests.conftest import fresh_citus_store, fresh_database, fresh_schema
from tests.serverproc import ServerProcess, free_port

STAND_IN = """
CREATE TABLE pg_dist_partition (logicalrelid regclass, kind text, col text);
CREATE FUNCTION create_reference_table(table_name regclass) RETURNS void
    LANGUAGE sql AS $$ INSERT INTO pg_dist_partition VALUES (table_name, 'n', NULL) $$;
CREATE FUNCTION create_distributed_table(table_name regclass, distribution_column text)
    RETURNS void LANGUAGE sql
    AS $$ INSERT INTO pg_dist_partition VALUES (table_name, 'h', distribution_column) $$;
"""
OUR_TABLES = (
    "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename <> 'pg_dist_partition'"
)


def tabulae(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tabulae", *args], capture_output=True, text=True, timeout=60
    )


def serve(url: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    ports = [str(free_port()) for _ in range(3)]
    return tabulae(
        "serve", "--store", url, "--data-dir", str(tmp_path / "data"),
        "--port", ports[0], "--queue-port", ports[1], "--blob-port", ports[2],
    )  # fmt: skip


def count_tables(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(OUR_TABLES).fetchone()
    assert row is not None
    return int(row[0])


def test_db_init_citus_without_the_extension_says_so_and_creates_nothing() -> None:
    url = fresh_database(database_url("postgres"))
    done = tabulae("db", "init", "--citus", "--store", url)
    assert done.returncode == 1
    assert "Citus extension is not installed" in done.stderr and "CREATE EXTENSION citus" in done.stderr
    assert "Traceback" not in done.stderr
    assert count_tables(url) == 0


def test_a_citus_database_is_refused_by_serve_and_plain_db_init(tmp_path: Path) -> None:
    url = fresh_database(database_url("postgres"))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(STAND_IN)  # type: ignore[arg-type]
    served = serve(url, tmp_path)
    assert served.returncode == 1
    assert "db init --citus" in served.stderr and "Traceback" not in served.stderr
    done = tabulae("db", "init", "--store", url)
    assert done.returncode == 1 and "--citus" in done.stderr
    assert count_tables(url) == 0
    assert tabulae("db", "init", "--citus", "--store", url).returncode == 0
    assert count_tables(url) == sum(len(schema.tables) for schema in SCHEMAS)


def test_serve_on_an_unreachable_database_says_so(tmp_path: Path) -> None:
    served = serve(f"postgresql://nobody@127.0.0.1:{free_port()}/none", tmp_path)
    assert served.returncode == 1
    assert "cannot use the database" in served.stderr and "Traceback" not in served.stderr


# ----------------------------------------------------------------------------- on a real coordinator

citus = pytest.mark.skipif(not os.environ.get(CITUS_ENV), reason=f"needs {CITUS_ENV} (a Citus coordinator)")


def citus_schema() -> str:
    """A new empty schema on the coordinator, and the URL of a store in it (not initialised)."""
    return fresh_schema(os.environ[CITUS_ENV])


@citus
def test_serve_on_citus_without_db_init_creates_nothing(tmp_path: Path) -> None:
    url = citus_schema()
    served = serve(url, tmp_path)
    assert served.returncode == 1 and "db init --citus" in served.stderr
    assert count_tables(url) == 0


@citus
def test_db_init_citus_over_local_tables_moves_their_rows(tmp_path: Path) -> None:
    """Tables made local on a Citus database (as plain ``db init`` did before it refused) keep
    their data when ``db init --citus`` distributes them, and no local copy is left behind."""
    from tabulae.storage.postgres import SCHEMAS

    url = citus_schema()
    with psycopg.connect(url, autocommit=True) as conn:
        for schema in SCHEMAS:
            for statement in schema.statements:
                conn.execute(statement)  # type: ignore[arg-type]
        conn.execute("INSERT INTO service_properties VALUES ('acct', 'doc')")
    done = tabulae("db", "init", "--citus", "--store", url)
    assert done.returncode == 0, done.stderr
    assert "moved the rows of the local table service_properties" in done.stdout
    server = ServerProcess(tmp_path / "data", extra_args=["--store", url, "--workers", "1"]).start()
    try:
        with TableServiceClient.from_connection_string(server.connection_string) as service:
            service.create_table("moved")
            assert [t.name for t in service.list_tables()] == ["moved"]
    finally:
        server.stop()
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT properties FROM service_properties").fetchall() == [(b"doc",)]
        sizes = conn.execute("SELECT pg_relation_size('service_properties'), pg_relation_size('entities')")
        assert sizes.fetchone() == (0, 0)


@citus
def test_fresh_citus_store_is_distributed() -> None:
    url = fresh_citus_store(os.environ[CITUS_ENV])
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_dist_partition WHERE logicalrelid = ANY("
            "ARRAY['entities', 'queue_messages', 'blob_chunks', 'tables']::regclass[])"
        ).fetchone()
    assert row == (4,)


def test_serve_through_the_databases_unix_socket(tmp_path: Path) -> None:
    """A URL naming the socket directory (``?host=/dir``), as the README advises for a database
    on the same machine, serves as a TCP one does."""
    url = fresh_database(database_url("postgres"))
    with psycopg.connect(url) as conn:
        directories = str(conn.execute("SHOW unix_socket_directories").fetchone()[0])  # type: ignore[index]
        port = int(conn.execute("SHOW port").fetchone()[0])  # type: ignore[index]
    directory = directories.split(",")[0].strip()
    if not Path(directory, f".s.PGSQL.{port}").exists():
        pytest.skip("the test database runs on another machine: no socket here")
    user, name = url.split("://", 1)[1].split("@", 1)[0], url.rsplit("/", 1)[1]
    socket_url = f"postgresql://{user}@/{name}?host={directory}&port={port}"
    server = ServerProcess(tmp_path / "data", extra_args=["--store", socket_url, "--workers", "1"]).start()
    try:
        table = TableServiceClient.from_connection_string(server.connection_string).create_table("bysocket")
        table.create_entity({"PartitionKey": "p", "RowKey": "r", "n": 1})
        assert table.get_entity("p", "r")["n"] == 1
    finally:
        server.stop()
    with psycopg.connect(url) as conn:  # the rows are in that database
        assert conn.execute("SELECT count(*) FROM entities").fetchone() == (1,)
