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


def test_readme_python_example_runs(server: ServerProcess) -> None:
    block = re.search(r"```python\n(.*?)```", README.read_text(), re.S)
    assert block is not None
    code = block.group(1).replace('"UseDevelopmentStorage=true"', repr(server.connection_string))
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(code, str(README), "exec"), {})
    assert "'name': 'Ada'" in output.getvalue()
    TableServiceClient.from_connection_string(server.connection_string).delete_table("people")


def test_readme_queue_example_runs(server: ServerProcess) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    [block] = [b for b in blocks if "QueueClient" in b]
    code = block.replace('"UseDevelopmentStorage=true"', repr(server.connection_string))
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(code, str(README), "exec"), {})
    assert output.getvalue() == "ship order 42 1\n"
    QueueServiceClient.from_connection_string(server.connection_string).delete_queue("orders")


def test_readme_blob_example_runs(server: ServerProcess) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    [block] = [b for b in blocks if "BlobServiceClient" in b]
    code = block.replace('"UseDevelopmentStorage=true"', repr(server.connection_string))
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(code, str(README), "exec"), {})
    assert output.getvalue().splitlines() == ["b'{\"ok\": true}'", "['2026/11/']"]
    BlobServiceClient.from_connection_string(server.connection_string).delete_container("reports")
