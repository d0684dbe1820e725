"""Raw HTTP to the Blob service, for shapes the SDK cannot express.

Requests are signed by the SDK's own Shared Key policy (so the signature comes from Microsoft's
implementation, not ours), then sent with ``http.client`` exactly as given, or as raw bytes over
a socket for framing the HTTP layer would refuse to produce (a body shorter than its length).
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from email.utils import formatdate
from urllib.parse import urlsplit
from xml.etree import ElementTree

from azure.core.pipeline import PipelineContext, PipelineRequest
from azure.core.rest import HttpRequest
from azure.storage.blob import BlobServiceClient, CorsRule
from azure.storage.blob._shared.authentication import SharedKeyCredentialPolicy

from tests.serverproc import DEV_ACCOUNT, DEV_KEY

VERSION = "2026-10-06"


@dataclass
class Reply:
    status: int
    headers: dict[str, str]  # lower-case names
    body: bytes

    @property
    def code(self) -> str | None:
        return self.headers.get("x-ms-error-code")

    def error_fields(self) -> dict[str, str]:
        """The child elements of an ``<Error>`` body, by tag."""
        root = ElementTree.fromstring(self.body)
        assert root.tag == "Error"
        return {child.tag: child.text or "" for child in root}


def sign(method: str, url: str, headers: dict[str, str], body: bytes = b"") -> dict[str, str]:
    request = HttpRequest(
        method, url, headers={"x-ms-date": formatdate(usegmt=True), "x-ms-version": VERSION, **headers}
    )
    if body:
        request.set_bytes_body(body)
    SharedKeyCredentialPolicy(DEV_ACCOUNT, DEV_KEY).on_request(
        PipelineRequest(request, PipelineContext(None))
    )
    return dict(request.headers)


_container_numbers = itertools.count()


class BlobHttp:
    """Signed raw requests to one server's Blob port (path-style URLs)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.base = f"http://127.0.0.1:{port}/{DEV_ACCOUNT}"

    def request(
        self,
        method: str,
        path: str,
        headers: dict[str, str] | None = None,
        body: bytes = b"",
        signed: bool = True,
    ) -> Reply:
        """``path`` follows the account (``/container/blob?query``) and is sent verbatim."""
        url = self.base + path
        all_headers = dict(headers or {})
        if body or method in ("PUT", "POST"):
            all_headers.setdefault("Content-Length", str(len(body)))
        if signed:
            all_headers = sign(method, url, all_headers, body)
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            target = urlsplit(url).path + ("?" + urlsplit(url).query if "?" in url else "")
            connection.putrequest(method, target, skip_accept_encoding=True)
            for name, value in all_headers.items():
                connection.putheader(name, value)
            connection.endheaders(body or None)
            response = connection.getresponse()
            return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
        finally:
            connection.close()

    def new_container(self, prefix: str) -> str:
        """Create a container named ``prefix`` and a fresh number (a test's own box) and return
        its name."""
        name = f"{prefix}{next(_container_numbers)}x"
        created = self.request("PUT", f"/{name}?restype=container")
        assert created.status == 201, created
        return name

    def head_bytes(self, method: str, path: str, headers: dict[str, str]) -> bytes:
        """A signed request line and header block, as bytes (the caller sends the body)."""
        url = self.base + path
        signed = sign(method, url, headers)
        target = urlsplit(url).path + ("?" + urlsplit(url).query if "?" in url else "")
        lines = [f"{method} {target} HTTP/1.1", f"Host: 127.0.0.1:{self.port}"]
        lines += [f"{name}: {value}" for name, value in signed.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def raw(self, data: bytes, *, close_write: bool = False, timeout: float = 10.0) -> bytes:
        """Send ``data`` on a fresh connection (then half-close it with ``close_write``) and read
        one response: until its declared length has arrived, the server closes, or ``timeout``."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as sock:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                sock.sendall(data)  # the server may answer (and close) before taking all of it
            if close_write:
                sock.shutdown(socket.SHUT_WR)
            received = b""
            try:
                while not _complete(received):
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    received += chunk
            except (TimeoutError, ConnectionResetError):
                pass
            return received


def _complete(data: bytes) -> bool:
    head, found, body = data.partition(b"\r\n\r\n")
    if not found:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return False


@contextlib.contextmanager
def cors_rules(service: BlobServiceClient, rules: list[CorsRule], settle: float = 0.0) -> Iterator[None]:
    """The account's Blob CORS rules replaced by ``rules`` for a ``with`` block, then restored;
    ``settle`` seconds are waited first where several workers must all have read them again."""
    original = service.get_service_properties()["cors"]
    service.set_service_properties(cors=rules)
    time.sleep(settle)
    try:
        yield
    finally:
        service.set_service_properties(cors=original)
