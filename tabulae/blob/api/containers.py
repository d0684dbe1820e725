"""Handlers of the account-level and container operations: HTTP in, service call, HTTP out."""

from __future__ import annotations

from email.utils import formatdate

from tabulae.blob.api import encryption, formats
from tabulae.blob.api.call import Call
from tabulae.blob.api.headers import bad_header, conditions, etag_headers
from tabulae.blob.api.operations import invalid_parameter
from tabulae.blob.rules import container_worm, leases
from tabulae.blob.rules.properties import PERMANENT_DELETE_VERSION
from tabulae.blob.service import MAX_RESULTS, LeaseOutcome, LeaseRequest
from tabulae.http.acl_ids import check_identifier_ids
from tabulae.http.documents import (
    BLOB_PERMISSIONS,
    NO_PLACE,
    parse_acl,
    render_acl,
    render_stats,
    stats_on_primary,
)
from tabulae.http.errors import UTF8_BOM, XML_CONTENT_TYPE
from tabulae.http.messages import Headers, Request, Response
from tabulae.http.metadata import metadata_headers, request_metadata
from tabulae.model.errors import ServiceError

_PUBLIC_ACCESS = ("container", "blob")
_LEASE_ACTIONS = ("acquire", "renew", "change", "release", "break")
_FIXED_CONTAINER_HEADERS: Headers = [
    (b"x-ms-immutable-storage-with-versioning-enabled", b"false"),
]
# A premium page blob account is a general-purpose v2 account of the Premium_LRS SKU ("Storage
# account overview"; the resource provider's SKU types list Premium_LRS for StorageV2).
_KIND = (b"x-ms-account-kind", b"StorageV2")
_STANDARD = (b"x-ms-sku-name", b"Standard_LRS")
_PREMIUM = (b"x-ms-sku-name", b"Premium_LRS")


def xml(body: bytes, status: int = 200, extra: Headers | None = None) -> Response:
    """An XML answer as Azure's Blob service writes it: the UTF-8 byte order mark, then the
    document (every XML body recorded from Azure starts with it, a listing as an error; the SDKs
    skip it, a client reading the bytes sees it)."""
    headers: Headers = [(b"content-type", XML_CONTENT_TYPE)]
    if extra:
        headers.extend(extra)
    return Response(status, headers, UTF8_BOM + body)


def max_results(query: dict[str, str]) -> int:
    """``maxresults``: 1 to 5000 (more is capped), 5000 when absent."""
    value = query.get("maxresults")
    if value is None:
        return MAX_RESULTS
    try:
        number = int(value)
    except ValueError:
        raise invalid_parameter("maxresults", value) from None
    if number <= 0:
        raise ServiceError(
            "OutOfRangeQueryParameterValue",
            fields=(("QueryParameterName", "maxresults"), ("QueryParameterValue", value)),
        )
    return min(number, MAX_RESULTS)


def includes(query: dict[str, str], allowed: frozenset[str]) -> frozenset[str]:
    value = query.get("include")
    if not value:
        return frozenset()
    names = frozenset(part.strip().lower() for part in value.split(",") if part.strip())
    unknown = names - allowed
    if unknown:
        raise invalid_parameter("include", value)
    return names


def public_access(request: Request) -> str | None:
    value = request.headers.get("x-ms-blob-public-access")
    if value is None or value == "":
        return None
    if value not in _PUBLIC_ACCESS:
        raise bad_header("x-ms-blob-public-access", value)
    return value


def lease_request(request: Request) -> LeaseRequest:
    headers = request.headers
    action = headers.get("x-ms-lease-action")
    if action is None:
        raise ServiceError("MissingRequiredHeader", fields=(("HeaderName", "x-ms-lease-action"),))
    if action.lower() not in _LEASE_ACTIONS:
        raise bad_header("x-ms-lease-action", action)
    action = action.lower()
    return LeaseRequest(
        action=action,
        lease_id=leases.parse_lease_id(headers.get("x-ms-lease-id"), "x-ms-lease-id"),
        proposed_id=leases.parse_lease_id(headers.get("x-ms-proposed-lease-id"), "x-ms-proposed-lease-id"),
        duration=leases.parse_duration(headers.get("x-ms-lease-duration")) if action == "acquire" else -1,
        break_period=leases.parse_break_period(headers.get("x-ms-lease-break-period")),
    )


def lease_response(request: LeaseRequest, outcome: LeaseOutcome) -> Response:
    headers = etag_headers(outcome.ticks)
    if request.action == "break":
        headers.append((b"x-ms-lease-time", str(outcome.break_seconds).encode()))
        return Response(202, headers)
    if request.action != "release" and outcome.lease.lease_id:
        headers.append((b"x-ms-lease-id", outcome.lease.lease_id.encode()))
    return Response(201 if request.action == "acquire" else 200, headers)


# ------------------------------------------------------------------------------ account


def marker_start(account: str, marker: str | None) -> str | None:
    """The container name a List Containers ``marker`` resumes at. Azure's ``NextMarker`` is
    ``/<account>/<container>``, naming the first container of the next page (recordings of real
    Azure: ``/fakeaccountname/container…x2``, then a page starting with ``container…x2``). Any
    other marker is 400 OutOfRangeInput, as Azure answered the .NET SDK's ``marker=garbage``
    (ListContainersSegmentAsync_Error); a bare name, which this server once wrote, is one."""
    if not marker:
        return None
    head = f"/{account}/"
    if not marker.startswith(head) or len(marker) == len(head):
        raise ServiceError("OutOfRangeInput")
    return marker[len(head) :]


async def list_containers(call: Call) -> Response:
    query = call.request.query
    limit = max_results(query)
    include = includes(query, frozenset({"metadata", "deleted", "system"}))
    account = call.route.account
    found, next_name = await call.service.list_containers(
        account,
        query.get("prefix", ""),
        marker_start(account, query.get("marker")),
        limit,
        system="system" in include,
    )
    next_marker = None if next_name is None else f"/{account}/{next_name}"
    listed = [(record, call.service.lease_state(record.lease)) for record in found]
    deleted = []
    if "deleted" in include and next_marker is None:  # on the last page, after the live ones
        deleted = await call.service.deleted_containers(call.route.account, query.get("prefix", ""))
    body = formats.render_containers(
        call.route.base,
        query.get("prefix", ""),
        query.get("marker", ""),
        query.get("maxresults", ""),
        listed,
        "metadata" in include,
        next_marker,
        deleted=[(d.name, d.version, d.deletion.time.timestamp(), days, kept) for d, days, kept in deleted],
    )
    return xml(body)


async def restore_container(call: Call) -> Response:
    """Restore Container (``comp=undelete``): 201 with the restored container's name."""
    headers = call.request.headers
    await call.service.restore_container(
        call.route.account,
        call.route.container,
        headers.get("x-ms-deleted-container-name"),
        headers.get("x-ms-deleted-container-version"),
    )
    return Response(201)


async def get_service_properties(call: Call) -> Response:
    properties = await call.service.get_service_properties(call.route.account)
    permanent_delete = call.version >= PERMANENT_DELETE_VERSION
    return xml(formats.render_service_properties_blob(properties, permanent_delete=permanent_delete))


async def set_service_properties(call: Call) -> Response:
    body = await call.document()
    current = await call.service.get_service_properties(call.route.account)
    updated = formats.parse_service_properties_blob(body, current)
    await call.service.set_service_properties(call.route.account, updated)
    return Response(202)


async def get_service_stats(call: Call) -> Response:
    """The secondary endpoint's replication status; the primary refuses the request."""
    if not call.route.secondary:
        raise stats_on_primary()
    return xml(render_stats(formatdate(usegmt=True)))


# Get Account Information answers x-ms-is-hns-enabled from this version ("Get Account
# Information": 2019-07-07 and later), as Azure answered the JS SDK: not at 2018-03-28, 2018-11-09
# nor 2019-02-02 (its nock recordings of 2019), false at 2020-02-10 (December 2020).
HNS_HEADER_VERSION = "2019-07-07"


async def get_account_info(call: Call) -> Response:
    features = await call.service.features.get(call.route.account)
    sku = _PREMIUM if features.premium_page_blobs else _STANDARD
    if call.version < HNS_HEADER_VERSION:
        return Response(200, [sku, _KIND])
    return Response(200, [sku, _KIND, (b"x-ms-is-hns-enabled", b"true" if features.hns else b"false")])


# ------------------------------------------------------------------------------ containers


async def create_container(call: Call) -> Response:
    default_scope, deny_override = encryption.container_scope(call)
    record = await call.service.create_container(
        call.route.account,
        call.route.container,
        request_metadata(call.request),
        public_access(call.request),
        default_scope=default_scope,
        deny_scope_override=deny_override,
    )
    return Response(201, etag_headers(record.ticks))


async def delete_container(call: Call) -> Response:
    await call.service.delete_container(
        call.route.account, call.route.container, conditions(call.request.headers), call.lease_id
    )
    return Response(202)


async def get_container_properties(call: Call) -> Response:
    record = await call.service.get_container(call.route.account, call.route.container, call.lease_id)
    headers = etag_headers(record.ticks)
    headers.extend(metadata_headers(record.metadata))
    status, state, duration = call.service.lease_state(record.lease)
    headers.append((b"x-ms-lease-status", status.encode()))
    headers.append((b"x-ms-lease-state", state.encode()))
    if duration:
        headers.append((b"x-ms-lease-duration", duration.encode()))
    if record.public_access:
        headers.append((b"x-ms-blob-public-access", record.public_access.encode()))
    headers.append((b"x-ms-has-immutability-policy", _bool(container_worm.has_policy(record.worm))))
    headers.append((b"x-ms-has-legal-hold", _bool(container_worm.has_hold(record.worm))))
    headers.extend(encryption.container_headers(record.default_scope, record.deny_scope_override))
    headers.extend(_FIXED_CONTAINER_HEADERS)
    return Response(200, headers)


def _bool(value: bool) -> bytes:
    return b"true" if value else b"false"


async def get_container_metadata(call: Call) -> Response:
    record = await call.service.get_container(call.route.account, call.route.container, call.lease_id)
    return Response(200, etag_headers(record.ticks) + metadata_headers(record.metadata))


async def set_container_metadata(call: Call) -> Response:
    record = await call.service.set_container_metadata(
        call.route.account,
        call.route.container,
        request_metadata(call.request),
        conditions(call.request.headers),
        call.lease_id,
    )
    return Response(200, etag_headers(record.ticks))


async def get_container_acl(call: Call) -> Response:
    record = await call.service.get_container(call.route.account, call.route.container, call.lease_id)
    extra = etag_headers(record.ticks)
    if record.public_access:
        extra.append((b"x-ms-blob-public-access", record.public_access.encode()))
    return xml(render_acl(record.acl), extra=extra)


async def set_container_acl(call: Call) -> Response:
    access = public_access(call.request)
    body = await call.document()
    try:
        identifiers = parse_acl(body, BLOB_PERMISSIONS, too_many=NO_PLACE)
    except ServiceError as exc:
        if exc.code == "InvalidXmlNodeValue":
            check_identifier_ids(body)  # Azure's own answer to a bad Id
        raise
    record = await call.service.set_container_acl(
        call.route.account,
        call.route.container,
        access,
        identifiers,
        conditions(call.request.headers),
        call.lease_id,
    )
    return Response(200, etag_headers(record.ticks))


async def lease_container(call: Call) -> Response:
    request = lease_request(call.request)
    outcome = await call.service.lease_container(
        call.route.account, call.route.container, request, conditions(call.request.headers)
    )
    return lease_response(request, outcome)
