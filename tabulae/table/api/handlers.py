"""Handlers for the table and entity operations: HTTP in, service call, HTTP out."""

from __future__ import annotations

from tabulae.http.frontend import Call
from tabulae.http.messages import NO_CACHE, NOSNIFF, Headers, Request, Response
from tabulae.model.entity import Entity, StoredEntity, entity_from_body, parse_json_pairs
from tabulae.model.errors import ServiceError
from tabulae.model.mutation import Mutation, MutationKind
from tabulae.table.api import odata
from tabulae.table.api.operations import Operation, write_condition
from tabulae.table.api.routing import Route
from tabulae.table.service import TableService, check_top

TableCall = Call[TableService, Route]
"""A Table request as its handler sees it."""

UNSUPPORTED_OPTIONS = ("$orderby", "$skip", "$expand", "$inlinecount", "$count", "$search", "$skiptoken")
_PREFER_VALUES = ("return-content", "return-no-content")
# Response headers Azure names in Access-Control-Expose-Headers besides a CORS rule's own list.
EXPOSED_HEADERS = (
    "x-ms-request-id,x-ms-client-request-id,Server,x-ms-version,X-Content-Type-Options,Cache-Control,"
    "x-ms-continuation-NextPartitionKey,x-ms-continuation-NextRowKey,x-ms-continuation-NextTableName,"
    "Content-Type,Content-Length,Date,ETag,Location,Preference-Applied,DataServiceId,x-ms-error-code"
)


def json_response(status: int, body: bytes, level: str, extra: Headers | None = None) -> Response:
    headers: Headers = [NO_CACHE, NOSNIFF, (b"content-type", odata.CONTENT_TYPES[level])]
    if extra:
        headers.extend(extra)
    return Response(status, headers, body)


def empty_response(status: int, extra: Headers | None = None) -> Response:
    """An OData answer without a body (204): ``X-Content-Type-Options: nosniff`` as on every
    OData answer of Azure's (recorded for the .NET SDK: Insert Entity with ``return-no-content``,
    Insert Or Merge, Delete Table)."""
    headers: Headers = [NO_CACHE, NOSNIFF]
    if extra:
        headers.extend(extra)
    return Response(status, headers, b"")


def prefer(request: Request) -> str | None:
    """The client's ``Prefer`` choice, if it is one the service honours."""
    value = request.headers.get("prefer")
    if value is None:
        return None
    value = value.strip().lower()
    return value if value in _PREFER_VALUES else None


def level_of(request: Request) -> str:
    return odata.metadata_level(request.headers.get("accept"), request.query.get("$format"))


def check_request_content_type(request: Request) -> None:
    content_type = request.headers.get("content-type", "")
    media = content_type.split(";", 1)[0].strip().lower()
    if media == "application/atom+xml":
        raise ServiceError("AtomFormatNotSupported")
    if media and media not in ("application/json", "text/json", "application/octet-stream", "text/plain"):
        raise ServiceError("MediaTypeNotSupported")


def parse_select(request: Request) -> list[str] | None:
    text = request.query.get("$select")
    if not text or text.strip() == "*":
        return None
    names = [name.strip() for name in text.split(",")]
    if any(not name for name in names):
        raise ServiceError("InvalidInput")
    return names


def if_match(request: Request, verb: str) -> str | None:
    """The ``If-Match`` condition after the header rules of "Update Entity"."""
    return write_condition(request.headers.get("if-match"), request.headers.get("if-none-match"), verb)


def etag_header(entity: StoredEntity) -> tuple[bytes, bytes]:
    return (b"etag", entity.etag.encode("ascii"))


def cost_headers(query_class: str, scanned: int) -> Headers:
    """What a read cost, on every query response: its class (README, "Seeing what your design
    costs") and the entities or table names examined for it."""
    return [(b"x-tabulae-query-class", query_class.encode()), (b"x-tabulae-scanned", str(scanned).encode())]


POINT_READ = cost_headers("point", 1)


# ---------------------------------------------------------------------------------- tables


async def query_tables(call: TableCall) -> Response:
    service, request, route = call.service, call.request, call.route
    level = level_of(request)
    for option in UNSUPPORTED_OPTIONS:
        if option in request.query:
            raise ServiceError("InvalidInput")
    page = await service.query_tables(
        route.account,
        request.query.get("$filter") or None,
        check_top(request.query.get("$top")),
        request.query_ci("NextTableName") or None,
    )
    extra = cost_headers("table-scan", page.scanned)
    if page.next_token:
        extra.append((b"x-ms-continuation-nexttablename", page.next_token.encode("ascii")))
    return json_response(200, odata.render_tables(route.base, route.account, page.names, level), level, extra)


async def create_table(call: TableCall) -> Response:
    service, request, route = call.service, call.request, call.route
    level = level_of(request)
    preference = prefer(request)
    applied: Headers = [(b"preference-applied", preference.encode())] if preference else []
    check_request_content_type(request)
    try:
        pairs = parse_json_pairs(request.body)
        names = [value for key, value in pairs if key == "TableName"]
        if len(names) != 1 or not isinstance(names[0], str):
            raise ServiceError("InvalidInput")
        name = await service.create_table(route.account, names[0])
    except ServiceError as exc:
        exc.headers = applied
        raise
    location = f"{route.base}/{odata.table_path(name)}".encode()
    if preference == "return-no-content":
        return empty_response(204, [(b"location", location), (b"dataserviceid", location), *applied])
    body = odata.render_table(route.base, route.account, name, level)
    return json_response(201, body, level, [(b"location", location), *applied])


async def delete_table(call: TableCall) -> Response:
    service, route = call.service, call.route
    assert route.table is not None
    await service.delete_table(route.account, route.table)
    return empty_response(204)


async def get_table(call: TableCall) -> Response:
    service, request, route = call.service, call.request, call.route
    assert route.table is not None
    level = level_of(request)
    name = await service.get_table(route.account, route.table)
    return json_response(200, odata.render_table(route.base, route.account, name, level), level, POINT_READ)


# ---------------------------------------------------------------------------------- entities


async def query_entities(call: TableCall) -> Response:
    service, request, route = call.service, call.request, call.route
    assert route.table is not None
    level = level_of(request)
    for option in UNSUPPORTED_OPTIONS:
        if option in request.query:
            raise ServiceError("InvalidInput")
    select = parse_select(request)
    page = await service.query_entities(
        route.account,
        route.table,
        request.query.get("$filter") or None,
        check_top(request.query.get("$top")),
        request.query_ci("NextPartitionKey") or None,
        request.query_ci("NextRowKey") or None,
        key_range=request.grant.key_range if request.grant is not None else None,
    )
    extra = cost_headers(page.query_class, page.scanned)
    if page.next_partition_token and page.next_row_token:
        extra.append((b"x-ms-continuation-nextpartitionkey", page.next_partition_token.encode("ascii")))
        extra.append((b"x-ms-continuation-nextrowkey", page.next_row_token.encode("ascii")))
    body = odata.render_entities(page.entities, route.base, route.account, route.table, level, select)
    return json_response(200, body, level, extra)


async def get_entity(call: TableCall) -> Response:
    service, request, route = call.service, call.request, call.route
    assert route.table is not None and route.pk is not None and route.rk is not None
    level = level_of(request)
    select = parse_select(request)
    entity = await service.get_entity(route.account, route.table, route.pk, route.rk)
    body = odata.render_entity(entity, route.base, route.account, route.table, level, select)
    return json_response(200, body, level, [etag_header(entity), *POINT_READ])


def read_entity(request: Request, url_keys: tuple[str, str] | None) -> Entity:
    """The request's entity. A caller that fails here asks ``require_table`` before answering:
    Azure reports a missing table ahead of a bad body ("Insert Entity"), and the write itself finds
    the table on the path where the body is good, so that path pays no extra lookup."""
    check_request_content_type(request)
    return entity_from_body(request.body, url_keys)


async def insert_entity(call: TableCall) -> Response:
    service, request, route = call.service, call.request, call.route
    assert route.table is not None
    level = level_of(request)
    preference = prefer(request)
    try:
        entity = read_entity(request, None)
        if request.grant is not None:
            request.grant.check(Operation.INSERT_ENTITY, pk=entity.pk, rk=entity.rk)
    except ServiceError:
        await service.require_table(route.account, route.table)
        raise
    stored = await service.write(
        route.account, route.table, Mutation(MutationKind.INSERT, entity.pk, entity.rk, entity.properties)
    )
    assert stored is not None
    return insert_response(stored, route, level, preference)


def insert_response(stored: StoredEntity, route: Route, level: str, preference: str | None) -> Response:
    assert route.table is not None
    location = f"{route.base}/{odata.key_path(route.table, stored.pk, stored.rk)}".encode()
    applied: Headers = [(b"preference-applied", preference.encode())] if preference else []
    if preference == "return-no-content":
        return empty_response(
            204, [etag_header(stored), (b"location", location), (b"dataserviceid", location), *applied]
        )
    body = odata.render_entity(stored, route.base, route.account, route.table, level)
    return json_response(201, body, level, [etag_header(stored), (b"location", location), *applied])


async def replace_or_merge(call: TableCall, kind: MutationKind) -> Response:
    """Update/Merge with If-Match; Insert Or Replace/Insert Or Merge without it."""
    service, request, route = call.service, call.request, call.route
    assert route.table is not None and route.pk is not None and route.rk is not None
    condition = if_match(request, "PUT" if kind is MutationKind.REPLACE else "MERGE")
    try:
        entity = read_entity(request, (route.pk, route.rk))
    except ServiceError:
        await service.require_table(route.account, route.table)
        raise
    stored = await service.write(
        route.account, route.table, Mutation(kind, route.pk, route.rk, entity.properties, condition)
    )
    assert stored is not None
    return empty_response(204, [etag_header(stored)])


async def delete_entity(call: TableCall) -> Response:
    service, request, route = call.service, call.request, call.route
    assert route.table is not None and route.pk is not None and route.rk is not None
    condition = if_match(request, "DELETE")
    if condition is None:
        raise ServiceError("UpdateConditionNotSatisfied")  # If-Match is required ("Delete Entity")
    await service.write(
        route.account, route.table, Mutation(MutationKind.DELETE, route.pk, route.rk, None, condition)
    )
    return empty_response(204)


# ---------------------------------------------------------------------------- nested paths


async def nested(call: TableCall, operation: Operation) -> Response:
    """A request to ``{table}/{segment}`` (``routing.Resource.NESTED``), answered as Azure does
    when a client's endpoint already ends in the table name: the path addresses that table's
    entities. A POST is an entity insert there, so ``POST {endpoint}/Tables`` with
    ``{"TableName": …}`` is ``PropertiesNeedValue`` and ``POST {endpoint}/$batch`` (multipart)
    ``MediaTypeNotSupported``; any other method names an entity without its keys, so
    ``DELETE {endpoint}/Tables('t')`` is ``InvalidInput`` about the number of keys, and a GET of a
    segment without keys is ``NotImplemented``. A missing table is ``TableNotFound`` first."""
    service, route = call.service, call.route
    assert route.table is not None and route.nested is not None
    if operation is Operation.INSERT_ENTITY:
        return await insert_entity(call)
    await service.require_table(route.account, route.table)
    if operation is Operation.QUERY_ENTITIES and "(" not in route.nested:
        raise ServiceError("NotImplemented")
    raise ServiceError(
        "InvalidInput",
        "The number of keys specified in the URI does not match number of key properties for the "
        f"resource '{route.account}.{route.table}'.",
    )
