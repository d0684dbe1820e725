"""The source of a copy from a URL (``x-ms-copy-source``): found, authorised, read.

A source of this server (any account it serves, addressed by the same host and port as the
request, or by a loopback name on that port) is read in-process and authorised exactly as a
Get Blob over HTTP would be: a SAS in its URL, a bearer token in
``x-ms-copy-source-authorization``, or a container that lets anyone read. Copy Blob (the
asynchronous one) also lets a request signed with the account's key copy any blob of that same
account, as Azure does; the From URL operations never do (Azure answers them 401
CannotVerifyCopySource). Any other URL is fetched with :mod:`tabulae.http.fetch` (bounded,
streamed, link-local addresses never reached), unless ``--copy-from-remote off``.

When the source refuses, the copy fails as on Azure: ``CannotVerifyCopySource`` with the
source's own status, and its status and error code in ``x-ms-copy-source-status-code`` and
``x-ms-copy-source-error-code`` (and in the error document).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from urllib.parse import parse_qsl, urlsplit

from tabulae.auth.bearer import is_jwt
from tabulae.auth.flow import authenticate
from tabulae.auth.rbac import require, token_actions
from tabulae.auth.sas import SasToken, stored_policies
from tabulae.blob.api import encryption
from tabulae.blob.api.call import Call
from tabulae.blob.api.headers import bad_header, conditions, version_or_snapshot
from tabulae.blob.api.roles import READ
from tabulae.blob.api.routing import Kind, Operation, resolve
from tabulae.blob.api.sas import BlobGrant, anonymous_allowed, verify_blob_sas
from tabulae.blob.rules import copies
from tabulae.blob.rules.conditions import Conditions, check, not_met
from tabulae.blob.rules.copies import SOURCE_DETAIL_VERSION
from tabulae.http.fetch import Fetched, FetchError, FetchLimits, fetch
from tabulae.http.options import Accounts
from tabulae.model.blobs import BlobKey, ContentProperties
from tabulae.model.errors import ServiceError
from tabulae.model.names import SECONDARY_SUFFIX

_SOURCE_RANGE = re.compile(r"bytes=(\d+)-(\d*)")
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")
_MESSAGE = re.compile(r"<Message>(.*?)</Message>", re.S)
FETCH_LIMITS = FetchLimits(connect_timeout=10.0, read_timeout=30.0, max_redirects=3)
SOURCE_VERSION = "2021-08-06"  # the x-ms-version a fetch from another storage service names


_ONE_WORD_BEARER = re.compile(r"\A[Bb]earer +(\S+) *\Z")


def check_source_token(header: str | None) -> None:
    """``x-ms-copy-source-authorization`` naming one word that is no token at all: Azure answers
    401 CannotVerifyCopySource with nothing of the source's (recorded: the Go SDK's
    TestAppendBlockFromURLCopySourceAuthNegative, ``Bearer faketoken``, x-ms-version
    2023-11-03). A header of another shape is the source's own refusal, 400
    InvalidAuthenticationInfo (recorded for ``Bearer auth token``: .NET's
    SyncUploadFromUriAsync_SourceBearerTokenFail and UploadPagesFromUriAsync_SourceBearerTokenFail)."""
    found = _ONE_WORD_BEARER.match(header or "")
    if found is not None and not is_jwt(found.group(1)):
        error = ServiceError("CannotVerifyCopySource")
        error.status = 401
        raise error


def source_refused(status: int, code: str | None, message: str | None) -> ServiceError:
    """Azure's answer when the copy source answers ``status`` (``code``): the same status, code
    CannotVerifyCopySource, the source's status and code as headers and in the document."""
    error = ServiceError("CannotVerifyCopySource")
    error.status = status
    headers = [(b"x-ms-copy-source-status-code", str(status).encode())]
    fields = [("CopySourceStatusCode", str(status))]
    if code:
        headers.append((b"x-ms-copy-source-error-code", code.encode("latin-1", "replace")))
        fields.append(("CopySourceErrorCode", code))
    if message:
        fields.append(("CopySourceErrorMessage", message))
    error.headers = headers
    error.fields = tuple(fields)
    return error


def as_of(error: ServiceError, version: str) -> ServiceError:
    """A copy's refusal as a request of ``version`` is answered: before
    :data:`~tabulae.blob.rules.copies.SOURCE_DETAIL_VERSION` CannotVerifyCopySource says nothing
    of the source but its status and message (no ``x-ms-copy-source-*`` headers, no
    ``CopySource*`` elements), as Azure answered Copy Blob From URL of a private source at
    2023-08-03 (297 bytes, where 2024-08-04's answer is 570) and Append Block From URL's unmet
    source condition (a bare 304)."""
    if error.code != "CannotVerifyCopySource" or version >= SOURCE_DETAIL_VERSION:
        return error
    plain = ServiceError(error.code, error.message)
    plain.status = error.status
    return plain


def unsized(error: ServiceError) -> bool:
    """Whether the bodiless answer to ``error`` goes without Content-Length: a copy whose source
    answered 304 is, as Azure answered Append Block From URL with an unmet source condition (the
    Java SDK's AppendBlobApiTests.appendBlockFromURLSourceACFail[1], x-ms-version 2023-08-03; the
    Rust SDK's append_blob_client/test_append_block_from_url_source_if_match, 2026-04-06), where
    Get Blob's own 304 says 'Content-Length: 0' (Java's BlobApiTests.downloadACFail[1] and [4])."""
    return error.status == 304 and error.code == "CannotVerifyCopySource"


def unreachable(reason: str) -> ServiceError:
    """The source gave no answer at all (timeout, refused connection or address, too large)."""
    error = ServiceError("CannotVerifyCopySource")
    error.status = 500
    error.fields = (("CopySourceErrorMessage", reason),)
    return error


def remote_disabled() -> ServiceError:
    error = ServiceError(
        "CannotVerifyCopySource",
        "Copies from outside this server are turned off on it (--copy-from-remote off).",
    )
    error.status = 403
    return error


@dataclass(slots=True)
class Source:
    """A copy source, resolved: where it is and what the copy may read."""

    url: str
    key: BlobKey | None = None  # a blob of this server
    snapshot: str = ""
    query: dict[str, str] = field(default_factory=dict)

    @property
    def local(self) -> bool:
        return self.key is not None


@dataclass(slots=True)
class SourceRead:
    """The source's bytes ``start`` to ``end`` (exclusive), with what the source says of itself."""

    size: int  # the whole source's length
    start: int
    end: int
    chunks: AsyncIterator[bytes]
    properties: ContentProperties
    metadata: dict[str, str]
    blob_type: str = "BlockBlob"
    tags: dict[str, str] = field(default_factory=dict)  # a blob of this server's index tags

    @property
    def length(self) -> int:
        return self.end - self.start


def recorded(url: str) -> str:
    """The source URL a copy records (``x-ms-copy-source`` of the destination's properties): its
    SAS signature left out (:func:`copies.without_signature`)."""
    return copies.without_signature(url)


def source_range(headers: dict[str, str]) -> tuple[int, int | None] | None:
    """``x-ms-source-range: bytes=start-end`` (inclusive end); None when absent. The end may be
    left open (``bytes=0-``: to the source's end), which is what the .NET SDK sends for Put
    Block and Append Block From URL given no range, and Azure takes (recorded for its
    StageBlockFromUriAsync_Min and AppendBlockFromUriAsync_NullOptions)."""
    value = headers.get("x-ms-source-range")
    if value is None:
        return None
    match = _SOURCE_RANGE.fullmatch(value.strip())
    if match is None or (match[2] and int(match[2]) < int(match[1])):
        raise bad_header("x-ms-source-range", value)
    return int(match[1]), int(match[2]) if match[2] else None


def _same_server(netloc: str, request_host: str, accounts: Accounts) -> bool:
    """Whether ``netloc`` names this server: the request's own host and port; a loopback name or
    address with that port; or Azure's host-style name of an account this server serves
    (``acct.blob.core.windows.net``, any port), which an emulator stands in for, as Azurite does."""
    if netloc.lower() == request_host.lower():
        return True
    source, request = urlsplit("//" + netloc), urlsplit("//" + request_host)
    host = (source.hostname or "").lower()
    labels = host.split(".")
    if len(labels) > 2 and labels[1] == "blob" and labels[0].removesuffix(SECONDARY_SUFFIX) in accounts:
        return True
    try:
        if source.port is None or source.port != request.port:
            return False
    except ValueError:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def storage_blob_url(call: Call, url: str) -> bool:
    """Whether ``url`` may name a blob: one of this server's, or a container and blob path on an
    Azure Blob host (``acct.blob.<cloud suffix>``). Incremental Copy refuses anything else with
    409 InvalidSourceBlobUrl, as Azure answered the Java SDK's ``https://www.error.com``."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return False
    if _same_server(parts.netloc, call.request.headers.get("host", ""), call.options.accounts):
        return True
    labels = (parts.hostname or "").lower().split(".")
    segments = [segment for segment in parts.path.split("/") if segment]
    return len(labels) > 2 and labels[1] == "blob" and len(segments) >= 2


def locate(call: Call, url: str) -> Source:
    """The source ``url`` names: a blob of this server, or a URL outside it."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise bad_header("x-ms-copy-source", url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    host = call.request.headers.get("host", "")
    if _same_server(parts.netloc, host, call.options.accounts):
        try:
            route = resolve(parts.scheme, parts.netloc, parts.path, call.options.accounts, None)
        except ServiceError as exc:
            raise source_refused(exc.status, exc.code, exc.message) from None
        if route.kind is not Kind.BLOB:
            raise bad_header("x-ms-copy-source", url)
        key = BlobKey(route.account, route.container, route.blob)
        return Source(url, key, version_or_snapshot(query), query)
    if not call.options.copy_from_remote:
        raise remote_disabled()
    return Source(url, query=query)


async def authorize_local(call: Call, source: Source, *, shared_key_ok: bool) -> None:
    """Authorise reading a local source as a Get Blob request to it would be. With
    ``shared_key_ok`` (Copy Blob) a request signed with the same account's key may read it. A
    request made with a bearer token reads a source of the same account without a SAS or
    ``x-ms-copy-source-authorization`` as that token would (as Azure's recordings of the From URL
    operations by a token show), while one signed with the key may not (recorded 401)."""
    key = source.key
    assert key is not None
    if shared_key_ok and call.grant is None and key.account == call.route.account:
        if call.request.actions is not None:  # a token held to its roles reads the source too
            require(call.request.actions, READ)
        return
    if shared_key_ok and call.grant is not None and key.account == call.route.account:
        grant = call.grant
        if grant.resource_types is not None and "o" in grant.resource_types and "r" in grant.permissions:
            return
    token_header = call.request.headers.get("x-ms-copy-source-authorization")
    check_source_token(token_header)
    if token_header is None and "sig" not in source.query and key.account == call.route.account:
        own = call.request.headers.get("authorization", "")
        if own[:7].lower() == "bearer ":  # a token's caller reads its own account's source as itself
            token_header = own  # (recorded: Append Block From URL by a token, the source bare)
    try:
        if token_header is None and "sig" not in source.query:
            record = await call.service.store.get_container(key.account, key.container)
            if record is not None and anonymous_allowed(Operation.GET_BLOB, record.public_access):
                return

        async def sas(token: SasToken) -> BlobGrant:
            record = await call.service.store.get_container(key.account, key.container)
            policies = stored_policies(record.acl) if record else {}
            return verify_blob_sas(
                token,
                source.query,
                account=key.account,
                keys=call.options.accounts[key.account],
                container=key.container,
                blob=key.name,
                policy_lookup=policies.get,
                is_https=urlsplit(source.url).scheme == "https",
                client_ip=call.request.client_ip,
                now=datetime.now(UTC),
            )

        def shared_key(_header: str) -> None:
            raise ServiceError("InvalidAuthenticationInfo")

        source_grant = await authenticate(
            token_header,
            source.query,
            account=key.account,
            service="blob",
            oauth=call.options.oauth,
            shared_key=shared_key,
            sas=sas,
        )
        if source_grant is not None:
            source_grant.check(Operation.GET_BLOB)
        elif token_header is not None and call.options.roles:  # the source's token, held to its roles
            require(token_actions(call.options.roles, token_header), READ)
    except ServiceError as exc:
        raise source_refused(exc.status, exc.code, exc.message) from None


async def read_local(
    call: Call,
    source: Source,
    wanted: tuple[int, int | None] | None,
    source_conditions: Conditions,
    unmet: str | None = None,
) -> SourceRead:
    """A local source's bytes (the range ``wanted``, inclusive, or all), after its conditions
    as a Get Blob would check them (304 and 412 become CannotVerifyCopySource). With ``unmet``,
    the operation's own code for its ETag conditions: unmet, they are 412 ``unmet`` (Put Blob
    From URL's SourceConditionNotMet, recorded for the JS SDK's syncUploadFromURL with a source
    If-Match), as Copy Blob checks them; its date conditions stay as Get Blob's (304 or 412
    CannotVerifyCopySource, recorded for the Python SDK's upload_blob_from_url)."""
    key = source.key
    assert key is not None
    source_key = encryption.customer_key(call.request, write=False, prefix="x-ms-source-")
    try:
        record, extents = await call.service.get_blob(
            key, source.snapshot, _without_etags(source_conditions) if unmet else source_conditions, None,
            content=True,
        )  # fmt: skip
        if unmet:
            try:
                etags = Conditions(
                    if_match=source_conditions.if_match, if_none_match=source_conditions.if_none_match
                )
                check(etags, record.ticks, read=False)
            except ServiceError:
                raise not_met(412, unmet) from None
        encryption.check_source_key(record, source_key)
        start, end = 0, record.size
        if wanted is not None:
            last = wanted[1]
            start, end = wanted[0], record.size if last is None else min(last + 1, record.size)
            if start >= record.size:
                raise ServiceError("InvalidRange")
    except ServiceError as exc:
        if unmet and exc.code == unmet:
            raise
        if exc.status == 304:  # the source's code (ConditionNotMet), as a fetched one says it;
            # no message: a 304 has no body (the Rust SDK's recorded
            # test_append_block_from_url_source_if_match, x-ms-version 2026-04-06)
            raise source_refused(304, exc.code, None) from None
        raise source_refused(exc.status, exc.code, exc.message) from None
    assert extents is not None
    return SourceRead(
        size=record.size,
        start=start,
        end=end,
        chunks=call.service.read(key, extents, start, end),
        properties=record.properties,
        metadata=record.metadata,
        blob_type=record.blob_type,
        tags=record.tags,
    )


def _fetch_headers(call: Call, wanted: tuple[int, int | None] | None) -> dict[str, str]:
    """The GET of a source outside this server: its range, the source conditions as the
    standard headers, and the token of ``x-ms-copy-source-authorization`` as its Authorization."""
    headers = {
        "x-ms-version": SOURCE_VERSION,
        "user-agent": "Tabulae (copy from URL)",
        "accept-encoding": "identity",  # the bytes as they are, never re-encoded for the trip
    }
    token = call.request.headers.get("x-ms-copy-source-authorization")
    if token is not None:
        headers["authorization"] = token
    if wanted is not None:
        last = "" if wanted[1] is None else str(wanted[1])
        headers["range"] = headers["x-ms-range"] = f"bytes={wanted[0]}-{last}"
    request = call.request.headers
    for name in ("if-match", "if-none-match", "if-modified-since", "if-unmodified-since"):
        value = request.get("x-ms-source-" + name)
        if value is not None:
            headers[name] = value
    return headers


def _without_etags(conditions: Conditions) -> Conditions:
    return replace(conditions, if_match=None, if_none_match=None)


async def open_remote(
    call: Call, source: Source, wanted: tuple[int, int | None] | None, limit: int
) -> tuple[Fetched, SourceRead]:
    """Fetch a source outside this server: its response (to close) and what it offers. A
    refusal is CannotVerifyCopySource with the source's status; no answer is a 500 one."""
    headers = _fetch_headers(call, wanted)
    try:
        fetched = await fetch(source.url, headers, FETCH_LIMITS)
    except FetchError as exc:
        raise unreachable(str(exc)) from None
    if fetched.status >= 300:
        code = fetched.headers.get("x-ms-error-code")
        text = await fetched.text() if fetched.status != 304 else ""
        found = _MESSAGE.search(text)
        message = found[1].split("\n", 1)[0].strip() if found else None
        raise source_refused(fetched.status, code, message)
    start, size = 0, None
    length = fetched.headers.get("content-length")
    content_range = _CONTENT_RANGE.fullmatch(fetched.headers.get("content-range", ""))
    if fetched.status == 206 and content_range is not None:
        start = int(content_range[1])
        end = int(content_range[2]) + 1
        size = int(content_range[3]) if content_range[3] != "*" else end
    elif wanted is not None and fetched.status == 200:
        await fetched.close()  # a source that ignores ranges: refuse rather than read it all
        raise unreachable("the copy source does not serve byte ranges")
    elif length is not None and length.isdigit():
        end = size = int(length)
    else:
        await fetched.close()
        raise unreachable("the copy source did not say how long it is (no Content-Length)")
    if end - start > limit:
        await fetched.close()
        raise unreachable(f"the copy source is larger than the {limit} bytes this operation copies")
    h = fetched.headers
    whole = fetched.status == 200
    properties = ContentProperties(
        content_type=h.get("content-type"),
        content_encoding=h.get("content-encoding"),
        content_language=h.get("content-language"),
        content_disposition=h.get("content-disposition"),
        cache_control=h.get("cache-control"),
        content_md5=h.get("content-md5") if whole else h.get("x-ms-blob-content-md5"),
    )
    metadata = {
        name[len("x-ms-meta-") :]: value for name, value in h.items() if name.startswith("x-ms-meta-")
    }
    read = SourceRead(
        size=size if size is not None else end,
        start=start,
        end=end,
        chunks=fetched.chunks(end - start),
        properties=properties,
        metadata=metadata,
        blob_type=h.get("x-ms-blob-type", "BlockBlob"),
    )
    return fetched, read


async def open_source(
    call: Call, *, ranged: bool, limit: int, shared_key_ok: bool = False, unmet: str | None = None
) -> tuple[Source, SourceRead, Fetched | None]:
    """Locate, authorise and open the request's ``x-ms-copy-source`` (the ``x-ms-source-range``
    of it when ``ranged``) for reading at most ``limit`` bytes; ``unmet`` as for :func:`read_local`."""
    headers = call.request.headers
    url = headers["x-ms-copy-source"]
    wanted = source_range(headers) if ranged else None
    source = locate(call, url)
    if source.local:
        await authorize_local(call, source, shared_key_ok=shared_key_ok)
        read = await read_local(call, source, wanted, conditions(headers, "x-ms-source-"), unmet)
        if read.length > limit:
            raise unreachable(f"the copy source is larger than the {limit} bytes this operation copies")
        return source, read, None
    fetched, read = await open_remote(call, source, wanted, limit)
    return source, read, fetched
