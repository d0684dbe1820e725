"""The README's Python examples run unchanged against a real server (docs that cannot rot)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

from azure.data.tables import TableServiceClient
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueServiceClient

from tests.serverproc import ServerProcess

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_opens_with_the_two_commands() -> None:
    first_block = re.search(r"```sh\n(.*?)```", README.read_text(), re.S)
    assert first_block is not None
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines() if line.strip()]
    assert commands == ["make run", "make test"]


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def run_twice(block: str, server: ServerProcess) -> list[str]:
    """What the block prints on each of two runs against ``server``: a reader runs an example
    again (after a typo, or tomorrow), so each must work on a second run as on the first."""
    code = block.replace('"UseDevelopmentStorage=true"', repr(server.connection_string))
    outputs = []
    for _ in range(2):
        output = io.StringIO()
        with contextlib.redirect_stdout(output):
            exec(compile(code, str(README), "exec"), {})
        outputs.append(output.getvalue())
    return outputs


def test_every_python_example_is_run() -> None:
    """Each Python block of the README runs in a test: the three client examples below, and the
    pytest plugin's example (its ``tabulae_`` fixtures) in tests/testing/test_pytest_plugin.py."""
    clients = ["TableServiceClient", "QueueClient", "BlobServiceClient"]
    kinds = [
        next((c for c in clients if c in block), "plugin" if "tabulae_" in block else "untested")
        for block in python_blocks()
    ]
    assert sorted(kinds) == sorted([*clients, "plugin"])


def test_readme_python_example_runs(server: ServerProcess) -> None:
    [block] = [b for b in python_blocks() if "TableServiceClient" in b]
    for output in run_twice(block, server):
        assert "'name': 'Ada'" in output
    TableServiceClient.from_connection_string(server.connection_string).delete_table("people")


def test_readme_queue_example_runs(server: ServerProcess) -> None:
    [block] = [b for b in python_blocks() if "QueueClient" in b]
    assert run_twice(block, server) == ["ship order 42 1\n"] * 2
    QueueServiceClient.from_connection_string(server.connection_string).delete_queue("orders")


def test_readme_blob_example_runs(server: ServerProcess) -> None:
    [block] = [b for b in python_blocks() if "BlobServiceClient" in b]
    for output in run_twice(block, server):
        assert output.splitlines() == ["b'{\"ok\": true}'", "['2026/11/']"]
    BlobServiceClient.from_connection_string(server.connection_string).delete_container("reports")
