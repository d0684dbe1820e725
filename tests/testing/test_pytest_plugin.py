"""The pytest plugin and ``tabulae.testing.serve``, run the way users run them: a pytest session
of their own (pytester, in a subprocess) using the fixtures against a real server."""

from __future__ import annotations

import importlib.metadata
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from azure.data.tables import TableServiceClient
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueServiceClient

from tabulae.testing import ServerError, TabulaeServer, serve, server

pytest_plugins = ["pytester"]
README = Path(__file__).resolve().parents[2] / "README.md"


def _plugin_args() -> list[str]:
    """Load the plugin by module unless the installed package registers its entry point already."""
    registered = importlib.metadata.entry_points(group="pytest11", name="tabulae")
    return [] if registered else ["-p", "tabulae.testing.pytest_plugin"]


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*_plugin_args(), "-p", "no:cacheprovider", *args, timeout=240)


def test_readme_example_passes(pytester: pytest.Pytester) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    [example] = [block for block in blocks if "def test_orders_flow" in block]
    pytester.makepyfile(test_readme_example=example)
    _run(pytester).assert_outcomes(passed=2)


def test_fixtures_share_one_server_and_never_a_name(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_fixtures="""
        import asyncio

        SEEN = {}

        def test_sync_clients(tabulae_server, tabulae_connection_string, tabulae_table_service,
                              tabulae_queue_service, tabulae_blob_service, tabulae_name):
            SEEN["server"] = tabulae_connection_string
            SEEN["name"] = tabulae_name
            assert tabulae_connection_string == tabulae_server.connection_string
            tabulae_table_service.create_table(tabulae_name)
            tabulae_queue_service.create_queue(tabulae_name)
            tabulae_blob_service.create_container(tabulae_name)
            assert tabulae_name in [t.name for t in tabulae_table_service.list_tables()]

        def test_same_server_fresh_name(tabulae_connection_string, tabulae_name, tabulae_table_service):
            assert SEEN["server"] == tabulae_connection_string
            assert SEEN["name"] != tabulae_name
            assert SEEN["name"] in [t.name for t in tabulae_table_service.list_tables()]

        def test_aio_clients(tabulae_table_service_aio, tabulae_queue_service_aio, tabulae_blob_service_aio,
                             tabulae_name):
            async def scenario():
                async with tabulae_table_service_aio as tables:
                    await tables.create_table(tabulae_name)
                async with tabulae_queue_service_aio as queues:
                    await queues.create_queue(tabulae_name)
                async with tabulae_blob_service_aio as blobs:
                    await blobs.create_container(tabulae_name)
                    return [c.name async for c in blobs.list_containers()]

            assert tabulae_name in asyncio.run(scenario())

        def test_resources_are_deleted_after_each_test(tabulae_table, tabulae_queue, tabulae_container):
            SEEN["resources"] = (tabulae_table.table_name, tabulae_queue.queue_name,
                                 tabulae_container.container_name)

        def test_after(tabulae_table_service, tabulae_queue_service, tabulae_blob_service):
            table, queue, container = SEEN["resources"]
            assert table not in [t.name for t in tabulae_table_service.list_tables()]
            assert queue not in [q.name for q in tabulae_queue_service.list_queues()]
            assert container not in [c.name for c in tabulae_blob_service.list_containers()]
        """
    )
    _run(pytester, "-W", "error").assert_outcomes(passed=5)


def test_in_memory_option_writes_no_database(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_memory="""
        def test_memory(tabulae_server, tabulae_table):
            tabulae_table.create_entity({"PartitionKey": "p", "RowKey": "r"})
            assert tabulae_server.data_dir is not None
            assert not (tabulae_server.data_dir / "tabulae.db").exists()
        """
    )
    _run(pytester, "--tabulae-in-memory").assert_outcomes(passed=1)


def test_tabulae_url_uses_a_running_server(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_remote="""
        def test_remote(tabulae_server, tabulae_table_service):
            assert tabulae_server.process is None  # nothing was started
            assert "seeded" in [t.name for t in tabulae_table_service.list_tables()]
        """
    )
    with serve(in_memory=True) as running:
        with TableServiceClient.from_connection_string(running.connection_string) as tables:
            tables.create_table("seeded")
        _run(pytester, "--tabulae-url", running.connection_string).assert_outcomes(passed=1)


def test_plugin_is_idle_until_a_fixture_is_used(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    result = _run(pytester, "--setup-show")
    result.assert_outcomes(passed=1)
    assert "tabulae_server" not in result.stdout.str()
    helped = _run(pytester, "--help")
    assert "--tabulae-url" in helped.stdout.str()


def test_serve_context_manager_for_unittest_and_scripts() -> None:
    with serve() as running:
        folder = running.data_dir
        assert folder is not None and (folder / "tabulae.db").exists()
        text = running.connection_string
        with TableServiceClient.from_connection_string(text) as tables:
            tables.create_table("plain")
        with QueueServiceClient.from_connection_string(text) as queues:
            queues.create_queue("plain").send_message("m")
        with BlobServiceClient.from_connection_string(text) as blobs:
            blobs.create_container("plain").upload_blob("b", b"x")
        process = running.process
    assert process is not None and process.poll() is not None
    assert not folder.exists()


def test_a_taken_port_is_retried_on_fresh_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Parallel workers can take a port between the pick and the bind: the start tries again."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        picks = iter([[busy, *server._free_ports(2)]])
        original = server._free_ports
        monkeypatch.setattr(server, "_free_ports", lambda count: next(picks, None) or original(count))
        started = server.start(tmp_path)
        try:
            assert busy not in [started.port(s) for s in ("table", "queue", "blob")]
        finally:
            assert started.process is not None
            server._stop(started.process)


def test_a_server_that_cannot_start_says_why(tmp_path: Path) -> None:
    with pytest.raises(ServerError, match="--workers"), serve(tmp_path, args=["--workers", "0"]):
        pass


def test_urls_and_connection_strings() -> None:
    dev = TabulaeServer.from_url("UseDevelopmentStorage=true")
    assert dev.table_endpoint == "http://127.0.0.1:10002/devstoreaccount1"
    assert TabulaeServer.from_url("http://tabulae").blob_endpoint == "http://tabulae:10000/devstoreaccount1"
    given = TabulaeServer.from_url(
        "DefaultEndpointsProtocol=http;AccountName=a1;AccountKey=a2V5;TableEndpoint=http://h:1/a1/;"
    )
    assert (given.account, given.key, given.endpoints) == ("a1", "a2V5", {"table": "http://h:1/a1"})
    with pytest.raises(ServerError):
        TabulaeServer.from_url("ftp://x")


def test_import_of_the_plugin_starts_nothing() -> None:
    code = "import tabulae.testing.pytest_plugin, sys; print('azure.storage.blob' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
