"""The account features endpoint under ``/-/accounts``: Tabulae's stand-in for the settings Azure
keeps in its management plane (blob versioning, change feed, container soft delete, last access
tracking; the hierarchical namespace is shown but set only at start-up). Not part of Azure's API.

::

    GET /-/accounts/{account}     the account's features: {"blob-versioning": false, …}
    PUT /-/accounts/{account}     change some: a JSON object of the features to change

Requests are signed with the account's key exactly as ``/-/indexes`` requests are (Shared Key
or Shared Key Lite in the Table service's form, CanonicalizedResource ``/{account}/-/accounts/…``,
dated, within the clock skew), so only a holder of the key changes them; a SAS is never enough.
Both answer the account's features after the request as JSON; errors are JSON errors with
Azure's codes (400 InvalidInput naming the feature for a bad document).
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from tabulae.auth.shared_key import verify_authorization
from tabulae.blob.features import AccountFeatureBook
from tabulae.http.addressing import decode_segments
from tabulae.http.errors import error_json
from tabulae.http.exchange import read_body
from tabulae.http.messages import Request, error_time
from tabulae.http.options import FrontendOptions
from tabulae.model.accounts import FeatureError, document, refused
from tabulae.model.errors import ServiceError

ACCOUNT_ADMIN_PATH = "/-/accounts"
MAX_DOCUMENT_BYTES = 64 * 1024
BODY_SECONDS = 30.0
_JSON = b"application/json;charset=utf-8"


class AccountAdmin:
    """The ASGI app mounted at :data:`ACCOUNT_ADMIN_PATH`."""

    def __init__(self, book: AccountFeatureBook, options: FrontendOptions) -> None:
        self.book = book
        self.options = options

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        request = Request.from_scope(scope)
        request_id = str(uuid.uuid4())
        headers = [(b"x-ms-request-id", request_id.encode())]
        try:
            status, body = await self._handle(request, receive)
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

    async def _handle(self, request: Request, receive: Any) -> tuple[int, bytes]:
        rest = request.raw_path[len(ACCOUNT_ADMIN_PATH) :].strip("/")
        segments = decode_segments(rest) if rest else []
        if len(segments) != 1 or not segments[0]:
            raise ServiceError("ResourceNotFound")
        account = segments[0]
        self._authenticate(request, account)
        if request.method == "GET":
            return 200, orjson.dumps(document(await self.book.get(account)))
        if request.method != "PUT":
            raise ServiceError("MethodNotAllowed")
        await read_body(request, receive, MAX_DOCUMENT_BYTES, BODY_SECONDS)
        try:
            changes = orjson.loads(request.body)
        except orjson.JSONDecodeError:
            raise refused(FeatureError("the body is not JSON: expected an object of features")) from None
        try:
            features = await self.book.change(account, changes)
        except FeatureError as exc:
            raise refused(exc) from None
        return 200, orjson.dumps(document(features))
