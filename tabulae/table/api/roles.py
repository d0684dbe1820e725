"""The role actions each Table operation needs of a bearer token ("Authorize access to data in
Azure Storage", "Permissions for Table service operations"), checked once ``--oauth-role``
assignments are configured (:mod:`tabulae.model.roles`, :mod:`tabulae.auth.rbac`). An entity
group transaction needs nothing of its own: each operation in it is checked. The service-level
operations and the table ACL need actions no data role holds, so a token is refused them, as
Azure refuses a token whose only roles are data roles.
"""

from __future__ import annotations

from tabulae.model.roles import Need, need
from tabulae.table.api.operations import Operation

_T = "tableServices/tables/"
_E = _T + "entities/"
_UPSERT = need(_E + "write", (_E + "add/action", _E + "update/action"))

NEEDS: dict[Operation, Need] = {
    Operation.QUERY_TABLES: need(_T + "read"),
    Operation.GET_TABLE: need(_T + "read"),
    Operation.CREATE_TABLE: need(_T + "write"),
    Operation.DELETE_TABLE: need(_T + "delete"),
    Operation.GET_ACL: need(_T + "getAcl/action"),
    Operation.SET_ACL: need(_T + "setAcl/action"),
    Operation.QUERY_ENTITIES: need(_E + "read"),
    Operation.GET_ENTITY: need(_E + "read"),
    Operation.INSERT_ENTITY: need(_E + "write", _E + "add/action"),
    Operation.UPSERT_REPLACE: _UPSERT,
    Operation.UPSERT_MERGE: _UPSERT,
    Operation.UPDATE_ENTITY: need(_E + "write", _E + "update/action"),
    Operation.MERGE_ENTITY: need(_E + "write", _E + "update/action"),
    Operation.DELETE_ENTITY: need(_E + "delete"),
    Operation.GET_SERVICE_PROPERTIES: need("tableServices/read"),
    Operation.SET_SERVICE_PROPERTIES: need("tableServices/write"),
    Operation.GET_SERVICE_STATS: need("tableServices/read"),
}
