"""Which operation a request performs: resolved once, from the resource, the effective method,
``comp`` and ``If-Match``, for a whole request and for each sub-request of a batch alike.

The operation then picks the handler (``app.HANDLERS``) and the permissions a SAS must carry
(``sas``), so routing and authorisation can never disagree about what a request does.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from tabulae.model.errors import ServiceError
from tabulae.table.api.routing import Resource

TUNNELLED = frozenset({"MERGE", "DELETE", "PUT", "PATCH"})
_INVALID_ETAG = (
    "The etag value '{}' specified in one of the request headers is not valid. "
    "Please make sure only one etag value is specified and is valid."
)


class Operation(StrEnum):
    """Every operation of the Table service, named as the REST reference names them."""

    QUERY_TABLES = "QueryTables"
    CREATE_TABLE = "CreateTable"
    DELETE_TABLE = "DeleteTable"
    GET_TABLE = "GetTable"
    QUERY_ENTITIES = "QueryEntities"
    GET_ENTITY = "GetEntity"
    INSERT_ENTITY = "InsertEntity"
    UPDATE_ENTITY = "UpdateEntity"
    MERGE_ENTITY = "MergeEntity"
    UPSERT_REPLACE = "InsertOrReplaceEntity"
    UPSERT_MERGE = "InsertOrMergeEntity"
    DELETE_ENTITY = "DeleteEntity"
    GET_ACL = "GetTableAcl"
    SET_ACL = "SetTableAcl"
    GET_SERVICE_PROPERTIES = "GetServiceProperties"
    SET_SERVICE_PROPERTIES = "SetServiceProperties"
    GET_SERVICE_STATS = "GetServiceStats"
    BATCH = "EntityGroupTransaction"


def effective_method(method: str, tunnels: Sequence[str]) -> str:
    """The method after ``X-HTTP-Method`` tunnelling: POST only, one header, a known verb."""
    if not tunnels:
        return method
    values = list(tunnels)
    if method.upper() != "POST":
        raise ServiceError("XMethodNotUsingPost")
    if len(values) > 1:
        raise ServiceError("XMethodIncorrectCount")
    value = values[0].strip().upper()
    if value not in TUNNELLED:
        raise ServiceError("XMethodIncorrectValue")
    return value


def parse_if_match(value: str | None) -> str | None:
    """An ``If-Match`` value as the service reads it: ``*`` or one weak ETag ``W/"…"``.

    The weak prefix is case-insensitive (RFC 9110 ``W/`` is a case-sensitive token, but Azure
    compares a well-formed lower-case ``w/"…"`` and answers 412 when it differs, as for any stale
    ETag); it comes back as ``W/`` so it compares equal to the stored ETag. Anything else, and a
    list of several ETags, is 400 ``InvalidInput``.
    """
    if value is None:
        return None
    value = value.strip()
    if value == "*":
        return value
    if len(value) > 3 and value[:3] in ('W/"', 'w/"') and value[-1] == '"' and '"' not in value[3:-1]:
        return value if value[0] == "W" else "W" + value[1:]
    raise ServiceError("InvalidInput", _INVALID_ETAG.format(value))


def write_condition(if_match: str | None, if_none_match: str | None, verb: str) -> str | None:
    """The condition of a write ("Update Entity", "Merge Entity", "Delete Entity"), read alike for a
    whole request and a batch's sub-request: ``If-None-Match`` is refused, ``If-Match`` parsed."""
    if if_none_match is not None:
        if if_match is not None:
            raise ServiceError(
                "InvalidInput",
                "Both If-Match and If-None-Match HTTP headers cannot be specified at the same time. "
                "Please specify only one of them.",
            )
        raise ServiceError(
            "InvalidInput", f"If-None-Match HTTP header cannot be specified for {verb} operations."
        )
    return parse_if_match(if_match)


def _entity_operation(method: str, conditional: bool) -> Operation:
    if method == "GET":
        return Operation.GET_ENTITY
    if method == "PUT":
        return Operation.UPDATE_ENTITY if conditional else Operation.UPSERT_REPLACE
    if method in ("MERGE", "PATCH"):
        return Operation.MERGE_ENTITY if conditional else Operation.UPSERT_MERGE
    if method == "DELETE":
        return Operation.DELETE_ENTITY
    raise ServiceError("MethodNotAllowed")


def _nested_operation(method: str, conditional: bool) -> Operation:
    """A path under a table name is taken as that table's entities: a POST inserts into the
    table, any other method works on an entity whose keys the path does not give."""
    if method == "POST":
        return Operation.INSERT_ENTITY
    if method == "GET":
        return Operation.QUERY_ENTITIES
    return _entity_operation(method, conditional)


def _service_operation(method: str, restype: str | None, comp: str | None) -> Operation:
    if restype != "service" or comp not in ("properties", "stats"):
        raise ServiceError("InvalidQueryParameterValue")
    if comp == "stats":
        if method != "GET":
            raise ServiceError("MethodNotAllowed")
        return Operation.GET_SERVICE_STATS
    if method == "GET":
        return Operation.GET_SERVICE_PROPERTIES
    if method == "PUT":
        return Operation.SET_SERVICE_PROPERTIES
    raise ServiceError("MethodNotAllowed")


_COLLECTION_OPERATIONS: dict[tuple[Resource, str], Operation] = {
    (Resource.TABLES, "GET"): Operation.QUERY_TABLES,
    (Resource.TABLES, "POST"): Operation.CREATE_TABLE,
    (Resource.TABLE, "GET"): Operation.GET_TABLE,
    (Resource.TABLE, "DELETE"): Operation.DELETE_TABLE,
    (Resource.ENTITIES, "GET"): Operation.QUERY_ENTITIES,
    (Resource.ENTITIES, "POST"): Operation.INSERT_ENTITY,
    (Resource.BATCH, "POST"): Operation.BATCH,
}
_ACL_OPERATIONS = {"GET": Operation.GET_ACL, "PUT": Operation.SET_ACL}


def resolve_operation(
    resource: Resource,
    method: str,
    *,
    comp: str | None = None,
    restype: str | None = None,
    conditional: bool = False,
) -> Operation:
    """The operation of a request to ``resource`` with the effective ``method``; ``conditional``
    says whether it carries ``If-Match`` (an update rather than an upsert). Raises the error
    the service gives for a method or ``comp`` the resource does not have."""
    if resource is Resource.SERVICE:
        return _service_operation(method, restype, comp)
    if comp is not None:
        if comp == "acl" and resource is Resource.ENTITIES:
            if method in _ACL_OPERATIONS:
                return _ACL_OPERATIONS[method]
            raise ServiceError("MethodNotAllowed")
        raise ServiceError("InvalidQueryParameterValue")
    if resource is Resource.ENTITY:
        return _entity_operation(method, conditional)
    if resource is Resource.NESTED:
        return _nested_operation(method, conditional)
    operation = _COLLECTION_OPERATIONS.get((resource, method))
    if operation is None:
        raise ServiceError("MethodNotAllowed")
    return operation
