"""The role actions each DFS operation needs of a bearer token, as the Blob operation it
stands for needs them (:mod:`tabulae.blob.api.roles`; Azure's DFS endpoint is authorised by
the same Blob role definitions: a move is ``blobs/move/action``, access control
``blobs/modifyPermissions/action`` and ``blobs/manageOwnership/action``, which only Storage
Blob Data Owner holds). On an HNS account the ACLs decide a path operation a role does not
allow (:mod:`tabulae.dfs.access`); these needs apply to the rest, and to every DFS operation
on a flat account.
"""

from __future__ import annotations

from tabulae.blob.api.roles import CONTAINER_READ, CONTAINER_WRITE, READ, WRITE
from tabulae.dfs.routing import DfsOperation
from tabulae.model.roles import Need, need

_B = "blobServices/containers/blobs/"

NEEDS: dict[DfsOperation, Need] = {
    DfsOperation.LIST_FILESYSTEMS: CONTAINER_READ,
    DfsOperation.CREATE_FILESYSTEM: CONTAINER_WRITE,
    DfsOperation.DELETE_FILESYSTEM: need("blobServices/containers/delete"),
    DfsOperation.GET_FILESYSTEM_PROPERTIES: CONTAINER_READ,
    DfsOperation.SET_FILESYSTEM_PROPERTIES: CONTAINER_WRITE,
    DfsOperation.LIST_PATHS: READ,
    DfsOperation.LIST_DELETED_PATHS: READ,
    DfsOperation.CREATE_FILE: WRITE,
    DfsOperation.CREATE_DIRECTORY: WRITE,
    DfsOperation.RENAME: need(_B + "move/action"),
    DfsOperation.APPEND: WRITE,
    DfsOperation.CONCURRENT_APPEND: WRITE,
    DfsOperation.FLUSH: WRITE,
    DfsOperation.SET_PROPERTIES: need(_B + "write"),
    DfsOperation.SET_ACCESS_CONTROL: need((_B + "modifyPermissions/action", _B + "manageOwnership/action")),
    DfsOperation.SET_ACCESS_CONTROL_RECURSIVE: need(
        (_B + "modifyPermissions/action", _B + "manageOwnership/action")
    ),
    DfsOperation.READ: READ,
    DfsOperation.GET_PROPERTIES: READ,
    DfsOperation.GET_STATUS: READ,
    DfsOperation.GET_ACCESS_CONTROL: READ,
    DfsOperation.DELETE_PATH: need(_B + "delete"),
    DfsOperation.LEASE: need(_B + "write"),
    DfsOperation.SET_EXPIRY: need(_B + "write"),
    DfsOperation.UNDELETE: CONTAINER_WRITE,
}
