"""The role model of ``--oauth-role`` (:mod:`tabulae.model.roles`): the built-in roles' actions
as Azure's definitions list them, assignments adding up, and every operation of every service
named in its table of needs (an operation left out would be refused to every token)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from tabulae.blob.api.roles import NEEDS as BLOB_NEEDS
from tabulae.blob.api.routing import Operation as BlobOperation
from tabulae.dfs.roles import NEEDS as DFS_NEEDS
from tabulae.dfs.routing import DfsOperation
from tabulae.model.roles import ROLE_ACTIONS, Need, Role, RoleError, allowed, assignments, parse_assignment
from tabulae.queue.api.operations import Operation as QueueOperation
from tabulae.queue.api.roles import NEEDS as QUEUE_NEEDS
from tabulae.table.api.operations import Operation as TableOperation
from tabulae.table.api.roles import NEEDS as TABLE_NEEDS


def test_roles_are_read_by_their_short_or_their_azure_names() -> None:
    assert parse_assignment("abc=Owner") == ("abc", "owner")
    assert parse_assignment(" abc = Storage  Queue Data Message Processor ") == ("abc", "queue-processor")
    for bad in ("abc", "=reader", "abc=admin", "abc=Storage Blob Data Delegator"):
        with pytest.raises(RoleError):
            parse_assignment(bad)


def test_assignments_add_up_and_the_highest_blob_role_orders_the_acl_checks() -> None:
    book = assignments(["a=reader", "a=contributor", "a=queue-sender", "g=table-reader"])
    assert book.blob == {"a": Role.CONTRIBUTOR}
    held = book.held("a", frozenset({"g"}))
    assert held == ROLE_ACTIONS["contributor"] | ROLE_ACTIONS["queue-sender"] | ROLE_ACTIONS["table-reader"]
    assert book.held("nobody", frozenset()) == frozenset()
    assert not assignments([])


def test_each_role_allows_what_its_definition_lists() -> None:
    def may(role: str, needs: Mapping[Any, Need], operation: str) -> bool:
        return allowed(ROLE_ACTIONS[role], needs[operation])

    # the owner's "containers/*" covers every container and blob action, ACLs and tags included
    assert all(
        may("owner", BLOB_NEEDS, op) for op in (BlobOperation.SET_CONTAINER_ACL, BlobOperation.SET_BLOB_TAGS)
    )
    assert may("owner", DFS_NEEDS, DfsOperation.SET_ACCESS_CONTROL)
    assert not may("owner", BLOB_NEEDS, BlobOperation.SET_SERVICE_PROPERTIES)  # a management action
    assert may("contributor", DFS_NEEDS, DfsOperation.RENAME)
    assert not may("contributor", DFS_NEEDS, DfsOperation.SET_ACCESS_CONTROL)
    assert may("reader", BLOB_NEEDS, BlobOperation.GET_USER_DELEGATION_KEY)
    assert not may("reader", BLOB_NEEDS, BlobOperation.PUT_BLOB)
    # Get Messages: process/action, or delete and read together
    assert may("queue-processor", QUEUE_NEEDS, QueueOperation.GET_MESSAGES)
    assert not may("queue-reader", QUEUE_NEEDS, QueueOperation.GET_MESSAGES)
    assert may("queue-sender", QUEUE_NEEDS, QueueOperation.PUT_MESSAGE)
    assert may("table-contributor", TABLE_NEEDS, TableOperation.UPSERT_MERGE)
    assert not may("table-reader", TABLE_NEEDS, TableOperation.INSERT_ENTITY)
    # the management role: the services and their containers, queues, tables; no data
    for needs, operation in ((BLOB_NEEDS, BlobOperation.SET_SERVICE_PROPERTIES),
                             (BLOB_NEEDS, BlobOperation.GET_ACCOUNT_INFO),
                             (BLOB_NEEDS, BlobOperation.SET_CONTAINER_ACL),
                             (QUEUE_NEEDS, QueueOperation.SET_ACL),
                             (TABLE_NEEDS, TableOperation.GET_SERVICE_STATS)):  # fmt: skip
        assert may("account-contributor", needs, operation)
    assert not may("account-contributor", BLOB_NEEDS, BlobOperation.GET_BLOB)
    assert not may("account-contributor", QUEUE_NEEDS, QueueOperation.GET_MESSAGES)
    assert not may("account-contributor", TABLE_NEEDS, TableOperation.QUERY_ENTITIES)


def test_every_operation_names_what_it_needs() -> None:
    assert set(BlobOperation) == set(BLOB_NEEDS)
    assert set(DfsOperation) == set(DFS_NEEDS)
    assert set(QueueOperation) == set(QUEUE_NEEDS)
    assert set(TableOperation) - set(TABLE_NEEDS) == {TableOperation.BATCH}  # each part is checked
