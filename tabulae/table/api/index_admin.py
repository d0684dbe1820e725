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

from typing import Any

import orjson

from tabulae.http.addressing import decode_segments
from tabulae.http.admin import SignedAdmin
from tabulae.http.messages import Request
from tabulae.http.options import FrontendOptions
from tabulae.model.errors import ServiceError
from tabulae.model.indexes import READY, IndexInfo
from tabulae.table.service import TableService

INDEX_ADMIN_PATH = "/-/indexes"


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


class IndexAdmin(SignedAdmin):
    """The app mounted at its path (see the module's docstring)."""

    def __init__(self, service: TableService, options: FrontendOptions) -> None:
        super().__init__(options)
        self.service = service

    async def handle(self, request: Request, receive: Any) -> tuple[int, bytes]:
        rest = request.raw_path[len(INDEX_ADMIN_PATH) :].strip("/")
        segments = decode_segments(rest) if rest else []
        if not segments or len(segments) > 3 or not all(segments):
            raise ServiceError("ResourceNotFound")
        account = segments[0]
        self.authenticate(request, account)
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
