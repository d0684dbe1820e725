"""Raw HTTP against the Queue service, signed with the Blob/Queue Shared Key or Shared Key Lite.

The signer here is written from "Authorize with Shared Key" independently of the server's code:
the server accepting what it signs is part of what the tests check. The request target is sent
verbatim, never re-encoded, and the signature covers that raw path.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import formatdate
from urllib.parse import parse_qsl, quote

from tests.serverproc import DEV_ACCOUNT, DEV_KEY

VERSION = "2026-10-06"  # what azure-storage-queue 12.18 sends
BOM = b"\xef\xbb\xbf"
DECLARATION = BOM + b'<?xml version="1.0" encoding="utf-8"?>'

_SIGNED = (
    "content-encoding",
    "content-language",
    "content-length",
    "content-md5",
    "content-type",
    "date",
    "if-modified-since",
    "if-match",
    "if-none-match",
    "if-unmodified-since",
    "range",
)


def _hmac(key_b64: str, text: str) -> str:
    digest = hmac.new(base64.b64decode(key_b64), text.encode("utf-8"), hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


def string_to_sign(
    scheme: str, method: str, headers: Mapping[str, str], account: str, raw_target: str
) -> str:
    """The Blob/Queue string-to-sign; ``headers`` lower-case names, ``raw_target`` path?query."""
    path, _, query = raw_target.partition("?")
    x_ms = "".join(
        f"{name}:{headers[name]}\n" for name in sorted(h for h in headers if h.startswith("x-ms-"))
    )
    date = "" if "x-ms-date" in headers else headers.get("date", "")
    pairs = parse_qsl(query, keep_blank_values=True)
    if scheme == "SharedKeyLite":
        comp = [v for k, v in pairs if k == "comp"]
        resource = f"/{account}{path}" + (f"?comp={comp[0]}" if comp else "")
        return "\n".join(
            (method, headers.get("content-md5", ""), headers.get("content-type", ""), date, "")
        ) + (x_ms + resource)
    values = []
    for name in _SIGNED:
        value = date if name == "date" else headers.get(name, "")
        if name == "content-length" and value == "0":
            value = ""
        values.append(value)
    grouped: dict[str, list[str]] = {}
    for name, value in pairs:
        grouped.setdefault(name.lower(), []).append(value)
    query_part = "".join(f"\n{n}:{','.join(sorted(v))}" for n, v in sorted(grouped.items()))
    return f"{method}\n" + "\n".join(values) + "\n" + x_ms + f"/{account}{path}" + query_part


@dataclass
class QueueResponse:
    status: int
    headers: http.client.HTTPMessage
    body: bytes
    reason: str = ""

    def header(self, name: str) -> str | None:
        return self.headers.get(name)

    def xml(self) -> ET.Element:
        assert self.body.startswith(DECLARATION), self
        return ET.fromstring(self.body[len(BOM) :])

    @property
    def error_code(self) -> str | None:
        try:
            return self.xml().findtext("Code")
        except (AssertionError, ET.ParseError):
            return None

    def error_fields(self) -> dict[str, str]:
        """The elements of an ``<Error>`` after ``Code`` and ``Message``, by name."""
        root = self.xml()
        return {child.tag: child.text or "" for child in root if child.tag not in ("Code", "Message")}

    def __repr__(self) -> str:
        return f"QueueResponse({self.status}, {dict(self.headers.items())!r}, {self.body[:600]!r})"


def assert_error(response: QueueResponse, status: int, code: str, **fields: str) -> None:
    """An Azure ``<Error>`` body with this status and code (and these extra elements)."""
    assert response.status == status, response
    assert response.header("x-ms-error-code") == code, response
    assert response.header("content-type") == "application/xml", response
    assert response.error_code == code, response
    message = response.xml().findtext("Message") or ""
    assert "\nRequestId:" in message and "\nTime:" in message, response
    found = response.error_fields()
    for name, value in fields.items():
        assert found.get(name) == value, (name, response)


class QueueHttp:
    """Sends requests to ``http://127.0.0.1:{port}/{account}{target}``; ``target`` starts with ``/``."""

    def __init__(self, port: int, account: str = DEV_ACCOUNT, key: str = DEV_KEY) -> None:
        self.port = port
        self.account = account
        self.key = key

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/{self.account}"

    def request(
        self,
        method: str,
        target: str,
        body: bytes | str | None = None,
        headers: Mapping[str, str | None] | None = None,
        *,
        auth: str = "SharedKey",
        extra_headers: Iterable[tuple[str, str]] = (),
        path_prefix: str | None = None,
        key: str | None = None,
    ) -> QueueResponse:
        """Send one request. ``auth`` is ``SharedKey``, ``SharedKeyLite`` or ``none``; headers given
        as None are left out; ``path_prefix`` replaces ``/{account}`` (``""`` for host-style)."""
        prefix = f"/{self.account}" if path_prefix is None else path_prefix
        raw_target = prefix + target
        payload = body.encode("utf-8") if isinstance(body, str) else body
        # lower-case name -> (name as sent, value); the case of a name is kept on the wire.
        merged: dict[str, tuple[str, str | None]] = {
            "x-ms-version": ("x-ms-version", VERSION),
            "x-ms-date": ("x-ms-date", formatdate(usegmt=True)),
        }
        if payload:
            merged["content-type"] = ("Content-Type", "application/xml")
        for name, value in (headers or {}).items():
            merged[name.lower()] = (name, value)
        final = {lower: pair for lower, pair in merged.items() if pair[1] is not None}
        final["content-length"] = ("Content-Length", str(len(payload or b"")))
        if auth in ("SharedKey", "SharedKeyLite") and "authorization" not in final:
            signed = {lower: str(value) for lower, (_name, value) in final.items() if lower != "host"}
            for name, value in extra_headers:  # a repeated header is signed as its values joined
                lower = name.lower()
                signed[lower] = f"{signed[lower]},{value}" if lower in signed else value
            text = string_to_sign(auth, method, signed, self.account, raw_target)
            final["authorization"] = (
                "Authorization",
                f"{auth} {self.account}:{_hmac(key or self.key, text)}",
            )
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.putrequest(method, raw_target, skip_host="host" in final, skip_accept_encoding=True)
            for name, value in [*final.values(), *extra_headers]:
                conn.putheader(name, str(value))
            try:
                conn.endheaders(payload)
            except (BrokenPipeError, ConnectionResetError):
                if conn.sock is None:  # the connection is gone (a killed server): nothing to read
                    raise
                # else the server answered before reading the body: its answer is still readable
            response = conn.getresponse()
            return QueueResponse(response.status, response.headers, response.read(), response.reason)
        finally:
            conn.close()

    # ------------------------------------------------------------------------- shortcuts

    def create(self, queue: str, **headers: str) -> QueueResponse:
        return self.request("PUT", f"/{queue}", headers=headers)

    def delete(self, queue: str) -> QueueResponse:
        return self.request("DELETE", f"/{queue}")

    def put(self, queue: str, text: str, query: str = "") -> QueueResponse:
        return self.request("POST", f"/{queue}/messages{query}", message_body(text))


def message_body(text: str) -> str:
    """A Put or Update Message body as the Python SDK writes it (``text`` already escaped)."""
    declaration = "<?xml version='1.0' encoding='utf-8'?>\n"
    return f"{declaration}<QueueMessage><MessageText>{text}</MessageText></QueueMessage>"


def quoted(value: str) -> str:
    return quote(value, safe="")


# ------------------------------------------------------------------------- SAS tokens, signed here


def sign(text: str, key: str = DEV_KEY) -> str:
    return base64.b64encode(hmac.new(base64.b64decode(key), text.encode(), hashlib.sha256).digest()).decode()


def account_sas(
    *, ss: str = "q", srt: str = "sco", sp: str = "rwdlacup", se: datetime | None = None, **extra: str
) -> dict[str, str]:
    """An account SAS signed here from "Create an account SAS" (version 2020-12-06 and later)."""
    fields = {
        "sv": "2026-10-06",
        "ss": ss,
        "srt": srt,
        "sp": sp,
        "se": (se or datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        **extra,
    }
    order = ("sp", "ss", "srt", "st", "se", "sip", "spr", "sv", "ses")
    text = DEV_ACCOUNT + "\n" + "".join(f"{fields.get(name, '')}\n" for name in order)
    return {**fields, "sig": sign(text)}


def queue_sas(queue: str, *, sp: str = "raup", sv: str = "2026-10-06", **extra: str) -> dict[str, str]:
    """A queue SAS signed here from "Create a service SAS"."""
    fields = {"sv": sv, **({"sp": sp} if sp else {}), **extra}
    if "se" not in fields and "si" not in fields:
        fields["se"] = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    if sv >= "2015-04-05":
        values = [fields.get(n, "") for n in ("sp", "st", "se")] + [f"/queue/{DEV_ACCOUNT}/{queue}"]
        values += [fields.get(n, "") for n in ("si", "sip", "spr", "sv")]
    else:
        values = [fields.get(n, "") for n in ("sp", "st", "se")] + [f"/{DEV_ACCOUNT}/{queue}"]
        values += [fields.get(n, "") for n in ("si", "sv")]
    return {**fields, "sig": sign("\n".join(values))}
