"""Entity group transactions on the wire: ``POST /$batch`` ("Performing entity group transactions").

The multipart codec (:mod:`tabulae.table.api.batch`) turns bytes into sub-requests; this module
turns each sub-request into a :class:`Mutation` with the same checks as its single-request
form, hands the group to the service, and renders one response part per operation, or exactly
one failing part whose message starts with the operation's index.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

from tabulae.http.addressing import is_path_style
from tabulae.http.errors import error_json
from tabulae.http.messages import NO_CACHE, NOSNIFF, Request, Response, error_time
from tabulae.model.entity import StoredEntity, entity_from_body
from tabulae.model.errors import VOLUME_FULL_MESSAGE, ServiceError
from tabulae.model.mutation import Mutation, MutationKind
from tabulae.model.names import SECONDARY_SUFFIX
from tabulae.table.api import odata
from tabulae.table.api.batch import Headers, SubRequest, SubResponse, parse_batch, render_batch_response
from tabulae.table.api.operations import Operation, effective_method, resolve_operation, write_condition
from tabulae.table.api.routing import Resource, Route, resolve
from tabulae.table.service import TableService

_PART_COMMON = (
    ("X-Content-Type-Options", "nosniff"),
    ("Cache-Control", "no-cache"),
    ("DataServiceVersion", "3.0;"),
)


def _part_headers(prefer: str | None) -> list[tuple[str, str]]:
    """The headers every part starts with; a ``Preference-Applied`` goes before
    ``DataServiceVersion``, as Azure writes it in successes and failures alike (Go SDK
    recordings ``go/sdk/data/aztables/testdata/recordings/TestBatchMixed/TestBatchMixed_storage``
    and ``TestBatchError/TestBatchError_storage.json``, x-ms-version 2019-02-02)."""
    if not prefer:
        return list(_PART_COMMON)
    return [*_PART_COMMON[:2], ("Preference-Applied", prefer), _PART_COMMON[2]]


# Called once per sub-operation with (route, operation, PartitionKey, RowKey); it raises to refuse it.
Authorizer = Callable[[Route, Operation, str, str], None]


@dataclass(slots=True)
class _Plan:
    """What a sub-request's method, headers and kind of resource decide, worked out once per batch
    for all the operations that repeat them (an SDK writes every operation of a kind with the same
    headers; only the URL of an update, merge or delete differs, and only in the keys)."""

    operation: Operation
    kind: MutationKind
    level: str
    prefer: str | None
    content_id: str | None  # a Content-ID header of the embedded request (legacy SDKs)
    condition: str | None  # the If-Match of an update, merge or delete
    created: Headers  # an inserted entity's answer: the headers before its Location


def _origin_path(target: str) -> str:
    """The path of an absolute or origin-form target; scheme and host are ignored."""
    if "://" in target:
        after_scheme = target.split("://", 1)[1]
        slash = after_scheme.find("/")
        target = after_scheme[slash:] if slash >= 0 else "/"
    return target.split("?", 1)[0]


def _sub_route(scheme: str, host: str, target: str, batch: Route, accounts: dict[str, list[bytes]]) -> Route:
    """Resolve a sub-request URL against the batch's own endpoint.

    A path-style target that does not start with an account segment is relative to the batch's
    account: the legacy Python SDK, given ``TableEndpoint=http://host/devstoreaccount1``, writes
    ``POST /mytable`` under ``POST /devstoreaccount1/$batch`` (on Azure the account is in the host,
    so that is the ordinary form there). An unknown account is bad input, not an auth failure.
    """
    path = _origin_path(target)
    if is_path_style(host, accounts):
        first = path.lstrip("/").split("/", 1)[0]
        if first not in accounts and first.removesuffix(SECONDARY_SUFFIX) not in accounts:
            path = f"{urlsplit(batch.base).path}{path if path.startswith('/') else '/' + path}"
    try:
        return resolve(scheme, host, path, accounts)
    except ServiceError as exc:
        if exc.code == "AuthenticationFailed":
            raise ServiceError("InvalidInput") from None
        raise


def _header(sub: SubRequest, name: str) -> str | None:
    """A sub-request header; repeated lines are joined with commas, as for a whole request."""
    values = [value for key, value in sub.headers if key == name]
    if not values:
        return None
    return values[0] if len(values) == 1 else ",".join(values)


def _content_id(sub: SubRequest) -> str | None:
    """The ``Content-ID`` Azure echoes in the answer to an operation: a header of the embedded
    request (the legacy SDKs'), as Azure answered the legacy Node SDK in 2014. A ``Content-ID``
    among the part's MIME headers (azure-data-tables, Azure.Data.Tables) is not echoed: Azure's
    answers to azure-data-tables' batches carry none (azure-sdk-assets python/.../recordings/
    test_encoder.pyTestTableEncodertest_encoder_batch.json, x-ms-version 2019-02-02;
    test_table_batch.pyTestTableBatchtest_batch_update.json and ..._same_row_operations_fail.json,
    2025-07-05). The Blob batch echoes the MIME one; that is its own rule."""
    return _header(sub, "content-id")


def _method(sub: SubRequest) -> str:
    return effective_method(
        sub.method.upper(), [value for key, value in sub.headers if key == "x-http-method"]
    )


def _prefer(sub: SubRequest) -> str | None:
    value = (_header(sub, "prefer") or "").strip().lower()
    return value if value in ("return-content", "return-no-content") else None


_KINDS = {
    Operation.INSERT_ENTITY: MutationKind.INSERT,
    Operation.UPDATE_ENTITY: MutationKind.REPLACE,
    Operation.UPSERT_REPLACE: MutationKind.REPLACE,
    Operation.MERGE_ENTITY: MutationKind.MERGE,
    Operation.UPSERT_MERGE: MutationKind.MERGE,
    Operation.DELETE_ENTITY: MutationKind.DELETE,
}


def _operation(sub: SubRequest, route: Route, method: str) -> Operation:
    """The sub-request's operation, resolved as a whole request's is; only writes of entities
    belong in a changeset (a GET there, or any other resource, is bad input)."""
    if route.resource not in (Resource.ENTITIES, Resource.ENTITY):
        raise ServiceError("InvalidInput")
    conditional = _header(sub, "if-match") is not None
    try:
        operation = resolve_operation(route.resource, method, conditional=conditional)
    except ServiceError:
        raise ServiceError("InvalidInput") from None
    if operation not in _KINDS:
        raise ServiceError("InvalidInput")
    return operation


def _plan(sub: SubRequest, route: Route) -> _Plan:
    """Resolve the operation, the response's metadata level and the write condition, in the order
    a whole request checks them (each may refuse the operation)."""
    operation = _operation(sub, route, _method(sub))
    level = odata.metadata_level(_header(sub, "accept"), None)
    kind = _KINDS[operation]
    condition = None
    if kind is not MutationKind.INSERT:
        verb = "DELETE" if kind is MutationKind.DELETE else "PUT" if kind is MutationKind.REPLACE else "MERGE"
        condition = write_condition(_header(sub, "if-match"), _header(sub, "if-none-match"), verb)
    prefer = _prefer(sub)
    return _Plan(operation, kind, level, prefer, _content_id(sub), condition, _created_headers(prefer, level))


def _mutation(sub: SubRequest, route: Route, plan: _Plan) -> Mutation:
    kind = plan.kind
    if kind is MutationKind.INSERT:
        entity = entity_from_body(sub.body, None)
        return Mutation(kind, entity.pk, entity.rk, entity.properties)
    assert route.pk is not None and route.rk is not None
    keys = (route.pk, route.rk)
    if kind is MutationKind.DELETE:
        if plan.condition is None:
            raise ServiceError("UpdateConditionNotSatisfied")  # If-Match is required
        return Mutation(kind, *keys, None, plan.condition)
    entity = entity_from_body(sub.body, keys)
    return Mutation(kind, *keys, entity.properties, plan.condition)


# An update, merge, upsert or delete answers 204 in OData 1.0's terms: "DataServiceVersion: 1.0;",
# whatever version the sub-request named (Go SDK recording go/sdk/data/aztables/testdata/
# recordings/TestBatchMixed/TestBatchMixed_storage.json: merge, delete, replace and merge, their
# DataServiceVersion headers empty; Python SDK recording test_encoder.pyTestTableEncoder
# test_encoder_batch.json: a merge naming 3.0; the C++ SDK's TransactionMerge-key and
# TransactionDelete-key; all x-ms-version 2019-02-02; the JS SDK's batch recordings of 2021 and the
# legacy Node SDK's of 2014). A failed one stays 3.0.
_NO_CONTENT_HEADERS = (*_PART_COMMON[:2], ("DataServiceVersion", "1.0;"))


@lru_cache(maxsize=64)
def _created_headers(prefer: str | None, level: str) -> tuple[tuple[str, str], ...]:
    """The headers every inserted entity's part of one kind shares, before its Location."""
    content_type = ("Content-Type", odata.CONTENT_TYPE_TEXT[level])
    if prefer == "return-no-content":
        return tuple(_part_headers(prefer))
    if prefer is None:
        # Azure writes an entity it returns unasked with the version and type first (Python SDK
        # recording test_encoder.pyTestTableEncodertest_encoder_batch.json, x-ms-version 2019-02-02)
        return (_PART_COMMON[2], content_type, *_PART_COMMON[:2])
    return (*_part_headers(prefer), content_type)


def _success_part(
    route: Route, plan: _Plan, content_id: str | None, stored: StoredEntity | None
) -> SubResponse:
    if plan.kind is MutationKind.DELETE or stored is None:
        return SubResponse(204, _NO_CONTENT_HEADERS, b"", content_id)
    etag = ("ETag", stored.etag)
    if plan.kind is not MutationKind.INSERT:
        return SubResponse(204, _NO_CONTENT_HEADERS, b"", content_id, (etag,))
    assert route.table is not None
    location = f"{route.base}/{odata.key_path(route.table, stored.pk, stored.rk)}"
    headers = plan.created
    if plan.prefer == "return-no-content":
        return SubResponse(
            204, headers, b"", content_id, (("Location", location), ("DataServiceId", location), etag)
        )
    body = odata.render_entity(stored, route.base, route.account, route.table, plan.level)
    return SubResponse(201, headers, body, content_id, (("Location", location), etag))


def _failure_part(
    error: ServiceError, request_id: str, content_id: str | None, prefer: str | None
) -> SubResponse:
    headers = _part_headers(prefer)
    headers.append(("Content-Type", odata.CONTENT_TYPE_TEXT[odata.MINIMAL]))
    return SubResponse(error.status, tuple(headers), error_json(error, request_id, error_time()), content_id)


def _multipart(parts: list[SubResponse], *, in_changeset: bool = True) -> Response:
    content_type, body = render_batch_response(parts, in_changeset=in_changeset)
    return Response(202, [NO_CACHE, NOSNIFF, (b"content-type", content_type.encode())], body)


async def submit(
    service: TableService,
    request: Request,
    route: Route,
    request_id: str,
    accounts: dict[str, list[bytes]],
    authorize: Authorizer | None = None,
    *,
    deletes_only: bool = False,
) -> Response:
    """Handle ``POST /$batch``: request-level errors raise; operation errors become a failing part.
    ``deletes_only`` (the data volume is full): a change set with anything but deletes is refused
    whole, as a single write would be."""
    batch = parse_batch(request.headers.get("content-type", ""), request.body)
    if batch.changeset_boundary is None:
        return await _single_query(
            service, batch.operations[0], request, route, request_id, accounts, authorize
        )
    host = request.headers.get("host", "127.0.0.1")
    mutations: list[Mutation] = []
    changes: list[tuple[Route, _Plan, str | None]] = []  # each operation's route, plan and Content-ID
    table_key: str | None = None
    routes: dict[str, Route] = {}  # inserts into one table all share one target URL
    plans: dict[tuple[str, Headers, Resource], _Plan] = {}
    for index, sub in enumerate(batch.operations):
        try:
            op_route = routes.get(sub.target)
            if op_route is None:
                op_route = routes[sub.target] = _sub_route(request.scheme, host, sub.target, route, accounts)
            if op_route.account != route.account or op_route.table is None:
                raise ServiceError("InvalidInput")
            if table_key is None:
                table_key = op_route.table.lower()
            elif op_route.table.lower() != table_key:
                raise ServiceError("InvalidInput")
            plan = plans.get((sub.method, sub.headers, op_route.resource))
            if plan is None:
                plan = plans[sub.method, sub.headers, op_route.resource] = _plan(sub, op_route)
            mutation = _mutation(sub, op_route, plan)
            if authorize is not None:
                authorize(op_route, plan.operation, mutation.pk, mutation.rk)
            mutations.append(mutation)
            changes.append((op_route, plan, plan.content_id))
        except ServiceError as error:
            error.index = index
            return _multipart([_failure_part(error, request_id, _content_id(sub), _prefer(sub))])
    if not mutations or table_key is None:
        raise ServiceError("InvalidInput")
    if deletes_only and any(mutation.kind is not MutationKind.DELETE for mutation in mutations):
        raise ServiceError("ServerBusy", VOLUME_FULL_MESSAGE)
    table = changes[0][0].table
    assert table is not None
    try:
        results = await service.submit_batch(route.account, table, mutations)
    except ServiceError as error:
        if error.index is None and error.status >= 500:
            raise  # refused or failed as a whole (throttled, fault, storage): a retryable request error
        index = error.index if error.index is not None else 0
        error.index = index
        _, failed_plan, failed_id = changes[min(index, len(changes) - 1)]
        return _multipart([_failure_part(error, request_id, failed_id, failed_plan.prefer)])
    parts = [
        _success_part(op_route, plan, content_id, stored)
        for (op_route, plan, content_id), stored in zip(changes, results, strict=True)
    ]
    return _multipart(parts)


async def _single_query(
    service: TableService,
    sub: SubRequest,
    request: Request,
    route: Route,
    request_id: str,
    accounts: dict[str, list[bytes]],
    authorize: Authorizer | None,
) -> Response:
    """A batch holding one bare GET of an entity, answered outside a changeset."""
    host = request.headers.get("host", "127.0.0.1")
    try:
        op_route = _sub_route(request.scheme, host, sub.target, route, accounts)
        if (
            sub.method.upper() != "GET"
            or op_route.account != route.account
            or op_route.resource is not Resource.ENTITY
            or op_route.table is None
            or op_route.pk is None
            or op_route.rk is None
        ):
            raise ServiceError("InvalidInput")
        if authorize is not None:
            authorize(op_route, Operation.GET_ENTITY, op_route.pk, op_route.rk)
        level = odata.metadata_level(_header(sub, "accept"), None)
        entity = await service.get_entity(op_route.account, op_route.table, op_route.pk, op_route.rk)
    except ServiceError as error:
        error.index = 0
        return _multipart([_failure_part(error, request_id, _content_id(sub), None)], in_changeset=False)
    body = odata.render_entity(entity, op_route.base, op_route.account, op_route.table, level)
    headers = (*_PART_COMMON, ("Content-Type", odata.CONTENT_TYPE_TEXT[level]), ("ETag", entity.etag))
    return _multipart([SubResponse(200, headers, body, _content_id(sub))], in_changeset=False)
