"""The JavaScript SDK, ``@azure/storage-blob`` unchanged, through the Blob operations users call
most: containers, uploads (one shot and staged blocks), ranged downloads, listings, append blobs,
leases, conditions, snapshots, copies, SAS and anonymous reads.

The test installs the package itself with npm (once, into ``$TABULAE_TEST_CACHE``, default
``~/.cache/tabulae-test``) and runs ``js/blob_sdk.js`` with Node against the session server of
each store. Without node and npm it is skipped locally and fails under CI, like the JavaScript
queue test.

It runs with today's release and with 12.8.0, of the releases (12.6.0 to 12.8.0) that send
``x-ms-encryption-algorithm: AES256`` on every request without a key, as Storage Explorer did
with them: Azure took those as requests without a customer-provided key.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.npm_cache import installed, run_node
from tests.serverproc import ServerProcess

#: The releases run, each installed into a cache directory of its own.
VERSIONS = ("12.34.0", "12.8.0")
SCRIPT = Path(__file__).parents[1] / "js" / "blob_sdk.js"


@pytest.fixture(scope="session", params=VERSIONS)
def blob_node_modules(request: pytest.FixtureRequest) -> Path:
    version = request.param
    folder = "js-blob" if version == VERSIONS[0] else f"js-blob-{version}"
    return installed(folder, f"@azure/storage-blob@{version}", "@azure/storage-blob/package.json")


def test_blob_operations_through_the_javascript_sdk(server: ServerProcess, blob_node_modules: Path) -> None:
    assert run_node(SCRIPT, blob_node_modules, str(server.blob_port)).startswith("ok ")
