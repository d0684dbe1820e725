"""Node packages the tests drive (the JavaScript SDKs, AzCopy's npm build), installed with npm
once into a folder of their own under ``$TABULAE_TEST_CACHE`` (default ``~/.cache/tabulae-test``)
and reused by later runs. Without node and npm a test that needs one is skipped locally and
fails under CI (``CI`` set), as the PostgreSQL cases do: a CI that lacks them cannot pass green.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest


def installed(folder: str, package: str, marker: str) -> Path:
    """The ``node_modules`` folder of cache folder ``folder`` holding ``package`` (a name with
    its version, as npm takes it), installed first unless ``marker`` (a path within
    ``node_modules``) shows an earlier run did."""
    if not (shutil.which("node") and shutil.which("npm")):
        if os.environ.get("CI"):
            pytest.fail(f"node and npm are needed to install {package}")
        pytest.skip("node and npm are not installed")
    cache = Path(os.environ.get("TABULAE_TEST_CACHE", Path.home() / ".cache" / "tabulae-test")) / folder
    modules = cache / "node_modules"
    if not (modules / marker).exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--silent", "--prefix", str(cache), package],
            check=True,
            capture_output=True,
            timeout=300,
        )
    return modules


def run_node(script: Path, modules: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Run a script of ``tests/js`` with Node over the packages in ``modules`` and return what it
    printed; the scripts print ``ok`` (and a name) when every step went as on Azure, and fail with
    the error otherwise."""
    result = subprocess.run(
        ["node", str(script), *args],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "NODE_PATH": str(modules), **(env or {})},
    )
    assert result.returncode == 0, result.stderr + result.stdout
    assert result.stdout.startswith("ok"), result.stdout
    return result.stdout.strip()
