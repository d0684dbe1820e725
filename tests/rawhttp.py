"""Raw HTTP against the server, signed with Shared Key or Shared Key Lite.

The SDK cannot express every wire shape the protocol allows (MERGE verb, legacy key encodings,
missing headers, duplicated headers, ...). This module sends exactly the bytes a test asks for:
the request target is used verbatim, never re-encoded, and the signature covers that raw path.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import http.client
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import formatdate
from typing import Any
from urllib.parse import parse_qsl, quote

from azure.core.exceptions import HttpResponseError

from tests.serverproc import DEV_ACCOUNT, DEV_KEY

JSON_NOMETADATA = "application/json;odata=nometadata"
JSON_MINIMAL = "application/json;odata=minimalmetadata"
JSON_FULL = "application/json;odata=fullmetadata"
VERSION = "2019-02-02"

RFC1123_RE = re.compile(r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$")
EDM_DATETIME_RE = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,7}))?Z$")


# --------------------------------------------------------------------------------------------
# Signing
# --------------------------------------------------------------------------------------------


def canonical_resource(account: str, raw_target: str) -> str:
    """``/{account}`` + the raw path (still percent-encoded) + ``?comp=`` when present."""
    path, _, query = raw_target.partition("?")
    resource = f"/{account}{path}"
    comp = [value for name, value in parse_qsl(query, keep_blank_values=True) if name == "comp"]
    if comp:
        resource += f"?comp={comp[0]}"
    return resource


def _hmac_b64(key_b64: str, string_to_sign: str) -> str:
    digest = hmac.new(base64.b64decode(key_b64), string_to_sign.encode("utf-8"), hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


def shared_key_signature(
    key_b64: str, verb: str, content_md5: str, content_type: str, date: str, resource: str
) -> str:
    """Table-service Shared Key: VERB, Content-MD5, Content-Type, Date, CanonicalizedResource."""
    return _hmac_b64(key_b64, f"{verb}\n{content_md5}\n{content_type}\n{date}\n{resource}")


def shared_key_lite_signature(key_b64: str, date: str, resource: str) -> str:
    """Table-service Shared Key Lite: Date, CanonicalizedResource."""
    return _hmac_b64(key_b64, f"{date}\n{resource}")


def rfc1123_now() -> str:
    return formatdate(usegmt=True)


# --------------------------------------------------------------------------------------------
# Responses
# --------------------------------------------------------------------------------------------


@dataclass
class RawResponse:
    status: int
    headers: http.client.HTTPMessage
    body: bytes

    def header(self, name: str) -> str | None:
        return self.headers.get(name)

    def json(self) -> Any:
        return json.loads(self.body)

    def json_pairs(self) -> list[tuple[str, Any]]:
        """Top-level key/value pairs in wire order (duplicates kept)."""
        pairs: list[tuple[str, Any]] = json.loads(self.body, object_pairs_hook=list)
        return pairs

    @property
    def error_code(self) -> str | None:
        """The ``odata.error.code`` of a JSON error body (None if the body is not one)."""
        try:
            return str(self.json()["odata.error"]["code"])
        except (ValueError, KeyError, TypeError):
            return None

    @property
    def error_message(self) -> str:
        """The human text of a JSON error (``value`` up to the ``\\nRequestId:`` line)."""
        value = str(self.json()["odata.error"]["message"]["value"])
        return value.split("\nRequestId:", 1)[0]

    def __repr__(self) -> str:
        return f"RawResponse({self.status}, {dict(self.headers.items())!r}, {self.body[:500]!r})"


def assert_error(response: RawResponse, status: int, code: str, message: str | None = None) -> None:
    """The response is a JSON OData error with this status and code (and message prefix)."""
    assert response.status == status, response
    assert response.error_code == code, response
    assert response.header("x-ms-error-code") == code, response
    if message is not None:
        assert response.error_message.startswith(message), response


def sdk_error_code(error: HttpResponseError) -> str | None:
    """The service error code behind an SDK exception.

    Some SDK methods (``create_entity``) re-raise the undecoded error, which lacks ``error_code``;
    the code is then read from the response (``x-ms-error-code``, else the JSON body).
    """
    code = getattr(error, "error_code", None)
    if code:
        return str(getattr(code, "value", code))
    response = error.response
    if response is None:
        return None
    headers: Mapping[str, str] = getattr(response, "headers", {})
    header = headers.get("x-ms-error-code")
    if header:
        return str(header)
    try:
        return str(json.loads(response.text())["odata.error"]["code"])
    except (ValueError, KeyError, TypeError):
        return None


# --------------------------------------------------------------------------------------------
# Client
# --------------------------------------------------------------------------------------------

HeaderValue = str | None


class RawClient:
    """Sends requests to ``http://127.0.0.1:{port}/{account}/{target}`` with Shared Key auth.

    ``target`` is the path after the account root plus an optional query string, exactly as it
    should appear on the wire. Default headers can be overridden, or removed by passing ``None``.
    """

    def __init__(
        self,
        port: int,
        account: str = DEV_ACCOUNT,
        key: str = DEV_KEY,
        host: str = "127.0.0.1",
    ) -> None:
        self.port = port
        self.account = account
        self.key = key
        self.host = host

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}/{self.account}"

    def request(
        self,
        method: str,
        target: str,
        body: bytes | str | Mapping[str, Any] | list[Any] | None = None,
        headers: Mapping[str, HeaderValue] | None = None,
        *,
        extra_headers: Iterable[tuple[str, str]] = (),
        auth: str = "SharedKey",
        path_prefix: str | None = None,
        sign_key: str | None = None,
        chunked: bool = False,
        timeout: float = 30.0,
    ) -> RawResponse:
        """Send one request and return its status, headers and body.

        ``auth`` is ``SharedKey``, ``SharedKeyLite`` or ``none``. ``path_prefix`` replaces the
        ``/{account}`` prefix of the raw path (``""`` for host-style requests). A ``Host`` header
        replaces the default one. ``chunked`` sends the body with ``Transfer-Encoding: chunked``.
        """
        prefix = f"/{self.account}" if path_prefix is None else path_prefix
        raw_target = f"{prefix}/{target}" if not target.startswith("/") else f"{prefix}{target}"

        payload: bytes | None
        if body is None:
            payload = None
        elif isinstance(body, bytes):
            payload = body
        elif isinstance(body, str):
            payload = body.encode("utf-8")
        else:
            payload = json.dumps(body).encode("utf-8")

        date = rfc1123_now()
        merged: dict[str, HeaderValue] = {
            "x-ms-version": VERSION,
            "DataServiceVersion": "3.0",
            "MaxDataServiceVersion": "3.0;NetFx",
            "Accept": JSON_MINIMAL,
            "x-ms-date": date,
            "Date": date,
        }
        if payload is not None:
            merged["Content-Type"] = "application/json"
        for name, value in (headers or {}).items():
            for existing in [k for k in merged if k.lower() == name.lower()]:
                del merged[existing]
            merged[name] = value
        final = [(k, v) for k, v in merged.items() if v is not None]
        final.extend(extra_headers)

        lowered = {k.lower(): v for k, v in final}
        if auth in ("SharedKey", "SharedKeyLite") and "authorization" not in lowered:
            sign_date = lowered.get("x-ms-date") or lowered.get("date") or ""
            resource = canonical_resource(self.account, raw_target)
            key = sign_key or self.key
            if auth == "SharedKey":
                signature = shared_key_signature(
                    key,
                    method.upper(),
                    lowered.get("content-md5", ""),
                    lowered.get("content-type", ""),
                    sign_date,
                    resource,
                )
            else:
                signature = shared_key_lite_signature(key, sign_date, resource)
            final.append(("Authorization", f"{auth} {self.account}:{signature}"))

        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            conn.putrequest(method, raw_target, skip_host="host" in lowered, skip_accept_encoding=True)
            for name, value in final:
                conn.putheader(name, value)
            if chunked and payload is not None:
                conn.putheader("Transfer-Encoding", "chunked")
                payload = b"%x\r\n%s\r\n0\r\n\r\n" % (len(payload), payload) if payload else b"0\r\n\r\n"
            elif payload is not None and "content-length" not in lowered:
                conn.putheader("Content-Length", str(len(payload)))
            # The server may answer (e.g. 413) and close before reading the whole body.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                conn.endheaders(payload)
            if conn.sock is None:  # the send failed before any socket was left to read an answer from
                raise ConnectionResetError("the connection was lost while sending the request")
            response = conn.getresponse()
            data = response.read()
            return RawResponse(response.status, response.headers, data)
        finally:
            conn.close()

    # Convenience wrappers ------------------------------------------------------------------

    def create_table(self, name: str, headers: Mapping[str, HeaderValue] | None = None) -> RawResponse:
        return self.request(
            "POST",
            "Tables",
            {"TableName": name},
            {"Content-Type": JSON_NOMETADATA, **(headers or {})},
        )

    def insert(
        self,
        table: str,
        entity: Mapping[str, Any] | bytes | str,
        headers: Mapping[str, HeaderValue] | None = None,
    ) -> RawResponse:
        return self.request(
            "POST", table, entity if isinstance(entity, bytes | str) else dict(entity), headers
        )

    def get_entity(
        self, table: str, pk: str, rk: str, headers: Mapping[str, HeaderValue] | None = None
    ) -> RawResponse:
        return self.request("GET", table + py_keys(pk, rk), None, headers)


# --------------------------------------------------------------------------------------------
# Key predicates in the shapes real clients send
# --------------------------------------------------------------------------------------------


def _double_quotes(value: str) -> str:
    return value.replace("'", "''")


def py_keys(pk: str, rk: str) -> str:
    """Python / .NET: quotes doubled, then everything but unreserved characters percent-encoded."""
    return (
        f"(PartitionKey='{quote(_double_quotes(pk), safe='')}',RowKey='{quote(_double_quotes(rk), safe='')}')"
    )


def _encode_uri_component(value: str) -> str:
    return quote(value, safe="!*'()")


def js_keys(pk: str, rk: str) -> str:
    """JS: ``encodeURIComponent(value.replace(/'/g, "''"))``, so the doubled quote stays raw."""
    return (
        f"(PartitionKey='{_encode_uri_component(_double_quotes(pk))}',"
        f"RowKey='{_encode_uri_component(_double_quotes(rk))}')"
    )


def _encode_reserved_expansion(value: str) -> str:
    # Newer JS: quotes doubled, '%' -> '%25', then RFC 6570 {+var}: reserved characters stay raw,
    # spaces and non-ASCII are percent-encoded.
    return quote(_double_quotes(value), safe=";,:@&=+$!*'()")


def newer_js_keys(pk: str, rk: str) -> str:
    return f"(PartitionKey='{_encode_reserved_expansion(pk)}',RowKey='{_encode_reserved_expansion(rk)}')"


def legacy_keys(pk: str, rk: str) -> str:
    """Old SDKs percent-encode the surrounding quotes too: ``PartitionKey=%27...%27``."""
    return (
        f"(PartitionKey=%27{quote(_double_quotes(pk), safe='')}%27,"
        f"RowKey=%27{quote(_double_quotes(rk), safe='')}%27)"
    )


def spaced_keys(pk: str, rk: str) -> str:
    """The docs' form with whitespace after the comma (sent as ``%20``)."""
    return (
        f"(PartitionKey='{quote(_double_quotes(pk), safe='')}',%20"
        f"RowKey='{quote(_double_quotes(rk), safe='')}')"
    )


# --------------------------------------------------------------------------------------------
# Edm.DateTime helpers
# --------------------------------------------------------------------------------------------


def parse_edm_datetime(text: str) -> tuple[datetime, int]:
    """Parse ``yyyy-MM-ddTHH:mm:ss[.f{1,7}]Z`` into (whole-second UTC datetime, 100 ns ticks)."""
    match = EDM_DATETIME_RE.match(text)
    assert match, f"not an Edm.DateTime ending in Z: {text!r}"
    whole = datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    ticks = int((match.group(2) or "").ljust(7, "0"))
    return whole, ticks


def etag_from_timestamp(timestamp: str) -> str:
    """The ETag Azure derives from a Timestamp string (also what the SDK rebuilds)."""
    return "W/\"datetime'" + quote(timestamp) + "'\""
