"""The JavaScript SDK, ``@azure/storage-queue`` unchanged, through every Queue operation.

The test installs the package itself with npm (about ten seconds, once, into
``$TABULAE_TEST_CACHE``, default ``~/.cache/tabulae-test``) and runs ``js/queue_sdk.js`` with
Node against the session server of each store. Without node and npm it is skipped locally and
fails under CI, like the PostgreSQL cases. ``test_queue_client_shapes.py`` replays what the SDK
sends byte for byte without needing Node.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.npm_cache import installed, run_node
from tests.serverproc import ServerProcess
from tests.tls import TENANT, SelfSignedCert

PACKAGE = "@azure/storage-queue@12.30.0"
SCRIPT = Path(__file__).parents[1] / "js" / "queue_sdk.js"


@pytest.fixture(scope="session")
def node_modules() -> Path:
    return installed("js-queue", PACKAGE, "@azure/storage-queue/package.json")


def test_every_operation_through_the_javascript_sdk(server: ServerProcess, node_modules: Path) -> None:
    assert run_node(SCRIPT, node_modules, str(server.queue_port)).startswith("ok ")


def test_an_oversized_message_gets_413_not_a_reset(server: ServerProcess, node_modules: Path) -> None:
    """The SDK writes its whole 16 MiB body before reading; the answer it finds is Azure's."""
    assert run_node(SCRIPT.with_name("queue_oversized.js"), node_modules, str(server.queue_port)) == "ok"


def test_bearer_challenge_through_the_javascript_sdk(
    oauth_server: ServerProcess, cert: SelfSignedCert, node_modules: Path
) -> None:
    """A client with a wrong audience gets 401 with a challenge naming a tenant GUID, which the
    SDK needs to fetch a token for the challenge's resource and retry, as it does on Azure."""
    script = SCRIPT.with_name("queue_bearer_challenge.js")
    extra_ca = {"NODE_EXTRA_CA_CERTS": str(cert.cert)}
    assert run_node(script, node_modules, str(oauth_server.queue_port), TENANT, env=extra_ca) == "ok"
