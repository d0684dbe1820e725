"""Encryption scopes and customer-provided keys on Blob requests: the headers read into the
request's :class:`~tabulae.blob.rules.encryption.Encryption`, a container's default scope, and
the headers answers carry.

A customer-provided key (``x-ms-encryption-key``, its ``-sha256`` and ``x-ms-encryption-algorithm:
AES256``) is checked (32 bytes, its digest the one given) and only its SHA-256 is kept, with the
blob, to verify later requests by. Tabulae does not encrypt content with the key: the data
directory is as protected as it is for any blob (the README says so), and reads without the key
are refused exactly as Azure refuses them. The key travels over HTTPS only, as Azure requires.
``x-ms-encryption-algorithm: AES256`` alone names no key and is ignored: @azure/storage-blob
12.6 to 12.8 (and Storage Explorer built on it) send it on every request, and did so against
Azure, whose answers they read as those of requests without one.

A write's scope is the one it names (``x-ms-encryption-scope``, or the ``ses`` of its SAS), else
its container's default; a scope must be one the account has (``--encryption-scope``).
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac

from tabulae.blob.api.call import Call
from tabulae.blob.api.headers import bad_header
from tabulae.blob.api.routing import Operation
from tabulae.blob.rules.encryption import Encryption, check_key
from tabulae.http.messages import Headers, Request
from tabulae.model.blobs import BlobRecord
from tabulae.model.encryption import ACCOUNT_KEY_SCOPE
from tabulae.model.errors import ServiceError

KEY = "x-ms-encryption-key"
KEY_SHA256 = "x-ms-encryption-key-sha256"
ALGORITHM = "x-ms-encryption-algorithm"
SCOPE = "x-ms-encryption-scope"
DEFAULT_SCOPE = "x-ms-default-encryption-scope"
DENY_OVERRIDE = "x-ms-deny-encryption-scope-override"

#: Operations that must name the blob's customer-provided key (and, writing in place, its scope).
CHECKED = frozenset(
    {
        Operation.GET_BLOB, Operation.GET_BLOB_PROPERTIES, Operation.GET_BLOB_METADATA, Operation.QUERY_BLOB,
        Operation.APPEND_BLOCK, Operation.APPEND_BLOCK_FROM_URL, Operation.PUT_PAGE,
        Operation.PUT_PAGE_FROM_URL, Operation.SET_BLOB_METADATA, Operation.SNAPSHOT_BLOB,
    }
)  # fmt: skip
#: Writes that take a key or a scope, and echo them.
WRITES = frozenset(
    {
        Operation.PUT_BLOB, Operation.PUT_BLOB_FROM_URL, Operation.PUT_BLOCK, Operation.PUT_BLOCK_FROM_URL,
        Operation.PUT_BLOCK_LIST, Operation.APPEND_BLOCK, Operation.APPEND_BLOCK_FROM_URL,
        Operation.PUT_PAGE, Operation.PUT_PAGE_FROM_URL, Operation.SET_BLOB_METADATA,
        Operation.SNAPSHOT_BLOB, Operation.COPY_BLOB,
    }
)  # fmt: skip
#: The writes whose answers echo the key's SHA-256 and the scope: not Snapshot Blob, which writes
#: no content (Azure answers it ``x-ms-request-server-encrypted: false``, echoing neither, as recorded).
ECHOES = WRITES - {Operation.SNAPSHOT_BLOB}
_PLAIN = Encryption()
_PLAIN_CHECKED = Encryption(checks=True)
_AES256 = "AES256"


def _key_headers(prefix: str) -> tuple[str, str, str]:
    return tuple(prefix + name.removeprefix("x-ms-") for name in (KEY, KEY_SHA256, ALGORITHM))  # type: ignore[return-value]


# The three key headers, by prefix: named once, not per request.
_KEY_HEADERS = {prefix: _key_headers(prefix) for prefix in ("x-ms-", "x-ms-source-")}


def customer_key(request: Request, *, write: bool, prefix: str = "x-ms-") -> str | None:
    """The Base64 SHA-256 of the request's customer-provided key, checked; None without one.
    ``prefix="x-ms-source-"``: the key of a copy's source."""
    headers = request.headers
    names = _KEY_HEADERS.get(prefix) or _key_headers(prefix)
    key, digest, algorithm = (headers.get(name) for name in names)
    if key is None and digest is None and algorithm in (None, _AES256):
        return None  # no key: a lone default algorithm asks for nothing
    if request.scheme != "https":
        raise ServiceError(
            "InvalidInput", "A customer-provided encryption key may only be sent over HTTPS."
        )  # assumed code: Azure's answer over HTTP is not in any recording found
    # Missing headers in Azure's order: the key, then (for a write) the algorithm, then the key's
    # hash (the Rust SDK's test_append_blob_partial_cpk_options_fail, 2026-04-06: a key alone
    # names x-ms-encryption-algorithm, a key and the algorithm x-ms-encryption-key-sha256)
    checks = ((names[0], key is None), (names[2], write and algorithm is None), (names[1], digest is None))
    for name, missing in checks:
        if missing:
            raise ServiceError("MissingRequiredHeader", fields=(("HeaderName", name),))
    assert key is not None and digest is not None
    if algorithm is not None and algorithm != _AES256:
        raise bad_header(names[2], algorithm)
    try:
        raw = base64.b64decode(key, validate=True)
    except (binascii.Error, ValueError):
        raise bad_header(names[0], "Sanitized") from None  # never echo a key
    if len(raw) != 32:
        raise bad_header(names[0], "Sanitized")
    computed = base64.b64encode(hashlib.sha256(raw).digest()).decode()
    if not hmac.compare_digest(computed.encode(), digest.encode()):
        raise bad_header(names[1], digest)
    return computed


def check_source_key(record: BlobRecord, source_key: str | None) -> None:
    """A copy's source read as Get Blob reads it: with the key it was written with, if any."""
    check_key(record, Encryption(key_sha256=source_key))


@functools.lru_cache(maxsize=4)
def _scoped_accounts(pairs: frozenset[tuple[str, str]]) -> frozenset[str]:
    """The accounts that have scopes (the settings' pairs, the same object every request)."""
    return frozenset(account for account, _ in pairs)


def _known(call: Call, scope: str) -> None:
    if scope != ACCOUNT_KEY_SCOPE and (call.route.account, scope) not in call.options.encryption_scopes:
        # as Azure answered a scope the account lacks on Snapshot Blob (the Rust SDK's
        # test_create_blob_snapshot_encryption_options, 2026-04-06), taken for every write
        raise ServiceError("EncryptionScopeNotAvailable")


async def request_encryption(call: Call, operation: Operation) -> Encryption | None:
    """The request's encryption, for the operations that have one; None for the others."""
    checks = operation in CHECKED
    write = operation in WRITES
    if not (checks or write):
        return None
    return await encryption_of(
        call, checks=checks, write=write, commits=operation is Operation.PUT_BLOCK_LIST
    )


async def encryption_of(call: Call, *, checks: bool, write: bool, commits: bool = False) -> Encryption:
    """The encryption of a request that must name the blob's key (``checks``), that writes
    (``write``: it takes a key or a scope), or that commits staged blocks (``commits``)."""
    request = call.request
    key = customer_key(request, write=write)
    named = request.headers.get(SCOPE)
    signed = request.query.get("ses") if call.grant is not None else None  # a SAS's, covered by its signature
    if signed is not None:
        if named is not None and named != signed:
            raise ServiceError("AuthorizationFailure")
        named = signed
    if key is not None and named is not None:
        raise bad_header(SCOPE, named)  # a key and a scope exclude each other
    scope = await _write_scope(call, named, key is not None) if write else None
    if key is None and scope is None and not commits:
        return _PLAIN_CHECKED if checks else _PLAIN
    return Encryption(scope, key, checks, commits)


async def _write_scope(call: Call, named: str | None, keyed: bool) -> str | None:
    """The scope a write uses: the one it names, else its container's default (None: the account's)."""
    if named is not None:
        _known(call, named)
    if call.route.account not in _scoped_accounts(call.options.encryption_scopes):
        # an account without scopes has no container with a default: no read
        return None if named == ACCOUNT_KEY_SCOPE else named
    container = await call.service.store.get_container(call.route.account, call.route.container)
    default = container.default_scope if container is not None else None
    if container is not None and container.deny_scope_override:
        if named is not None and named != (default or ACCOUNT_KEY_SCOPE):
            raise ServiceError("RequestForbiddenByContainerEncryptionPolicy")  # recorded: 403
        if keyed:
            raise ServiceError(
                "BlobCustomerSpecifiedEncryptionMismatch",
                "The container's default encryption scope may not be overridden.",
            )  # assumed code: the recordings found show a key refused only for other reasons
    scope = named if named is not None else (None if keyed else default)
    return None if scope == ACCOUNT_KEY_SCOPE else scope


def write_headers(encryption: Encryption) -> Headers:
    """What a write echoes: the key's SHA-256 and the scope it used."""
    headers: Headers = []
    if encryption.key_sha256 is not None:
        headers.append((b"x-ms-encryption-key-sha256", encryption.key_sha256.encode()))
    if encryption.scope is not None:
        headers.append((b"x-ms-encryption-scope", encryption.scope.encode()))
    return headers


def read_headers(record: BlobRecord, encryption: Encryption | None) -> Headers:
    """Refuse a read without the blob's key (or with another); else the blob's encryption headers."""
    check_key(record, encryption or _PLAIN)
    headers: Headers = []
    if record.encryption_key_sha256 is not None:
        headers.append((b"x-ms-encryption-key-sha256", record.encryption_key_sha256.encode()))
    if record.encryption_scope is not None:
        headers.append((b"x-ms-encryption-scope", record.encryption_scope.encode()))
    return headers


def container_scope(call: Call) -> tuple[str | None, bool]:
    """Create Container's default scope (None: the account's key) and whether blobs may override it."""
    headers = call.request.headers
    default = headers.get(DEFAULT_SCOPE)
    deny = headers.get(DENY_OVERRIDE)
    if deny is not None and deny.lower() not in ("true", "false"):
        raise bad_header(DENY_OVERRIDE, deny)
    if default is None:
        if deny is not None and deny.lower() == "true":
            raise ServiceError("MissingRequiredHeader", fields=(("HeaderName", DEFAULT_SCOPE),))
        return None, False
    if default != ACCOUNT_KEY_SCOPE and (call.route.account, default) not in call.options.encryption_scopes:
        raise bad_header(DEFAULT_SCOPE, default)  # assumed code, as for x-ms-encryption-scope
    return (None if default == ACCOUNT_KEY_SCOPE else default), (deny or "").lower() == "true"


def container_headers(default: str | None, deny: bool) -> Headers:
    return [
        (b"x-ms-default-encryption-scope", (default or ACCOUNT_KEY_SCOPE).encode()),
        (b"x-ms-deny-encryption-scope-override", b"true" if deny else b"false"),
    ]
