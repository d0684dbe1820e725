"""``tabulae serve`` as a user starts it: flags, the start-up line, and refusals before start."""

from __future__ import annotations

import base64
import glob
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from azure.core.credentials import AccessToken
from azure.data.tables import TableServiceClient
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueServiceClient

from tests.serverproc import ServerProcess, free_port
from tests.tls import make_self_signed_cert


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
    assert result.stderr.startswith(
        f"tabulae: AddressInUse: cannot listen on 127.0.0.1:{port} for the Table service"
    )
    assert result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr
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


def test_oauth_basic_needs_a_certificate(tmp_path: Path) -> None:
    """``--help`` says it and start-up enforces it: the SDKs send bearer tokens over HTTPS only
    (azure-core refuses a bearer credential on an http:// endpoint), so a plain-HTTP server with
    bearer tokens on could only ever be used by hand."""
    result = _serve("--oauth", "basic", "--port", str(free_port()), "--data-dir", str(tmp_path))
    assert result.returncode != 0
    assert "--oauth basic needs --cert" in result.stderr
    assert result.stdout == ""
    help_text = subprocess.run(
        [sys.executable, "-m", "tabulae", "serve", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "needs --cert" in " ".join(help_text.split())


def test_sdk_refuses_bearer_tokens_over_http() -> None:
    """The client behaviour the rule above follows: azure-data-tables will not even build a
    client with a token credential for an http:// endpoint."""

    class Token:
        def get_token(self, *scopes: str, **kwargs: object) -> AccessToken:
            return AccessToken("token", 2**31)

    with pytest.raises(ValueError, match="HTTPS"):
        TableServiceClient(f"http://127.0.0.1:{free_port()}/devstoreaccount1", credential=Token())  # type: ignore[arg-type]


def test_top_against_a_dead_server_fails(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "tabulae", "top", f"127.0.0.1:{free_port()}", "--iterations", "2"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert result.stderr.startswith("tabulae: ConnectionRefused: cannot read")


def test_top_against_a_live_server_succeeds(server: ServerProcess) -> None:
    endpoint = f"127.0.0.1:{server.port}"
    command = [sys.executable, "-m", "tabulae", "top", endpoint, "--iterations", "1", "--interval", "0"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert "cannot read" not in result.stdout


def test_make_run_installs_the_server_without_the_test_toolchain(tmp_path: Path) -> None:
    """``make run`` installs ``.`` alone; ``make test`` adds the ``[test]`` extra."""
    root = Path(__file__).resolve().parents[2]
    venv = tmp_path / "venv"

    def plan(target: str) -> str:
        result = subprocess.run(
            ["make", "-n", "-C", str(root), target, f"VENV={venv}"],
            capture_output=True,
            text=True,
            check=True,
        )
        return result.stdout

    run = plan("run")
    assert f"{venv}/bin/pip install --quiet -e ." in run and "[test]" not in run
    assert f"{venv}/bin/tabulae serve" in run
    flagged = subprocess.run(
        ["make", "-n", "-C", str(root), "run", f"VENV={venv}", "ARGS=--port 20002 --workers 1"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"{venv}/bin/tabulae serve --port 20002 --workers 1" in flagged
    test = plan("test")
    assert "-e '.[test]'" in test and "scripts/check" in test


def _first_lines(process: subprocess.Popen[str], count: int, timeout: float = 60) -> list[str]:
    """The first ``count`` lines the server prints, or fewer if it prints no more in time."""
    lines: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        for _ in range(count):
            lines.append(process.stdout.readline().rstrip("\n"))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    return list(lines)


def test_the_banner_gives_the_console_and_a_connection_string_that_works() -> None:
    port = free_port()
    queue_port, blob_port = free_port(), free_port()
    command = [
        sys.executable, "-m", "tabulae", "serve", "--port", str(port), "--queue-port", str(queue_port),
        "--blob-port", str(blob_port), "--in-memory", "--workers", "1",
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert process.stdout is not None
        lines = _first_lines(process, 3)
        assert lines[1] == f"Console: http://127.0.0.1:{port}/-/console/"
        label, _, connection_string = lines[2].partition(": ")
        assert label == "Connection string (devstoreaccount1)"
        assert connection_string == (
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
            "AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;"
            f"BlobEndpoint=http://127.0.0.1:{blob_port}/devstoreaccount1;"
            f"QueueEndpoint=http://127.0.0.1:{queue_port}/devstoreaccount1;"
            f"TableEndpoint=http://127.0.0.1:{port}/devstoreaccount1;"
        )
        # Copied into an SDK, it reaches every service.
        with TableServiceClient.from_connection_string(connection_string) as tables:
            tables.create_table("banner")
            assert [t.name for t in tables.list_tables()] == ["banner"]
        with QueueServiceClient.from_connection_string(connection_string) as queues:
            queues.create_queue("banner")
            assert [q.name for q in queues.list_queues()] == ["banner"]
        with BlobServiceClient.from_connection_string(connection_string) as blobs:
            blobs.create_container("banner")
            assert [c.name for c in blobs.list_containers()] == ["banner"]
    finally:
        process.terminate()
        process.wait(15)
        if process.stdout is not None:
            process.stdout.close()


def test_the_banner_never_prints_the_key_of_an_account_of_ours() -> None:
    key = base64.b64encode(b"a secret key of thirty-two bytes").decode()
    command = [
        sys.executable, "-m", "tabulae", "serve", "--port", str(free_port()),
        "--queue-port", str(free_port()), "--blob-port", str(free_port()), "--in-memory",
        "--workers", "1", "--services", "table,queue", "--account", f"myaccount:{key}", "--no-console",
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert process.stdout is not None
        banner = _first_lines(process, 2)
    finally:
        process.terminate()
        process.wait(15)
        if process.stdout is not None:
            process.stdout.close()
    assert banner[1].startswith(
        "Connection string (myaccount): DefaultEndpointsProtocol=http;AccountName=myaccount;"
        "AccountKey=<your key>;QueueEndpoint=http://127.0.0.1:"
    )
    assert "BlobEndpoint" not in banner[1] and "Console" not in "".join(banner)
    assert key not in "".join(banner)


@pytest.mark.parametrize("roles", [[], ["--oauth-role", "11111111-2222-3333-4444-555555555555=reader"]])
def test_unchecked_bearer_tokens_beyond_loopback_are_warned_of(tmp_path: Path, roles: list[str]) -> None:
    """``--oauth basic`` checks no token's signature: allowed off loopback (Azurite's users run
    so in containers), but the start says who could then forge what."""
    cert = make_self_signed_cert(tmp_path / "tls")
    tls = ["--cert", str(cert.cert), "--key", str(cert.key), "--oauth", "basic", "--workers", "1", *roles]
    wide = ServerProcess(tmp_path / "wide", extra_args=["--host", "0.0.0.0", "--no-console", *tls]).start()
    wide.stop()
    said = wide.log_path.read_text()
    assert "tabulae: warning: --oauth basic does not check bearer tokens' signatures" in said
    assert ("the roles given with --oauth-role" if roles else "full access to every account") in said
    local = ServerProcess(tmp_path / "local", extra_args=tls).start()
    local.stop()
    assert "warning" not in local.log_path.read_text()
