"""``tabulae azurite``: a script that starts the peer emulator with its flags starts Tabulae the same
way, flag by flag, checked on a running server with the official SDKs and raw HTTP."""

from __future__ import annotations

import http.client
import os
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from azure.core.exceptions import HttpResponseError
from azure.data.tables import TableServiceClient
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueServiceClient

from tabulae.azurite_cli import FLAGS, AzuriteFlagError, plan
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, _kill_group, free_port
from tests.tls import StaticTokenCredential, make_jwt, make_self_signed_cert


@dataclass
class Azurite:
    """A ``tabulae azurite…`` process started with Azurite's flags on free ports."""

    process: subprocess.Popen[bytes]
    ports: dict[str, int]
    scheme: str = "http"
    output: tuple[str, str] | None = None

    def connection_string(self, account: str = DEV_ACCOUNT, key: str = DEV_KEY) -> str:
        parts = [f"DefaultEndpointsProtocol={self.scheme}", f"AccountName={account}", f"AccountKey={key}"]
        names = {"blob": "BlobEndpoint", "queue": "QueueEndpoint", "table": "TableEndpoint"}
        for service, port in self.ports.items():
            parts.append(f"{names[service]}={self.scheme}://127.0.0.1:{port}/{account}")
        return ";".join(parts) + ";"

    def stop(self) -> tuple[str, str]:
        """Stop it (again is a no-op) and return what it printed on stdout and stderr."""
        if self.output is None:
            if self.process.poll() is None:
                self.process.terminate()
            try:
                out, err = self.process.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                _kill_group(self.process.pid)
                out, err = self.process.communicate()
            _kill_group(self.process.pid)
            self.output = (out.decode(), err.decode())
        return self.output


def _port_flags(services: tuple[str, ...]) -> tuple[list[str], dict[str, int]]:
    ports = {service: free_port() for service in services}
    flags: list[str] = []
    for service, port in ports.items():
        flags += [f"--{service}Port", str(port)]
    return flags, ports


def _start(
    form: str, flags: list[str], ports: dict[str, int], cwd: Path, env: dict[str, str] | None = None
) -> Azurite:
    process = subprocess.Popen(
        [sys.executable, "-m", "tabulae", form, *flags],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )
    server = Azurite(process, ports)
    deadline = time.monotonic() + 30
    for port in ports.values():
        while True:
            if process.poll() is not None:
                out, err = server.stop()
                raise RuntimeError(f"{form} exited with {process.returncode}: {out}{err}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    server.stop()
                    raise RuntimeError(f"{form} did not listen on {port}") from None
                time.sleep(0.05)
    return server


@pytest.fixture
def started(tmp_path: Path) -> Iterator[list[Azurite]]:
    servers: list[Azurite] = []
    yield servers
    for server in servers:
        server.stop()


def _run(form: str, *flags: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tabulae", form, *flags], cwd=cwd, capture_output=True, text=True, timeout=60
    )


def _one_call_each(server: Azurite, name: str = "azuritecli") -> None:
    text = server.connection_string()
    if "table" in server.ports:
        with TableServiceClient.from_connection_string(text) as tables:
            tables.create_table(name).create_entity({"PartitionKey": "p", "RowKey": "r", "N": 1})
    if "queue" in server.ports:
        with QueueServiceClient.from_connection_string(text) as queues:
            queues.create_queue(name).send_message("hello")
    if "blob" in server.ports:
        with BlobServiceClient.from_connection_string(text) as blobs:
            blobs.create_container(name).upload_blob("b", b"content")


def test_a_ci_line_runs_unchanged(tmp_path: Path, started: list[Azurite]) -> None:
    """``azurite --silent --location X --blobPort P …`` as a CI file writes it: every service
    serves, data lands in X, no access log, Azurite's start-up lines are printed."""
    location = tmp_path / "workspace"
    flags, ports = _port_flags(("blob", "queue", "table"))
    server = _start("azurite", ["--silent", "--location", str(location), *flags], ports, tmp_path)
    started.append(server)
    _one_call_each(server)
    out, err = server.stop()
    assert (location / "tabulae.db").exists()
    assert not (tmp_path / "tabulae.db").exists()
    for service in ("Blob", "Queue", "Table"):
        port = ports[service.lower()]
        assert f"Azurite {service} service is successfully listening at http://127.0.0.1:{port}" in out
    assert '"status"' not in err  # --silent: no access log
    # Restarted on the same location, the data is there.
    server = _start("azurite", ["-s", "-l", str(location), *flags], ports, tmp_path)
    started.append(server)
    with TableServiceClient.from_connection_string(server.connection_string()) as tables:
        assert tables.get_table_client("azuritecli").get_entity("p", "r")["N"] == 1


def test_without_silent_each_request_is_logged_and_location_defaults_to_cwd(
    tmp_path: Path, started: list[Azurite]
) -> None:
    flags, ports = _port_flags(("table",))
    server = _start("azurite-table", flags, ports, tmp_path)
    started.append(server)
    _one_call_each(server)
    _, err = server.stop()
    assert '"status"' in err and '"method"' in err
    assert (tmp_path / "tabulae.db").exists()  # Azurite's default workspace: the current directory


def test_debug_file_gets_the_log(tmp_path: Path, started: list[Azurite]) -> None:
    log = tmp_path / "debug.log"
    flags, ports = _port_flags(("queue",))
    server = _start("azurite-queue", ["-s", "-d", str(log), "-l", str(tmp_path), *flags], ports, tmp_path)
    started.append(server)
    _one_call_each(server)
    server.stop()
    assert '"status"' in log.read_text()


@pytest.mark.parametrize("service", ["blob", "queue", "table"])
def test_single_service_forms_serve_one_service(service: str, tmp_path: Path, started: list[Azurite]) -> None:
    flags, ports = _port_flags((service,))
    others = [other for other in ("blob", "queue", "table") if other != service]
    server = _start(f"azurite-{service}", ["-s", "-l", str(tmp_path), *flags], ports, tmp_path)
    started.append(server)
    _one_call_each(server)
    # The other services' default ports are not taken by this form (their flags are refused).
    result = _run(f"azurite-{service}", f"--{others[0]}Port", "1", cwd=tmp_path)
    assert result.returncode != 0
    assert f"unknown flag --{others[0]}Port for azurite-{service}" in result.stderr


def test_in_memory_persistence_writes_nothing(tmp_path: Path, started: list[Azurite]) -> None:
    flags, ports = _port_flags(("blob", "queue", "table"))
    server = _start("azurite", ["-s", "--inMemoryPersistence", *flags], ports, tmp_path)
    started.append(server)
    _one_call_each(server)
    server.stop()
    assert list(tmp_path.iterdir()) == []
    refused = _run("azurite", "--inMemoryPersistence", "--location", str(tmp_path), cwd=tmp_path)
    assert refused.returncode != 0 and "--inMemoryPersistence" in refused.stderr


def test_skip_api_version_check(tmp_path: Path, started: list[Azurite]) -> None:
    def status(port: int) -> int:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            # A public container answers anonymously, so no signing is needed to see the check.
            conn.request(
                "GET",
                f"/{DEV_ACCOUNT}/pub?restype=container&comp=list",
                headers={"x-ms-version": "2099-01-01"},
            )
            return conn.getresponse().status
        finally:
            conn.close()

    results = {}
    for extra in ([], ["--skipApiVersionCheck"]):
        flags, ports = _port_flags(("blob",))
        server = _start("azurite-blob", ["-s", "--inMemoryPersistence", *extra, *flags], ports, tmp_path)
        started.append(server)
        with BlobServiceClient.from_connection_string(server.connection_string()) as blobs:
            blobs.create_container("pub", public_access="container")
        results[bool(extra)] = status(ports["blob"])
    assert results == {False: 400, True: 200}


def test_disable_product_style_url(tmp_path: Path, started: list[Azurite]) -> None:
    """A host whose first label is the account names it, unless the flag says the path always does."""

    def status(port: int) -> int:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            headers = {"Host": f"{DEV_ACCOUNT}.blob.example.test:{port}"}
            conn.request("GET", f"/{DEV_ACCOUNT}/pub?restype=container&comp=list", headers=headers)
            return conn.getresponse().status
        finally:
            conn.close()

    results = {}
    for extra in ([], ["--disableProductStyleUrl"]):
        flags, ports = _port_flags(("blob",))
        server = _start("azurite-blob", ["-s", "--inMemoryPersistence", *extra, *flags], ports, tmp_path)
        started.append(server)
        with BlobServiceClient.from_connection_string(server.connection_string()) as blobs:
            blobs.create_container("pub", public_access="container")
        results[bool(extra)] = status(ports["blob"])
    assert results[True] == 200  # the account from the path: container "pub" is listed
    assert results[False] != 200  # the account from the host: "/devstoreaccount1/pub" is a blob path


def test_pem_certificate_and_oauth_basic(tmp_path: Path, started: list[Azurite]) -> None:
    cert = make_self_signed_cert(tmp_path / "tls")
    flags, ports = _port_flags(("table",))
    tls = ["--cert", str(cert.cert), "--key", str(cert.key), "--oauth", "basic"]
    server = _start("azurite-table", ["-s", "--inMemoryPersistence", *tls, *flags], ports, tmp_path)
    server.scheme = "https"
    started.append(server)
    out_before = server.process.stdout  # the banner says https
    assert out_before is not None
    with TableServiceClient(
        endpoint=f"https://127.0.0.1:{ports['table']}/{DEV_ACCOUNT}",
        credential=StaticTokenCredential(make_jwt()),  # type: ignore[arg-type]
        connection_verify=str(cert.cert),
    ) as client:
        client.create_table("bearer")
        assert [t.name for t in client.list_tables()] == ["bearer"]
    refused = _run("azurite-table", "--oauth", "basic", "--inMemoryPersistence", cwd=tmp_path)
    assert refused.returncode != 0 and "--cert" in refused.stderr
    refused = _run("azurite-table", "--oauth", "full", "--inMemoryPersistence", cwd=tmp_path)
    assert refused.returncode != 0 and "--oauth" in refused.stderr


def test_pfx_certificate_with_password(tmp_path: Path, started: list[Azurite]) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, pkcs12

    pem = make_self_signed_cert(tmp_path / "tls")
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    key = load_pem_private_key(pem.key.read_bytes(), None)
    certificate = x509.load_pem_x509_certificate(pem.cert.read_bytes())
    pfx = tmp_path / "cert.pfx"
    pfx.write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"t", key, certificate, None, BestAvailableEncryption(b"s3cret")
        )  # type: ignore[arg-type]
    )
    flags, ports = _port_flags(("blob",))
    server = _start(
        "azurite-blob",
        ["-s", "--inMemoryPersistence", "--cert", str(pfx), "--pwd", "s3cret", *flags],
        ports,
        tmp_path,
    )
    server.scheme = "https"
    started.append(server)
    with BlobServiceClient.from_connection_string(
        server.connection_string(), connection_verify=str(pem.cert)
    ) as blobs:
        blobs.create_container("tls").upload_blob("b", b"over https")
    conn = http.client.HTTPSConnection(
        "127.0.0.1", ports["blob"], context=ssl.create_default_context(cafile=str(pem.cert))
    )
    conn.request("GET", "/-/nothing")
    assert conn.getresponse().status == 404
    conn.close()
    wrong = _run("azurite-blob", "--cert", str(pfx), "--pwd", "wrong", "--inMemoryPersistence", cwd=tmp_path)
    assert wrong.returncode != 0 and "--pwd" in wrong.stderr


def test_accepted_flags_and_azurite_accounts(tmp_path: Path, started: list[Azurite]) -> None:
    """-L, --disableTelemetry, keep-alive timeouts and --extentMemoryLimit start the server; the
    accounts of AZURITE_ACCOUNTS are served in place of the development account."""
    flags, ports = _port_flags(("blob", "queue", "table"))
    key = "a2V5MWtleTFrZXkxa2V5MQ=="
    server = _start(
        "azurite",
        [
            "-sL", "--disableTelemetry", "--inMemoryPersistence", "--extentMemoryLimit", "50",
            "--blobKeepAliveTimeout=5", "--queueKeepAliveTimeout", "5",
            "--tableKeepAliveTimeout", "5", *flags,
        ],
        ports,
        tmp_path,
        env={"AZURITE_ACCOUNTS": f"acct1:{key}"},
    )  # fmt: skip
    started.append(server)
    with TableServiceClient.from_connection_string(server.connection_string("acct1", key)) as tables:
        tables.create_table("mine")
    with (
        TableServiceClient.from_connection_string(server.connection_string()) as dev,
        pytest.raises(HttpResponseError),
    ):
        dev.create_table("devs")


def test_unknown_flags_and_help(tmp_path: Path) -> None:
    result = _run("azurite", "--blobPort", "1", "--bogus", cwd=tmp_path)
    assert result.returncode != 0
    assert (
        result.stderr.strip() == "tabulae: InvalidArguments: azurite: unknown flag --bogus for azurite"
        " (see `tabulae azurite --help`)"
    )
    result = _run("azurite", "-x", cwd=tmp_path)
    assert "unknown flag -x" in result.stderr
    result = _run("azurite", "--blobPort", cwd=tmp_path)
    assert "--blobPort needs a value" in result.stderr
    helped = _run("azurite", "--help", cwd=tmp_path)
    assert helped.returncode == 0
    for flag in FLAGS:
        assert f"--{flag.long}" in helped.stdout


def test_installed_shims_run_tabulae(tmp_path: Path, started: list[Azurite]) -> None:
    shims = tmp_path / "bin"
    result = _run("azurite", "--install-shims", str(shims), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in shims.iterdir()) == [
        "azurite",
        "azurite-blob",
        "azurite-queue",
        "azurite-table",
    ]
    flags, ports = _port_flags(("table",))
    process = subprocess.Popen(
        ["azurite-table", "--silent", "--inMemoryPersistence", *flags],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PATH": f"{shims}:{os.environ['PATH']}"},
        start_new_session=True,
    )
    server = Azurite(process, ports)
    started.append(server)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", ports["table"]), timeout=0.5):
                break
        except OSError:
            assert process.poll() is None, server.stop()
            time.sleep(0.05)
    _one_call_each(server)


def test_every_flag_maps_as_documented() -> None:
    """The translation itself, for the flags whose effect the tests above cannot see from outside."""
    todo = plan(
        "azurite", ["--blobHost", "0.0.0.0", "--queueHost", "0.0.0.0", "--tableHost=0.0.0.0"], Path("/w")
    )
    assert todo.serve_args[:4] == ["--services", "table,queue,blob", "--host", "0.0.0.0"]
    assert "--blob-host" not in todo.serve_args and "--queue-host" not in todo.serve_args
    apart = plan("azurite", ["--blobHost", "0.0.0.0", "--queueHost", "127.0.0.3"]).serve_args
    assert apart[2:8] == ["--host", "127.0.0.1", "--queue-host", "127.0.0.3", "--blob-host", "0.0.0.0"]
    assert plan("azurite-blob", ["--blobHost", "0.0.0.0"]).serve_args[2:4] == ["--host", "0.0.0.0"]
    assert todo.serve_args[-3:] == ["--data-dir", "/w", "--access-log"]
    assert plan("azurite", ["-lDIR", "-s"]).serve_args[-2:] == ["--data-dir", "DIR"]
    with pytest.raises(AzuriteFlagError, match="--cert needs --key"):
        plan("azurite", ["--cert", "x.pem"])
    with pytest.raises(AzuriteFlagError, match="takes no value"):
        plan("azurite", ["--silent=yes"])
    with pytest.raises(AzuriteFlagError, match="only supported with --inMemoryPersistence"):
        plan("azurite", ["--extentMemoryLimit", "5"])
    with pytest.raises(AzuriteFlagError, match="expected a port"):
        plan("azurite", ["--tablePort", "http"])


def test_readme_documents_every_flag() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    table = readme[readme.index("| Azurite flag |") :]
    for flag in FLAGS:
        assert f"`--{flag.long}`" in table.split("\n\n")[0]


def test_each_service_on_an_address_of_its_own(tmp_path: Path, started: list[Azurite]) -> None:
    """``--blobHost`` apart from the others: the Blob service answers there and only there, and
    what the server announces (Azurite's lines and the connection string) says so."""
    flags, ports = _port_flags(("blob", "queue", "table"))
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tabulae",
            "azurite",
            "--blobHost",
            "127.0.0.2",
            *flags,
            "--location",
            str(tmp_path),
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    server = Azurite(process, ports)
    started.append(server)
    hosts = {"blob": "127.0.0.2", "queue": "127.0.0.1", "table": "127.0.0.1"}
    deadline = time.monotonic() + 60
    for service, port in ports.items():
        while True:
            assert process.poll() is None, server.stop()
            try:
                with socket.create_connection((hosts[service], port), timeout=0.5):
                    break
            except OSError:
                assert time.monotonic() < deadline, f"{service} did not listen on {hosts[service]}:{port}"
                time.sleep(0.05)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", ports["blob"]), timeout=2).close()
    text = server.connection_string().replace(f"127.0.0.1:{ports['blob']}", f"127.0.0.2:{ports['blob']}")
    with BlobServiceClient.from_connection_string(text) as blobs:
        blobs.create_container("apart").upload_blob("b", b"here")
        assert blobs.get_container_client("apart").download_blob("b").readall() == b"here"
    with QueueServiceClient.from_connection_string(text) as queues:
        queues.create_queue("apart").send_message("hello")
    out, _ = server.stop()
    assert f"Blob service is successfully listening at http://127.0.0.2:{ports['blob']}" in out
    assert f"BlobEndpoint=http://127.0.0.2:{ports['blob']}/{DEV_ACCOUNT}" in out
    assert f"QueueEndpoint=http://127.0.0.1:{ports['queue']}/{DEV_ACCOUNT}" in out
