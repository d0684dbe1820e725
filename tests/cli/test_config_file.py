"""``tabulae serve --config FILE``: settings from TOML, flags overriding the file, default CORS
rules for accounts without their own."""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.core.exceptions import HttpResponseError
from azure.data.tables import TableServiceClient
from azure.storage.queue import QueueServiceClient

from tabulae.config import ConfigError
from tabulae.config_file import read
from tabulae.model.encryption import scope_pairs
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, _kill_group, free_port

KEY = "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"


@pytest.fixture
def launched() -> Iterator[list[subprocess.Popen[bytes]]]:
    processes: list[subprocess.Popen[bytes]] = []
    yield processes
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(15)
        _kill_group(process.pid)
        if process.stderr:
            process.stderr.close()


def _serve(args: list[str], wait_for: list[int], launched: list[subprocess.Popen[bytes]]) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "tabulae", "serve", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    launched.append(process)
    deadline = time.monotonic() + 30
    for port in wait_for:  # ready: the worker has opened the store
        while True:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            try:
                conn.request("GET", "/-/ready")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                pass
            finally:
                conn.close()
            assert time.monotonic() < deadline
            time.sleep(0.05)


def _preflight(port: int, origin: str, account: str = "team") -> tuple[int, str | None]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(
            "OPTIONS",
            f"/{account}/Tables",
            headers={"Origin": origin, "Access-Control-Request-Method": "GET"},
        )
        response = conn.getresponse()
        response.read()
        return response.status, response.getheader("access-control-allow-origin")
    finally:
        conn.close()


def _connection_string(ports: dict[str, int], account: str, key: str) -> str:
    return (
        f"DefaultEndpointsProtocol=http;AccountName={account};AccountKey={key};"
        f"TableEndpoint=http://127.0.0.1:{ports['table']}/{account};"
        f"QueueEndpoint=http://127.0.0.1:{ports['queue']}/{account};"
    )


def test_a_config_file_sets_accounts_ports_store_and_cors(
    tmp_path: Path, launched: list[subprocess.Popen[bytes]]
) -> None:
    ports = {"table": free_port(), "queue": free_port()}
    config = tmp_path / "tabulae.toml"
    config.write_text(
        f"""
services = ["table", "queue"]
data-dir = "{tmp_path / "data"}"
workers = 1
access-log = true

[ports]
table = {ports["table"]}
queue = {ports["queue"]}

[accounts]
team = "{KEY}"

[targets]
partition = 500

[[cors]]
allowed-origins = ["http://localhost:3000"]
allowed-methods = ["GET", "PUT"]
max-age = 60
"""
    )
    _serve(["--config", str(config), "--console"], list(ports.values()), launched)
    assert (tmp_path / "data" / "tabulae.db").exists()
    with TableServiceClient.from_connection_string(_connection_string(ports, "team", KEY)) as tables:
        tables.create_table("fromfile")
        assert _preflight(ports["table"], "http://localhost:3000") == (200, "http://localhost:3000")
        assert _preflight(ports["table"], "http://elsewhere.test")[0] == 403
        # The account's own rules, once set, replace the defaults.
        from azure.data.tables import TableCorsRule

        tables.set_service_properties(cors=[TableCorsRule(["http://own.test"], ["GET"])])
        assert _preflight(ports["table"], "http://own.test") == (200, "http://own.test")
        assert _preflight(ports["table"], "http://localhost:3000")[0] == 403
    with (
        TableServiceClient.from_connection_string(_connection_string(ports, DEV_ACCOUNT, DEV_KEY)) as dev,
        pytest.raises(HttpResponseError),
    ):
        dev.create_table("notserved")


def test_flags_override_the_file(tmp_path: Path, launched: list[subprocess.Popen[bytes]]) -> None:
    filed, given = free_port(), free_port()
    table = free_port()
    config = tmp_path / "tabulae.toml"
    config.write_text(
        f'services = "table,queue"\nport = {table}\nqueue-port = {filed}\nin-memory = true\nworkers = 2\n'
    )
    _serve(["--config", str(config), "--queue-port", str(given), "--workers", "1"], [table, given], launched)
    ports = {"table": table, "queue": given}
    with QueueServiceClient.from_connection_string(_connection_string(ports, DEV_ACCOUNT, DEV_KEY)) as queues:
        queues.create_queue("overridden")
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", filed), timeout=1):
        pass
    assert (
        not (Path.cwd() / "tabulae-data" / "tabulae.db").exists() or True
    )  # in memory: nothing asserted here


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("colour = 'blue'", "colour: not a setting"),
        ("port = 'ten'", "port: expected a whole number"),
        ("access-log = 'yes'", "access-log: expected true or false"),
        ("oauth = 'full'", "oauth: expected one of off, basic"),
        ("[ports]\nfile = 1", "ports.file: expected table, queue or blob"),
        ("[[cors]]\nallowed-origins = ['*']", "a CORS rule needs allowed-origins and allowed-methods"),
        ("[[cors]]\nallowed-origins = ['*']\nallowed-methods = ['FETCH']", "FETCH is not one of"),
        ("port = ", "not valid TOML"),
        ("[oauth-roles]\nabc = 'admin'", "oauth-roles.abc: expected a role or a list of roles"),
        ("encryption-scope = [1]", "encryption-scope: expected a list of strings"),
        ("encryption-scope = 'a-b'", "--encryption-scope 'a-b': a scope name is 3 to 63 letters and digits"),
        ("encryption-scope = 'nobody:abc'", "the server does not serve account 'nobody'"),
    ],
)
def test_bad_files_are_refused_naming_the_key(tmp_path: Path, text: str, message: str) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(text + "\n")
    result = subprocess.run(
        [sys.executable, "-m", "tabulae", "serve", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ},
    )
    assert result.returncode != 0
    assert message in result.stderr
    assert result.stderr.startswith("tabulae: ")


def test_the_file_maps_onto_the_flags(tmp_path: Path) -> None:
    config = tmp_path / "all.toml"
    config.write_text(
        """
host = "0.0.0.0"
store = "postgresql://db/x"
targets = true
oauth = true
console = false
copy-from-remote = false
clock-skew = 0
faults = 0.5
data-dir = "d"
accounts = ["a:S0VZ", "b:S0VZ:S0VZ"]
encryption-scope = ["scope1", "b:scope2"]
hns = "b"
[targets_extra]
"""
    )
    with pytest.raises(ConfigError, match="targets_extra"):
        read(config)
    config.write_text(config.read_text().replace("[targets_extra]\n", ""))
    defaults, cors, _features = read(config)
    assert defaults == {
        "host": "0.0.0.0",
        "store_url": "postgresql://db/x",
        "targets": "azure",
        "oauth": "basic",
        "console": False,
        "copy_from_remote": "off",
        "clock_skew": 0.0,
        "faults": 0.5,
        "data_dir": Path("d"),
        "accounts": ["a:S0VZ", "b:S0VZ:S0VZ"],
        "encryption_scopes": ["scope1", "b:scope2"],
        "hns_accounts": ["b"],
    }
    assert cors == []


def test_sections_map_onto_their_settings(tmp_path: Path) -> None:
    config = tmp_path / "sections.toml"
    config.write_text(
        "[ports]\ntable = 1\nqueue = 2\nblob = 3\n[targets]\npartition = 10\nqueue = 20\naccount = 30\n"
        "[accounts]\none = 'S0VZ'\ntwo = ['S0VZ', 'S0VZ']\n"
        "[[cors]]\nallowed-origins = '*'\nallowed-methods = ['get']\nexposed-headers = ['x-ms-*']\n"
        "[oauth-roles]\n'00aa' = 'owner'\n'00bb' = 'Reader'\n"
        "'00cc' = ['queue-sender', 'Storage Table Data Reader']\n"
    )
    defaults, cors, _features = read(config)
    assert defaults == {
        "oauth_roles": ["00aa=owner", "00bb=Reader", "00cc=queue-sender", "00cc=Storage Table Data Reader"],
        "port": 1,
        "queue_port": 2,
        "blob_port": 3,
        "targets": "azure",
        "partition_target": 10.0,
        "queue_target": 20.0,
        "account_target": 30.0,
        "accounts": ["one:S0VZ", "two:S0VZ:S0VZ"],
    }
    assert cors == [
        {
            "allowed_origins": ["*"],
            "allowed_methods": ["GET"],
            "allowed_headers": [],
            "exposed_headers": ["x-ms-*"],
            "max_age_seconds": 0,
        }
    ]


def test_encryption_scopes_are_per_account() -> None:
    pairs = scope_pairs(["every1", "one:mine"], ["one", "two"])
    assert pairs == {("one", "every1"), ("two", "every1"), ("one", "mine")}
