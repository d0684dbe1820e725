"""The console is a door too: sessions, CSRF, origins, escaping, and one account's view only."""

from __future__ import annotations

import base64
import contextlib
import os
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.data.tables import TableServiceClient

from tests.consoleclient import ConsoleClient
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess

OTHER_KEY = base64.b64encode(os.urandom(64)).decode()


@pytest.fixture
def console(server: ServerProcess) -> ConsoleClient:
    client = ConsoleClient(server.port)
    assert client.sign_in(DEV_ACCOUNT, DEV_KEY).status == 303
    return client


@pytest.fixture(scope="module")
def two_accounts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server of two accounts, neither the development one (so nothing is pre-filled)."""
    process = ServerProcess(
        tmp_path_factory.mktemp("two"),
        extra_args=["--account", f"alice:{OTHER_KEY}", "--account", f"bob:{DEV_KEY}", "--workers", "2"],
    ).start()
    yield process
    process.stop()


def _service(server: ServerProcess, account: str, key: str) -> TableServiceClient:
    return TableServiceClient.from_connection_string(
        f"DefaultEndpointsProtocol=http;AccountName={account};AccountKey={key};"
        f"TableEndpoint=http://127.0.0.1:{server.port}/{account};"
    )


def test_the_session_cookie_is_signed_httponly_and_samesite_strict(server: ServerProcess) -> None:
    client = ConsoleClient(server.port)
    first = client.get("/")
    assert first.status == 303 and first.header("location") == "/-/console/signin"
    answer = client.sign_in(DEV_ACCOUNT, DEV_KEY)
    assert answer.status == 303
    cookie = answer.header("set-cookie") or ""
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/-/console" in cookie
    assert DEV_KEY not in cookie and DEV_KEY.rstrip("=") not in cookie
    page = client.get("/tables")
    assert page.status == 200
    for name, value in (
        ("x-frame-options", "DENY"),
        ("x-content-type-options", "nosniff"),
        ("cache-control", "no-store"),
    ):
        assert page.header(name) == value
    policy = page.header("content-security-policy") or ""
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert DEV_KEY not in page.text


def test_a_wrong_key_or_unknown_account_is_refused(server: ServerProcess) -> None:
    client = ConsoleClient(server.port)
    assert client.sign_in(DEV_ACCOUNT, OTHER_KEY).status == 403
    assert client.get("/tables").status == 303  # still signed out
    assert client.sign_in("nosuchaccount", DEV_KEY).status == 403
    assert client.sign_in(DEV_ACCOUNT, "not base64!").status == 403


def test_a_tampered_or_forged_cookie_is_worth_nothing(console: ConsoleClient) -> None:
    assert console.cookie is not None
    name, value = console.cookie.split("=", 1)
    payload, mac = value.split(".")
    forged = base64.urlsafe_b64encode(b"1|devstoreaccount1|x|9999999999|n").rstrip(b"=").decode()
    for bad in (f"{payload}.{mac[:-2]}AA", f"{forged}.{mac}", payload, ""):
        console.cookie = f"{name}={bad}"
        assert console.get("/tables").status == 303


def test_posts_need_the_sessions_csrf_token_and_this_origin(
    console: ConsoleClient, server: ServerProcess, table_name: str
) -> None:
    no_token = console.post("/tables", {"name": table_name}, csrf=False)
    assert no_token.status == 403
    wrong = console.post("/tables", {"name": table_name, "csrf": "A" * 32}, csrf=False)
    assert wrong.status == 403
    foreign = console.post("/tables", {"name": table_name}, headers={"Origin": "http://evil.example"})
    assert foreign.status == 403
    # Another visitor's token is not this session's.
    stranger = ConsoleClient(server.port)
    stranger.get("/signin")
    assert (
        console.post("/tables", {"name": table_name, "csrf": stranger.csrf or ""}, csrf=False).status == 403
    )
    with _service(server, DEV_ACCOUNT, DEV_KEY) as service:
        assert table_name not in [t.name for t in service.list_tables()]
    created = console.post(
        "/tables", {"name": table_name}, headers={"Origin": f"http://127.0.0.1:{server.port}"}
    )
    assert created.status == 303
    with _service(server, DEV_ACCOUNT, DEV_KEY) as service:
        service.delete_table(table_name)


def test_a_signed_out_visitor_reaches_nothing_but_sign_in(server: ServerProcess, table_name: str) -> None:
    client = ConsoleClient(server.port)
    client.get("/signin")
    assert client.post("/tables", {"name": table_name}).status == 403
    assert client.get(f"/tables/{table_name}").status == 303
    assert client.get("/insight").status == 303


def test_signing_out_ends_the_session(console: ConsoleClient) -> None:
    console.get("/tables")
    assert console.post("/signout", {}).status == 303
    assert console.get("/tables").status == 303


def test_a_signed_out_cookie_is_refused_by_every_worker(two_accounts: ServerProcess) -> None:
    alice = ConsoleClient(two_accounts.port)
    assert alice.sign_in("alice", OTHER_KEY).status == 303
    saved = alice.cookie
    assert alice.get("/tables").status == 200
    assert alice.post("/signout", {}).status == 303
    copy = ConsoleClient(two_accounts.port, cookie=saved)
    for _ in range(12):  # a connection each: the kernel spreads them over both workers
        refused = copy.get("/tables")
        copy.cookie = saved
        assert refused.status == 303 and refused.header("location") == "/-/console/signin"
    # Signing in again is a new session, which works (and the old cookie still does not).
    assert alice.sign_in("alice", OTHER_KEY).status == 303
    assert alice.get("/tables").status == 200
    assert ConsoleClient(two_accounts.port, cookie=saved).get("/tables").status == 303


@pytest.mark.parametrize(
    "host", ["localhost", "LOCALHOST.", "devstoreaccount1.table.localhost", "127.0.0.1", "127.3.2.1", "[::1]"]
)
def test_the_console_answers_at_loopback_names(server: ServerProcess, host: str) -> None:
    page = ConsoleClient(server.port).request("GET", "/signin", headers={"Host": f"{host}:{server.port}"})
    assert page.status == 200 and DEV_KEY in page.text  # pre-filled: this is the machine itself


@pytest.mark.parametrize(
    "host",
    [
        "attacker.example",
        "localhost.attacker.example",
        "127.0.0.1.nip.io",
        "10.0.0.1",
        "",
        "[::2]",
        "[::1].attacker.example",
    ],
)
def test_other_host_names_get_403_and_no_page(server: ServerProcess, host: str) -> None:
    """DNS rebinding: a name of the attacker's that resolves to 127.0.0.1 reaches this port."""
    client = ConsoleClient(server.port)
    for path in ("/signin", "/", "/static/console.css"):
        answer = client.request("GET", path, headers={"Host": f"{host}:{server.port}" if host else ""})
        assert answer.status == 403
        assert DEV_KEY not in answer.text and "<form" not in answer.text and "csrf" not in answer.text
        assert answer.header("set-cookie") is None
    signed_in = ConsoleClient(server.port)
    assert signed_in.sign_in(DEV_ACCOUNT, DEV_KEY).status == 303
    signed_in.extra_headers["Host"] = f"{host}:{server.port}"
    assert signed_in.get("/tables").status == 403  # a stolen cookie does not help either


def test_the_console_is_on_the_table_port_only(server: ServerProcess) -> None:
    table_port = ConsoleClient(server.port)
    assert table_port.get("/signin").status == 200
    assert table_port.get("/static/console.css").status == 200
    for port in (server.queue_port, server.blob_port):
        other = ConsoleClient(port)
        for path in ("/", "/signin", "/static/console.css", "/tables"):
            answer = other.get(path)  # the service's own error: no account is named "-"
            assert answer.status in (400, 403, 404), (port, path, answer.status)
            assert answer.header("set-cookie") is None and answer.header("x-ms-request-id")
            assert b"<Error><Code>" in answer.body and b"<html" not in answer.body


def test_user_data_is_escaped_everywhere_it_is_shown(
    console: ConsoleClient, server: ServerProcess, table_name: str
) -> None:
    hostile = "<script>alert(1)</script>"
    attribute = '"><img src=x onerror=alert(2)>'
    with _service(server, DEV_ACCOUNT, DEV_KEY) as service:
        table = service.create_table(table_name)
        keyed = "<svg onload=alert(3)>"  # keys cannot hold "/"
        table.create_entity({"PartitionKey": keyed, "RowKey": attribute, "note": hostile + attribute})
        try:
            grid = console.get(f"/tables/{table_name}")
            shown = console.get(
                f"/tables/{table_name}?filter=" + "note%20eq%20%27%3Cscript%3E%27&select=%3Cb%3E"
            )
            link = grid.text.split(f"/tables/{table_name}/e/", 1)[1].split('"', 1)[0]
            entity = console.get(f"/tables/{table_name}/e/{link}")
        finally:
            service.delete_table(table_name)
    for page in (grid, shown, entity):
        assert page.status == 200
        for raw in ("<script>alert", "<img src=x", "<b>", "<svg"):
            assert raw not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in grid.text
    assert "&lt;svg onload=alert(3)&gt;" in grid.text
    assert "&#34;&gt;&lt;img src=x onerror=alert(2)&gt;" in entity.text


def test_a_session_sees_its_own_account_only(two_accounts: ServerProcess) -> None:
    with _service(two_accounts, "bob", DEV_KEY) as bob:
        bob.create_table("bobsecrets").upsert_entity({"PartitionKey": "p", "RowKey": "r", "x": 1})
    alice = ConsoleClient(two_accounts.port)
    page = alice.get("/signin")
    assert OTHER_KEY not in page.text and DEV_KEY not in page.text  # no key pre-filled here
    assert alice.sign_in("alice", OTHER_KEY).status == 303
    for _ in range(6):  # two workers: every one of them accepts the session
        tables = alice.get("/tables")
        assert tables.status == 200 and "bobsecrets" not in tables.text
    assert alice.get("/tables/bobsecrets").status == 404  # as alice, the table does not exist
    assert "bobsecrets" not in alice.get("/insight").text
    assert OTHER_KEY not in tables.text


def test_no_console_unless_asked_off_loopback(tmp_path: Path) -> None:
    off = ServerProcess(tmp_path / "off", extra_args=["--no-console", "--workers", "1"]).start()
    try:
        assert ConsoleClient(off.port).get("/").status == 404
    finally:
        off.stop()
    wide = ServerProcess(tmp_path / "wide", extra_args=["--host", "0.0.0.0", "--workers", "1"]).start()
    try:
        assert ConsoleClient(wide.port).get("/signin").status == 404
    finally:
        wide.stop()
    assert "warning" not in wide.log_path.read_text()
    asked = ServerProcess(
        tmp_path / "asked",
        extra_args=["--host", "0.0.0.0", "--console", "--workers", "1", "--console-host", "Console.Example"],
    ).start()
    try:
        page = ConsoleClient(asked.port).get("/signin")
        assert page.status == 200 and DEV_KEY not in page.text  # off loopback, nothing is pre-filled
        for host, status in (("console.example", 200), ("CONSOLE.EXAMPLE.", 200), ("other.example", 403)):
            answer = ConsoleClient(asked.port).request("GET", "/signin", headers={"Host": f"{host}:80"})
            assert answer.status == status, host
    finally:
        asked.stop()
    # Plain HTTP off loopback: keys typed at sign-in cross the network in clear text, said at start.
    said = asked.log_path.read_text()
    assert "tabulae: warning: the console listens on 0.0.0.0 over plain HTTP" in said


def _post_head(port: int, path: str, length: int, content_type: str, cookie: str | None = None) -> bytes:
    """The head of a console POST declaring ``length`` body bytes (the test sends what it likes)."""
    lines = [
        f"POST /-/console{path} HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        f"Content-Type: {content_type}",
        f"Content-Length: {length}",
    ]
    if cookie is not None:
        lines.append(f"Cookie: {cookie}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _answer(sock: socket.socket, timeout: float) -> bytes:
    """What the server says, up to its closing the connection or the end of the answer's body
    (or ``timeout`` seconds of silence)."""
    sock.settimeout(timeout)
    chunks: list[bytes] = []
    with contextlib.suppress(TimeoutError, ConnectionResetError):
        while data := sock.recv(65536):
            chunks.append(data)
            head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
            length = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
            if length and len(body) >= int(length.group(1)):
                break
    return b"".join(chunks)


@pytest.mark.parametrize(
    "path", ["/signin/upload", "/signinx/upload", "/static/x/upload", "/tables/t/upload"]
)
def test_a_visitor_who_has_not_signed_in_cannot_upload(server: ServerProcess, path: str) -> None:
    """A form is read before its CSRF token can be checked, so the upload cap (256 MiB spooled to
    a temporary file) is for signed-in sessions only: a visitor's POST under the sign-in page's
    path, or a static file's, is answered from its headers, its body never read."""
    visitor = ConsoleClient(server.port)
    visitor.get("/signin")  # a cookie and a token, which anyone may have
    declared = 200 * 1024 * 1024
    boundary = "b0undary"
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        head = _post_head(
            server.port, path, declared, f"multipart/form-data; boundary={boundary}", visitor.cookie
        )
        field = f'--{boundary}\r\nContent-Disposition: form-data; name="csrf"\r\n\r\n{visitor.csrf}\r\n'
        sock.sendall(head + field.encode())
        started = time.monotonic()
        answer = _answer(sock, 10)
    assert time.monotonic() - started < 5
    status = int(answer.split(b" ", 2)[1])
    assert status in (403, 413), answer[:200]
    # Signed in, the same POST is not refused for its size.
    member = ConsoleClient(server.port)
    assert member.sign_in(DEV_ACCOUNT, DEV_KEY).status == 303
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        head = _post_head(
            server.port,
            "/blobs/nosuch/upload",
            8 * 1024 * 1024,
            "multipart/form-data; boundary=b",
            member.cookie,
        )
        sock.sendall(head + b"--b\r\n")
        assert _answer(sock, 1) == b""  # waiting for the rest of the file


@pytest.fixture(scope="module")
def impatient(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server whose clients may pause their bodies one second (``--request-timeout 1``)."""
    process = ServerProcess(
        tmp_path_factory.mktemp("impatient"), extra_args=["--request-timeout", "1", "--workers", "1"]
    ).start()
    yield process
    process.stop()


@pytest.mark.timeout(60)  # a hang guard: the server must answer by itself
@pytest.mark.parametrize("signed_in", [False, True], ids=["sign-in form", "signed-in form"])
def test_a_form_trickled_in_is_cut_off(impatient: ServerProcess, signed_in: bool) -> None:
    """A console form is held to the services' pace (``--request-timeout``): a client that sends
    part of it and then waits gets 408 and its connection closed, instead of holding it forever."""
    client = ConsoleClient(impatient.port)
    if signed_in:
        assert client.sign_in(DEV_ACCOUNT, DEV_KEY).status == 303
    else:
        client.get("/signin")
    path = "/tables" if signed_in else "/signin"
    with socket.create_connection(("127.0.0.1", impatient.port)) as sock:
        sock.sendall(
            _post_head(impatient.port, path, 1000, "application/x-www-form-urlencoded", client.cookie)
        )
        sock.sendall(f"csrf={client.csrf}&name=".encode())
        started = time.monotonic()
        answer = _answer(sock, 20)
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert b"too slowly" in answer
    assert time.monotonic() - started < 15
    assert client.get("/signin" if not signed_in else "/tables").status == 200  # the server is fine
