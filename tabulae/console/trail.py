"""The way back through a grid's pages: continuation tokens only lead forward, so each link
carries the tokens of the pages before it.

A grid page is named by its continuation tokens (``np``, ``nr``; none on the first page), the
number of rows before it (``o``) and its number (``pg``), and carries ``back``: the same for
the pages before it, oldest first, as ``np,nr,o,pg~np,nr,o,pg`` (tokens are ``1!<n>!<base64url>``,
so neither ``,`` nor ``~`` occurs in them). "Next" appends the current page to the trail,
"previous" takes its last entry off. The row numbers are what is cheaply known, the rows the
pages so far returned: no page counts the table. A trail longer than :data:`MAX_TRAIL_CHARS`
drops its oldest pages (keys can be long, and a URL has a limit); from the oldest page kept,
only "first page" leads back.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

MAX_TRAIL_CHARS = 8000
_TOKEN = re.compile(r"1![0-9]+![A-Za-z0-9_-]*")


@dataclass(frozen=True, slots=True)
class Stop:
    """A page of the grid: its tokens ("" on the first page), rows before it, its number."""

    np: str = ""
    nr: str = ""
    offset: int = 0
    number: int = 1

    @property
    def first(self) -> bool:
        return not self.np


def _count(text: str | None, default: int) -> int:
    return int(text) if text and text.isdigit() and len(text) < 16 else default


def _parse_trail(text: str) -> list[Stop]:
    stops = []
    for entry in text.split("~") if text else ():
        parts = entry.split(",")
        if len(parts) != 4 or not all(_TOKEN.fullmatch(token) for token in parts[:2]):
            return []  # not a trail this console made: no way back but the first page
        stops.append(Stop(parts[0], parts[1], _count(parts[2], 0), _count(parts[3], 1)))
    return stops


def _trail_text(stops: list[Stop]) -> str:
    entries = [f"{stop.np},{stop.nr},{stop.offset},{stop.number}" for stop in stops]
    while entries and len("~".join(entries)) > MAX_TRAIL_CHARS:
        entries.pop(0)
    return "~".join(entries)


@dataclass(frozen=True, slots=True)
class Trail:
    """Where the current page is, and the pages before it (see the module docstring)."""

    here: Stop
    back: list[Stop]

    @classmethod
    def of(cls, params: Mapping[str, str]) -> Trail:
        np, nr = params.get("np", ""), params.get("nr", "")
        if not (np and nr):
            return cls(Stop(), [])
        number = max(_count(params.get("pg"), 2), 2)
        return cls(Stop(np, nr, _count(params.get("o"), 0), number), _parse_trail(params.get("back", "")))

    def next(self, tokens: tuple[str, str], rows: int) -> dict[str, str | int]:
        """The query parameters of the page after this one, which returned ``rows`` rows."""
        back = [*self.back, self.here] if not self.here.first else []
        return {
            "np": tokens[0],
            "nr": tokens[1],
            "o": self.here.offset + rows,
            "pg": self.here.number + 1,
            "back": _trail_text(back),
        }

    def previous(self) -> dict[str, str | int] | None:
        """The query parameters of the page before this one (``{}``: the first page), or
        ``None`` when there is none, or the trail no longer reaches it."""
        if self.here.first:
            return None
        if not self.back:
            return {} if self.here.number == 2 else None
        last = self.back[-1]
        return {
            "np": last.np,
            "nr": last.nr,
            "o": last.offset,
            "pg": last.number,
            "back": _trail_text(self.back[:-1]),
        }
