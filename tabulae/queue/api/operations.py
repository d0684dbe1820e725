"""Which operation a Queue service request performs, resolved once from the resource, the method
and ``comp``/``restype``/``peekonly``.

The operation then picks the handler (``app.HANDLERS``) and the permissions a SAS must carry
(:mod:`.sas`), so routing and authorisation can never disagree about what a request does.
"""

from __future__ import annotations

from enum import StrEnum

from tabulae.model.errors import ServiceError
from tabulae.queue.api.routing import Resource


class Operation(StrEnum):
    """Every operation of the Queue service, named as the REST reference names them."""

    LIST_QUEUES = "ListQueues"
    GET_SERVICE_PROPERTIES = "GetQueueServiceProperties"
    SET_SERVICE_PROPERTIES = "SetQueueServiceProperties"
    GET_SERVICE_STATS = "GetQueueServiceStats"
    CREATE_QUEUE = "CreateQueue"
    DELETE_QUEUE = "DeleteQueue"
    GET_METADATA = "GetQueueMetadata"
    SET_METADATA = "SetQueueMetadata"
    GET_ACL = "GetQueueACL"
    SET_ACL = "SetQueueACL"
    PUT_MESSAGE = "PutMessage"
    GET_MESSAGES = "GetMessages"
    PEEK_MESSAGES = "PeekMessages"
    CLEAR_MESSAGES = "ClearMessages"
    UPDATE_MESSAGE = "UpdateMessage"
    DELETE_MESSAGE = "DeleteMessage"
    GET_USER_DELEGATION_KEY = "GetUserDelegationKey"


# Operations a secondary (read-only) endpoint serves. Get Messages changes the queue: not one.
READ_OPERATIONS = frozenset(
    {
        Operation.LIST_QUEUES,
        Operation.GET_SERVICE_PROPERTIES,
        Operation.GET_SERVICE_STATS,
        Operation.GET_METADATA,
        Operation.GET_ACL,
        Operation.PEEK_MESSAGES,
    }
)

_BY_METHOD: dict[tuple[Resource, str | None], dict[str, Operation]] = {
    (Resource.QUEUE, None): {"PUT": Operation.CREATE_QUEUE, "DELETE": Operation.DELETE_QUEUE},
    (Resource.QUEUE, "metadata"): {
        "GET": Operation.GET_METADATA,
        "HEAD": Operation.GET_METADATA,
        "PUT": Operation.SET_METADATA,
    },
    (Resource.QUEUE, "acl"): {"GET": Operation.GET_ACL, "HEAD": Operation.GET_ACL, "PUT": Operation.SET_ACL},
    (Resource.MESSAGES, None): {
        "POST": Operation.PUT_MESSAGE,
        "GET": Operation.GET_MESSAGES,
        "DELETE": Operation.CLEAR_MESSAGES,
    },
    (Resource.MESSAGE, None): {"PUT": Operation.UPDATE_MESSAGE, "DELETE": Operation.DELETE_MESSAGE},
}


def _service_operation(method: str, restype: str | None, comp: str | None) -> Operation:
    if comp == "list" and restype is None:
        if method == "GET":
            return Operation.LIST_QUEUES
        raise ServiceError("UnsupportedHttpVerb")
    if restype != "service" or comp not in ("properties", "stats", "userdelegationkey"):
        raise ServiceError("InvalidQueryParameterValue")
    if comp == "userdelegationkey":  # the Queue service has it since 2025-07-05's user delegation SAS
        if method != "POST":
            raise ServiceError("UnsupportedHttpVerb")
        return Operation.GET_USER_DELEGATION_KEY
    if comp == "stats":
        if method != "GET":
            raise ServiceError("UnsupportedHttpVerb")
        return Operation.GET_SERVICE_STATS
    if method == "GET":
        return Operation.GET_SERVICE_PROPERTIES
    if method == "PUT":
        return Operation.SET_SERVICE_PROPERTIES
    raise ServiceError("UnsupportedHttpVerb")


def resolve_operation(
    resource: Resource, method: str, *, comp: str | None, restype: str | None, peekonly: str | None
) -> Operation:
    """The operation of a ``method`` request to ``resource``; raises the error the service gives
    for a ``comp`` the resource does not have (400) or a method it does not support (405)."""
    if resource is Resource.SERVICE:
        return _service_operation(method, restype, comp)
    if comp is not None and (resource is not Resource.QUEUE or comp not in ("metadata", "acl")):
        raise ServiceError("InvalidQueryParameterValue")
    operation = _BY_METHOD[(resource, comp)].get(method)
    if operation is None:
        raise ServiceError("UnsupportedHttpVerb")
    if operation is Operation.GET_MESSAGES and peekonly is not None and peekonly.lower() == "true":
        return Operation.PEEK_MESSAGES
    return operation
