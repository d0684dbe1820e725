"""Set Queue ACL and Set Container ACL: a signed identifier whose Id is empty or longer than 64
characters.

Azure's Queue and Blob services refuse it as a document error, not a node value: 400
``InvalidXmlDocument`` with the line and position its XML reader stood on once it had read the
offending ``<SignedIdentifier>`` (the name of the node after that element's end tag) and the
reason "Signed identifier ID cannot be empty or over 64 characters in length" (Java SDK
recording QueueAsyncApiTests.setInvalidAccessPolicy, x-ms-version 2023-11-03: a 72-character Id,
one-line body, LinePosition 304 = the name in the ``</SignedIdentifiers>`` that follows).
The Blob service answers the same for a container's identifier without an ``Id`` (Go SDK
recording ``go/sdk/storage/azdatalake/testdata/recordings/Test/
TestFilesystemSetAccessPolicyWithNullId.json``, x-ms-version 2023-11-03: LinePosition 115 = the
name in the ``</SignedIdentifiers>`` after it); and for an Id over 64 characters
(the Go SDK's Blob recording TestContainerSetPermissionsSignedIdentifierTooLong, x-ms-version
2023-11-03: two 65-character Ids, LinePosition 259 = the name in the second
``<SignedIdentifier>``). Whitespace between the tags is taken to be skipped by that reader (not
recorded).

More than five signed identifiers are a document error too, but one found once the
reader is done: line 0, position 0 and an empty reason (Go SDK recording
``go/sdk/storage/azqueue/testdata/recordings/Test/TestQueueSetACLMoreThanFive.json``, x-ms-version
2018-03-28: six valid identifiers; the Blob service's
TestContainerSetPermissionsACLMoreThanFive, 2023-11-03, alike): ``parse_acl``'s ``too_many``
(``NO_PLACE``). Which error wins when a body has both too many identifiers
and a bad Id is not recorded; the count is checked first.
"""

from __future__ import annotations

import xml.parsers.expat

from tabulae.http.xmlplace import entity_free_reader, placed_error, reader_place

MAX_ID = 64
REASON = "Signed identifier ID cannot be empty or over 64 characters in length"


def check_identifier_ids(body: bytes) -> None:
    """Raise Azure's document error for the first identifier whose Id is empty or too long;
    return quietly when every Id is fine (or the body is not a well-formed ACL)."""
    parser = entity_free_reader()
    depth = 0
    texts: list[str] = []
    in_id = False
    has_id = False
    bad_after: bool = False  # the identifier just closed had a bad Id: the next tag is the place

    def place(end_tag: bool) -> None:
        raise placed_error(reader_place(parser, end_tag=end_tag), REASON)

    def start(name: str, _attributes: dict[str, str]) -> None:
        nonlocal depth, in_id, has_id
        if bad_after:
            place(end_tag=False)
        depth += 1
        if depth == 2 and name == "SignedIdentifier":
            has_id = False
        elif depth == 3 and name == "Id":
            in_id, has_id = True, True
            texts.clear()

    def end(name: str) -> None:
        nonlocal depth, in_id, bad_after
        if bad_after:
            place(end_tag=True)
        if depth == 3 and name == "Id":
            in_id = False
        elif depth == 2 and name == "SignedIdentifier":
            identifier = "".join(texts).strip() if has_id else ""
            bad_after = not identifier or len(identifier) > MAX_ID
        depth -= 1

    def characters(data: str) -> None:
        if in_id:
            texts.append(data)

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = characters
    try:
        parser.Parse(body, True)
    except xml.parsers.expat.ExpatError:
        return
