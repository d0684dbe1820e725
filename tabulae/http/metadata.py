"""User metadata on the wire: ``x-ms-meta-{name}`` request headers in, response headers out.

Shared by every service whose resources carry metadata (queues; containers and blobs). Header
names arrive lower-cased from ASGI; our protocol also hands over the names as they were sent
(:data:`~tabulae.http.messages.META_NAMES_EXTENSION`), so metadata keeps its case. A header named
exactly ``x-ms-meta`` is no metadata: the Python SDK sends one with its whole dict on Create Queue,
and Azure ignores it.
"""

from __future__ import annotations

from tabulae.http.messages import HEADER_CASE, Headers, Request
from tabulae.model.metadata import Metadata, check_metadata

PREFIX = b"x-ms-meta-"


def request_metadata(request: Request) -> Metadata:
    """The metadata a request sets, validated (``model.metadata.check_metadata``)."""
    sent = request.meta_names or []
    pairs: list[tuple[str, str]] = []
    for name, value in request.raw_headers:
        if not name.startswith(PREFIX):
            continue
        lower = name[len(PREFIX) :].decode("latin-1")
        original = sent[len(pairs)][len(PREFIX) :] if len(pairs) < len(sent) else lower
        pairs.append((original if original.lower() == lower else lower, value.decode("latin-1").strip()))
    return check_metadata(pairs)


def metadata_headers(metadata: Metadata) -> Headers:
    """``x-ms-meta-{name}: {value}`` for each pair, names in the case they were set with (through
    the :data:`HEADER_CASE` hint our protocol acts on)."""
    headers = [(PREFIX + name.encode("ascii"), value.encode("ascii")) for name, value in metadata.items()]
    cased = [name for name, _value in headers if not name.islower()]
    if cased:
        headers.append((HEADER_CASE, b",".join(cased)))
    return headers
