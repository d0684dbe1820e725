"""The request-document parser: the tree ElementTree builds, and nothing a DTD or deep nesting
could make it do."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from tabulae.http.xmlparse import MAX_DEPTH, parse_xml
from tabulae.model.errors import ServiceError

DOCUMENTS = [
    b"<BlockList><Latest>YWFh</Latest><Committed>YmJi</Committed></BlockList>",
    b'<?xml version="1.0" encoding="utf-8"?>\n<a x="1"><b>t&amp;u<c/>tail</b><!-- c --><?pi x?></a>',
    b"\xef\xbb\xbf<a>\xc3\xa9</a>",
    '<?xml version="1.0" encoding="UTF-16"?><a>\u00e9\U0001f600</a>'.encode("utf-16"),
    '<?xml version="1.0" encoding="ISO-8859-1"?><a>\u00e9</a>'.encode("latin-1"),
    b'<a xmlns="urn:x"><b/></a>',
]


@pytest.mark.parametrize("body", DOCUMENTS)
def test_the_tree_is_elementtrees(body: bytes) -> None:
    ours, theirs = parse_xml(body), ET.fromstring(body)
    assert [(e.tag.lstrip("{"), e.attrib, e.text, e.tail) for e in ours.iter()] == [
        (e.tag.lstrip("{"), e.attrib, e.text, e.tail) for e in theirs.iter()
    ]


def _refused(body: bytes) -> None:
    with pytest.raises(ServiceError) as caught:
        parse_xml(body)
    assert caught.value.code == "InvalidXmlDocument"


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-16-be", "utf-16-le"])
@pytest.mark.parametrize(
    "dtd",
    [
        "<!DOCTYPE a>",
        '<!DOCTYPE a [<!ENTITY e "x">]>',
        '<!DOCTYPE a SYSTEM "http://127.0.0.1:1/x.dtd">',
        '<!DOCTYPE a [<!ENTITY % p "x"> %p;]>',
    ],
)
def test_any_dtd_is_refused(encoding: str, dtd: str) -> None:
    text = f"{dtd}<a>x</a>"
    body = text.encode(encoding)
    if encoding != "utf-16":  # "utf-16" writes its own byte order mark
        body = ("\ufeff" + text).encode(encoding)
    _refused(body)


def test_nesting_is_capped() -> None:
    assert parse_xml(b"<a>" * MAX_DEPTH + b"</a>" * MAX_DEPTH).tag == "a"
    _refused(b"<a>" * (MAX_DEPTH + 1) + b"</a>" * (MAX_DEPTH + 1))
    _refused(b"<a>" * 1_000_000)  # refused at depth 33: nothing near a million elements is built


@pytest.mark.parametrize(
    "body",
    [b"", b"<a>", b"<a></b>", b"<a>&e;</a>", b'<?xml version="1.0" encoding="x-nothing"?><a/>', b"\xff\xfe<"],
)
def test_malformed_documents(body: bytes) -> None:
    _refused(body)
