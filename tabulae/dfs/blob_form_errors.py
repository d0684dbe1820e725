"""Errors of the DFS operations the Data Lake SDK sends in the Blob API's form.

The SDK sends Set Expiry (``PUT <path>?comp=expiry``) and Undelete Path (``PUT
<path>?comp=undelete`` with ``x-ms-undelete-source``) to the Blob endpoint, and Azure answers
their errors as the Blob API does, not as the DFS endpoint: the XML ``<Error>``, under the Blob
codes (``BlobNotFound``, ``ContainerNotFound``, not ``PathNotFound``, ``FilesystemNotFound``).
Recorded for the .NET SDK: FileClientTests/ScheduleDeletionAsync_Error (x-ms-version
2024-08-04: Set Expiry of a missing file, ``BlobNotFound`` after the byte order mark with a line
break after the XML declaration) and FileSystemClientTests/UndeletePathAsync_Error (2021-06-08:
Undelete Path in a missing file system, ``ContainerNotFound``). List Deleted Paths, the third
such operation, answers so too: recorded for the Java SDK, SoftDeleteTests.listDeletedPathsError
(2023-01-03: in a missing file system, ``ContainerNotFound`` after the byte order mark, no line
break after the declaration, Content-Length 225).
"""

from __future__ import annotations

from tabulae.dfs.routing import DfsOperation
from tabulae.http.errors import UTF8_BOM, XML_CONTENT_TYPE, error_xml
from tabulae.http.messages import Request, Response, error_time
from tabulae.model.errors import ServiceError

# The Blob API's names for what the DFS service raises under its own.
_BLOB_CODES = {"PathNotFound": "BlobNotFound", "FilesystemNotFound": "ContainerNotFound"}


def applies(request: Request) -> bool:
    """Whether ``request`` is Set Expiry, Undelete Path or List Deleted Paths, whose errors take
    the Blob API's form."""
    return request.operation in (
        DfsOperation.SET_EXPIRY,
        DfsOperation.UNDELETE,
        DfsOperation.LIST_DELETED_PATHS,
    )


def response(request: Request, error: ServiceError, request_id: str) -> Response:
    """The Blob API's error answer for ``error``, under the Blob code where the names differ."""
    code = _BLOB_CODES.get(error.code)
    if code is not None:
        error = ServiceError(code, headers=error.headers)
    elif error.code == "InvalidHeaderValue" and ("HeaderName", "x-ms-expiry-time") in error.fields:
        # An x-ms-expiry-time Set Expiry cannot read is refused without naming it: Azure answered
        # an Absolute "1000" with the bare InvalidHeaderValue (the C++ SDK's DataLakeFileClientTest.
        # ScheduleForDeletion, x-ms-version 2021-04-10, 255 bytes).
        error = ServiceError("InvalidHeaderValue", headers=error.headers)
    headers = [(b"x-ms-error-code", error.code.encode())]
    if error.headers:
        headers.extend(error.headers)
    if request.method == "HEAD":
        return Response(error.status, headers)
    # as recorded: Set Expiry's errors have a line break after the declaration
    line_break = request.operation is DfsOperation.SET_EXPIRY
    body = error_xml(error, request_id, error_time(), table_style=False, line_break=line_break)
    headers.append((b"content-type", XML_CONTENT_TYPE))
    return Response(error.status, headers, UTF8_BOM + body)
