"""The Set Blob Tags / Get Blob Tags document and the Find Blobs by Tags listing ("Set Blob
Tags", "Get Blob Tags", "Find Blobs by Tags"), over the shared safe XML reader.

The document is ``<Tags><TagSet><Tag><Key>k</Key><Value>v</Value></Tag>...</TagSet></Tags>``;
a missing ``Value`` is the empty string, a missing or empty ``Key`` is 400 ``EmptyTagName``, and
the set is then checked by :func:`tabulae.blob.rules.tags.check_tags`. An empty body or an empty
``TagSet`` removes every tag ("Set Blob Tags").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from xml.sax.saxutils import escape

from tabulae.blob.rules.tags import check_tags
from tabulae.http.documents import parse_document
from tabulae.model.errors import ServiceError

DECLARATION = '<?xml version="1.0" encoding="utf-8"?>'


def parse_tags_document(body: bytes) -> dict[str, str]:
    """The tags of a Set Blob Tags body, validated; 400 InvalidXmlDocument when it is not one."""
    root = parse_document(body, "Tags")
    if root is None:
        return {}
    elements = root.find("TagSet")
    if elements is None:
        if len(root):
            raise ServiceError("InvalidXmlDocument")
        return {}
    pairs: list[tuple[str, str]] = []
    for element in elements:
        if element.tag != "Tag":
            raise ServiceError("InvalidXmlDocument")
        key = element.find("Key")
        value = element.find("Value")
        pairs.append(("" if key is None else key.text or "", "" if value is None else value.text or ""))
    return check_tags(pairs)


def tag_set(tags: Mapping[str, str]) -> str:
    """``<TagSet>…</TagSet>``: also a listing's ``<Tags>`` content."""
    items = "".join(
        f"<Tag><Key>{escape(key)}</Key><Value>{escape(value)}</Value></Tag>" for key, value in tags.items()
    )
    return f"<TagSet>{items}</TagSet>"


def render_tags_document(tags: Mapping[str, str]) -> bytes:
    """The Get Blob Tags body, a line break after its declaration as Azure writes it (the .NET
    SDK's recording of GetSetTagsAsync, x-ms-version 2024-08-04, and the JS SDK's of 2019-12-12).
    The tags come in key order whatever order they were set in, and none is ``<TagSet/>``, as in
    the Rust SDK's recording of test_blob_tags (2026-04-06: ``hello`` then ``ferris`` set,
    ``ferris`` then ``hello`` read). Keys are compared by code point (assumed: the recording's
    keys are all lower case)."""
    if not tags:
        return f"{DECLARATION}\n<Tags><TagSet/></Tags>".encode()
    return f"{DECLARATION}\n<Tags>{tag_set(dict(sorted(tags.items())))}</Tags>".encode()


_QUOTES = {'"': "&quot;", "'": "&apos;"}


def render_found_blobs(
    service_endpoint: str,
    where: str,
    blobs: Sequence[tuple[str, str, Mapping[str, str]]],
    next_marker: str | None,
) -> bytes:
    """The Find Blobs by Tags body: (container, blob name, matching tags) per blob. Written as
    Azure writes it in the JS SDK's recordings (x-ms-version 2019-12-12 to 2021-04-10): a line
    break after the declaration, and empty ``<Blobs/>`` and ``<NextMarker/>`` without a space.
    The expression's quotes are written as entities, ``<Where>&quot;key&quot;=&apos;value&apos;
    </Where>`` (the Go SDK's recording TestAccountFilterBlobs, x-ms-version 2023-11-03)."""
    items = "".join(
        f"<Blob><Name>{escape(name)}</Name><ContainerName>{escape(container)}</ContainerName>"
        f"<Tags>{tag_set(tags)}</Tags></Blob>"
        for container, name, tags in blobs
    )
    marker = f"<NextMarker>{escape(next_marker)}</NextMarker>" if next_marker else "<NextMarker/>"
    endpoint = escape(service_endpoint, {'"': "&quot;"})
    found = f"<Blobs>{items}</Blobs>" if items else "<Blobs/>"
    return (
        f'{DECLARATION}\n<EnumerationResults ServiceEndpoint="{endpoint}">'
        f"<Where>{escape(where, _QUOTES)}</Where>{found}{marker}</EnumerationResults>"
    ).encode()
