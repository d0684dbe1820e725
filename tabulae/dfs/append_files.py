"""Data Lake append files: Create Path with ``blobtype=appendblob``, and Concurrent Append.

REST 2026-02-06 (the .NET SDK's AppendFileClientTests record it; the REST reference does not
describe it yet): a file created with ``blobtype=appendblob`` is an append blob of the
hierarchical namespace (Get Properties says ``x-ms-blob-type: AppendBlob``), and ``PATCH
?action=concurrentAppend`` adds its body at the end at once, as Append Block does, with no flush.
Azure answers 202 with ``x-ms-append-offset``, ``x-ms-committed-block-count``,
``x-ms-request-server-encrypted`` and the Content-MD5 sent (no ETag); an
``x-ms-conditional-appendpos`` other than the file's length is 412 ``InvalidAppendPosition``
("The append position conditional header parameter value is not equal to the length of the
file."), recorded for AppendAsync_IfAppendPositionEqual(False).
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING

from tabulae.blob.api.headers import conditions
from tabulae.blob.rules.leases import parse_lease_id
from tabulae.blob.rules.limits import max_append
from tabulae.dfs.routing import invalid_parameter
from tabulae.http.messages import Headers, Response
from tabulae.model.errors import ServiceError

if TYPE_CHECKING:
    from tabulae.dfs.handlers import DfsCall

_ENCRYPTED = (b"x-ms-request-server-encrypted", b"true")

# What Append Block raises, as Concurrent Append names it on the DFS endpoint.
_APPEND_CODES = {
    "AppendPositionConditionNotMet": "InvalidAppendPosition",
    "BlobNotFound": "PathNotFound",
    "ContainerNotFound": "FilesystemNotFound",
}


def is_append_blob(query: dict[str, str]) -> bool:
    """Create Path's ``blobtype``: ``appendblob`` makes an append file, ``blockblob`` (or none)
    the ordinary one; anything else is 400 InvalidQueryParameterValue (assumed, as for the other
    DFS enumerations: no recording shows another value)."""
    value = query.get("blobtype")
    if value is None or value.lower() == "blockblob":
        return False
    if value.lower() == "appendblob":
        return True
    raise invalid_parameter("blobtype", value)


def _header_error(name: str, value: str) -> ServiceError:
    return ServiceError("InvalidHeaderValue", fields=(("HeaderName", name), ("HeaderValue", value)))


async def concurrent_append(c: DfsCall) -> Response:
    """Concurrent Append: the body goes at the end of the append file, at once."""
    headers = c.headers
    if headers.get("content-length", "").strip() == "0":  # as Append Data answers nothing to append
        raise _header_error("Content-Length", "0")
    position = headers.get("x-ms-conditional-appendpos")
    if position is not None and not position.isdigit():
        raise _header_error("x-ms-conditional-appendpos", position)
    lease_id = parse_lease_id(headers.get("x-ms-lease-id") or None, "x-ms-lease-id")
    upload = c.call.upload(max_append(c.call.version))
    try:
        record, offset, sums = await c.call.service.append_block(
            c.key,
            upload,
            conditions(headers),
            lease_id,
            None,
            int(position) if position is not None else None,
        )
    except ServiceError as error:
        code = _APPEND_CODES.get(error.code)
        raise (error if code is None else ServiceError(code)) from None
    answer: Headers = [
        (b"x-ms-append-offset", str(offset).encode()),
        (b"x-ms-committed-block-count", str(record.block_count).encode()),
    ]
    if upload.md5 is not None and sums.md5 is not None:
        answer.append((b"content-md5", base64.b64encode(sums.md5)))
    return Response(202, [*answer, _ENCRYPTED, *c.call.echo])
