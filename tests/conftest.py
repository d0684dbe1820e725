"""Fixtures shared by every test: a real server process, SDK clients, unique names."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.serverproc import ServerProcess

_names = itertools.count()


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One durable server for the session, on a free port with a temporary data directory."""
    process = ServerProcess(tmp_path_factory.mktemp("data")).start()
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
