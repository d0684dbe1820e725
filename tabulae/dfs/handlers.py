"""Handlers of the DFS operations: HTTP in, :class:`DataLakeService` call, HTTP out, in the
shapes of the Data Lake Storage Gen2 REST reference (JSON bodies, ``x-ms-*`` headers)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from urllib.parse import parse_qsl, unquote

from tabulae.auth.sas import parse_sas, stored_policies
from tabulae.blob import encryption_guard, softdeletion
from tabulae.blob.api import blobs as blob_handlers
from tabulae.blob.api.call import Call
from tabulae.blob.api.containers import lease_request, lease_response
from tabulae.blob.api.formats import http_date as blob_http_date
from tabulae.blob.api.headers import conditions, etag_headers
from tabulae.blob.api.sas import verify_blob_sas
from tabulae.blob.rules import leases
from tabulae.blob.rules.checksums import b64
from tabulae.blob.rules.conditions import NONE, check, etag_of
from tabulae.blob.rules.leases import parse_lease_id
from tabulae.blob.service import LeaseRequest
from tabulae.dfs import acl, append_files, formats
from tabulae.dfs.access import AccessGuard
from tabulae.dfs.paths import RenameSource, check_directory_depth, normalize, parse_rename_source
from tabulae.dfs.routing import (
    APPEND_LEASE_ACTIONS,
    DfsOperation,
    RecursiveMode,
    count,
    flag,
    invalid_parameter,
    recursive_mode,
    sas_allows,
)
from tabulae.dfs.service import (
    DEFAULT_CONTENT_TYPE,
    CreateRequest,
    DataLakeService,
    FlushRequest,
    Posix,
    filesystem_errors,
    is_directory,
    posix_of,
    root_posix,
)
from tabulae.dfs.trash import deletion_id, is_deletion_id
from tabulae.http.messages import Headers, Response
from tabulae.model import edm
from tabulae.model.blobs import BlobKey, BlobRecord, ContentProperties
from tabulae.model.errors import ServiceError

_ENCRYPTED = (b"x-ms-request-server-encrypted", b"true")
_NOT_ENCRYPTED = (b"x-ms-request-server-encrypted", b"false")
# Create Path answers x-ms-request-server-encrypted from this version, as Azure answered the JS
# SDK: not at 2019-02-02 (December 2019), 2019-12-12 (June 2020) nor 2020-02-10 (September to
# December 2020), true at 2020-06-12 (May 2021) and after (its nock recordings; 2020-04-08 is
# not recorded and is taken to be without it, as the versions before).
CREATE_ENCRYPTED_VERSION = "2020-06-12"
_NAMESPACE = formats.NAMESPACE_ENABLED
MAX_LIST = 5000


@dataclass(slots=True)
class DfsCall:
    """A DFS request as its handler sees it: the Blob call (request, route, body) and the DFS
    service over the same store."""

    call: Call
    dfs: DataLakeService
    operation: DfsOperation
    filesystem: str
    path: str
    principal: acl.Principal = acl.SUPER
    access: AccessGuard | None = None  # what a listing checks as it goes

    @property
    def headers(self) -> dict[str, str]:
        return self.call.request.headers

    @property
    def query(self) -> dict[str, str]:
        return self.call.request.query

    @property
    def key(self) -> BlobKey:
        return BlobKey(self.call.route.account, self.filesystem, self.path)


def _moment(ticks: int) -> datetime:
    micros = (ticks - edm.UNIX_EPOCH_TICKS) // 10
    return datetime.fromtimestamp(micros // 1_000_000, UTC).replace(microsecond=micros % 1_000_000)


def _json(status: int, body: bytes, extra: Headers = ()) -> Response:  # type: ignore[assignment]
    return Response(status, [(b"content-type", formats.JSON_CONTENT_TYPE), *extra], body)


def _content_properties(
    headers: dict[str, str], default: ContentProperties | None = None
) -> ContentProperties | None:
    """``x-ms-content-type`` and its siblings (Path - Create, Flush, Set Properties); None when
    none is sent. Sent without a type, the type is Azure's documented default."""
    names = ("x-ms-content-type", "x-ms-content-encoding", "x-ms-content-language",
             "x-ms-content-disposition", "x-ms-cache-control", "x-ms-content-md5")  # fmt: skip
    if not any(name in headers for name in names):
        return default
    content_type, *others = (headers.get(name) for name in names)
    return ContentProperties(DEFAULT_CONTENT_TYPE if content_type is None else content_type, *others)


def _lease(headers: dict[str, str], name: str = "x-ms-lease-id") -> str | None:
    """A lease id header; the SDK sends ``x-ms-source-lease-id`` empty on every rename."""
    return parse_lease_id(headers.get(name) or None, name)


def _acquire_request(headers: dict[str, str]) -> LeaseRequest:
    """The lease a write acquires: ``x-ms-proposed-lease-id`` for ``x-ms-lease-duration``."""
    duration = leases.parse_duration(headers.get("x-ms-lease-duration"))
    return LeaseRequest("acquire", proposed_id=_lease(headers, "x-ms-proposed-lease-id"), duration=duration)


async def _lease_after(c: DfsCall, action: str | None) -> None:
    """The lease half of Create Path with ``x-ms-proposed-lease-id`` and of Append and Flush
    with ``x-ms-lease-action`` (REST 2023-08-03 on): acquire, renew or release once the write is
    done. ``acquire-release`` leaves no lease behind, so it takes nothing here."""
    headers = c.headers
    if action == "acquire":
        request = _acquire_request(headers)
    elif action in ("auto-renew", "release"):
        request = LeaseRequest("renew" if action == "auto-renew" else "release", lease_id=_lease(headers))
    else:
        return
    await c.call.service.lease_blob(c.key, request, NONE)


def _lease_action(c: DfsCall) -> str | None:
    action = c.headers.get("x-ms-lease-action")
    if action is not None and action not in APPEND_LEASE_ACTIONS:
        raise ServiceError(
            "InvalidHeaderValue", fields=(("HeaderName", "x-ms-lease-action"), ("HeaderValue", action))
        )
    return action


async def _renew_first(c: DfsCall) -> tuple[str | None, Headers]:
    """The request's lease action, an ``auto-renew`` done before the write: a lease that ran out
    meanwhile is renewed (as Renew Lease may while no one else took the file) and the write then
    holds it, as Azure answers the JS SDK's recorded "append with auto-renew lease" (an Append
    with the lease id 15 s after the lease was taken for 15 s).

    With the action comes what the answer says of it: after an ``auto-renew``,
    ``x-ms-lease-renewed``, ``true`` when the lease had run out and was taken again, ``false``
    when it still held. Azure answered ``true`` to the JS SDK's Append and Flush 15 s into a
    15 s lease ("append with auto-renew lease", "flush with auto-renew lease", x-ms-version
    2021-12-02) and ``false`` to the C++ SDK's Flush a second into a 20 s lease
    (DataLakeFileClientTest.FlushFileWithLease, 2021-06-08); the other actions get no such
    header there."""
    action = _lease_action(c)
    if action != "auto-renew":
        return action, []
    lease = (await c.dfs.get(c.key)).lease
    ran_out = leases.current(lease, c.call.service.clock()).state == "expired"
    await _lease_after(c, action)
    return None, [(b"x-ms-lease-renewed", b"true" if ran_out else b"false")]


def _write_lease(c: DfsCall, action: str | None) -> str | None:
    """The lease id the write itself must present: none when it acquires one."""
    return None if action in ("acquire", "acquire-release") else _lease(c.headers)


def _expiry_of(record: BlobRecord) -> datetime | None:
    seconds = posix_of(record).expiry
    return datetime.fromtimestamp(seconds, UTC) if seconds is not None else None


async def _set_expiry(c: DfsCall, option: str) -> BlobRecord:
    """Set Expiry (``comp=expiry``) and Create Path's ``x-ms-expiry-option``: when a file
    expires, kept with its owner and ACL; ``NeverExpire`` clears it."""
    value = c.headers.get("x-ms-expiry-time")

    def change(record: BlobRecord, ticks: int) -> BlobRecord:
        if is_directory(record):
            raise ServiceError("ResourceTypeMismatch")
        moment = formats.expiry(option, value, now=datetime.now(UTC), created=_moment(record.created))
        posix = replace(posix_of(record), expiry=moment.timestamp() if moment is not None else None)
        return replace(record, posix=posix.stored())

    return await c.dfs.update(c.key, change)


async def set_expiry(c: DfsCall) -> Response:
    option = c.headers.get("x-ms-expiry-option")
    if option is None:
        raise ServiceError("MissingRequiredHeader", fields=(("HeaderName", "x-ms-expiry-option"),))
    record = await _set_expiry(c, option)
    return Response(200, _record_headers(record))


def _record_headers(record: BlobRecord) -> Headers:
    return etag_headers(record.ticks)


# ------------------------------------------------------------------ file systems


async def create_filesystem(c: DfsCall) -> Response:
    properties = formats.parse_properties(c.headers.get("x-ms-properties", ""))
    try:
        record = await c.call.service.create_container(c.call.route.account, c.filesystem, properties, None)
    except ServiceError as error:
        if error.code == "ContainerAlreadyExists":
            raise ServiceError("FilesystemAlreadyExists") from None
        raise
    if c.principal.creator is not None:
        await c.dfs.claim_root(c.call.route.account, c.filesystem, c.principal.creator)
    return Response(201, [*etag_headers(record.ticks), _NAMESPACE])


async def _container(c: DfsCall):  # type: ignore[no-untyped-def]
    with filesystem_errors():
        return await c.call.service.get_container(c.call.route.account, c.filesystem)


async def delete_filesystem(c: DfsCall) -> Response:
    await _container(c)
    await c.call.service.delete_container(c.call.route.account, c.filesystem, conditions(c.headers), None)
    return Response(202, [])


async def get_filesystem_properties(c: DfsCall) -> Response:
    record = await _container(c)
    headers = [*etag_headers(record.ticks), _NAMESPACE]
    headers.append((b"x-ms-properties", formats.render_properties(record.metadata).encode()))
    return Response(200, headers)


async def set_filesystem_properties(c: DfsCall) -> Response:
    await _container(c)
    properties = formats.parse_properties(c.headers.get("x-ms-properties", ""))
    record = await c.call.service.set_container_metadata(
        c.call.route.account, c.filesystem, properties, conditions(c.headers), None
    )
    return Response(200, etag_headers(record.ticks))


async def list_filesystems(c: DfsCall) -> Response:
    query = c.query
    limit = count(query, "maxResults", minimum=1, maximum=MAX_LIST) or MAX_LIST
    marker = query.get("continuation")
    records, next_marker = await c.call.service.list_containers(
        c.call.route.account, query.get("prefix", ""), marker, limit
    )
    items = [formats.FilesystemItem(r.name, _moment(r.ticks), f'"{etag_of(r.ticks)}"') for r in records]
    extra: Headers = [(formats.CONTINUATION, next_marker.encode())] if next_marker else []
    return _json(200, formats.list_filesystems(items), extra)


async def list_paths(c: DfsCall) -> Response:
    query = c.query
    recursive = flag(query, "recursive")
    if recursive is None:
        from tabulae.dfs.routing import missing_parameter

        raise missing_parameter("recursive")
    limit = count(query, "maxResults", minimum=1) or MAX_LIST
    limit = min(limit, MAX_LIST)
    directory = normalize(query.get("directory", ""))
    token = query.get("continuation")
    after = formats.decode_continuation(token) if token else None
    begin = query.get("beginFrom")
    records, last = await c.dfs.list_paths(
        c.call.route.account,
        c.filesystem,
        directory,
        recursive,
        after,
        limit,
        normalize(begin) if begin else None,
    )
    if recursive and c.access is not None:
        await c.access.check_descent(
            c.principal, BlobKey(c.call.route.account, c.filesystem, directory), records
        )
    items = []
    for record in records:
        posix = posix_of(record)
        items.append(
            formats.PathItem(
                name=record.name,
                is_directory=is_directory(record),
                content_length=record.size,
                last_modified=_moment(record.ticks),
                etag=etag_of(record.ticks),
                owner=posix.owner,
                group=posix.group,
                permissions=posix.permissions,
                creation_time=_moment(record.created),
                expiry_time=_expiry_of(record),
                encryption_context=posix.context,
                encryption_scope=record.encryption_scope,
            )
        )
    extra: Headers = [(formats.CONTINUATION, formats.encode_continuation(last).encode())] if last else []
    return _json(200, formats.list_paths(items), extra)


# ------------------------------------------------------------------ paths


def _permissions(headers: dict[str, str]) -> int | None:
    text = headers.get("x-ms-permissions")
    return acl.parse_permissions(text) if text is not None else None


async def create_path(c: DfsCall) -> Response:
    headers = c.headers
    directory = c.operation is DfsOperation.CREATE_DIRECTORY
    if directory and "x-ms-expiry-option" in headers:  # recorded: Azure refuses before creating
        raise ServiceError("ExpiryNotSupportedForDirectory")
    if "x-ms-proposed-lease-id" in headers:
        # A proposed lease without its duration is 400 MissingRequiredHeader naming
        # x-ms-lease-duration (recorded: the Java SDK's FileApiTest.createOptionsWithLeaseIdError,
        # 2023-01-03), refused with the request's other header checks, before the path is made.
        _acquire_request(headers)
    if directory:
        check_directory_depth(c.path)
    elif headers.get("x-ms-expiry-option") == "RelativeToCreation":
        # a new file has no creation time to count from yet: 400 with no detail (Go SDK recording
        # go/sdk/storage/azdatalake/.../TestCreateFileWithExpiryRelativeToCreation.json, 2020-10-02)
        raise ServiceError("InvalidHeaderValue")
    umask = headers.get("x-ms-umask")
    acl_text = headers.get("x-ms-acl")
    request = CreateRequest(
        directory=directory,
        permissions=_permissions(headers),
        umask=acl.parse_umask(umask) if umask is not None else None,
        entries=acl.parse_acl(acl_text, full=False, directory=directory) if acl_text else None,
        owner=headers.get("x-ms-owner") or c.principal.creator,
        group=headers.get("x-ms-group"),
        metadata=formats.parse_properties(headers.get("x-ms-properties", "")),
        properties=_content_properties(headers) or ContentProperties(content_type=DEFAULT_CONTENT_TYPE),
        conditions=conditions(headers),
        lease_id=_lease(headers),
        creator=c.principal.creator,
        encryption_context=headers.get("x-ms-encryption-context"),  # a directory's too, as recorded
        append_blob=not directory and append_files.is_append_blob(c.query),
    )
    record = await c.dfs.create(c.key, request)
    if "x-ms-expiry-option" in headers:
        record = await _set_expiry(c, headers["x-ms-expiry-option"])
    if "x-ms-proposed-lease-id" in headers:
        await _lease_after(c, "acquire")
    encrypted = [_ENCRYPTED] if c.call.version >= CREATE_ENCRYPTED_VERSION else []
    return Response(201, [*_record_headers(record), *encrypted])


async def _authorize_source(c: DfsCall, source: RenameSource) -> None:
    """A rename signed with the account key may move any path of the account. One authorised by
    a SAS must also be allowed to take the source away: by a SAS of its own on the source (the
    SDK appends it to ``x-ms-rename-source``), an account SAS, or the same container's SAS."""
    grant = c.call.grant
    if grant is None or grant.resource_types is not None:
        return
    account = c.call.route.account
    token = parse_sas(source.sas) if source.sas else None
    if token is None:
        if grant.scope == "c" and source.filesystem == c.filesystem:
            return
        raise ServiceError("AuthorizationPermissionMismatch")
    record = await c.call.service.store.get_container(account, source.filesystem)
    policies = stored_policies(record.acl) if record else {}
    source_grant = verify_blob_sas(
        token,
        source.sas,
        account=account,
        keys=c.call.options.accounts[account],
        container=source.filesystem,
        blob=source.path,
        policy_lookup=policies.get,
        is_https=c.call.request.scheme == "https",
        client_ip=c.call.request.client_ip,
        now=datetime.now(UTC),
    )
    if not sas_allows("".join(source_grant.permissions), ("dm",)):
        raise ServiceError("AuthorizationPermissionMismatch")


async def rename(c: DfsCall) -> Response:
    source = parse_rename_source(c.headers["x-ms-rename-source"])
    await _authorize_source(c, source)
    account = c.call.route.account
    record = await c.dfs.rename(
        BlobKey(account, source.filesystem, source.path),
        c.key,
        source_conditions=conditions(c.headers, "x-ms-source-"),
        conditions=conditions(c.headers),
        source_lease=_lease(c.headers, "x-ms-source-lease-id"),
        lease_id=_lease(c.headers),
    )
    headers = _record_headers(record) if record is not None else []
    return Response(201, [*headers])


async def append(c: DfsCall) -> Response:
    position = count(c.query, "position")
    if position is None:
        from tabulae.dfs.routing import missing_parameter

        raise missing_parameter("position")
    if c.headers.get("content-length", "").strip() == "0":
        # Nothing to append is refused, as Azure answers the .NET SDK's AppendDataAsync_EmptyStream
        # (recorded, 2024-08-04): 400 InvalidHeaderValue naming Content-Length.
        raise ServiceError(
            "InvalidHeaderValue", fields=(("HeaderName", "Content-Length"), ("HeaderValue", "0"))
        )
    upload = c.call.upload(4000 * 1024 * 1024)
    action, renewed = await _renew_first(c)
    lease_id = _write_lease(c, action)
    sums = await c.dfs.append(c.key, position, upload, lease_id)
    # A Content-MD5 sent is echoed (recorded: the Java SDK's FileApiTest.appendDataMd5, 2023-01-03).
    headers: Headers = [(b"content-md5", b64(sums.md5).encode())] if sums.md5 else []
    if flag(c.query, "flush", False):
        # Flushed too, the file's new ETag and Last-Modified come back, as from Flush
        # (recorded for azure-storage-file-datalake's test_flush_data_with_bool).
        flushed = FlushRequest(position=position + upload.length, lease_id=lease_id)
        headers += _record_headers(await c.dfs.flush(c.key, flushed))
    await _lease_after(c, action)
    return Response(202, [*headers, *renewed, _ENCRYPTED, *c.call.echo])


async def flush(c: DfsCall) -> Response:
    position = count(c.query, "position")
    if position is None:
        from tabulae.dfs.routing import missing_parameter

        raise missing_parameter("position")
    action, renewed = await _renew_first(c)
    request = FlushRequest(
        position=position,
        retain=bool(flag(c.query, "retainUncommittedData", False)),
        close=bool(flag(c.query, "close", False)),
        properties=_content_properties(c.headers),
        conditions=conditions(c.headers),
        lease_id=_write_lease(c, action),
    )
    record = await c.dfs.flush(c.key, request)
    await _lease_after(c, action)
    return Response(200, [*_record_headers(record), *renewed, _flush_encrypted()])


def _flush_encrypted() -> tuple[bytes, bytes]:
    """A Flush carries no content: Azure answers it ``x-ms-request-server-encrypted: false``,
    ``true`` only when the request names a customer-provided key (as recorded for both)."""
    encryption = encryption_guard.REQUEST.get()
    return _ENCRYPTED if encryption is not None and encryption.key_sha256 is not None else _NOT_ENCRYPTED


async def set_properties(c: DfsCall) -> Response:
    headers = c.headers
    properties = (
        formats.parse_properties(headers["x-ms-properties"]) if "x-ms-properties" in headers else None
    )
    content = _content_properties(headers)

    def change(record: BlobRecord, ticks: int) -> BlobRecord:
        metadata = record.metadata
        if properties is not None:
            metadata = dict(properties)
            if is_directory(record):
                metadata["hdi_isfolder"] = "true"
        return replace(
            record,
            ticks=ticks,
            metadata=metadata,
            properties=content if content is not None else record.properties,
        )

    record = await c.dfs.update(c.key, change, conditions(headers), _lease(headers))
    return Response(200, _record_headers(record))


async def set_access_control(c: DfsCall) -> Response:
    headers = c.headers
    owner, group = headers.get("x-ms-owner"), headers.get("x-ms-group")
    permissions = _permissions(headers)
    # An empty x-ms-acl (the JS SDK's setAccessControl([], {owner})) leaves the ACL as it is, as
    # Azure answers it (recorded: 200, the ACL read back unchanged).
    acl_text = headers.get("x-ms-acl") or None
    if permissions is not None and acl_text is not None:
        raise ServiceError(
            "InvalidHeaderValue", fields=(("HeaderName", "x-ms-acl"), ("HeaderValue", acl_text))
        )

    def changed(posix: Posix, directory: bool) -> Posix:
        entries, sticky = posix.entries, posix.sticky
        if acl_text is not None:
            entries = acl.complete(acl.parse_acl(acl_text, full=True, directory=directory))
        if permissions is not None:
            entries = acl.apply_mode(entries, permissions)
            sticky = bool(permissions & acl.STICKY)
        return replace(
            posix, owner=owner or posix.owner, group=group or posix.group, entries=entries, sticky=sticky
        )

    if not c.path:  # the root directory (``/``; the SDK's ``get_directory_client("/")``)
        container = await c.dfs.update_root(
            c.call.route.account, c.filesystem, lambda posix: changed(posix, True), conditions(headers)
        )
        return Response(200, [*etag_headers(container.ticks), _NAMESPACE])

    def change(record: BlobRecord, ticks: int) -> BlobRecord:
        # An ACL is no content nor property: the path keeps its ETag and Last-Modified (recorded
        # for azure-storage-file-datalake's test_set_access_control*, read back by Get Access
        # Control), and Azure answers with x-ms-namespace-enabled.
        new = changed(posix_of(record), is_directory(record))
        return replace(record, posix=new.stored())

    record = await c.dfs.update(c.key, change, conditions(headers), _lease(headers))
    return Response(200, [*_record_headers(record), _NAMESPACE])


MAX_RECORDS = 2000  # Set Access Control Recursive's batch when maxRecords is not given (assumed)


def _recursive_change(mode: RecursiveMode, text: str) -> Callable[[BlobRecord, int], BlobRecord]:
    """How one path's ACL changes in a recursive set, modify or remove; a file takes the access
    entries only (default entries are a directory's)."""
    if mode is RecursiveMode.REMOVE:
        keys = acl.parse_removal(text)
    else:
        entries = acl.parse_acl(text, full=mode is RecursiveMode.SET, directory=True)

    def change(record: BlobRecord, ticks: int) -> BlobRecord:
        posix = posix_of(record)
        directory = is_directory(record)
        if mode is RecursiveMode.REMOVE:
            new = acl.remove(posix.entries, [key for key in keys if directory or not key[0]])
        else:
            mine = [entry for entry in entries if directory or not entry.default]
            if mode is RecursiveMode.SET:
                new = acl.complete(mine)
            else:
                new = acl.modify(posix.entries, mine, directory=directory)
        return replace(record, posix=replace(posix, entries=new).stored())  # ETag kept, as by Set

    return change


async def set_access_control_recursive(c: DfsCall) -> Response:
    mode = recursive_mode(c.query)
    text = c.headers.get("x-ms-acl")
    if not text:
        raise ServiceError("MissingRequiredHeader", fields=(("HeaderName", "x-ms-acl"),))
    change = _recursive_change(mode, text)
    limit = count(c.query, "maxRecords", minimum=1) or MAX_RECORDS
    token = c.query.get("continuation")
    try:
        after = formats.decode_continuation(token) if token else None
    except ServiceError:
        # a token Azure never gave changes nothing and ends the walk: 200 with every count 0 and
        # no continuation (Go SDK recording go/sdk/storage/azdatalake/testdata/recordings/Test/
        # TestDirSetAccessControlRecursiveWithBadContinuation.json, x-ms-version 2023-08-03)
        return Response(200, [_NAMESPACE], formats.acl_recursive_result(0, 0, 0, []))
    todo: list[BlobRecord] = []
    directories = files = 0
    if after is None and not c.path:  # the root directory first, in the file system's record

        def root_change(posix: Posix) -> Posix:
            record = change(BlobRecord("", "", "BlockBlob", 0, 0, 0, posix=posix.stored(),
                                       metadata={"hdi_isfolder": "true"}), 0)  # fmt: skip
            return posix_of(record)

        await c.dfs.update_root(c.call.route.account, c.filesystem, root_change)
        directories += 1
        limit = max(limit - 1, 1)  # a token of the root's own name would be empty: go on now
    elif after is None:
        todo.append(await c.dfs.get(c.key))
    last: str | None = None
    if not todo or is_directory(todo[0]):
        records, last = (
            await c.dfs.list_paths(c.call.route.account, c.filesystem, c.path, True, after, limit - len(todo))
            if limit > len(todo)
            else ([], c.path)
        )
        todo.extend(records)
    failures: list[formats.AclFailure] = []
    go_on = c.query.get("forceFlag", "").lower() == "true"
    for record in todo:
        if not _may_set_acl(c.principal, record):
            failures.append(formats.AclFailure(record.name, is_directory(record), _NOT_OWNER))
            if not go_on:  # Azure stops at the first failure, with no continuation: the caller
                last = None  # retries from the token it sent (the SDK hands that one back)
                break
            continue
        await c.dfs.update(BlobKey(c.call.route.account, c.filesystem, record.name), change)
        if is_directory(record):
            directories += 1
        else:
            files += 1
    headers: Headers = [_NAMESPACE]
    if last is not None:
        headers.append((formats.CONTINUATION, formats.encode_continuation(last).encode()))
    body = formats.acl_recursive_result(directories, files, len(failures), failures)
    # Azure sends this JSON with no Content-Type at all (the .NET, JS and Python SDKs' recordings
    # of setAccessControlRecursive, x-ms-version 2019-12-12 to 2024-08-04); the SDKs read a body
    # without one as JSON.
    return Response(200, headers, body)


_NOT_OWNER = "This request is not authorized to perform this operation using this permission."


def _may_set_acl(principal: acl.Principal, record: BlobRecord) -> bool:
    """Set Access Control Recursive changes only what the caller may change: a path a token's
    user (or a SAS's ``suoid``) does not own is a failed entry, not a refused request
    ("Set access control lists recursively": failures are counted per entry)."""
    return principal.superuser or principal.oid == posix_of(record).owner


async def get_access_control(c: DfsCall) -> Response:
    if not c.path:  # the root directory: kept in the file system's record
        container = await _container(c)
        check(conditions(c.headers), container.ticks, read=True)
        posix, headers = root_posix(container), etag_headers(container.ticks)
    else:
        record = await c.dfs.get(c.key)
        check(conditions(c.headers), record.ticks, read=True)
        posix, headers = posix_of(record), _record_headers(record)
    headers.extend(
        formats.access_control_headers(posix.owner, posix.group, posix.permissions, posix.acl_text)
    )
    # No Content-Length, as Azure answers it (the az CLI's `fs access show`, Azure/azure-cli
    # storage recordings test_adls_file_scenarios.yaml at 2020-02-10, and azure-storage-file-
    # datalake's test_file.pyTestFiletest_get_access_control.json at 2025-07-05: Date, ETag,
    # Last-Modified, Server, the access headers and x-ms-version alone).
    return Response(200, headers, unsized=True)


# Get Blob Properties and Get Blob on an HNS account answer ``x-ms-acl`` from this version on
# (Learn, "Version 2023-11-03"; recorded: absent at 2023-01-03 and 2023-08-03 in the Java SDK's
# FileApiTest.getPropertiesDefault and renameSasToken, and at 2021-12-02 in the C++ SDK's
# DataLakeFileClientTest.FlushFileWithLease; present at 2023-11-03 in its DataLakePathClientTest.
# GetPropertiesAccessControlList and at 2024-08-04 in the .NET SDK's FileClientTests/GetPropertiesAsync).
BLOB_ACL_VERSION = "2023-11-03"
# ... and ``x-ms-owner``, ``x-ms-group`` and ``x-ms-permissions`` from this one (Learn, "Version
# 2020-06-12"; recorded: none of them, nor ``x-ms-resource-type``, at 2019-02-02 in the Java
# SDK's FileApiTest.perCallPolicy). ``x-ms-resource-type`` is taken to come with them: the
# versions between are not recorded.
BLOB_POSIX_VERSION = "2020-06-12"


def path_headers(record: BlobRecord, *, acl: bool = True, posix: bool = True) -> Headers:
    """What Get Properties (and the Blob API's HEAD and GET on an HNS account) add for a path;
    ``acl=False`` leaves out ``x-ms-acl`` (the Blob API before :data:`BLOB_ACL_VERSION`),
    ``posix=False`` the resource type, owner, group and permissions too (before
    :data:`BLOB_POSIX_VERSION`)."""
    access = posix_of(record)
    headers = [formats.resource_type_header(is_directory(record))] if posix else []
    expires = _expiry_of(record)
    if expires is not None:
        headers.append((b"x-ms-expiry-time", formats.http_date(expires).encode()))
    if posix:
        acl_text = access.acl_text if acl else None
        headers.extend(
            formats.access_control_headers(access.owner, access.group, access.permissions, acl_text)
        )
    if access.context is not None:
        headers.append((b"x-ms-encryption-context", access.context.encode()))
    return headers


_LEASE_HEADERS = frozenset({b"x-ms-lease-status", b"x-ms-lease-state", b"x-ms-lease-duration"})


def query_headers(headers: Headers, record: BlobRecord) -> Headers:
    """Query Blob Contents of a path of an HNS account: its answer carries the path's
    ``x-ms-resource-type`` and none of the blob's lease headers (recorded: the Java SDK's
    FileApiTest.queryFatalError at 2023-01-03 and the .NET SDK's FileClientTests/QueryAsync_Min
    at 2024-08-04, and the C++ SDK's DataLakeFileClientTest.QueryWithError and
    QueryBlobAccessConditionLeaseId at 2021-04-10; a flat account's answer has
    ``x-ms-lease-state`` and ``x-ms-lease-status``, the Java SDK's BlobBaseApiTests.queryFatalError)."""
    kept = [pair for pair in headers if pair[0] not in _LEASE_HEADERS]
    return [*kept, formats.resource_type_header(is_directory(record))]


async def get_properties(c: DfsCall) -> Response:
    response = await blob_handlers.get_blob_properties(c.call)
    record = await c.dfs.get(c.key)
    response.headers.extend(path_headers(record))
    metadata = {k: v for k, v in record.metadata.items() if k.lower() != "hdi_isfolder"}
    response.headers.append((b"x-ms-properties", formats.render_properties(metadata).encode()))
    return response


# What Get Properties with ``action=getStatus`` answers: the path's system properties only (Go
# SDK recording go/sdk/storage/azdatalake/testdata/recordings/Test/TestDirGetPathProperties.json,
# x-ms-version 2025-07-05, a directory: ETag, Last-Modified, creation time, owner, group,
# permissions, resource type, server-encrypted). No ACL, metadata, properties, content headers,
# lease or tier; what else a file's answer carries (its expiry, say) is not recorded.
_STATUS_HEADERS = frozenset(
    {
        b"etag", b"last-modified", b"content-length", b"x-ms-creation-time", b"x-ms-server-encrypted",
        b"x-ms-resource-type", b"x-ms-owner", b"x-ms-group", b"x-ms-permissions",
    }
)  # fmt: skip


async def get_status(c: DfsCall) -> Response:
    response = await get_properties(c)
    response.headers = [(name, value) for name, value in response.headers if name.lower() in _STATUS_HEADERS]
    return response


async def delete_path(c: DfsCall) -> Response:
    """Delete Path: a kept (soft) deletion answers its id and ``x-ms-delete-type-permanent:
    false``, one gone for good ``true`` (both recorded: test_delete_directory on a soft-delete
    account, test_delete_file on one without); a directory too large for one request answers
    ``x-ms-continuation``, which the SDK sends back until none comes (the token names the
    directory: the next request deletes what remains of it)."""
    recursive = flag(c.query, "recursive")
    token = c.query.get("continuation")
    if token and formats.decode_continuation(token) != c.path:
        raise invalid_parameter("continuation", token)
    done = await c.dfs.delete(c.key, recursive, conditions(c.headers), _lease(c.headers))
    headers: Headers = []
    if not done.finished:
        headers.append((formats.CONTINUATION, formats.encode_continuation(c.path).encode()))
    if done.deletion_id is not None:
        headers.append((b"x-ms-deletion-id", done.deletion_id.encode()))
        headers.append((b"x-ms-delete-type-permanent", b"false"))
    elif done.finished:  # a piece of a larger delete: Azure's answer is not recorded
        headers.append((b"x-ms-delete-type-permanent", b"true"))
    return Response(200, headers)


def deletion_of(source: str) -> tuple[str | None, str]:
    """``x-ms-undelete-source``: ``{path}?deletionid={id}``, the path percent-encoded, without
    the account and file system ("Undelete Blob"), as the Python SDK writes it; or the query
    alone, ``?deletionid={id}``, as the .NET SDK writes it, for the request's own path (None
    here; Azure restores it, recorded for the .NET SDK's UndeletePathAsync). 400
    ``InvalidHeaderValue`` for no ``deletionid``, one that is not a number, or a path without a
    name, naming the whole header as its value (recorded: the Java SDK's
    SoftDeleteTests.restorePathError, ``?deletionid=bar``, 2023-01-03, even in a file system
    that does not exist)."""
    location, mark, query = source.partition("?")
    fields = dict(parse_qsl(query, keep_blank_values=True))
    deletion = fields.get("deletionid")
    if not mark or not deletion or not is_deletion_id(deletion) or (location and not location.strip("/")):
        raise ServiceError(
            "InvalidHeaderValue", fields=(("HeaderName", "x-ms-undelete-source"), ("HeaderValue", source))
        )
    return (normalize(unquote(location)) if location else None), deletion


async def undelete_path(c: DfsCall) -> Response:
    """Undelete Path (``comp=undelete`` with ``x-ms-undelete-source``): the deleted path comes
    back at its own name (a source naming another path is 400: Azure restores in place), 200
    with its ``x-ms-resource-type``, which the SDK reads to return a file or directory client."""
    path, deletion = deletion_of(c.headers["x-ms-undelete-source"])
    if path is not None and path != c.path:
        raise ServiceError(
            "InvalidHeaderValue",
            fields=(
                ("HeaderName", "x-ms-undelete-source"),
                ("HeaderValue", c.headers["x-ms-undelete-source"]),
            ),
        )
    record = await c.dfs.undelete(c.key, deletion)
    # As Azure answers the .NET SDK's UndeletePathAsync (recorded, 2021-06-08): the restored
    # path's creation time and resource type, no ETag or Last-Modified.
    created = (b"x-ms-creation-time", blob_http_date(record.created).encode())
    return Response(200, [created, formats.resource_type_header(is_directory(record))])


def _max_results(query: dict[str, str]) -> int:
    """``maxResults`` (the DFS SDK's spelling) or ``maxresults``: 1 to 5000, 5000 when absent."""
    name = "maxResults" if "maxResults" in query else "maxresults"
    return min(count(query, name, minimum=1) or MAX_LIST, MAX_LIST)


async def list_deleted_paths(c: DfsCall) -> Response:
    """List Deleted Paths in the Blob API's form (the SDK sends it to the Blob endpoint)."""
    query = c.query
    limit = _max_results(query)
    records, next_marker = await c.dfs.list_deleted(
        c.call.route.account, c.filesystem, query.get("prefix", ""), query.get("marker") or None, limit
    )
    items = [
        formats.DeletedItem(
            name=record.name,
            deletion_id=deletion_id(record.snapshot),
            is_directory=is_directory(record),
            content_length=record.size,
            created=_moment(record.created),
            last_modified=_moment(record.ticks),
            etag=etag_of(record.ticks),
            deleted=datetime.fromtimestamp(record.deleted_time or 0.0, UTC),
            remaining_days=c.call.service.remaining_days(record),
            purge=datetime.fromtimestamp(softdeletion.purge_at(record), UTC),
            properties=record.properties,
        )
        for record in records
    ]
    body = formats.list_deleted_paths(
        c.call.route.base,
        c.filesystem,
        items,
        prefix=query.get("prefix", ""),
        marker=query.get("marker", ""),
        max_results=query.get("maxResults", query.get("maxresults", "")),
        next_marker=next_marker,
    )
    return Response(200, [(b"content-type", b"application/xml")], body)


async def lease(c: DfsCall) -> Response:
    request = lease_request(c.call.request)
    outcome = await c.call.service.lease_blob(c.key, request, conditions(c.headers))
    return lease_response(request, outcome)


async def read(c: DfsCall) -> Response:
    await c.dfs.get(c.key)  # an expired file is gone
    response = await blob_handlers.get_blob(c.call)
    return response


async def not_implemented(c: DfsCall) -> Response:
    raise ServiceError("NotImplemented")


HANDLERS: dict[DfsOperation, Callable[[DfsCall], Awaitable[Response]]] = {
    DfsOperation.LIST_FILESYSTEMS: list_filesystems,
    DfsOperation.CREATE_FILESYSTEM: create_filesystem,
    DfsOperation.DELETE_FILESYSTEM: delete_filesystem,
    DfsOperation.GET_FILESYSTEM_PROPERTIES: get_filesystem_properties,
    DfsOperation.SET_FILESYSTEM_PROPERTIES: set_filesystem_properties,
    DfsOperation.LIST_PATHS: list_paths,
    DfsOperation.CREATE_FILE: create_path,
    DfsOperation.CREATE_DIRECTORY: create_path,
    DfsOperation.RENAME: rename,
    DfsOperation.APPEND: append,
    DfsOperation.CONCURRENT_APPEND: append_files.concurrent_append,
    DfsOperation.FLUSH: flush,
    DfsOperation.SET_PROPERTIES: set_properties,
    DfsOperation.SET_ACCESS_CONTROL: set_access_control,
    DfsOperation.SET_ACCESS_CONTROL_RECURSIVE: set_access_control_recursive,
    DfsOperation.READ: read,
    DfsOperation.GET_PROPERTIES: get_properties,
    DfsOperation.GET_STATUS: get_status,
    DfsOperation.GET_ACCESS_CONTROL: get_access_control,
    DfsOperation.DELETE_PATH: delete_path,
    DfsOperation.LEASE: lease,
    DfsOperation.SET_EXPIRY: set_expiry,
    DfsOperation.UNDELETE: undelete_path,
    DfsOperation.LIST_DELETED_PATHS: list_deleted_paths,
}
