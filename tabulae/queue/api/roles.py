"""The role actions each Queue operation needs of a bearer token ("Authorize access to data in
Azure Storage", "Permissions for Queue service operations"), checked once ``--oauth-role``
assignments are configured (:mod:`tabulae.model.roles`, :mod:`tabulae.auth.rbac`). The
service-level operations and the queue ACL need actions no data role holds, so a token is
refused them, as Azure refuses a token whose only roles are data roles.
"""

from __future__ import annotations

from tabulae.model.roles import Need, need
from tabulae.queue.api.operations import Operation

_Q = "queueServices/queues/"
_M = _Q + "messages/"

NEEDS: dict[Operation, Need] = {
    Operation.LIST_QUEUES: need(_Q + "read"),
    Operation.GET_SERVICE_PROPERTIES: need("queueServices/read"),
    Operation.SET_SERVICE_PROPERTIES: need("queueServices/write"),
    Operation.GET_SERVICE_STATS: need("queueServices/read"),
    Operation.CREATE_QUEUE: need(_Q + "write"),
    Operation.DELETE_QUEUE: need(_Q + "delete"),
    Operation.GET_METADATA: need(_Q + "read"),
    Operation.SET_METADATA: need(_Q + "write"),
    Operation.GET_ACL: need(_Q + "getAcl/action"),
    Operation.SET_ACL: need(_Q + "setAcl/action"),
    Operation.PUT_MESSAGE: need(_M + "add/action", _M + "write"),
    Operation.GET_MESSAGES: need(_M + "process/action", (_M + "delete", _M + "read")),
    Operation.PEEK_MESSAGES: need(_M + "read"),
    Operation.DELETE_MESSAGE: need(_M + "process/action", _M + "delete"),
    Operation.CLEAR_MESSAGES: need(_M + "delete"),
    Operation.UPDATE_MESSAGE: need(_M + "write"),
    # A user delegation key for queues takes the Blob service's action, as Azure's guide to user
    # delegation SAS for Blob, Files and Queue says: a Blob data role grants it, no queue role.
    Operation.GET_USER_DELEGATION_KEY: need("blobServices/generateUserDelegationKey/action"),
}
