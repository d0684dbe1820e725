"""Where Azure's XML reader stood when it refused a document it had read.

Some of Azure's refusals of a well-formed document are ``InvalidXmlDocument`` with a
``LineNumber``, a ``LinePosition`` and a ``Reason``: the reader checks an element's value once it
has read past it, and names the node it then stands on. The place is 1-based, at that node's
name: the character after ``<`` for a start tag, after ``</`` for an end tag (Blob Set Service
Properties in the Go SDK's recordings ``TestAccountDeleteRetentionPolicyDaysTooLarge.json`` and
``...DaysOmitted.json``, x-ms-version 2023-11-03; a Set ACL's bad Id, ``http/acl_ids``,
reads places the same way). Whitespace between tags is taken to be skipped (not recorded).

The body has already been read by ``xmlparse.parse_xml``; this second pass never expands an
entity either (a DTD stops it, and nothing is found).
"""

from __future__ import annotations

import xml.parsers.expat
from collections.abc import Sequence
from typing import NoReturn

from tabulae.model.errors import ServiceError

Place = tuple[int, int]


def entity_free_reader() -> xml.parsers.expat.XMLParserType:
    """An expat reader that stops at a document type declaration, so it never expands an entity
    (its callers read bodies ``parse_xml`` has already accepted; this holds whoever calls it)."""
    parser = xml.parsers.expat.ParserCreate()

    def no_dtd(*_args: object) -> NoReturn:
        raise xml.parsers.expat.ExpatError("a document type declaration")

    parser.StartDoctypeDeclHandler = no_dtd
    parser.EntityDeclHandler = no_dtd
    return parser


def reader_place(parser: xml.parsers.expat.XMLParserType, *, end_tag: bool) -> Place:
    """Where Azure's reader stands on the tag ``parser`` is at: 1-based, at the tag's name (after
    ``<``, or after ``</`` for an end tag)."""
    return parser.CurrentLineNumber, parser.CurrentColumnNumber + (3 if end_tag else 2)


def placed_error(place: Place, reason: str) -> ServiceError:
    """400 ``InvalidXmlDocument`` naming ``place`` and ``reason``."""
    line, position = place
    return ServiceError(
        "InvalidXmlDocument",
        fields=(("LineNumber", str(line)), ("LinePosition", str(position)), ("Reason", reason)),
    )


class _Found(Exception):
    def __init__(self, place: Place) -> None:
        super().__init__()
        self.place = place


def _walk(body: bytes, path: Sequence[str], *, after: bool) -> Place | None:
    """The place of the end tag of the first element at ``path`` (``after`` False), or of the
    first tag that follows that end tag (``after`` True)."""
    parser = entity_free_reader()
    stack: list[str] = []
    ended = False

    def here(end_tag: bool) -> Place:
        return reader_place(parser, end_tag=end_tag)

    def start(name: str, _attributes: dict[str, str]) -> None:
        if ended:
            raise _Found(here(end_tag=False))
        stack.append(name)

    def end(name: str) -> None:
        nonlocal ended
        if ended:
            raise _Found(here(end_tag=True))
        if stack == list(path):
            if not after:
                raise _Found(here(end_tag=True))
            ended = True
        stack.pop()

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    try:
        parser.Parse(body, True)
    except _Found as found:
        return found.place
    except xml.parsers.expat.ExpatError:
        return None
    return None


def document_error(body: bytes, path: Sequence[str], reason: str, *, after: bool) -> ServiceError:
    """400 ``InvalidXmlDocument`` naming the place after the element at ``path`` (``after``) or
    at its end tag, and ``reason``; without a place when none is found."""
    place = _walk(body, path, after=after)
    if place is None:
        return ServiceError("InvalidXmlDocument")
    return placed_error(place, reason)
