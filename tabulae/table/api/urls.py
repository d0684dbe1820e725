"""Resource paths: from the raw request path to the resource it names ("Addressing Table service resources").

Grammar of one decoded path segment (after splitting the raw path on ``/`` and percent-decoding
each segment once as UTF-8; ``+`` stays a plus)::

    segment    = name [ "(" [ keys ] ")" ]
    keys       = ws key *( ws "," ws key ) ws          ; entity key predicate
               / ws literal ws                        ; Tables('name')
    key        = ( "PartitionKey" / "RowKey" ) ws "=" ws literal
    literal    = "'" *( non-quote / "''" ) "'"        ; '' stands for one quote
    ws         = *( " " )

Both keys are required, once each, in either order. ``name`` is everything before the first
``(`` and the predicate runs to the last ``)``, so ``,`` ``=`` ``(`` and ``)`` inside quoted keys
are fine. Splitting before decoding keeps an encoded ``%2F`` inside its key, where it is then
rejected as a forbidden key character.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tabulae.model.errors import MSG_KEY_COUNT, ServiceError
from tabulae.model.names import check_url_key


@dataclass(slots=True)  # not frozen: built on every request; frozen ones build slower
class Segment:
    """A decoded last path segment: a name, whether it had parentheses, and the literals inside."""

    name: str
    has_parens: bool
    keys: dict[str, str] | None  # PartitionKey/RowKey predicate
    literal: str | None  # Tables('name') form


def _read_literal(text: str, pos: int) -> tuple[str, int]:
    """Read a quoted literal starting at ``pos`` (which must be a quote); return (value, end)."""
    if pos >= len(text) or text[pos] != "'":
        raise ServiceError("InvalidInput", MSG_KEY_COUNT)
    out: list[str] = []
    pos += 1
    while True:
        end = text.find("'", pos)
        if end < 0:
            raise ServiceError("InvalidInput", MSG_KEY_COUNT)
        out.append(text[pos:end])
        if end + 1 < len(text) and text[end + 1] == "'":
            out.append("'")
            pos = end + 2
            continue
        return "".join(out), end + 1


def _skip_spaces(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] == " ":
        pos += 1
    return pos


# The form every SDK writes (keys without quotes inside), matched in one step.
_PLAIN_KEYS_RE = re.compile(r"PartitionKey='([^']*)',RowKey='([^']*)'")


def parse_key_predicate(text: str) -> dict[str, str]:
    """Parse ``PartitionKey='a',RowKey='b'`` (any order, optional spaces) into both keys."""
    plain = _PLAIN_KEYS_RE.fullmatch(text)
    if plain is not None:
        check_url_key(plain[1])
        check_url_key(plain[2])
        return {"PartitionKey": plain[1], "RowKey": plain[2]}
    keys: dict[str, str] = {}
    pos = _skip_spaces(text, 0)
    while True:
        eq = text.find("=", pos)
        if eq < 0:
            raise ServiceError("InvalidInput", MSG_KEY_COUNT)
        name = text[pos:eq].strip()
        if name not in ("PartitionKey", "RowKey") or name in keys:
            raise ServiceError("InvalidInput", MSG_KEY_COUNT)
        value, pos = _read_literal(text, _skip_spaces(text, eq + 1))
        keys[name] = value
        pos = _skip_spaces(text, pos)
        if pos == len(text):
            break
        if text[pos] != ",":
            raise ServiceError("InvalidInput", MSG_KEY_COUNT)
        pos = _skip_spaces(text, pos + 1)
    if len(keys) != 2:
        raise ServiceError("InvalidInput", MSG_KEY_COUNT)
    for value in keys.values():
        check_url_key(value)
    return keys


def parse_segment(segment: str) -> Segment:
    """Parse the resource segment: ``t``, ``t()``, ``t(PartitionKey='a',RowKey='b')``, ``Tables('t')``."""
    open_at = segment.find("(")
    if open_at < 0:
        return Segment(segment, False, None, None)
    if not segment.endswith(")"):
        raise ServiceError("InvalidInput", MSG_KEY_COUNT)
    name = segment[:open_at]
    inner = segment[open_at + 1 : -1]
    if not inner.strip():
        return Segment(name, True, None, None)
    stripped = inner.strip()
    if stripped.startswith("'"):
        value, end = _read_literal(stripped, 0)
        if end != len(stripped):
            raise ServiceError("InvalidInput", MSG_KEY_COUNT)
        return Segment(name, True, None, value)
    return Segment(name, True, parse_key_predicate(inner), None)
