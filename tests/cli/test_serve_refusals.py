"""``tabulae serve`` with a data directory it cannot use, as a newcomer meets it (issue 29).

Each case runs a real server process, with one worker and with two, and wants what a user
needs: a non-zero exit at once, one line ``tabulae: CODE: message`` on stderr saying what is
wrong, no start-up banner (the server never served), and nothing of a store left behind. The
directories are made unwritable in ways that hold for root too (the tests run as root, where
permission bits stop nothing): an immutable directory (``chattr +i``), and a read-only bind
mount inside a mount namespace of the server's own (``unshare``), so nothing outside sees it.

A worker that fails at start-up for a reason no check foresees (here a database file that is
not a database) must stop the server with a non-zero status, never leave it running without
workers or exit 0.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.serverproc import free_port

WORKERS = [1, 2]


def serve(data_dir: Path, workers: int, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    command = [
        *prefix, sys.executable, "-m", "tabulae", "serve", "--data-dir", str(data_dir),
        "--workers", str(workers), "--port", str(free_port()), "--queue-port", str(free_port()),
        "--blob-port", str(free_port()),
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def assert_refused(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode != 0, result
    assert result.stdout == "", "a banner was printed for a server that never served"
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("tabulae: InvalidDataDir: "), lines[0]
    for word in words:
        assert word in lines[0], lines[0]


@contextlib.contextmanager
def unwritable(directory: Path) -> Iterator[None]:
    """``directory`` refuses new files, for root as for anyone: immutable (root), or mode 555."""
    directory.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        directory.chmod(0o555)
        try:
            yield
        finally:
            directory.chmod(0o755)
        return
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    made = subprocess.run(["chattr", "+i", str(directory)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"this file system has no immutable flag: {made.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(directory)], check=True)


@pytest.mark.parametrize("workers", WORKERS)
def test_a_file_as_data_dir_is_refused_before_the_banner(tmp_path: Path, workers: int) -> None:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a directory\n")
    assert_refused(serve(a_file, workers), str(a_file), "is a file, not a directory", "--data-dir")
    assert a_file.read_text() == "not a directory\n"


@pytest.mark.parametrize("workers", WORKERS)
def test_a_data_dir_below_a_file_is_refused(tmp_path: Path, workers: int) -> None:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("")
    assert_refused(serve(a_file / "data", workers), str(a_file), "is a file, not a directory")


@pytest.mark.parametrize("workers", WORKERS)
def test_an_unwritable_data_dir_is_refused_and_left_empty(tmp_path: Path, workers: int) -> None:
    data = tmp_path / "data"
    with unwritable(data):
        assert_refused(serve(data, workers), f"cannot write in {data}")
        assert list(data.iterdir()) == [], "a partial store was left behind"


@pytest.mark.parametrize("workers", WORKERS)
def test_a_missing_data_dir_that_cannot_be_created_is_refused(tmp_path: Path, workers: int) -> None:
    parent = tmp_path / "parent"
    with unwritable(parent):
        assert_refused(serve(parent / "data", workers), f"cannot create {parent / 'data'}")
        assert list(parent.iterdir()) == []


@pytest.mark.parametrize("workers", WORKERS)
def test_a_data_dir_on_a_read_only_file_system_is_refused(tmp_path: Path, workers: int) -> None:
    data = tmp_path / "data"
    data.mkdir()
    # A read-only bind mount of the directory over itself, in a mount namespace the server alone
    # lives in (the mount disappears with it).
    remount = 'mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" && exec "$@"'
    prefix = ("unshare", "--mount", "sh", "-c", remount, str(data))
    probe = subprocess.run([*prefix, "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"no mount namespace here (unshare needs CAP_SYS_ADMIN): {probe.stderr.strip()}")
    assert_refused(serve(data, workers, prefix), f"cannot write in {data}", "Read-only file system")
    assert list(data.iterdir()) == []


@pytest.mark.parametrize("workers", WORKERS)
def test_a_worker_that_cannot_start_stops_the_server_with_an_error(tmp_path: Path, workers: int) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "tabulae.db").write_bytes(b"this is not an SQLite database, whatever its name says\n" * 20)
    result = serve(data, workers)
    assert result.returncode == 3, result
    assert result.stdout == "", "a banner was printed for a server that never served"
    last = result.stderr.splitlines()[-1]
    assert last.startswith("tabulae: StartupFailed: "), result.stderr
    assert "file is not a database" in result.stderr
    assert "Traceback" not in result.stderr
