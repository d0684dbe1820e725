"""Edm types: the typed values an entity holds, and their exact text forms.

In memory every property is a pair ``(edm_type, value)``:

=============  ==========================================================
Edm.String     ``str``
Edm.Boolean    ``bool``
Edm.Int32      ``int`` in [-2**31, 2**31 - 1]
Edm.Int64      ``int`` in [-2**63, 2**63 - 1] (never routed through a float)
Edm.Double     ``float`` (NaN, ±Infinity and -0.0 included)
Edm.DateTime   ``int`` .NET ticks: 100 ns units since 0001-01-01T00:00:00Z
Edm.Guid       ``str`` in lower-case canonical 8-4-4-4-12 form
Edm.Binary     ``bytes``
=============  ==========================================================

Ticks keep the service's full 100 ns precision, order chronologically as plain integers, and
make ``max(now, stored + 1)`` (the strictly increasing Timestamp rule) a simple comparison.
"""

from __future__ import annotations

import codecs
import re
import time
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

STRING = "Edm.String"
BOOLEAN = "Edm.Boolean"
INT32 = "Edm.Int32"
INT64 = "Edm.Int64"
DOUBLE = "Edm.Double"
DATETIME = "Edm.DateTime"
GUID = "Edm.Guid"
BINARY = "Edm.Binary"

ALL_TYPES = frozenset({STRING, BOOLEAN, INT32, INT64, DOUBLE, DATETIME, GUID, BINARY})

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

TICKS_PER_SECOND = 10_000_000
_DOTNET_EPOCH = datetime(1, 1, 1, tzinfo=UTC)
UNIX_EPOCH_TICKS = 621_355_968_000_000_000
MIN_DATETIME_TICKS = 504_911_232_000_000_000  # 1601-01-01T00:00:00Z, the service's lower bound
MAX_DATETIME_TICKS = 3_155_378_975_999_999_999  # 9999-12-31T23:59:59.9999999Z

Property = tuple[str, Any]
Properties = dict[str, Property]

_DATETIME_RE = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?"
    r"(Z|z|[+-]\d{2}:?\d{2})?",
    re.ASCII,  # digits of other scripts are not an ISO 8601 date (nor does Azure read them)
)
_GUID_D = r"([0-9a-fA-F]{8})-([0-9a-fA-F]{4})-([0-9a-fA-F]{4})-([0-9a-fA-F]{4})-([0-9a-fA-F]{12})"
# The forms .NET's Guid(string) reads: 8-4-4-4-12 bare ("D"), in braces ("B") or parentheses ("P"),
# and 32 hex digits ("N").
_GUID_RE = re.compile(
    rf"{_GUID_D}|\{{{_GUID_D}\}}|\({_GUID_D}\)|"
    r"([0-9a-fA-F]{8})([0-9a-fA-F]{4})([0-9a-fA-F]{4})([0-9a-fA-F]{4})([0-9a-fA-F]{12})"
)


def now_ticks() -> int:
    """The current UTC time in ticks (100 ns resolution where the clock has it)."""
    return UNIX_EPOCH_TICKS + time.time_ns() // 100


def parse_datetime(text: str) -> int | None:
    """Parse an ISO 8601 date-time into ticks; ``None`` if it is not one.

    Accepts 0 or more fraction digits (beyond 7 truncated, as the service keeps 100 ns),
    ``Z``, a numeric offset, or no zone at all (taken as UTC). The range is not checked here.
    """
    match = _DATETIME_RE.fullmatch(text.strip())
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    try:
        moment = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second or 0))
    except ValueError:
        return None
    seconds = (moment - datetime(1, 1, 1)) // timedelta(seconds=1)
    ticks = seconds * TICKS_PER_SECOND
    if fraction:
        ticks += int((fraction + "000000")[:7])
    if zone and zone not in ("Z", "z"):
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        offset_minutes = int(digits[:2]) * 60 + int(digits[2:])
        ticks -= sign * offset_minutes * 60 * TICKS_PER_SECOND
    return ticks


@lru_cache(maxsize=4096)  # new versions are written within the same few seconds
def _second_text(seconds: int) -> str:
    moment = _DOTNET_EPOCH + timedelta(seconds=seconds)
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T"
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}"
    )


@lru_cache(maxsize=16384)  # the same entity versions are formatted again and again on reads
def format_datetime(ticks: int) -> str:
    """Format ticks as the service does: UTC, ``Z``, trailing zeros of the fraction trimmed."""
    seconds, fraction = divmod(ticks, TICKS_PER_SECOND)
    text = _second_text(seconds)
    if fraction:
        return f"{text}.{fraction:07d}".rstrip("0") + "Z"
    return text + "Z"


def format_datetime_legacy(ticks: int) -> str:
    """The ``MM/dd/yyyy HH:mm:ss`` form Azure puts in out-of-range DateTime messages."""
    seconds = ticks // TICKS_PER_SECOND
    moment = _DOTNET_EPOCH + timedelta(seconds=seconds)
    return (
        f"{moment.month:02d}/{moment.day:02d}/{moment.year:04d} "
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}"
    )


def etag_for(timestamp: str) -> str:
    """The entity ETag the service derives from a formatted Timestamp ("Update Entity")."""
    return "W/\"datetime'" + timestamp.replace(":", "%3A") + "'\""


@lru_cache(maxsize=4096)  # the rows of one batch or commit group share one Timestamp
def etag_of_ticks(ticks: int) -> str:
    """The ETag of the entity version written at ``ticks``."""
    return etag_for(format_datetime(ticks))


def parse_guid(text: str) -> str | None:
    """Canonical lower-case 8-4-4-4-12 form of a Guid string in any of .NET's D, B, P and N forms
    and any case, surrounding white space allowed; ``None`` if it is not one."""
    match = _GUID_RE.fullmatch(text.strip())
    if match is None:
        return None
    return "-".join(group for group in match.groups() if group is not None).lower()


def utf16_length(text: str) -> int:
    """Length in UTF-16 code units, the unit the service's limits are written in."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le")) // 2


# The C codec functions themselves: ``str.encode``/``bytes.decode`` with an error handler look
# the codec up by name on every call, which costs several times the conversion of a short key.
_encode_utf16be = codecs.utf_16_be_encode
_decode_utf16be = codecs.utf_16_be_decode


def utf16_sort_key(text: str) -> bytes:
    """Bytes whose plain byte order is the service's ordinal UTF-16 code-unit order of ``text``:
    the form in which every engine stores keys, so its native byte order is the service's order."""
    return _encode_utf16be(text, "surrogatepass")[0]


def from_utf16_sort_key(key: bytes) -> str:
    """The text a :func:`utf16_sort_key` encodes (lone surrogates included)."""
    return _decode_utf16be(key, "surrogatepass", True)[0]
