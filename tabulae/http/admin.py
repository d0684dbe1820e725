"""Tabulae's own signed admin endpoints (``/-/indexes``, ``/-/accounts``): not part of Azure's API.

What they share is written here once: a request signed with the account's key exactly as a Table
request is (Shared Key or Shared Key Lite, CanonicalizedResource ``/{account}/-/…``, dated, within
the clock skew; a SAS is never enough), answers as JSON, and errors as the Table service's JSON
errors with Azure's codes. Each endpoint supplies only :meth:`SignedAdmin.handle`.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from typing import Any

from tabulae.auth.shared_key import verify_authorization
from tabulae.http.errors import error_json
from tabulae.http.messages import Request, error_time
from tabulae.http.options import FrontendOptions
from tabulae.model.errors import ServiceError

JSON_TYPE = b"application/json;charset=utf-8"


class SignedAdmin(ABC):
    """An ASGI app answering signed JSON requests about one account."""

    def __init__(self, options: FrontendOptions) -> None:
        self.options = options

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        request = Request.from_scope(scope)
        request_id = str(uuid.uuid4())
        headers = [(b"x-ms-request-id", request_id.encode())]
        try:
            status, body = await self.handle(request, receive)
        except ServiceError as error:
            status, body = error.status, error_json(error, request_id, error_time())
            headers.append((b"x-ms-error-code", error.code.encode()))
            headers.extend(error.headers or ())
        headers += [(b"content-type", JSON_TYPE), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def authenticate(self, request: Request, account: str) -> None:
        """The account's key signed it, or 401/403 as the services answer."""
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

    @abstractmethod
    async def handle(self, request: Request, receive: Any) -> tuple[int, bytes]:
        """The status and JSON body of a request (``receive`` reads its body, when it has one)."""
