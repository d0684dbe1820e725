"""TLS and bearer-token helpers for the security tests.

* ``make_self_signed_cert`` runs the ``openssl`` CLI to make a throw-away certificate for
  ``127.0.0.1`` / ``localhost`` that clients can trust by path (``connection_verify=...``).
* ``make_jwt`` builds an *unsigned* JWT with the claims ``tabulae serve --oauth basic`` checks.
* ``StaticTokenCredential`` / ``AsyncStaticTokenCredential`` hand such a token to the SDK.
* ``https_request`` sends one raw request over HTTPS (``rawhttp.RawClient`` speaks plain HTTP only).
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from azure.core.credentials import AccessToken

from tests.rawhttp import RawResponse

STORAGE_AUDIENCE = "https://storage.azure.com"
TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
ISSUER = f"https://sts.windows.net/{TENANT}/"


@dataclass(frozen=True)
class SelfSignedCert:
    """A PEM certificate and its unencrypted private key, both on disk."""

    cert: Path
    key: Path

    def ssl_context(self) -> ssl.SSLContext:
        """A client context that trusts exactly this certificate."""
        return ssl.create_default_context(cafile=str(self.cert))


def make_self_signed_cert(directory: Path) -> SelfSignedCert:
    """Create a self-signed certificate valid for 127.0.0.1 and localhost (EC P-256, 2 days)."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-nodes", "-days", "2",
            "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-keyout", str(key), "-out", str(cert),
            "-subj", "/CN=127.0.0.1",
            "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,digitalSignature,keyCertSign",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return SelfSignedCert(cert, key)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def make_jwt(
    *,
    aud: str = STORAGE_AUDIENCE,
    iss: str = ISSUER,
    nbf: float | None = None,
    exp: float | None = None,
    extra: Mapping[str, Any] | None = None,
) -> str:
    """An unsigned (``alg: none``) JWT; by default valid from a minute ago for an hour."""
    now = int(time.time())
    claims: dict[str, Any] = {
        "aud": aud,
        "iss": iss,
        "iat": now - 60,
        "nbf": int(now - 60 if nbf is None else nbf),
        "exp": int(now + 3600 if exp is None else exp),
        "oid": "00000000-0000-0000-0000-000000000001",
        "tid": TENANT,
        **(extra or {}),
    }
    header = {"alg": "none", "typ": "JWT"}
    return f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}."


@dataclass
class StaticTokenCredential:
    """A ``TokenCredential`` that always returns the same token and counts the calls."""

    token: str
    scopes_seen: list[tuple[str, ...]] = field(default_factory=list)

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        self.scopes_seen.append(scopes)
        # The AccessToken's own expiry is what azure-core caches by; keep it in the future so that
        # the JWT's claims (possibly expired on purpose) are what the server judges.
        return AccessToken(self.token, int(time.time()) + 3600)


@dataclass
class AsyncStaticTokenCredential:
    """The ``AsyncTokenCredential`` twin of :class:`StaticTokenCredential`."""

    token: str
    scopes_seen: list[tuple[str, ...]] = field(default_factory=list)

    async def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        self.scopes_seen.append(scopes)
        return AccessToken(self.token, int(time.time()) + 3600)

    async def close(self) -> None:
        return None

    async def __aenter__(self) -> AsyncStaticTokenCredential:
        return self

    async def __aexit__(self, *args: object) -> None:
        return None


def https_request(
    port: int,
    cert: SelfSignedCert,
    method: str,
    raw_target: str,
    headers: Mapping[str, str] | None = None,
    body: bytes | None = None,
) -> RawResponse:
    """Send one request over HTTPS to 127.0.0.1 with the target used verbatim."""
    conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=cert.ssl_context())
    try:
        conn.putrequest(method, raw_target, skip_accept_encoding=True)
        for name, value in (headers or {}).items():
            conn.putheader(name, value)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        response = conn.getresponse()
        return RawResponse(response.status, response.headers, response.read())
    finally:
        conn.close()
