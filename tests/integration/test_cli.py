"""``tabulae serve`` as a user starts it: flags, the start-up line, and refusals before start."""

from __future__ import annotations

import glob
import socket
import subprocess
import sys
from pathlib import Path

from tests.serverproc import free_port


def _serve(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tabulae", "serve", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def test_help_lists_every_setting_with_its_default() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tabulae", "serve", "--help"], capture_output=True, text=True, check=True
    )
    for flag in ("--host", "--port", "--queue-port", "--blob-port", "--services", "--data-dir", "--workers"):
        assert flag in result.stdout
    assert "(default 127.0.0.1)" in result.stdout and "(default 10002)" in result.stdout


def test_a_busy_port_is_reported_before_any_banner(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = _serve("--port", str(port), "--services", "table", "--data-dir", str(tmp_path))
    assert result.returncode != 0
    assert result.stdout == ""  # no "Table service on ..." line for a server that never listened
    assert f"cannot listen on 127.0.0.1:{port} for the Table service" in result.stderr
    assert "--port" in result.stderr


def test_in_memory_with_a_store_url_is_refused_and_leaves_nothing_behind() -> None:
    before = set(glob.glob("/dev/shm/tabulae-mem-*"))
    result = _serve(
        "--in-memory", "--store", "postgresql://nobody@127.0.0.1:1/none", "--port", str(free_port())
    )
    assert result.returncode != 0
    assert "--in-memory and --store exclude each other" in result.stderr
    assert set(glob.glob("/dev/shm/tabulae-mem-*")) == before


def test_unknown_services_and_bad_worker_counts_are_refused() -> None:
    result = _serve("--services", "table,files")
    assert result.returncode != 0 and "--services" in result.stderr
    result = _serve("--workers", "0")
    assert result.returncode != 0 and "--workers" in result.stderr


def test_the_banner_comes_once_listening_and_names_each_endpoint(tmp_path: Path) -> None:
    port = free_port()
    command = [
        sys.executable, "-m", "tabulae", "serve", "--services", "table", "--port", str(port),
        "--data-dir", str(tmp_path), "--workers", "1",
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # the port was bound before the banner was printed
        assert f"Table service on http://127.0.0.1:{port}/devstoreaccount1" in banner
    finally:
        process.terminate()
        code = process.wait(15)
        if process.stdout is not None:
            process.stdout.close()
    assert code == 0
