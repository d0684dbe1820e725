"""Bearer tokens for local development (Microsoft Entra ID), off unless ``--oauth basic`` is given.

A local server cannot check Microsoft Entra signatures offline, so, like Azurite's basic mode,
the JWT is decoded without verifying its signature and only its audience, issuer and validity
window are checked. That is for trying token-based code locally, never for guarding data.
"""

from __future__ import annotations

import base64
import binascii
import re
import time

import orjson

from tabulae.model.errors import ServiceError

_ISSUERS = (
    "https://sts.windows.net/",
    "https://sts.chinacloudapi.cn/",
    "https://sts.microsoftonline.de/",
    "https://sts.windows-ppe.net/",
    "https://login.microsoftonline.com/",
)
_SKEW_SECONDS = 300
CHALLENGE = (
    b"Bearer authorization_uri=https://login.microsoftonline.com/common/oauth2/authorize "
    b"resource_id=https://storage.azure.com"
)
_TENANT = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def challenge_for(claims: dict[str, object] | None) -> bytes:
    """The ``WWW-Authenticate`` challenge for a refused token.

    Azure names the account's tenant (a GUID) in ``authorization_uri``, and the JavaScript SDKs'
    challenge handling retries only when the first path segment is a GUID. A local server has
    no tenant of its own, so the token's ``tid`` stands in for it (as it does for the user
    delegation keys this server issues); without one, ``common``.
    """
    tenant = claims.get("tid") if claims else None
    if not isinstance(tenant, str) or _TENANT.fullmatch(tenant) is None:
        return CHALLENGE
    return (
        f"Bearer authorization_uri=https://login.microsoftonline.com/{tenant}/oauth2/authorize "
        "resource_id=https://storage.azure.com"
    ).encode()


def _audiences(account: str, service: str) -> set[str]:
    return {
        "https://storage.azure.com",
        "https://storage.azure.com/",
        "e406a681-f3d4-42a8-90b6-c2b029497af1",
        f"https://{account}.{service}.core.windows.net",
        f"https://{account}.{service}.core.windows.net/",
    }


def _claims(token: str) -> dict[str, object]:
    parts = token.split(".")
    if len(parts) != 3:
        raise ValueError("not a JWT")
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    claims = orjson.loads(base64.urlsafe_b64decode(payload))
    if not isinstance(claims, dict):
        raise ValueError("claims are not an object")
    return claims


def is_jwt(token: str) -> bool:
    """Whether ``token`` decodes as a JSON Web Token at all (its claims readable), whatever it says."""
    try:
        _claims(token)
    except (ValueError, binascii.Error, orjson.JSONDecodeError):
        return False
    return True


def token_claims(header: str) -> dict[str, object]:
    """The claims of an ``Authorization: Bearer`` header already verified by :func:`verify_bearer`
    (a user delegation key is issued to the token's ``oid`` in its ``tid``)."""
    return _claims(header.split(None, 1)[1].strip())


# Azure's own words for a token it refuses (AuthenticationErrorDetail), as real answers quote
# them. An issuer it does not trust is 401 InvalidAuthenticationInfo with the challenge (Azure
# answers so since 2021: azure-sdk-for-java#24926, AzureStorageExplorer#9050). An audience it
# does not serve is the same 401 on the Blob (and Data Lake) and Queue services (recorded for the
# JS SDKs' "bearer token challenge" and "customized audience" tests, 2023 to 2026: the SDKs ask
# for a token for the challenge's resource and try again), and 403 AuthenticationFailed on the
# Table service, whose answer is not on record (Azure Files answers 403).
ISSUER_MISMATCH = "Issuer validation failed. Issuer did not match."
AUDIENCE_MISMATCH = "Audience validation failed. Audience did not match."
# A token past its expiry says so. On the Blob (and Data Lake) and Queue services it is the
# challenge's 401, as the audience's is: AzCopy keeps Azure's answer beside the policy that signs
# in again on it (Azure/azure-storage-azcopy ste/destReauthPolicy.go), as does
# azure-sdk-for-net#42859 (March 2024, Azure.Storage.Blobs 12.13.0). Older answers (and clients
# sending old versions) show 403 AuthenticationFailed with the same detail (azure-sdk-for-java#8667,
# 2020; epam/ai-dial-core#779, 2025, jclouds), which the Table service keeps. A token not yet
# valid keeps the bare 403: Azure's words for it are not on record.
TOKEN_EXPIRED = "Lifetime validation failed. The token is expired."
_CHALLENGED = frozenset({"blob", "queue"})  # a foreign audience or an expired token is 401 there
CHALLENGE_MESSAGE = (
    "Server failed to authenticate the request. "
    "Please refer to the information in the www-authenticate header."
)


def _challenge(detail: str, claims: dict[str, object]) -> ServiceError:
    """401 InvalidAuthenticationInfo pointing at the challenge, saying why (``detail``)."""
    error = ServiceError(
        "InvalidAuthenticationInfo",
        CHALLENGE_MESSAGE,
        detail=detail,
        headers=[(b"www-authenticate", challenge_for(claims))],
    )
    error.status = 401
    return error


def verify_bearer(header: str, account: str, now: float | None = None, *, service: str = "table") -> None:
    """Accept a well-formed token for this account's audience from a Microsoft issuer, in its
    window; ``service`` (``table``, ``queue``, ``blob``) names the service's own audience."""
    token = header.split(None, 1)[1].strip() if " " in header.strip() else ""
    try:
        claims = _claims(token)
    except (ValueError, binascii.Error, orjson.JSONDecodeError) as exc:
        raise ServiceError("InvalidAuthenticationInfo", headers=[(b"www-authenticate", CHALLENGE)]) from exc
    moment = time.time() if now is None else now
    audience = claims.get("aud")
    issuer = claims.get("iss")
    not_before = claims.get("nbf", 0)
    expires = claims.get("exp")
    if not isinstance(issuer, str) or not issuer.startswith(_ISSUERS):
        raise _challenge(ISSUER_MISMATCH, claims)
    if audience not in _audiences(account, service):
        if service in _CHALLENGED:
            raise _challenge(AUDIENCE_MISMATCH, claims)
        raise ServiceError(
            "AuthenticationFailed",
            detail=AUDIENCE_MISMATCH,
            headers=[(b"www-authenticate", challenge_for(claims))],
        )
    challenge = [(b"www-authenticate", challenge_for(claims))]
    if (
        not isinstance(not_before, int | float)
        or not isinstance(expires, int | float)
        or moment + _SKEW_SECONDS < not_before
    ):
        raise ServiceError("AuthenticationFailed", headers=challenge)
    if moment - _SKEW_SECONDS >= expires:
        if service in _CHALLENGED:
            raise _challenge(TOKEN_EXPIRED, claims)
        raise ServiceError("AuthenticationFailed", detail=TOKEN_EXPIRED, headers=challenge)
