"""The role actions each Blob operation needs of a bearer token ("Authorize access to data in
Azure Storage", "Permissions for Blob service operations"), checked once ``--oauth-role``
assignments are configured (:mod:`tabulae.model.roles`, :mod:`tabulae.auth.rbac`).

What Azure names "write, or add/action for a new blob" is written as either alternative: no
built-in role holds one without the other. The service-level operations need actions of the
management plane that no data role holds, so a token is refused them (as Azure refuses a token
whose only roles are data roles); an operation missing here is refused the same way.
"""

from __future__ import annotations

from tabulae.blob.api.routing import Operation
from tabulae.model.roles import Need, need

_C = "blobServices/containers/"
_B = _C + "blobs/"
READ = need(_B + "read")
WRITE = need(_B + "write", _B + "add/action")
CONTAINER_READ = need(_C + "read")
CONTAINER_WRITE = need(_C + "write")

NEEDS: dict[Operation, Need] = {
    Operation.LIST_CONTAINERS: CONTAINER_READ,
    Operation.GET_SERVICE_PROPERTIES: need("blobServices/read"),
    Operation.SET_SERVICE_PROPERTIES: need("blobServices/write"),
    Operation.GET_SERVICE_STATS: need("blobServices/read"),
    Operation.GET_ACCOUNT_INFO: need("blobServices/getInfo/action"),
    Operation.GET_USER_DELEGATION_KEY: need("blobServices/generateUserDelegationKey/action"),
    Operation.CREATE_CONTAINER: CONTAINER_WRITE,
    Operation.GET_CONTAINER_PROPERTIES: CONTAINER_READ,
    Operation.GET_CONTAINER_METADATA: CONTAINER_READ,
    Operation.SET_CONTAINER_METADATA: CONTAINER_WRITE,
    Operation.GET_CONTAINER_ACL: need(_C + "getAcl/action"),
    Operation.SET_CONTAINER_ACL: need(_C + "setAcl/action"),
    Operation.LEASE_CONTAINER: CONTAINER_WRITE,
    Operation.DELETE_CONTAINER: need(_C + "delete"),
    Operation.RESTORE_CONTAINER: CONTAINER_WRITE,
    Operation.LIST_BLOBS: READ,
    Operation.FIND_BLOBS_BY_TAGS: need(_B + "filter/action"),
    Operation.FIND_BLOBS_BY_TAGS_IN_CONTAINER: need(_B + "filter/action"),
    Operation.PUT_BLOB: WRITE,
    Operation.PUT_BLOB_FROM_URL: WRITE,
    Operation.GET_BLOB: READ,
    Operation.GET_BLOB_PROPERTIES: READ,
    Operation.SET_BLOB_PROPERTIES: need(_B + "write"),
    Operation.GET_BLOB_METADATA: READ,
    Operation.SET_BLOB_METADATA: need(_B + "write"),
    Operation.GET_BLOB_TAGS: need(_B + "tags/read"),
    Operation.SET_BLOB_TAGS: need(_B + "tags/write"),
    Operation.LEASE_BLOB: need(_B + "write"),
    Operation.SNAPSHOT_BLOB: WRITE,
    Operation.COPY_BLOB: WRITE,
    Operation.ABORT_COPY: need(_B + "write"),
    Operation.DELETE_BLOB: need(_B + "delete"),
    Operation.UNDELETE_BLOB: CONTAINER_WRITE,
    Operation.SET_BLOB_TIER: need(_B + "write"),
    Operation.SUBMIT_BATCH: CONTAINER_WRITE,  # each sub-request is checked on its own as well
    Operation.SET_IMMUTABILITY_POLICY: need(_B + "immutableStorage/runAsSuperUser/action"),
    Operation.DELETE_IMMUTABILITY_POLICY: need(_B + "immutableStorage/runAsSuperUser/action"),
    Operation.SET_LEGAL_HOLD: CONTAINER_WRITE,
    Operation.PUT_BLOCK: need(_B + "write"),
    Operation.PUT_BLOCK_FROM_URL: need(_B + "write"),
    Operation.PUT_BLOCK_LIST: need(_B + "write"),
    Operation.GET_BLOCK_LIST: READ,
    Operation.QUERY_BLOB: READ,
    Operation.PUT_PAGE: need(_B + "write"),
    Operation.PUT_PAGE_FROM_URL: need(_B + "write"),
    Operation.GET_PAGE_RANGES: READ,
    Operation.INCREMENTAL_COPY: WRITE,
    Operation.APPEND_BLOCK: WRITE,
    Operation.APPEND_BLOCK_FROM_URL: WRITE,
    Operation.SEAL_BLOB: need(_B + "write"),
}

# The operations on a path of an HNS account that only a role decides: its ACLs grant read,
# write and execute, and none of these is one ("Access control model in Azure Data Lake
# Storage": what the ACL model cannot express is the role's).
ROLE_ONLY = frozenset(
    {
        Operation.GET_BLOB_TAGS, Operation.SET_BLOB_TAGS, Operation.SET_IMMUTABILITY_POLICY,
        Operation.DELETE_IMMUTABILITY_POLICY, Operation.SET_LEGAL_HOLD, Operation.UNDELETE_BLOB,
    }
)  # fmt: skip
