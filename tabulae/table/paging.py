"""Continuation tokens: opaque to clients, exact for us, and safe to copy into a URL.

A token names the last key a page examined; the next page resumes strictly after it, so rows
inserted or deleted between pages never make a page repeat or skip a surviving row. The form
follows Azure's ``1!<length>!<base64>`` shape, with URL-safe unpadded base64 so that clients
may copy it into a query string verbatim and .NET may join two tokens with a space. An empty
key still gives a non-empty token (``1!0!``), which the JavaScript SDK needs to keep paging.
"""

from __future__ import annotations

import base64
import binascii

from tabulae.model.errors import ServiceError

_PREFIX = "1!"


def encode_token(key: str) -> str:
    """Encode one key (PartitionKey, RowKey or lower-cased table name) as a token."""
    data = base64.urlsafe_b64encode(key.encode("utf-8", "surrogatepass")).rstrip(b"=").decode("ascii")
    return f"{_PREFIX}{len(data)}!{data}"


def decode_token(token: str) -> str:
    """Decode a token we issued; anything else is 400 ``InvalidInput``."""
    try:
        head, length, data = token.split("!", 2)
        if head != "1" or int(length) != len(data) or not data.isascii():
            raise ValueError(token)
        raw = base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))
        if base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii") != data:
            raise ValueError(token)
        return raw.decode("utf-8", "surrogatepass")
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise ServiceError("InvalidInput") from exc
