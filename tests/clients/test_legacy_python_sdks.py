"""Older generations of Microsoft's Python SDKs, still found in production code, against a real
server on each store: the legacy azure-storage-blob and azure-storage-queue 2.1.0 and
azure-cosmosdb-table 1.0.6 (``BlockBlobService``, ``QueueService``, ``TableService``), and
azure-storage-blob 12.8.1, whose Blob Batch writes sub-request paths without the account.

Both the legacy packages and 12.x install as ``azure.storage.blob``, so neither can share the
test environment: each set is installed with pip into a virtual environment of its own (once,
under ``$TABULAE_TEST_CACHE``, default ``~/.cache/tabulae-test``), and its script
(``tests/clients/legacy/``) runs there as a subprocess, printing ``ok`` or failing with the
client's error. Without PyPI the test is skipped locally and fails under CI, like the
JavaScript SDK tests without npm.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.serverproc import ServerProcess

SCRIPTS = Path(__file__).parent / "legacy"

#: The environments, by name: the exact packages each holds (pinned, so the wire is the one the
#: script was written against). azure-core and six for 12.8.1: it imports six, which later
#: azure-core releases no longer bring.
ENVIRONMENTS = {
    "legacy": (
        "azure-storage-blob==2.1.0",
        "azure-storage-common==2.1.0",
        "azure-storage-queue==2.1.0",
        "azure-cosmosdb-table==1.0.6",
    ),
    "blob-12.8": ("azure-storage-blob==12.8.1", "azure-core==1.41.0", "six==1.17.0"),
}

#: (environment, script, the service it talks to).
RUNS = [
    ("legacy", "blob_2x.py", "blob"),
    ("legacy", "queue_2x.py", "queue"),
    ("legacy", "table_cosmosdb.py", "table"),
    ("blob-12.8", "blob_12_8.py", "blob"),
]


def _cache() -> Path:
    return Path(os.environ.get("TABULAE_TEST_CACHE", Path.home() / ".cache" / "tabulae-test"))


def _environment(name: str) -> Path:
    """The Python of environment ``name``, created and filled on first use. Its folder is named
    after its packages, so a change of pins makes a new one rather than reusing a stale one."""
    packages = ENVIRONMENTS[name]
    digest = hashlib.sha256("\n".join(packages).encode()).hexdigest()[:12]
    home = _cache() / f"py-{name}-{digest}"
    python = home / "bin" / "python"
    done = home / "installed"
    if done.exists():
        return python
    try:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(home)], check=True, capture_output=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *packages],
            check=True,
            capture_output=True,
            text=True,
            timeout=600,
        )
    except subprocess.CalledProcessError as error:
        if os.environ.get("CI"):
            pytest.fail(f"could not install {packages}: {error.stderr}")
        pytest.skip(f"could not install {packages} (no PyPI?)")
    done.write_text("\n".join(packages))
    return python


@pytest.fixture(scope="session")
def environments() -> dict[str, Path]:
    return {name: _environment(name) for name in ENVIRONMENTS}


def _endpoint(server: ServerProcess, service: str) -> str:
    return {"blob": server.blob_endpoint, "queue": server.queue_endpoint, "table": server.endpoint}[service]


@pytest.mark.parametrize(("environment", "script", "service"), RUNS, ids=[run[1] for run in RUNS])
def test_older_python_sdk(
    server: ServerProcess, environments: dict[str, Path], environment: str, script: str, service: str
) -> None:
    name = "legacy" + uuid.uuid4().hex[:12]
    result = subprocess.run(
        [str(environments[environment]), str(SCRIPTS / script), _endpoint(server, service), name],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:] + result.stdout[-2000:]
    assert result.stdout.strip().endswith("ok"), result.stdout[-2000:]
