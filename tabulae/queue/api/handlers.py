"""Handlers for the Queue service's operations: HTTP in, service call, HTTP out."""

from __future__ import annotations

import re
from email.utils import formatdate

from tabulae.http.acl_ids import check_identifier_ids
from tabulae.http.documents import (
    NO_PLACE,
    QUEUE_PERMISSIONS,
    parse_acl,
    parse_service_properties,
    render_acl,
    render_service_properties,
    render_stats,
    stats_on_primary,
)
from tabulae.http.errors import XML_CONTENT_TYPE
from tabulae.http.frontend import Call
from tabulae.http.messages import NO_CACHE, Headers, Request, Response
from tabulae.http.metadata import metadata_headers, request_metadata
from tabulae.model.errors import ServiceError
from tabulae.queue.api.formats import (
    BOM,
    http_time,
    parse_message_text,
    refuse_self_closed_root,
    render_peeked,
    render_put,
    render_queue_list,
    render_taken,
)
from tabulae.queue.api.routing import Route
from tabulae.queue.service import LATEST_VERSION, QueueService, invalid_parameter, out_of_range

QueueCall = Call[QueueService, Route]
"""A Queue request as its handler sees it."""

_INTEGER = re.compile(r"-?[0-9]{1,18}")
_MAX_INT32 = 2**31 - 1
# Response headers Azure names in Access-Control-Expose-Headers besides a CORS rule's own list.
EXPOSED_HEADERS = (
    "x-ms-request-id,x-ms-client-request-id,Server,x-ms-version,Content-Type,Cache-Control,"
    "Content-Length,Date,x-ms-error-code,x-ms-approximate-messages-count,x-ms-popreceipt,"
    "x-ms-time-next-visible"
)


def xml_response(status: int, body: bytes, *, cache: bool = True) -> Response:
    headers: Headers = [(b"content-type", XML_CONTENT_TYPE)]
    if cache:
        headers.append(NO_CACHE)
    return Response(status, headers, body)


def integer_parameter(request: Request, name: str) -> int | None:
    """An integer query parameter, or None when absent; 400 when it is not an integer."""
    text = request.query.get(name)
    if text is None:
        return None
    if not _INTEGER.fullmatch(text):
        raise invalid_parameter(name, text, "not a valid integer")
    return int(text)


def required(request: Request, name: str) -> str:
    value = request.query.get(name)
    if value is None:
        raise ServiceError("MissingRequiredQueryParameter", fields=(("QueryParameterName", name),))
    return value


def version_of(request: Request) -> str:
    """The version whose rules apply: ``x-ms-version`` (for a request a SAS authorised that
    named none, its ``sv``, which the front-end puts there), else a SAS's ``sv``, else the
    newest."""
    return request.headers.get("x-ms-version") or request.query.get("sv") or LATEST_VERSION


# ---------------------------------------------------------------------------------- service


async def list_queues(call: QueueCall) -> Response:
    service, request, route = call.service, call.request, call.route
    query = request.query
    max_results = integer_parameter(request, "maxresults")
    if max_results is not None and not 1 <= max_results <= _MAX_INT32:
        raise out_of_range("maxresults", max_results, 1, _MAX_INT32)
    include = [item.strip() for item in query.get("include", "").split(",") if item.strip()]
    if any(item != "metadata" for item in include):
        raise invalid_parameter("include", query["include"], "only 'metadata' can be included")
    prefix = query.get("prefix")
    marker = query.get("marker")
    page = await service.list_queues(route.account, prefix or "", marker, max_results)
    body = render_queue_list(
        route.base + "/",
        page.queues,
        prefix=prefix,
        marker=marker,
        max_results=query.get("maxresults"),
        next_marker=page.next_marker,
        with_metadata=bool(include),
    )
    return xml_response(200, body)


async def get_service_properties(call: QueueCall) -> Response:
    service, route = call.service, call.route
    properties = await service.get_service_properties(route.account)
    return xml_response(200, BOM + render_service_properties(properties))


async def set_service_properties(call: QueueCall) -> Response:
    service, request, route = call.service, call.request, call.route
    current = await service.get_service_properties(route.account)
    properties = parse_service_properties(request.body, current, too_many=NO_PLACE)
    refuse_self_closed_root(request.body)
    await service.set_service_properties(route.account, properties)
    return Response(202)


async def get_service_stats(call: QueueCall) -> Response:
    route = call.route
    if not route.secondary:  # only the secondary endpoint has replication to report on
        raise stats_on_primary()
    return xml_response(200, BOM + render_stats(formatdate(usegmt=True)))


# ---------------------------------------------------------------------------------- queues


async def create_queue(call: QueueCall) -> Response:
    service, request, route = call.service, call.request, call.route
    created = await service.create_queue(route.account, route.queue, request_metadata(request))
    return Response(201 if created else 204)


async def delete_queue(call: QueueCall) -> Response:
    service, route = call.service, call.route
    await service.delete_queue(route.account, route.queue)
    return Response(204)


async def get_metadata(call: QueueCall) -> Response:
    service, route = call.service, call.route
    metadata, count = await service.get_queue_properties(route.account, route.queue)
    headers: Headers = [NO_CACHE, (b"x-ms-approximate-messages-count", str(count).encode())]
    headers.extend(metadata_headers(metadata))
    return Response(200, headers)


async def set_metadata(call: QueueCall) -> Response:
    service, request, route = call.service, call.request, call.route
    await service.set_queue_metadata(route.account, route.queue, request_metadata(request))
    return Response(204)


async def get_acl(call: QueueCall) -> Response:
    service, route = call.service, call.route
    identifiers = await service.get_acl(route.account, route.queue)
    return xml_response(200, BOM + render_acl(identifiers))


async def set_acl(call: QueueCall) -> Response:
    service, request, route = call.service, call.request, call.route
    try:
        identifiers = parse_acl(request.body, QUEUE_PERMISSIONS, too_many=NO_PLACE)
    except ServiceError as exc:
        if exc.code == "InvalidXmlNodeValue":
            check_identifier_ids(request.body)  # Azure's own answer to a bad Id
        raise
    await service.set_acl(route.account, route.queue, identifiers)
    return Response(204)


# ---------------------------------------------------------------------------------- messages


async def put_message(call: QueueCall) -> Response:
    service, request, route = call.service, call.request, call.route
    visibility = integer_parameter(request, "visibilitytimeout")
    ttl = integer_parameter(request, "messagettl")
    text = parse_message_text(request.body)
    message = await service.put_message(
        route.account, route.queue, text, visibility, ttl, version_of(request)
    )
    return xml_response(201, render_put(message), cache=False)


async def get_messages(call: QueueCall) -> Response:
    service, request, route = call.service, call.request, call.route
    count = integer_parameter(request, "numofmessages")
    visibility = integer_parameter(request, "visibilitytimeout")
    messages = await service.get_messages(route.account, route.queue, count, visibility)
    return xml_response(200, render_taken(messages))


async def peek_messages(call: QueueCall) -> Response:
    service, request, route = call.service, call.request, call.route
    messages = await service.peek_messages(
        route.account, route.queue, integer_parameter(request, "numofmessages")
    )
    return xml_response(200, render_peeked(messages))


async def clear_messages(call: QueueCall) -> Response:
    service, route = call.service, call.route
    await service.clear_messages(route.account, route.queue)
    return Response(204)


async def update_message(call: QueueCall) -> Response:
    service, request, route = call.service, call.request, call.route
    receipt = required(request, "popreceipt")
    required(request, "visibilitytimeout")
    visibility = integer_parameter(request, "visibilitytimeout")
    assert visibility is not None
    text = parse_message_text(request.body) if request.body.strip() else None
    message = await service.update_message(
        route.account, route.queue, route.message_id, receipt, visibility, text, version_of(request)
    )
    headers: Headers = [
        (b"x-ms-popreceipt", message.receipt.encode("ascii")),
        (b"x-ms-time-next-visible", http_time(message.visible).encode("ascii")),
    ]
    return Response(204, headers)


async def delete_message(call: QueueCall) -> Response:
    service, request, route = call.service, call.request, call.route
    receipt = required(request, "popreceipt")
    await service.delete_message(route.account, route.queue, route.message_id, receipt)
    return Response(204)
