"""Every ``tabulae`` command fails the same way (issue 29): one line ``tabulae: CODE: message`` on
stderr and a non-zero exit status, never a Python traceback; Ctrl-C exits 130 and says nothing.

CODE is Azure's error code where the service answered (the server here is a real Tabulae, which
answers as Azure does), else a code of ours naming what went wrong on this side. Every command
is run as a user runs it, in a subprocess.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess, free_port

ONE_LINE = re.compile(r"tabulae: ([A-Za-z0-9]+): \S.*\n")
MALFORMED = "this is not a connection string"
BAD_KEY = f"DefaultEndpointsProtocol=http;AccountName={DEV_ACCOUNT};AccountKey=not-base64!;TableEndpoint=http://127.0.0.1:1/{DEV_ACCOUNT};"


def nobody() -> str:
    """A connection string whose endpoints nothing listens on."""
    return ServerProcess(Path("unused")).connection_string  # free ports, never started


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = ServerProcess(tmp_path_factory.mktemp("data"), ["--workers", "1", "--in-memory"]).start()
    yield server
    server.stop()


def tabulae(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tabulae", *args]
    return subprocess.run(command, capture_output=True, text=True, input=stdin, timeout=120)


def failed(result: subprocess.CompletedProcess[str], code: str, status: int | None = None) -> str:
    """The one line of a failed command, checked: its format, its code, its exit status."""
    assert result.returncode != 0, result
    if status is not None:
        assert result.returncode == status, result
    assert "Traceback" not in result.stderr, result.stderr
    found = ONE_LINE.fullmatch(result.stderr)
    assert found is not None, f"not one 'tabulae: CODE: message' line: {result.stderr!r}"
    assert found.group(1) == code, result.stderr
    return result.stderr


@pytest.mark.parametrize(
    ("name", "code"),
    [("bad_name!", "InvalidResourceName"), ("ab", "OutOfRangeInput"), ("tables", "InvalidInput")],
)
def test_a_bad_table_name_gets_the_services_code(live: ServerProcess, name: str, code: str) -> None:
    result = tabulae("table", "create", name, "--connection-string", live.connection_string)
    failed(result, code, 1)


def test_service_refusals_of_every_data_command_are_one_line(live: ServerProcess, tmp_path: Path) -> None:
    cs = ("--connection-string", live.connection_string)
    assert tabulae("table", "create", "clierrors", *cs).returncode == 0
    failed(tabulae("table", "create", "clierrors", *cs), "TableAlreadyExists", 1)
    failed(tabulae("entity", "get", "nosuchtable", "p", "r", *cs), "TableNotFound", 1)
    failed(tabulae("entity", "get", "clierrors", "p", "r", *cs), "ResourceNotFound", 1)
    failed(tabulae("entity", "get", "bad!", "p", "r", *cs), "InvalidResourceName", 1)
    failed(tabulae("entity", "put", "clierrors", '{"PartitionKey": "p"}', *cs), "InvalidFormat", 1)
    failed(tabulae("entity", "put", "clierrors", "{not json", *cs), "InvalidFormat", 1)
    failed(tabulae("export", "nosuchtable", str(tmp_path / "out.jsonl"), *cs), "TableNotFound", 1)
    failed(tabulae("import", str(tmp_path / "missing.jsonl"), "clierrors", *cs), "FileNotFound", 1)
    failed(tabulae("index", "list", "nosuchtable", *cs), "TableNotFound", 1)


COMMANDS = [
    ("table", "list"),
    ("table", "create", "sometable"),
    ("entity", "get", "sometable", "p", "r"),
    ("entity", "query", "sometable"),
    ("export", "sometable", "-"),
    ("import", "/dev/null", "sometable"),
    ("copy", "sometable", "othertable"),
    ("index", "list"),
    ("stress", "--duration", "1"),
    ("examples", "log-tail"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_a_malformed_connection_string_is_one_line(command: tuple[str, ...]) -> None:
    failed(tabulae(*command, "--connection-string", MALFORMED), "InvalidConnectionString", 2)


@pytest.mark.parametrize("command", [("table", "list"), ("stress",), ("examples",)], ids=" ".join)
def test_a_key_that_is_not_base64_is_one_line(command: tuple[str, ...]) -> None:
    line = failed(tabulae(*command, "--connection-string", BAD_KEY), "InvalidConnectionString", 2)
    assert "not-base64" not in line  # a key, even a broken one, is never printed


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_an_unreachable_server_is_one_line(command: tuple[str, ...]) -> None:
    result = tabulae(*command, "--connection-string", nobody())
    failed(result, "ConnectionRefused")


def test_top_of_an_unreachable_server_is_one_line() -> None:
    failed(tabulae("top", f"127.0.0.1:{free_port()}", "--iterations", "1"), "ConnectionRefused", 1)


@pytest.mark.parametrize(
    "args",
    [
        ("table", "frob"),
        ("entity", "get"),
        ("export",),
        ("serve", "--workers", "0"),
        ("serve", "--port", "10002", "--queue-port", "10002"),
        ("serve", "--account", "bad name:key"),
        ("serve", "--oauth-role", "00aa=admin"),
        ("serve", "--in-memory", "--store", "postgresql://nobody@127.0.0.1:1/none"),
        ("db", "init"),
        ("stress", "--mix", "1,2"),
        ("examples", "no-such-pattern"),
        ("copy", "a", "b", "--endpoint", "http://127.0.0.1:1/x", "--connection-string", "x"),
    ],
    ids=lambda a: " ".join(a),
)
def test_usage_errors_are_one_line(args: tuple[str, ...]) -> None:
    failed(tabulae(*args), "InvalidArguments", 2)


def test_the_dev_key_is_never_shown_in_an_error(live: ServerProcess) -> None:
    result = tabulae("table", "create", "bad_name!", "--connection-string", live.connection_string)
    assert DEV_KEY not in result.stderr and DEV_KEY not in result.stdout


def test_ctrl_c_exits_130_quietly() -> None:
    """A server that accepts connections and never answers: the command waits for it until the
    user presses Ctrl-C."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        cs = (
            f"DefaultEndpointsProtocol=http;AccountName={DEV_ACCOUNT};AccountKey={DEV_KEY};"
            f"TableEndpoint=http://127.0.0.1:{port}/{DEV_ACCOUNT};"
        )
        command = [sys.executable, "-m", "tabulae", "table", "list", "--connection-string", cs]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            connection, _ = silent.accept()  # the command is now waiting for an answer
            with connection:
                time.sleep(0.5)
                process.send_signal(signal.SIGINT)
                out, err = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()  # and its pipes closed, so nothing is left for a later test
    assert process.returncode == 130
    assert err == "" and out == ""
