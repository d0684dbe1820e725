"""Support for the reliability tests (issue #7): real server processes we can kill as a whole,
wire-level checks of Azure error bodies, ``$batch`` bodies written by hand, and SQLite checks.

Everything here drives real ``tabulae serve`` processes. :class:`IsolatedServer` differs from
:class:`tests.serverproc.ServerProcess` in three ways the reliability tests need:

* it runs in its own session (process group), so ``SIGKILL`` reaches the supervisor and every
  worker at the same instant, like a machine losing power would (a kill of the supervisor alone
  would leave ``--workers N`` children serving and writing);
* its stderr goes to a file, never to a pipe nobody reads (with ``--access-log`` a pipe would
  fill up and block the server);
* it tells which of its processes outlived a stop, and which processes are its workers.

The few tests at the bottom check these helpers themselves, so a broken checker cannot make the
real tests pass vacuously.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.rawhttp import (
    JSON_MINIMAL,
    VERSION,
    RawClient,
    RawResponse,
    canonical_resource,
    rfc1123_now,
    shared_key_signature,
)
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess

ROOT = Path(__file__).resolve().parents[2]

# Connection-level failures: the request may or may not have been applied.
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (OSError, http.client.HTTPException)


# --------------------------------------------------------------------------------------------
# Server processes
# --------------------------------------------------------------------------------------------


def _process_group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group, read from /proc."""
    members: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="latin-1") as handle:
                stat = handle.read()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...; comm may contain spaces and parentheses.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(entry))
    return members


@dataclass
class IsolatedServer(ServerProcess):
    """A ``tabulae serve`` process group with stderr in a file (see the module docstring)."""

    log_path: Path | None = None
    leftovers: list[int] = field(default_factory=list)
    pgid: int | None = None

    def __post_init__(self) -> None:
        if self.log_path is None:
            handle, name = tempfile.mkstemp(prefix="tabulae-server-", suffix=".log")
            os.close(handle)
            self.log_path = Path(name)

    def start(self, timeout: float = 30.0) -> IsolatedServer:
        command = [
            sys.executable,
            "-m",
            "tabulae",
            "serve",
            "--services",
            "table",
            "--port",
            str(self.port),
            "--data-dir",
            str(self.data_dir),
            *self.extra_args,
        ]
        env = dict(os.environ) if self.env is None else self.env
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        assert self.log_path is not None
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child, closed below
        try:
            self.process = subprocess.Popen(
                command,
                stdout=subprocess.DEVNULL,
                stderr=log,
                env=env,
                cwd=ROOT,
                start_new_session=True,
            )
        finally:
            log.close()
        self.pgid = self.process.pid
        self.leftovers = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                code = self.process.returncode
                self.process = None
                self._reap_group()
                raise RuntimeError(f"tabulae serve exited with {code}: {self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        self.kill()
        raise RuntimeError("tabulae serve did not start listening in time")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int | None:
        """Signal the supervisor and wait; return its exit code (None if it had to be killed).

        Processes of the group still alive afterwards are recorded in ``leftovers`` and killed.
        """
        if self.process is None:
            return None
        code: int | None
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                code = self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self._killpg()
                self.process.wait()
                code = None
        else:
            code = self.process.returncode
        self.process = None
        self._reap_group()
        return code

    def kill(self) -> None:
        """SIGKILL the whole process group at once and wait until every member is gone."""
        if self.process is None:
            return
        self._killpg()
        self.process.wait()
        self.process = None
        deadline = time.monotonic() + 10
        while self.pgid is not None and _process_group_members(self.pgid) and time.monotonic() < deadline:
            time.sleep(0.01)

    def _killpg(self) -> None:
        if self.pgid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pgid, signal.SIGKILL)

    def _reap_group(self) -> None:
        if self.pgid is None:
            return
        deadline = time.monotonic() + 2
        members = _process_group_members(self.pgid)
        while members and time.monotonic() < deadline:
            time.sleep(0.05)
            members = _process_group_members(self.pgid)
        self.leftovers = members
        if members:
            self._killpg()

    def wait_exit(self, timeout: float = 30.0) -> int | None:
        """Wait for the supervisor to exit by itself (after a signal we sent); None on timeout."""
        if self.process is None:
            return None
        try:
            code: int | None = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._killpg()
            self.process.wait()
            code = None
        self.process = None
        self._reap_group()
        return code

    def worker_pids(self) -> list[int]:
        """The worker processes of ``--workers N`` (the supervisor itself when N is 1)."""
        if self.process is None:
            return []
        pid = self.process.pid
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            return []
        workers = []
        for child in children:
            try:
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            except OSError:
                continue
            if b"spawn_main" in cmdline:
                workers.append(int(child))
        return workers or [pid]

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_text(self) -> str:
        assert self.log_path is not None
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, size: int = 3000) -> str:
        return self.log_text()[-size:]

    def raw(self) -> RawClient:
        return RawClient(self.port)


def request_id_prefix(response: RawResponse) -> str:
    """The per-process part of ``x-ms-request-id`` (each worker draws its own random prefix)."""
    value = response.header("x-ms-request-id") or ""
    return value[:18]


def wait_for_workers(server: IsolatedServer, count: int, timeout: float = 30.0) -> None:
    """Send requests on fresh connections until ``count`` distinct workers have answered."""
    client = server.raw()
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    while len(seen) < count:
        assert time.monotonic() < deadline, f"only {len(seen)} of {count} workers answered"
        response = client.request("GET", "Tables")
        assert response.status == 200, response
        seen.add(request_id_prefix(response))


# --------------------------------------------------------------------------------------------
# Requests over plain sockets (for clients that send slowly, stall, or hang up half-way)
# --------------------------------------------------------------------------------------------


def signed_request(
    port: int,
    method: str,
    target: str,
    body: bytes = b"",
    content_type: str = "",
    headers: Sequence[tuple[str, str]] = (),
) -> tuple[bytes, bytes]:
    """The head (request line and headers, Shared Key signed) and body of a request, as bytes."""
    raw_target = f"/{DEV_ACCOUNT}/{target}"
    date = rfc1123_now()
    resource = canonical_resource(DEV_ACCOUNT, raw_target)
    signature = shared_key_signature(DEV_KEY, method, "", content_type, date, resource)
    lines = [
        f"{method} {raw_target} HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        f"x-ms-version: {VERSION}",
        "DataServiceVersion: 3.0",
        "MaxDataServiceVersion: 3.0;NetFx",
        f"Accept: {JSON_MINIMAL}",
        f"x-ms-date: {date}",
        f"Authorization: SharedKey {DEV_ACCOUNT}:{signature}",
    ]
    if content_type:
        lines.append(f"Content-Type: {content_type}")
    if body or method in ("POST", "PUT", "MERGE", "PATCH"):
        lines.append(f"Content-Length: {len(body)}")
    lines.extend(f"{name}: {value}" for name, value in headers)
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"), body


def read_response(sock: socket.socket, method: str = "GET") -> RawResponse:
    """Read one complete HTTP response from a socket (IncompleteRead if it is cut short)."""
    response = http.client.HTTPResponse(sock, method=method)
    try:
        response.begin()
        body = response.read()
    finally:
        response.close()
    return RawResponse(response.status, response.headers, body)


# --------------------------------------------------------------------------------------------
# SQLite
# --------------------------------------------------------------------------------------------


def integrity_check(db_path: Path) -> str:
    """``PRAGMA integrity_check`` of a store that no server has open ("ok" when healthy)."""
    conn = sqlite3.connect(str(db_path))
    try:
        rows = conn.execute("PRAGMA integrity_check").fetchall()
    finally:
        conn.close()
    return "\n".join(str(row[0]) for row in rows)


def crash_image_integrity(data_dir: Path) -> str:
    """Integrity of the files a crash left behind, checked on a copy so that recovery is still
    left to the server (SQLite replays the WAL into the copy, exactly as the server will)."""
    with tempfile.TemporaryDirectory(prefix="tabulae-crash-image-") as scratch:
        for suffix in ("", "-wal"):
            source = data_dir / f"tabulae.db{suffix}"
            if source.exists():
                shutil.copyfile(source, Path(scratch) / source.name)
        return integrity_check(Path(scratch) / "tabulae.db")


# --------------------------------------------------------------------------------------------
# Azure error bodies (JSON and XML)
# --------------------------------------------------------------------------------------------

_XML_ERROR_TAGS = ("Error", "{http://schemas.microsoft.com/ado/2007/08/dataservices/metadata}error")


def azure_error_code(response: RawResponse) -> str:
    """Check that ``response`` is a well-formed Azure error and return its code.

    JSON: exactly ``{"odata.error":{"code":…,"message":{"lang":…,"value":…}}}``, compact, on one
    line. XML: ``<Error><Code/><Message/>…`` or ``m:error`` with ``m:code`` and ``m:message``.
    Either way ``x-ms-error-code`` carries the same code. Raises AssertionError otherwise.
    """
    assert response.status >= 400, response
    header = response.header("x-ms-error-code")
    content_type = (response.header("content-type") or "").lower()
    body = response.body
    if "xml" in content_type:
        root = ET.fromstring(body)
        assert root.tag in _XML_ERROR_TAGS, response
        if root.tag == "Error":
            code = root.findtext("Code")
            message = root.findtext("Message")
        else:
            ns = "{http://schemas.microsoft.com/ado/2007/08/dataservices/metadata}"
            code = root.findtext(f"{ns}code")
            message = root.findtext(f"{ns}message")
        assert code and message is not None, response
    else:
        assert "json" in content_type, response
        assert b"\n" not in body and b": " not in body.split(b'"value":', 1)[0], response
        document = json.loads(body)
        assert isinstance(document, dict) and list(document) == ["odata.error"], response
        error = document["odata.error"]
        assert isinstance(error, dict) and sorted(error) == ["code", "message"], response
        code = error["code"]
        message = error["message"]
        assert isinstance(code, str) and code, response
        assert isinstance(message, dict) and sorted(message) == ["lang", "value"], response
        assert isinstance(message["value"], str) and isinstance(message["lang"], str), response
    assert header == code, f"x-ms-error-code {header!r} != body code {code!r}: {response!r}"
    content_length = response.header("content-length")
    if content_length is not None:
        assert int(content_length) == len(body), response
    return code


def assert_retryable_server_error(response: RawResponse) -> str:
    """A 5xx that SDKs retry (500/503), as a well-formed Azure JSON error; returns the code."""
    assert response.status in (500, 503), response
    code = azure_error_code(response)
    assert "json" in (response.header("content-type") or ""), response
    return code


# --------------------------------------------------------------------------------------------
# $batch bodies and responses (success and failure)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchOp:
    """One operation of a changeset: a method, the target after the account, headers, a body."""

    method: str
    target: str
    headers: Mapping[str, str] = field(default_factory=dict)
    body: Any = None


def batch_request(endpoint: str, ops: Sequence[BatchOp]) -> tuple[str, bytes]:
    """A changeset written the way azure-data-tables writes it; returns (Content-Type, body)."""
    batch = f"batch_{uuid.uuid4()}"
    changeset = f"changeset_{uuid.uuid4()}"
    out = [f"--{batch}\r\nContent-Type: multipart/mixed; boundary={changeset}\r\n\r\n".encode()]
    for index, op in enumerate(ops):
        payload = b"" if op.body is None else json.dumps(op.body).encode()
        lines = [
            f"--{changeset}",
            "Content-Type: application/http",
            "Content-Transfer-Encoding: binary",
            f"Content-ID: {index}",
            "",
            f"{op.method} {endpoint}/{op.target} HTTP/1.1",
        ]
        if op.body is not None:
            lines += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
        lines += ["x-ms-version: 2019-02-02", "DataServiceVersion: 3.0", "Accept: application/json"]
        lines += [f"{name}: {value}" for name, value in op.headers.items()]
        out.append(("\r\n".join(lines) + "\r\n\r\n").encode() + payload + b"\r\n")
    out.append(f"--{changeset}--\r\n\r\n--{batch}--\r\n".encode())
    return f"multipart/mixed; boundary={batch}", b"".join(out)


@dataclass
class BatchPart:
    status: int
    headers: dict[str, str]
    body: bytes


def _boundary(content_type: str) -> str:
    match = re.search(r'boundary="?([^";]+)"?', content_type)
    assert match, f"no boundary in {content_type!r}"
    return match.group(1)


def _multipart_parts(body: bytes, boundary: str) -> list[bytes]:
    pieces = re.split(rb"(?:\r\n)?--" + re.escape(boundary.encode()) + rb"(?:--)?[ \t]*(?:\r\n|\Z)", body)
    return [piece for piece in pieces[1:] if piece.strip()]


def _split_head(part: bytes) -> tuple[dict[str, str], bytes]:
    head, _, rest = part.partition(b"\r\n\r\n")
    headers = {}
    for line in head.decode("utf-8").split("\r\n"):
        name, colon, value = line.partition(":")
        if colon:
            headers[name.strip().lower()] = value.strip()
    return headers, rest


def _http_part(piece: bytes, response: RawResponse) -> BatchPart:
    _mime, http_message = _split_head(piece)
    status_line, _, rest = http_message.partition(b"\r\n")
    match = re.fullmatch(rb"HTTP/1\.1 (\d{3})(?: .*)?", status_line)
    assert match, f"bad status line {status_line!r} in {response!r}"
    headers, part_body = _split_head(rest)
    return BatchPart(int(match.group(1)), headers, part_body.rstrip(b"\r\n"))


def parse_batch_response(response: RawResponse) -> list[BatchPart]:
    """The operation parts of a 202 batch response, in order (a changeset's parts, or the one
    part of a bare GET answered outside any changeset)."""
    assert response.status == 202, response
    outer = _boundary(response.header("content-type") or "")
    top = _multipart_parts(response.body, outer)
    assert len(top) == 1, response
    mime_headers, changeset_body = _split_head(top[0])
    if mime_headers.get("content-type", "").startswith("application/http"):
        return [_http_part(top[0], response)]
    inner = _boundary(mime_headers.get("content-type", ""))
    return [_http_part(piece, response) for piece in _multipart_parts(changeset_body, inner)]


def send_batch(client: RawClient, ops: Sequence[BatchOp], timeout: float = 30.0) -> RawResponse:
    content_type, body = batch_request(client.endpoint, ops)
    return client.request("POST", "$batch", body, {"Content-Type": content_type}, timeout=timeout)


# --------------------------------------------------------------------------------------------
# Entities on the wire
# --------------------------------------------------------------------------------------------


def user_properties(entity: Mapping[str, Any]) -> dict[str, Any]:
    """The user properties of a minimal-metadata entity (no keys, Timestamp or annotations)."""
    return {
        name: value
        for name, value in entity.items()
        if name not in ("PartitionKey", "RowKey", "Timestamp") and "@" not in name and "." not in name
    }


def query_all(client: RawClient, table: str, query: str = "", timeout: float = 30.0) -> list[dict[str, Any]]:
    """Every entity of a query, following continuation tokens."""
    entities: list[dict[str, Any]] = []
    extra = ""
    while True:
        separator = "&" if query else ""
        target = f"{table}()?{query}{separator}{extra}" if (query or extra) else f"{table}()"
        response = client.request("GET", target, timeout=timeout)
        assert response.status == 200, response
        entities.extend(response.json()["value"])
        next_pk = response.header("x-ms-continuation-nextpartitionkey")
        next_rk = response.header("x-ms-continuation-nextrowkey")
        if not next_pk:
            return entities
        extra = f"NextPartitionKey={next_pk}&NextRowKey={next_rk}"


def entity_map(entities: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], tuple[str, dict[str, Any]]]:
    """(PartitionKey, RowKey) → (ETag, user properties)."""
    return {(e["PartitionKey"], e["RowKey"]): (e["odata.etag"], user_properties(e)) for e in entities}


# --------------------------------------------------------------------------------------------
# Checks of the checkers
# --------------------------------------------------------------------------------------------


def _fake(status: int, body: bytes, headers: Mapping[str, str]) -> RawResponse:
    message = http.client.HTTPMessage()
    for name, value in headers.items():
        message[name] = value
    return RawResponse(status, message, body)


def test_error_checker_accepts_azure_errors_and_rejects_others() -> None:
    good = b'{"odata.error":{"code":"InternalError","message":{"lang":"en-US","value":"x\\nRequestId:1"}}}'
    json_type = "application/json;odata=minimalmetadata"
    assert azure_error_code(_fake(500, good, {"x-ms-error-code": "InternalError", "content-type": json_type}))
    xml = b"<?xml version='1.0'?><Error><Code>InvalidUri</Code><Message>m</Message></Error>"
    assert azure_error_code(
        _fake(400, xml, {"x-ms-error-code": "InvalidUri", "content-type": "application/xml"})
    )
    bad_bodies = [
        b'{"odata.error":{"code":"InternalError","message":"flat"}}',
        b'{"odata.error":{"code":"InternalError","message":{"lang":"en-US","value":"x"},"extra":1}}',
        b"Internal Server Error",
        b"",
    ]
    for body in bad_bodies:
        try:
            azure_error_code(
                _fake(500, body, {"x-ms-error-code": "InternalError", "content-type": json_type})
            )
        except (AssertionError, ValueError):
            continue
        raise AssertionError(f"accepted a malformed error body {body!r}")
    try:
        azure_error_code(_fake(500, good, {"x-ms-error-code": "Other", "content-type": json_type}))
    except AssertionError:
        pass
    else:
        raise AssertionError("accepted a header code that differs from the body code")


def test_batch_response_parser_reads_parts_in_order() -> None:
    body = (
        b"--batchresponse_1\r\nContent-Type: multipart/mixed; boundary=changesetresponse_2\r\n\r\n"
        b"--changesetresponse_2\r\nContent-Type: application/http\r\n"
        b"Content-Transfer-Encoding: binary\r\n\r\n"
        b"HTTP/1.1 204 No Content\r\nContent-ID: 0\r\nETag: W/\"datetime'a'\"\r\n\r\n\r\n"
        b"--changesetresponse_2\r\nContent-Type: application/http\r\n"
        b"Content-Transfer-Encoding: binary\r\n\r\n"
        b"HTTP/1.1 412 Precondition Failed\r\nContent-ID: 1\r\nContent-Type: application/json\r\n\r\n"
        b'{"odata.error":{}}\r\n'
        b"--changesetresponse_2--\r\n--batchresponse_1--\r\n"
    )
    parts = parse_batch_response(
        _fake(202, body, {"content-type": "multipart/mixed; boundary=batchresponse_1"})
    )
    assert [p.status for p in parts] == [204, 412]
    assert parts[0].headers["etag"] == "W/\"datetime'a'\""
    assert parts[1].body == b'{"odata.error":{}}'


def test_isolated_server_kill_takes_every_worker(tmp_path: Path) -> None:
    server = IsolatedServer(tmp_path / "data", ["--workers", "2"], log_path=tmp_path / "server.log").start()
    try:
        wait_for_workers(server, 2)
        workers = server.worker_pids()
        assert len(workers) == 2
        pgid = server.pgid
        assert pgid is not None
        server.kill()
        assert _process_group_members(pgid) == []
    finally:
        server.kill()


__all__ = [
    "CONNECTION_ERRORS",
    "DEV_ACCOUNT",
    "BatchOp",
    "BatchPart",
    "IsolatedServer",
    "assert_retryable_server_error",
    "azure_error_code",
    "batch_request",
    "crash_image_integrity",
    "entity_map",
    "integrity_check",
    "parse_batch_response",
    "query_all",
    "read_response",
    "request_id_prefix",
    "send_batch",
    "signed_request",
    "user_properties",
    "wait_for_workers",
]
