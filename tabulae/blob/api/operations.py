"""Which Blob operation a request performs: resolved once, from the resource, the method,
``restype``, ``comp`` and the few headers that choose between operations on one URL.

The operation then picks the handler (``app.HANDLERS``), the permission a SAS must carry and
whether anonymous callers may perform it (``sas``), so routing and authorisation can never
disagree about what a request does. Features Tabulae does not have (blob expiry) get the Azure
error a service gives for a parameter it does not support, never a half-done operation.
"""

from __future__ import annotations

from tabulae.blob.api.routing import Kind, Operation, Route
from tabulae.model.errors import ServiceError

# comp values of features Tabulae does not serve, on any resource.
_UNSUPPORTED_COMP = frozenset(
    {
        "expiry", "rename",
    }
)  # fmt: skip


def unsupported_parameter(name: str, value: str) -> ServiceError:
    return ServiceError(
        "UnsupportedQueryParameter", fields=(("QueryParameterName", name), ("QueryParameterValue", value))
    )


def unsupported_header(name: str, value: str) -> ServiceError:
    return ServiceError("UnsupportedHeader", fields=(("HeaderName", name), ("HeaderValue", value)))


def invalid_parameter(name: str, value: str, reason: str | None = None) -> ServiceError:
    """400 InvalidQueryParameterValue naming the parameter and its value, and Azure's reason
    where it gives one."""
    fields = (("QueryParameterName", name), ("QueryParameterValue", value))
    return ServiceError(
        "InvalidQueryParameterValue", fields=fields if reason is None else (*fields, ("Reason", reason))
    )


def _verb(method: str, table: dict[str, Operation]) -> Operation:
    operation = table.get(method)
    if operation is None:
        raise ServiceError("UnsupportedHttpVerb")
    return operation


def _service(method: str, restype: str | None, comp: str | None) -> Operation:
    if comp == "list" and restype is None:
        return _verb(method, {"GET": Operation.LIST_CONTAINERS})
    if restype == "service" and comp == "properties":
        return _verb(
            method, {"GET": Operation.GET_SERVICE_PROPERTIES, "PUT": Operation.SET_SERVICE_PROPERTIES}
        )
    if restype == "service" and comp == "stats":
        return _verb(method, {"GET": Operation.GET_SERVICE_STATS})
    if restype == "account" and comp == "properties":
        return _verb(method, {"GET": Operation.GET_ACCOUNT_INFO, "HEAD": Operation.GET_ACCOUNT_INFO})
    if comp == "blobs" and restype is None:
        return _verb(method, {"GET": Operation.FIND_BLOBS_BY_TAGS})
    if comp == "batch" and restype in (None, "container"):
        # The JavaScript SDK's BlobBatchClient takes a path-style account URL
        # (http://127.0.0.1:10000/devstoreaccount1) for a container's, and sends the account's
        # batch with restype=container: it is the account's batch all the same.
        return _verb(method, {"POST": Operation.SUBMIT_BATCH})
    if restype == "service" and comp == "userdelegationkey":
        return _verb(method, {"POST": Operation.GET_USER_DELEGATION_KEY})
    if comp is None and restype is None:
        raise ServiceError("InvalidUri")
    if comp is not None:
        raise invalid_parameter("comp", comp)
    raise invalid_parameter("restype", restype or "")


def _container(method: str, restype: str | None, comp: str | None) -> Operation:
    if restype == "account":
        if comp == "properties":
            return _verb(method, {"GET": Operation.GET_ACCOUNT_INFO, "HEAD": Operation.GET_ACCOUNT_INFO})
        raise invalid_parameter("comp", comp or "")
    if comp is None:
        return _verb(
            method,
            {
                "PUT": Operation.CREATE_CONTAINER,
                "DELETE": Operation.DELETE_CONTAINER,
                "GET": Operation.GET_CONTAINER_PROPERTIES,
                "HEAD": Operation.GET_CONTAINER_PROPERTIES,
            },
        )
    if comp == "metadata":
        return _verb(
            method,
            {
                "GET": Operation.GET_CONTAINER_METADATA,
                "HEAD": Operation.GET_CONTAINER_METADATA,
                "PUT": Operation.SET_CONTAINER_METADATA,
            },
        )
    if comp == "acl":
        return _verb(
            method,
            {
                "GET": Operation.GET_CONTAINER_ACL,
                "HEAD": Operation.GET_CONTAINER_ACL,
                "PUT": Operation.SET_CONTAINER_ACL,
            },
        )
    if comp == "lease":
        return _verb(method, {"PUT": Operation.LEASE_CONTAINER})
    if comp == "list":
        return _verb(method, {"GET": Operation.LIST_BLOBS})
    if comp == "blobs":
        return _verb(method, {"GET": Operation.FIND_BLOBS_BY_TAGS_IN_CONTAINER})
    if comp == "batch":
        return _verb(method, {"POST": Operation.SUBMIT_BATCH})
    if comp == "undelete":
        return _verb(method, {"PUT": Operation.RESTORE_CONTAINER})
    raise invalid_parameter("comp", comp)


def _blob(method: str, comp: str | None, headers: dict[str, str]) -> Operation:
    copy_source = "x-ms-copy-source" in headers
    if comp is None:
        if method == "PUT" and copy_source and "x-ms-blob-type" in headers:
            return Operation.PUT_BLOB_FROM_URL
        if method == "PUT":
            return Operation.COPY_BLOB if copy_source else Operation.PUT_BLOB
        return _verb(
            method,
            {
                "GET": Operation.GET_BLOB,
                "HEAD": Operation.GET_BLOB_PROPERTIES,
                "DELETE": Operation.DELETE_BLOB,
            },
        )
    if copy_source and comp == "block":
        return _verb(method, {"PUT": Operation.PUT_BLOCK_FROM_URL})
    if copy_source and comp == "appendblock":
        return _verb(method, {"PUT": Operation.APPEND_BLOCK_FROM_URL})
    if copy_source and comp == "page":
        return _verb(method, {"PUT": Operation.PUT_PAGE_FROM_URL})
    if comp == "block":
        return _verb(method, {"PUT": Operation.PUT_BLOCK})
    if comp == "blocklist":
        return _verb(method, {"PUT": Operation.PUT_BLOCK_LIST, "GET": Operation.GET_BLOCK_LIST})
    if comp == "appendblock":
        return _verb(method, {"PUT": Operation.APPEND_BLOCK})
    if comp == "properties":
        return _verb(method, {"PUT": Operation.SET_BLOB_PROPERTIES})
    if comp == "metadata":
        return _verb(
            method,
            {
                "GET": Operation.GET_BLOB_METADATA,
                "HEAD": Operation.GET_BLOB_METADATA,
                "PUT": Operation.SET_BLOB_METADATA,
            },
        )
    if comp == "lease":
        return _verb(method, {"PUT": Operation.LEASE_BLOB})
    if comp == "snapshot":
        return _verb(method, {"PUT": Operation.SNAPSHOT_BLOB})
    if comp == "copy":
        return _verb(method, {"PUT": Operation.ABORT_COPY})
    if comp == "tags":
        return _verb(method, {"PUT": Operation.SET_BLOB_TAGS, "GET": Operation.GET_BLOB_TAGS})
    if comp == "tier":
        return _verb(method, {"PUT": Operation.SET_BLOB_TIER})
    if comp == "seal":
        return _verb(method, {"PUT": Operation.SEAL_BLOB})
    if comp == "page":
        return _verb(method, {"PUT": Operation.PUT_PAGE})
    if comp == "pagelist":
        return _verb(method, {"GET": Operation.GET_PAGE_RANGES})
    if comp == "immutabilityPolicies":
        return _verb(
            method, {"PUT": Operation.SET_IMMUTABILITY_POLICY, "DELETE": Operation.DELETE_IMMUTABILITY_POLICY}
        )
    if comp == "legalhold":
        return _verb(method, {"PUT": Operation.SET_LEGAL_HOLD})
    if comp == "incrementalcopy":
        return _verb(method, {"PUT": Operation.INCREMENTAL_COPY})
    if comp == "undelete":
        return _verb(method, {"PUT": Operation.UNDELETE_BLOB})
    if comp == "query":
        return _verb(method, {"POST": Operation.QUERY_BLOB})
    raise invalid_parameter("comp", comp)


def resolve_operation(route: Route, method: str, query: dict[str, str], headers: dict[str, str]) -> Operation:
    """The operation of a request to ``route``; raises the error Azure gives for a verb, ``comp``
    or ``restype`` the resource does not have, and for the features Tabulae does not serve."""
    comp = query.get("comp")
    restype = query.get("restype")
    if comp in _UNSUPPORTED_COMP:
        raise unsupported_parameter("comp", comp)
    if route.kind is Kind.SERVICE:
        return _service(method, restype, comp)
    if route.kind is Kind.CONTAINER:
        return _container(method, restype, comp)
    if restype == "account" and comp == "properties":
        return _verb(method, {"GET": Operation.GET_ACCOUNT_INFO, "HEAD": Operation.GET_ACCOUNT_INFO})
    return _blob(method, comp, headers)


READ_ONLY = frozenset(
    {
        Operation.LIST_CONTAINERS, Operation.GET_SERVICE_PROPERTIES, Operation.GET_SERVICE_STATS,
        Operation.GET_ACCOUNT_INFO, Operation.GET_CONTAINER_PROPERTIES, Operation.GET_CONTAINER_METADATA,
        Operation.GET_CONTAINER_ACL, Operation.LIST_BLOBS, Operation.GET_BLOCK_LIST, Operation.GET_BLOB,
        Operation.GET_BLOB_PROPERTIES, Operation.GET_BLOB_METADATA, Operation.GET_PAGE_RANGES,
        Operation.GET_BLOB_TAGS, Operation.FIND_BLOBS_BY_TAGS, Operation.FIND_BLOBS_BY_TAGS_IN_CONTAINER,
        Operation.QUERY_BLOB,
    }
)  # fmt: skip
