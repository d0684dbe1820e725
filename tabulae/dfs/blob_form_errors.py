"""Errors of Set Expiry, the DFS operation the Data Lake SDK sends in the Blob API's form.

The SDK sends Set Expiry (``PUT <path>?comp=expiry``) to the Blob endpoint, and Azure answers its
errors as the Blob API does, not as the DFS endpoint: the XML ``<Error>`` after the byte order
mark, the Blob code (``BlobNotFound`` for a missing file, not ``PathNotFound``), and a line break
after the XML declaration, as recorded for the .NET SDK's ScheduleDeletionAsync_Error
(``FileClientTests``, x-ms-version 2024-08-04). The other two Blob-form DFS operations (Undelete
Path, List Deleted Paths) keep the DFS answer: no recording shows theirs.
"""

from __future__ import annotations

from tabulae.dfs.routing import DfsOperation
from tabulae.http.errors import UTF8_BOM, XML_CONTENT_TYPE, error_xml
from tabulae.http.messages import Request, Response, error_time
from tabulae.model.errors import ServiceError

# The Blob API's names for what the DFS service raises under its own.
_BLOB_CODES = {"PathNotFound": "BlobNotFound", "FilesystemNotFound": "ContainerNotFound"}


def applies(request: Request) -> bool:
    """Whether ``request`` is Set Expiry, whose errors take the Blob API's form."""
    return request.operation is DfsOperation.SET_EXPIRY


def response(error: ServiceError, request_id: str, *, head: bool) -> Response:
    """The Blob API's error answer for ``error``, under the Blob code where the names differ."""
    code = _BLOB_CODES.get(error.code)
    if code is not None:
        error = ServiceError(code, headers=error.headers)
    headers = [(b"x-ms-error-code", error.code.encode())]
    if error.headers:
        headers.extend(error.headers)
    if head:
        return Response(error.status, headers)
    declaration, end, rest = error_xml(error, request_id, error_time(), table_style=False).partition(b"?>")
    headers.append((b"content-type", XML_CONTENT_TYPE))
    return Response(error.status, headers, UTF8_BOM + declaration + end + b"\n" + rest)
