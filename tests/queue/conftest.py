"""Fixtures of the Queue tests that need a server over HTTPS accepting bearer tokens."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.serverproc import ServerProcess
from tests.tls import SelfSignedCert


@pytest.fixture(scope="module")
def oauth_server(tmp_path_factory: pytest.TempPathFactory, cert: SelfSignedCert) -> Iterator[ServerProcess]:
    """One worker, HTTPS with ``cert``, ``--oauth basic``: a module's own server."""
    args = ["--workers", "1", "--cert", str(cert.cert), "--key", str(cert.key), "--oauth", "basic"]
    process = ServerProcess(tmp_path_factory.mktemp("oauthdata"), extra_args=args).start()
    yield process
    process.stop()
