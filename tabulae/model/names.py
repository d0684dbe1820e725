"""Table, queue and container names and entity keys: what the service accepts, and its errors."""

from __future__ import annotations

import re

from tabulae.model.edm import utf16_length
from tabulae.model.errors import MSG_NAME_LENGTH, MSG_QUERY_SYNTAX, ServiceError

SECONDARY_SUFFIX = "-secondary"  # ``acct-secondary`` names the read-only secondary endpoint of ``acct``

MAX_KEY_UTF16 = 1024

_TABLE_CHARS = re.compile(r"[A-Za-z][A-Za-z0-9]*")
# Lower-case letters and digits, single hyphens between them ("Naming Queues and Metadata"; blob
# containers follow the same rule).
_LOWER_DNS_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_FORBIDDEN_KEY_CHARS = re.compile(r"[/\\#?\x00-\x1f\x7f-\x9f]")


def check_table_name(name: str) -> None:
    """Reject a table name the way Azure does: characters first, then length, then ``tables``."""
    if not _TABLE_CHARS.fullmatch(name):
        raise ServiceError("InvalidResourceName")
    if not 3 <= len(name) <= 63:
        raise ServiceError("OutOfRangeInput", MSG_NAME_LENGTH)
    if name.lower() == "tables":
        raise ServiceError("InvalidInput")


def check_lower_dns_name(name: str) -> None:
    """Reject a queue (or blob container) name: 3-63 characters first, then lower-case letters,
    digits and single inner hyphens (``OutOfRangeInput``, ``InvalidResourceName``)."""
    if not 3 <= len(name) <= 63:
        raise ServiceError("OutOfRangeInput", MSG_NAME_LENGTH)
    if not _LOWER_DNS_NAME.fullmatch(name):
        raise ServiceError("InvalidResourceName")


def check_body_key(which: str, value: str) -> None:
    """Validate a PartitionKey or RowKey that arrived in a JSON body."""
    ascii_only = value.isascii()  # the usual key: one code unit a character, no surrogates
    if not ascii_only:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:  # a lone surrogate escaped in the JSON
            raise ServiceError("InvalidInput") from exc
    if _FORBIDDEN_KEY_CHARS.search(value):
        raise ServiceError("OutOfRangeInput", f"The '{which}' parameter of value '{value}' is out of range.")
    if (len(value) if ascii_only else utf16_length(value)) > MAX_KEY_UTF16:
        raise ServiceError("PropertyValueTooLarge")


def check_url_key(value: str) -> None:
    """Validate a key that arrived in a URL key predicate (the error code differs by character)."""
    match = _FORBIDDEN_KEY_CHARS.search(value)
    if match:
        char = match.group()
        if char in "/\\":
            raise ServiceError("InvalidInput", MSG_QUERY_SYNTAX)
        raise ServiceError("OutOfRangeInput")
    if utf16_length(value) > MAX_KEY_UTF16:
        raise ServiceError("PropertyValueTooLarge")
