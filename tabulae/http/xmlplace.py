"""Where Azure's XML reader stands when it refuses an element's content: the line and position of
the name in that element's end tag.

Azure checks some elements of a request document once it has read them whole, and names the
place in a 400 ``InvalidXmlDocument`` (``LineNumber``, ``LinePosition``, ``Reason``): its reader
then stands on the end tag, and the position counts from 1 to the tag's name, after ``</``
(Set Blob Service Properties with a ``DeleteRetentionPolicy`` lacking ``Days`` or out of range,
recorded for the Go SDK's tests). Called only on a body ``parse_xml`` has already accepted; a DTD
stops this reader too, so it never expands an entity.
"""

from __future__ import annotations

from typing import NoReturn
from xml.parsers import expat

from tabulae.model.errors import ServiceError


class _Found(Exception):
    def __init__(self, line: int, position: int) -> None:
        super().__init__(line, position)
        self.line, self.position = line, position


def _refuse(*_args: object) -> NoReturn:
    raise expat.ExpatError("a document type declaration")


def end_tag_place(body: bytes, path: tuple[str, ...]) -> tuple[int, int] | None:
    """(line, position) of the name in the end tag of the first element at ``path`` (its tags
    from the root down), or None when there is none (or the body does not parse)."""
    parser = expat.ParserCreate()
    open_tags: list[str] = []

    def start(name: str, _attributes: dict[str, str]) -> None:
        open_tags.append(name)

    def end(_name: str) -> None:
        if tuple(open_tags) == path:
            raise _Found(parser.CurrentLineNumber, parser.CurrentColumnNumber + 3)
        open_tags.pop()

    parser.StartDoctypeDeclHandler = _refuse
    parser.EntityDeclHandler = _refuse
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    try:
        parser.Parse(body, True)
    except _Found as found:
        return found.line, found.position
    except (expat.ExpatError, LookupError, ValueError):
        return None
    return None


def refused_at_end_tag(body: bytes, path: tuple[str, ...], reason: str) -> ServiceError:
    """400 ``InvalidXmlDocument`` naming the end tag of the element at ``path`` and ``reason``."""
    place = end_tag_place(body, path)
    if place is None:
        return ServiceError("InvalidXmlDocument", fields=(("Reason", reason),))
    line, position = place
    return ServiceError(
        "InvalidXmlDocument",
        fields=(("LineNumber", str(line)), ("LinePosition", str(position)), ("Reason", reason)),
    )
