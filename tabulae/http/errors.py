"""Rendering a ``ServiceError`` at the edge: JSON for OData operations, XML for the rest."""

from __future__ import annotations

from xml.sax.saxutils import escape

import orjson

from tabulae.model.errors import ServiceError

XML_CONTENT_TYPE = b"application/xml"
#: The UTF-8 byte order mark Azure's Blob and Queue services put before the XML bodies they send.
UTF8_BOM = b"\xef\xbb\xbf"
_METADATA_NS = "http://schemas.microsoft.com/ado/2007/08/dataservices/metadata"


def error_text(error: ServiceError, request_id: str, time_text: str) -> str:
    """The message value: index prefix inside a batch, then RequestId and Time lines as Azure does."""
    prefix = f"{error.index}:" if error.index is not None else ""
    return f"{prefix}{error.message}\nRequestId:{request_id}\nTime:{time_text}"


def error_json(error: ServiceError, request_id: str, time_text: str) -> bytes:
    """Compact, one-line JSON: the .NET batch regex and the JS batch parser both rely on it."""
    return orjson.dumps(
        {
            "odata.error": {
                "code": error.code,
                "message": {"lang": "en-US", "value": error_text(error, request_id, time_text)},
            }
        }
    )


def error_xml(
    error: ServiceError, request_id: str, time_text: str, *, table_style: bool, line_break: bool = False
) -> bytes:
    """``m:error`` for table-level XML operations (ACL), the generic ``<Error>`` otherwise.
    ``line_break``: a line break after the XML declaration, as Azure writes the errors of its
    front-end and of a few Blob operations (each caller names its recording); the writer of
    those bodies also writes an apostrophe in the message as ``&apos;`` ("An HTTP header
    that&apos;s mandatory...": the C++ SDK's DataLakeFileClientTest.ScheduleForDeletion, Set
    Expiry without x-ms-expiry-time at x-ms-version 2021-04-10, 303 bytes), where the other
    bodies keep it as is."""
    message = escape(error_text(error, request_id, time_text))
    if line_break:
        message = message.replace("'", "&apos;")
    if table_style:
        return (
            f'<?xml version="1.0" encoding="utf-8"?><m:error xmlns:m="{_METADATA_NS}">'
            f'<m:code>{error.code}</m:code><m:message xml:lang="en-US">{message}</m:message></m:error>'
        ).encode()
    detail = "".join(
        f"<{name}>{escape(value)}</{name}>" if value else f"<{name} />" for name, value in error.fields
    )
    if error.detail and error.code in ("AuthenticationFailed", "InvalidAuthenticationInfo"):
        detail += f"<AuthenticationErrorDetail>{escape(error.detail)}</AuthenticationErrorDetail>"
    declaration = '<?xml version="1.0" encoding="utf-8"?>' + ("\n" if line_break else "")
    return (
        f"{declaration}<Error><Code>{error.code}</Code><Message>{message}</Message>{detail}</Error>"
    ).encode()
