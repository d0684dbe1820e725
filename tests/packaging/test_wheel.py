"""What a user installs: ``python -m build`` makes an sdist and a wheel from the sources, the
wheel installs into a fresh virtual environment that has no build tools (not even pip), and
there ``tabulae serve`` answers one call per service and serves the console's pages and files.

Needs the network for PyPI (the build backend and the wheel's dependencies; pip's cache makes
later runs quicker)."""

from __future__ import annotations

import http.client
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest
from azure.data.tables import TableServiceClient
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueServiceClient

import tabulae
from tests.serverproc import ServerProcess

REPO = Path(__file__).resolve().parents[2]
CARRIED = ("tabulae/console/templates/base.html", "tabulae/console/static/console.css")
SOURCES = (
    "tabulae",
    "pyproject.toml",
    "README.md",
    "CHANGELOG.md",
    "ARCHITECTURE.md",
    "Makefile",
    "MANIFEST.in",
)


def _env() -> dict[str, str]:
    """The environment without the checkout on PYTHONPATH: what runs is what was installed."""
    return {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}


def _pip(python: Path, *args: str) -> None:
    """The test environment's pip, installing into another interpreter's environment."""
    pip = [
        sys.executable,
        "-m",
        "pip",
        "--python",
        str(python),
        "install",
        "--quiet",
        "--disable-pip-version-check",
    ]
    subprocess.run([*pip, *args], check=True, capture_output=True, timeout=600, env=_env())


def _source_copy(folder: Path) -> Path:
    """The files a release is built from, copied, so that building leaves nothing in the checkout."""
    for name in SOURCES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, folder / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, folder / name)
    return folder


def _get(port: int, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _start_with(server: ServerProcess, program: Path) -> None:
    """Start ``server`` with the installed program, not this checkout's module."""
    command = [
        str(program), "serve", "--port", str(server.port), "--queue-port", str(server.queue_port),
        "--blob-port", str(server.blob_port), "--data-dir", str(server.data_dir), *server.extra_args,
    ]  # fmt: skip
    server.process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_env(), start_new_session=True
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert server.process.poll() is None, server.process.stderr.read() if server.process.stderr else ""
        try:
            with socket.create_connection(("127.0.0.1", server.port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("the installed tabulae did not listen in time")


@pytest.mark.timeout(900)
def test_build_install_in_a_fresh_venv_and_serve(tmp_path: Path) -> None:
    builder = tmp_path / "builder"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(builder)], check=True)
    _pip(builder / "bin" / "python", "build", "setuptools>=77")
    dist = tmp_path / "dist"
    source = _source_copy(tmp_path / "source")
    subprocess.run(
        [builder / "bin" / "python", "-m", "build", "--no-isolation", "--outdir", str(dist), str(source)],
        check=True,
        capture_output=True,
        timeout=600,
        env=_env(),
    )
    version = tabulae.__version__
    [wheel] = dist.glob(f"tabulae-{version}-*.whl")
    [sdist] = dist.glob(f"tabulae-{version}.tar.gz")
    with zipfile.ZipFile(wheel) as archive:
        assert set(CARRIED) <= set(archive.namelist())
        entry_points = archive.read(f"tabulae-{version}.dist-info/entry_points.txt").decode()
    assert "[pytest11]\ntabulae = tabulae.testing.pytest_plugin" in entry_points
    with tarfile.open(sdist) as archive:
        carried = {name.partition("/")[2] for name in archive.getnames()}
    assert {*CARRIED, "CHANGELOG.md", "README.md", "pyproject.toml"} <= carried

    fresh = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(fresh)], check=True)
    _pip(fresh / "bin" / "python", str(wheel))
    shown = subprocess.run(
        [fresh / "bin" / "tabulae", "--version"], capture_output=True, text=True, check=True, env=_env()
    )
    assert shown.stdout.strip() == f"tabulae {version}"
    # No build tools in the fresh environment: what runs there is the wheel's content only.
    probe = "import importlib.util as u; print([m for m in ('setuptools', 'pip', 'build') if u.find_spec(m)])"
    found = subprocess.run(
        [fresh / "bin" / "python", "-c", probe], capture_output=True, text=True, env=_env()
    )
    assert found.stdout == "[]\n"

    server = ServerProcess(tmp_path / "data", extra_args=["--workers", "1"])
    _start_with(server, fresh / "bin" / "tabulae")
    try:
        text = server.connection_string
        with TableServiceClient.from_connection_string(text) as tables:
            tables.create_table("smoke").create_entity({"PartitionKey": "p", "RowKey": "r"})
        with QueueServiceClient.from_connection_string(text) as queues:
            queues.create_queue("smoke").send_message("m")
        with BlobServiceClient.from_connection_string(text) as blobs:
            blobs.create_container("smoke").upload_blob("b", b"x")
        status, page = _get(server.port, "/-/console/signin")
        assert status == 200 and b"<html" in page.lower()
        status, css = _get(server.port, "/-/console/static/console.css")
        assert status == 200 and css == (REPO / CARRIED[1]).read_bytes()
        assert _get(server.port, "/-/ready")[0] == 200
    finally:
        server.stop()
