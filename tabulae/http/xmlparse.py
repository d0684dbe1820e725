"""Reading a request's XML body: the one parser every service's documents go through.

Azure's request documents (block lists, ACLs, service properties, queue messages) never carry a
document type declaration and are a few elements deep. A DTD is what entity expansion ("billion
laughs") and external entities need, so a DOCTYPE is refused the moment expat reports it, in
whatever encoding the body is written (a search of the raw bytes for ``<!DOCTYPE`` misses
UTF-16), before any declaration in it is read. Elements nested deeper than ``MAX_DEPTH`` are
refused as they open, so a deep document never becomes a deep tree.

Expat reports each event to the small handlers below, which feed the C ``TreeBuilder``: the same
tree ``ElementTree.fromstring`` builds, namespaced names kept as expat gives them
(``uri}local``), which never match an Azure element name, as before.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import NoReturn
from xml.parsers import expat

from tabulae.model.errors import ServiceError

MAX_DEPTH = 32  # Azure's documents are under 10 deep


class _Refused(Exception):
    """A DTD, or nesting past ``MAX_DEPTH``: raised inside expat's callbacks to stop the parse."""


def _refuse(*_args: object) -> NoReturn:
    raise _Refused


def parse_xml(body: bytes) -> ET.Element:
    """The root element of ``body``; 400 ``InvalidXmlDocument`` when it is not well-formed, has
    a document type declaration, nests deeper than ``MAX_DEPTH`` or names an unknown encoding."""
    builder = ET.TreeBuilder()
    parser = expat.ParserCreate(namespace_separator="}")
    open_element = builder.start
    close_element = builder.end
    depth = 0

    def start(tag: str, attributes: dict[str, str]) -> None:
        nonlocal depth
        depth += 1
        if depth > MAX_DEPTH:
            raise _Refused
        open_element(tag, attributes)

    def end(tag: str) -> None:
        nonlocal depth
        depth -= 1
        close_element(tag)

    parser.StartDoctypeDeclHandler = _refuse
    parser.EntityDeclHandler = _refuse  # declarations only occur inside a DTD: a second guard
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = builder.data
    parser.buffer_text = True
    try:
        parser.Parse(body, True)
        return builder.close()
    except (expat.ExpatError, _Refused, LookupError, ValueError) as exc:
        # LookupError, ValueError: a declared encoding Python lacks or cannot decode with
        raise ServiceError("InvalidXmlDocument") from exc
