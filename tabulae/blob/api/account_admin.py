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

from typing import Any

import orjson

from tabulae.blob.features import AccountFeatureBook
from tabulae.http.addressing import decode_segments
from tabulae.http.admin import SignedAdmin
from tabulae.http.exchange import read_body
from tabulae.http.messages import Request
from tabulae.http.options import FrontendOptions
from tabulae.model.accounts import FeatureError, document, refused
from tabulae.model.errors import ServiceError

ACCOUNT_ADMIN_PATH = "/-/accounts"
MAX_DOCUMENT_BYTES = 64 * 1024
BODY_SECONDS = 30.0


class AccountAdmin(SignedAdmin):
    """The app mounted at its path (see the module's docstring)."""

    def __init__(self, book: AccountFeatureBook, options: FrontendOptions) -> None:
        super().__init__(options)
        self.book = book

    async def handle(self, request: Request, receive: Any) -> tuple[int, bytes]:
        rest = request.raw_path[len(ACCOUNT_ADMIN_PATH) :].strip("/")
        segments = decode_segments(rest) if rest else []
        if len(segments) != 1 or not segments[0]:
            raise ServiceError("ResourceNotFound")
        account = segments[0]
        self.authenticate(request, account)
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
