"""The Queue service's XML bodies, written as Azure writes them: a UTF-8 byte order mark, the
declaration, no whitespace between elements, times in RFC 1123, empty lists self-closed
(``<QueueMessagesList />``).

Message text goes out XML-escaped exactly as stored: the service never decodes Base64 or any
other encoding a client chose.
"""

from __future__ import annotations

from email.utils import formatdate
from functools import lru_cache
from xml.sax.saxutils import escape

from tabulae.http.documents import parse_document
from tabulae.model.errors import ServiceError
from tabulae.model.metadata import Metadata
from tabulae.model.queues import MICROSECONDS, QueueMessage

BOM = b"\xef\xbb\xbf"
DECLARATION = BOM + b'<?xml version="1.0" encoding="utf-8"?>'
_EMPTY_LIST = DECLARATION + b"<QueueMessagesList />"


def http_time(microseconds: int) -> str:
    """RFC 1123, whole seconds: ``Thu, 04 Dec 2025 14:16:26 GMT``."""
    return _rfc1123(microseconds // MICROSECONDS)


@lru_cache(maxsize=4096)  # the messages of a busy queue share a few seconds
def _rfc1123(seconds: int) -> str:
    return formatdate(seconds, usegmt=True)


def parse_message_text(body: bytes) -> str:
    """The ``MessageText`` of a ``<QueueMessage>`` body; markup inside it is refused (it must be
    escaped), and an empty element is an empty message."""
    root = parse_document(body, "QueueMessage")
    if root is None:
        raise ServiceError("InvalidXmlDocument")
    element = root.find("MessageText")
    if element is None:
        raise ServiceError("MissingRequiredXmlNode")
    if len(element):
        raise ServiceError("InvalidXmlNodeValue")
    return element.text or ""


def refuse_self_closed_root(body: bytes) -> None:
    """400 ``InvalidXmlDocument`` for a well-formed Set Queue Service Properties body whose root
    is self-closed (``<StorageServiceProperties />``), as Azure answers it: its reader expects
    content after the root's start and finds the end of the document ("'None' is an invalid
    XmlNodeType", recorded for azure-storage-queue's async ``test_too_many_cors_rules``, which
    sends that body), naming the line and the position just after the tag. What Azure answers
    ``<Root></Root>`` is not recorded: it is left as before. Call it after the body parsed: a
    well-formed document that ends in ``/>`` ends with its root's self-closed tag (a trailing
    comment ends ``-->``, an instruction ``?>``).
    """
    text = body.decode("utf-8-sig", errors="replace").rstrip()
    if not text.endswith("/>"):
        return
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    line, position = text.count("\n") + 1, len(text) - text.rfind("\n")
    where = f"Line {line}, position {position}."
    raise ServiceError(
        "InvalidXmlDocument",
        fields=(
            ("LineNumber", str(line)),
            ("LinePosition", str(position)),
            ("Reason", f"Error parsing Xml content: 'None' is an invalid XmlNodeType. {where}"),
        ),
    )


def _times(message: QueueMessage) -> str:
    return (
        f"<MessageId>{message.id}</MessageId><InsertionTime>{http_time(message.inserted)}</InsertionTime>"
        f"<ExpirationTime>{http_time(message.expires)}</ExpirationTime>"
    )


def _list(items: list[str]) -> bytes:
    if not items:
        return _EMPTY_LIST
    return DECLARATION + ("<QueueMessagesList>" + "".join(items) + "</QueueMessagesList>").encode()


def render_put(message: QueueMessage) -> bytes:
    """Put Message's answer: id, times, receipt and TimeNextVisible; no count, no text."""
    return _list(
        [
            f"<QueueMessage>{_times(message)}<PopReceipt>{message.receipt}</PopReceipt>"
            f"<TimeNextVisible>{http_time(message.visible)}</TimeNextVisible></QueueMessage>"
        ]
    )


def render_taken(messages: list[QueueMessage]) -> bytes:
    """Get Messages' answer: everything, receipt and TimeNextVisible included."""
    return _list(
        [
            f"<QueueMessage>{_times(m)}<PopReceipt>{m.receipt}</PopReceipt>"
            f"<TimeNextVisible>{http_time(m.visible)}</TimeNextVisible><DequeueCount>{m.dequeue_count}"
            f"</DequeueCount><MessageText>{escape(m.text)}</MessageText></QueueMessage>"
            for m in messages
        ]
    )


def render_peeked(messages: list[QueueMessage]) -> bytes:
    """Peek Messages' answer: no receipt and no TimeNextVisible."""
    return _list(
        [
            f"<QueueMessage>{_times(m)}<DequeueCount>{m.dequeue_count}</DequeueCount>"
            f"<MessageText>{escape(m.text)}</MessageText></QueueMessage>"
            for m in messages
        ]
    )


def render_queue_list(
    endpoint: str,
    queues: list[tuple[str, Metadata]],
    *,
    prefix: str | None,
    marker: str | None,
    max_results: str | None,
    next_marker: str | None,
    with_metadata: bool,
) -> bytes:
    """List Queues' answer. ``Prefix``, ``Marker`` and ``MaxResults`` echo what the request gave;
    ``Queues`` and ``NextMarker`` are always there (empty when there is nothing)."""
    parts = [f'<EnumerationResults ServiceEndpoint="{escape(endpoint, {chr(34): "&quot;"})}">']
    if prefix is not None:
        parts.append(f"<Prefix>{escape(prefix)}</Prefix>")
    if marker:
        parts.append(f"<Marker>{escape(marker)}</Marker>")
    if max_results is not None:
        parts.append(f"<MaxResults>{escape(max_results)}</MaxResults>")
    if queues:
        parts.append("<Queues>")
        for name, metadata in queues:
            parts.append(f"<Queue><Name>{name}</Name>")
            if with_metadata:
                parts.append(render_metadata(metadata))
            parts.append("</Queue>")
        parts.append("</Queues>")
    else:
        parts.append("<Queues />")
    parts.append(f"<NextMarker>{escape(next_marker)}</NextMarker>" if next_marker else "<NextMarker />")
    parts.append("</EnumerationResults>")
    return DECLARATION + "".join(parts).encode()


def render_metadata(metadata: Metadata) -> str:
    if not metadata:
        return "<Metadata />"
    return "<Metadata>" + "".join(f"<{k}>{escape(v)}</{k}>" for k, v in metadata.items()) + "</Metadata>"
