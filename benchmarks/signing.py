"""Shared Key signing for the Table service, used to pre-sign every benchmark request.

The Table flavour of Shared Key signs only the verb, Content-MD5, Content-Type, the date and the
canonicalized resource (account + raw path, plus ``?comp=`` when present); no ``x-ms-`` headers
and no other query parameters. So a request's signature depends on its path but never on its body
or its query string, which is what lets wrk replay pre-signed requests.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import urllib.parse
from datetime import UTC, datetime, timedelta
from email.utils import formatdate

ACCOUNT = "devstoreaccount1"
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
_KEY_BYTES = base64.b64decode(ACCOUNT_KEY)


def http_date() -> str:
    """The current time as an RFC 1123 date, the form ``x-ms-date`` takes."""
    return formatdate(usegmt=True)


def string_to_sign(verb: str, path: str, content_type: str, date: str, comp: str | None = None) -> str:
    """The Shared Key string-to-sign; ``path`` is the raw (still percent-encoded) path, no query."""
    resource = f"/{ACCOUNT}{path}"
    if comp:
        resource += f"?comp={comp}"
    return f"{verb.upper()}\n\n{content_type}\n{date}\n{resource}"


def signature(text: str) -> str:
    """Base64 HMAC-SHA256 of ``text`` under the development account key."""
    digest = hmac.new(_KEY_BYTES, text.encode("utf-8"), hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


def authorization(verb: str, path: str, content_type: str, date: str) -> str:
    """The ``Authorization`` header value for one request (query string excluded from ``path``)."""
    return f"SharedKey {ACCOUNT}:{signature(string_to_sign(verb, path, content_type, date))}"


def table_sas(table: str, permissions: str, version: str, hours: float = 4.0) -> str:
    """A table SAS query string ("Create a service SAS": twelve fields joined by LF, the table
    name lower-cased in the resource), in the order the Python SDK writes its fields."""
    expiry = (datetime.now(UTC) + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ")
    resource = f"/table/{ACCOUNT}/{table.lower()}"
    text = "\n".join((permissions, "", expiry, resource, "", "", "", version, "", "", "", ""))
    fields = {"se": expiry, "sp": permissions, "sv": version, "tn": table, "sig": signature(text)}
    return urllib.parse.urlencode(fields, quote_via=urllib.parse.quote)


def _self_check() -> None:
    """ "Authorize with Shared Key" worked example 1; raises if the signing code drifted."""
    text = string_to_sign(
        "POST", f"/{ACCOUNT}/Tables", "application/json;odata=nometadata", "Mon, 01 Jan 2024 00:00:00 GMT"
    )
    if signature(text) != "VVEni35dYYPP+Qk8tDErfbBKYUstV8A3uqbQVnV53eM=":
        raise AssertionError("Shared Key signing does not reproduce the spec's worked example")


_self_check()
