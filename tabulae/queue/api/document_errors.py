"""The Queue service's own wording of two kinds of refused XML document.

The shared readers of ``http.documents`` refuse these as bare codes; Azure's Queue service says
more, as it answered the Rust SDK (``Azure/azure-sdk-assets``,
``rust/sdk/storage/azure_storage_queue/tests/data/``, x-ms-version 2026-04-06):

* Too many elements, six CORS rules (``queue_service_client/test_set_cors_too_many_rules``) or
  sixteen signed identifiers (``queue_client/test_set_access_policy_too_many_identifiers``):
  400 ``InvalidXmlDocument`` with ``LineNumber`` 0, ``LinePosition`` 0 and an empty ``Reason``,
  as though no reader position applied.
* A retention policy of 366 days (``queue_service_client/test_set_retention_too_long``, the
  Logging one, ``<Days>`` before ``<Enabled>true``): 400 ``InvalidXmlDocument`` (not
  ``InvalidXmlNodeValue``) with the line and position of the name of the node after
  ``</Days>``, where a streaming reader stands once it has read the value, and the Reason
  "Retention days must be greater than 0 and less than or equal to 365 days.". The metrics'
  retention policies are taken to be read the same way (not recorded); a value that is no
  number keeps ``InvalidXmlNodeValue`` (not recorded either).

The Blob and Table services keep the shared readers' answers: no recording shows theirs.
"""

from __future__ import annotations

import xml.parsers.expat
from typing import NoReturn

from tabulae.http.xmlparse import parse_xml
from tabulae.model.errors import ServiceError
from tabulae.model.policies import MAX_CORS_RULES, MAX_IDENTIFIERS

RETENTION_REASON = "Retention days must be greater than 0 and less than or equal to 365 days."
_NOWHERE = (("LineNumber", "0"), ("LinePosition", "0"), ("Reason", ""))
_MAX_DAYS = 365


def refine_too_many(body: bytes) -> None:
    """Raise Azure's wording when a well-formed ACL or service properties body has more
    identifiers or CORS rules than allowed; return quietly otherwise (the caller re-raises)."""
    try:
        root = parse_xml(body)
    except ServiceError:
        return
    if root.tag == "SignedIdentifiers":
        count = len(root)
        limit = MAX_IDENTIFIERS
    elif root.tag == "StorageServiceProperties" and (cors := root.find("Cors")) is not None:
        count = len(cors)
        limit = MAX_CORS_RULES
    else:
        return
    if count > limit:
        raise ServiceError("InvalidXmlDocument", fields=_NOWHERE)


def refine_retention_days(body: bytes) -> None:
    """Raise Azure's wording for the first enabled retention policy whose ``Days`` is a number
    outside 1..365; return quietly when there is none (the caller re-raises its own error)."""
    parser = xml.parsers.expat.ParserCreate()
    path: list[str] = []
    texts: list[str] = []
    days: str | None = None
    enabled: str | None = None
    place: tuple[int, int] | None = None  # where the reader stood after </Days>
    placing = False  # </Days> just ended: the next node's position is the one to give

    def mark(end_tag: bool) -> None:
        nonlocal placing, place
        if placing:
            column = parser.CurrentColumnNumber + (3 if end_tag else 2)  # at the name, 1-based
            place, placing = (parser.CurrentLineNumber, column), False

    def start(name: str, _attributes: dict[str, str]) -> None:
        nonlocal days, enabled
        mark(end_tag=False)
        path.append(name)
        texts.clear()
        if name == "RetentionPolicy":
            days = enabled = None

    def end(name: str) -> None:
        nonlocal days, enabled, placing
        mark(end_tag=True)
        path.pop()
        in_policy = bool(path) and path[-1] == "RetentionPolicy"
        if in_policy and name == "Days":
            days, placing = "".join(texts).strip(), True
        elif in_policy and name == "Enabled":
            enabled = "".join(texts).strip()
        elif name == "RetentionPolicy" and enabled == "true" and _out_of_range(days) and place:
            raise ServiceError(
                "InvalidXmlDocument",
                fields=(
                    ("LineNumber", str(place[0])),
                    ("LinePosition", str(place[1])),
                    ("Reason", RETENTION_REASON),
                ),
            )
        texts.clear()

    def characters(data: str) -> None:
        texts.append(data)

    def no_dtd(*_args: object) -> NoReturn:
        # the shared reader refused any DTD before this runs; kept so that this second reader
        # never expands entities, whoever calls it
        raise xml.parsers.expat.ExpatError("a document type declaration")

    parser.StartDoctypeDeclHandler = no_dtd
    parser.EntityDeclHandler = no_dtd
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = characters
    try:
        parser.Parse(body, True)
    except xml.parsers.expat.ExpatError:
        return


def _out_of_range(days: str | None) -> bool:
    if days is None or not days.isascii() or not days.isdigit():
        return False
    return len(days) > 4 or not 1 <= int(days) <= _MAX_DAYS
