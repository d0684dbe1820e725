"""Get User Delegation Key on the Blob service (:mod:`tabulae.http.delegation_key` answers it,
as for the Queue service): keys for the Blob service (``SignedService`` ``b``)."""

from __future__ import annotations

from tabulae.blob.api.call import Call
from tabulae.blob.api.containers import xml
from tabulae.http.delegation_key import issue_key
from tabulae.http.messages import Response


async def get_user_delegation_key(call: Call) -> Response:
    authorization = call.request.headers.get("authorization")
    keys = call.options.accounts[call.route.account]
    return xml(
        issue_key(
            authorization, await call.document(), service="b", version=call.version, account_key=keys[0]
        )
    )
