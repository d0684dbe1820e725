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

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.serverproc import ServerProcess

#: The releases run, each installed into a cache directory of its own.
VERSIONS = ("12.34.0", "12.8.0")
SCRIPT = Path(__file__).parents[1] / "js" / "blob_sdk.js"


@pytest.fixture(scope="session", params=VERSIONS)
def blob_node_modules(request: pytest.FixtureRequest) -> Path:
    if not (shutil.which("node") and shutil.which("npm")):
        if os.environ.get("CI"):
            pytest.fail("node and npm are needed for the JavaScript SDK test")
        pytest.skip("node and npm are not installed")
    version = request.param
    folder = "js-blob" if version == VERSIONS[0] else f"js-blob-{version}"
    cache = Path(os.environ.get("TABULAE_TEST_CACHE", Path.home() / ".cache" / "tabulae-test")) / folder
    modules = cache / "node_modules"
    if not (modules / "@azure" / "storage-blob" / "package.json").exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                "npm",
                "install",
                "--no-audit",
                "--no-fund",
                "--silent",
                "--prefix",
                str(cache),
                f"@azure/storage-blob@{version}",
            ],
            check=True,
            capture_output=True,
            timeout=300,
        )
    return modules


def test_blob_operations_through_the_javascript_sdk(server: ServerProcess, blob_node_modules: Path) -> None:
    result = subprocess.run(
        ["node", str(SCRIPT), str(server.blob_port)],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "NODE_PATH": str(blob_node_modules)},
    )
    assert result.returncode == 0, result.stderr + result.stdout
    assert result.stdout.startswith("ok "), result.stdout
