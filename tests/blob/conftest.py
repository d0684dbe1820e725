"""Servers shared by the Blob tests of several modules (each one started once per session), and
raw signed requests to the session server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.backends import backend_names
from tests.blobhttp import BlobHttp
from tests.conftest import fresh_store
from tests.serverproc import ServerProcess


@pytest.fixture(scope="session", params=backend_names())
def versioned(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server whose accounts keep versions (``--blob-versioning``), one per backend for the
    session: the modules that need one share it, each in containers of its own."""
    extra = [*fresh_store(request.param), "--blob-versioning"]
    process = ServerProcess(tmp_path_factory.mktemp("versioned"), extra_args=extra, backend=request.param)
    process.start()
    yield process
    process.stop()


@pytest.fixture
def http(server: ServerProcess) -> BlobHttp:
    """Signed raw requests to the session server's Blob port."""
    return BlobHttp(server.blob_port)
