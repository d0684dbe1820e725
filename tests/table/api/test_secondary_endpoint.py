"""The read-only secondary endpoint (``acct-secondary``) of the Table service.

Azure answers every write there 403 ``InsufficientAccountPermissions``, "Write operations are
not allowed." (Microsoft's azure-data-tables ``test_table_client_location_mode`` asserts that
message; its recording of real Azure shows the code), while reads are served.
"""

from __future__ import annotations

import pytest

from tests.rawhttp import RawClient, assert_error
from tests.serverproc import DEV_ACCOUNT, ServerProcess

SECONDARY = f"/{DEV_ACCOUNT}-secondary"
WRITE_REFUSED = ("InsufficientAccountPermissions", "Write operations are not allowed.")


@pytest.mark.parametrize(
    ("method", "target", "body"),
    [
        ("POST", "Tables", {"TableName": "{table}"}),
        ("DELETE", "Tables('{table}')", None),
        ("POST", "{table}", {"PartitionKey": "p", "RowKey": "r"}),
        ("PUT", "{table}(PartitionKey='p',RowKey='r')", {"v": 1}),
        ("MERGE", "{table}(PartitionKey='p',RowKey='r')", {"v": 1}),
        ("DELETE", "{table}(PartitionKey='p',RowKey='r')", None),
    ],
)
def test_writes_to_the_secondary_are_refused(
    raw: RawClient, table_name: str, method: str, target: str, body: dict[str, object] | None
) -> None:
    assert raw.create_table(table_name).status == 201
    if body is not None:
        body = {
            key: value.format(table=table_name) if isinstance(value, str) else value
            for key, value in body.items()
        }
    headers = (
        {"If-Match": "*"}
        if method in {"DELETE", "MERGE"} and "(" in target and "Tables" not in target
        else None
    )
    response = raw.request(method, target.format(table=table_name), body, headers, path_prefix=SECONDARY)
    assert_error(response, 403, *WRITE_REFUSED)
    # Nothing was written, and the table is still there.
    assert raw.request("GET", f"{table_name}()").json()["value"] == []
    assert raw.request("GET", f"Tables('{table_name}')").status == 200


def test_reads_on_the_secondary_are_served(raw: RawClient, server: ServerProcess, table_name: str) -> None:
    assert raw.create_table(table_name).status == 201
    assert raw.request("GET", f"{table_name}()", path_prefix=SECONDARY).status == 200
    missing = raw.request("GET", f"{table_name}(PartitionKey='foo',RowKey='bar')", path_prefix=SECONDARY)
    assert_error(missing, 404, "ResourceNotFound", "The specified resource does not exist.")
