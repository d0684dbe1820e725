"""The property-index admin endpoint under ``/-/indexes``: Tabulae's own, not part of Azure's API.

::

    GET    /-/indexes/{account}                      the account's indexes
    GET    /-/indexes/{account}/{table}              one table's indexes
    PUT    /-/indexes/{account}/{table}/{property}?type=Edm.String[&wait=false]
    DELETE /-/indexes/{account}/{table}/{property}

Requests are signed with the account's key exactly as a Table request is (Shared Key or Shared
Key Lite; CanonicalizedResource ``/{account}/-/indexes/…``, dated, within the clock skew), so
only a holder of the key can add or drop an index; a SAS is never enough. Answers are JSON:
``{"value": [index, …]}`` for a listing, the index for a PUT (200 once usable, 202 while it
builds with ``wait=false``), 204 for a DELETE; errors are the Table service's JSON errors.
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from tabulae.auth.shared_key import verify_authorization
from tabulae.http.addressing import decode_segments
from tabulae.http.errors import error_json
from tabulae.http.messages import Request, error_time
from tabulae.http.options import FrontendOptions
from tabulae.model.errors import ServiceError
from tabulae.model.indexes import READY, IndexInfo
from tabulae.table.service import TableService

INDEX_ADMIN_PATH = "/-/indexes"
_JSON = b"application/json;charset=utf-8"


def index_document(info: IndexInfo) -> dict[str, Any]:
    """An index as the endpoint (and the CLI) shows it."""
    return {
        "table": info.table,
        "property": info.property,
        "type": info.edm_type,
        "state": info.state,
        "done": info.done,
        "total": info.total,
        "error": info.error,
    }


class IndexAdmin:
    """The ASGI app mounted at :data:`INDEX_ADMIN_PATH`."""

    def __init__(self, service: TableService, options: FrontendOptions) -> None:
        self.service = service
        self.options = options

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        request = Request.from_scope(scope)
        request_id = str(uuid.uuid4())
        headers = [(b"x-ms-request-id", request_id.encode())]
        try:
            status, body = await self._handle(request)
        except ServiceError as error:
            status, body = error.status, error_json(error, request_id, error_time())
            headers.append((b"x-ms-error-code", error.code.encode()))
            headers.extend(error.headers or ())
        headers += [(b"content-type", _JSON), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def _authenticate(self, request: Request, account: str) -> None:
        keys = self.options.accounts.get(account)
        header = request.headers.get("authorization")
        if header is None:
            raise ServiceError("NoAuthenticationInformation")
        if keys is None:
            raise ServiceError("AuthenticationFailed")
        verify_authorization(
            header,
            method=request.method,
            raw_path=request.raw_path,
            comp=None,
            content_md5=request.headers.get("content-md5", ""),
            content_type=request.headers.get("content-type", ""),
            x_ms_date=request.headers.get("x-ms-date"),
            date=request.headers.get("date"),
            account=account,
            keys=keys,
            max_skew_seconds=self.options.clock_skew,
        )

    async def _handle(self, request: Request) -> tuple[int, bytes]:
        rest = request.raw_path[len(INDEX_ADMIN_PATH) :].strip("/")
        segments = decode_segments(rest) if rest else []
        if not segments or len(segments) > 3 or not all(segments):
            raise ServiceError("ResourceNotFound")
        account = segments[0]
        self._authenticate(request, account)
        method = request.method
        if len(segments) < 3:
            if method != "GET":
                raise ServiceError("MethodNotAllowed")
            table = segments[1] if len(segments) == 2 else None
            found = await self.service.list_indexes(account, table)
            return 200, orjson.dumps({"value": [index_document(info) for info in found]})
        table, prop = segments[1], segments[2]
        if method == "PUT":
            edm_type = request.query.get("type", "Edm.String")
            wait = request.query.get("wait", "true").lower() != "false"
            info = await self.service.add_index(account, table, prop, edm_type, wait=wait)
            return (200 if info.state == READY or wait else 202), orjson.dumps(index_document(info))
        if method == "DELETE":
            await self.service.drop_index(account, table, prop)
            return 204, b""
        raise ServiceError("MethodNotAllowed")
