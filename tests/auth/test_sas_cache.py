"""A SAS token used again and again: the server remembers what it verified about the token
(signature, parsed times) but must check on every request what can change between two uses of
the same token: the clock against its expiry, the stored access policy it names, its signature
against any change to the token.

The server runs one worker, so every request meets the same process's caches: the first uses of
a token fill them, and the request under test is answered from them.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

import pytest
from azure.core.credentials import AzureNamedKeyCredential
from azure.data.tables import TableAccessPolicy, TableClient, generate_table_sas

from tests.rawhttp import RawClient, RawResponse, assert_error
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess

CREDENTIAL = AzureNamedKeyCredential(DEV_ACCOUNT, DEV_KEY)
WARM_UPS = 3  # uses of a token before the request under test


@pytest.fixture(scope="module")
def one_worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    process = ServerProcess(Path(tmp_path_factory.mktemp("sas-cache")), extra_args=["--workers", "1"])
    process.start()
    yield process
    process.stop()


@pytest.fixture
def table(one_worker: ServerProcess, request: pytest.FixtureRequest) -> Iterator[TableClient]:
    name = "cache" + "".join(c for c in request.node.name if c.isalnum())[:40]
    client = TableClient.from_connection_string(one_worker.connection_string, name)
    client.create_table()
    client.create_entity({"PartitionKey": "p", "RowKey": "r", "V": 1})
    yield client
    client.delete_table()
    client.close()


def _read(server: ServerProcess, table: str, token: str) -> RawResponse:
    target = f"{table}(PartitionKey='p',RowKey='r')?{token}"
    return RawClient(server.port).request("GET", target, auth="none")


def _insert(server: ServerProcess, table: str, token: str, row: str) -> RawResponse:
    body: dict[str, Any] = {"PartitionKey": "p", "RowKey": row}
    return RawClient(server.port).request("POST", f"{table}?{token}", body, auth="none")


def _warm(server: ServerProcess, table: str, token: str) -> None:
    for _ in range(WARM_UPS):
        response = _read(server, table, token)
        assert response.status == 200, response


def _tamper(token: str, **changes: str) -> str:
    fields = dict(parse_qsl(token, keep_blank_values=True))
    fields.update(changes)
    return urlencode(fields, quote_via=quote, safe="")


def test_a_token_that_expires_is_refused_after_it_was_cached(
    one_worker: ServerProcess, table: TableClient
) -> None:
    expiry = (datetime.now(UTC) + timedelta(seconds=3)).replace(microsecond=0)
    token = generate_table_sas(CREDENTIAL, table.table_name, permission="r", expiry=expiry)
    _warm(one_worker, table.table_name, token)
    time.sleep(max(0.0, (expiry - datetime.now(UTC)).total_seconds()) + 1.2)  # past the expiry
    assert_error(_read(one_worker, table.table_name, token), 403, "AuthenticationFailed")


def test_a_revoked_or_edited_stored_policy_takes_effect_at_once(
    one_worker: ServerProcess, table: TableClient
) -> None:
    expiry = datetime.now(UTC) + timedelta(hours=1)
    table.set_table_access_policy({"readers": TableAccessPolicy(permission="r", expiry=expiry)})
    token = generate_table_sas(CREDENTIAL, table.table_name, policy_id="readers")
    _warm(one_worker, table.table_name, token)

    table.set_table_access_policy({"readers": TableAccessPolicy(permission="a", expiry=expiry)})
    assert_error(_read(one_worker, table.table_name, token), 403, "AuthorizationPermissionMismatch")
    assert _insert(one_worker, table.table_name, token, "added").status == 201

    table.set_table_access_policy({})
    assert_error(_read(one_worker, table.table_name, token), 403, "AuthenticationFailed")
    assert_error(_insert(one_worker, table.table_name, token, "refused"), 403, "AuthenticationFailed")
    assert sorted(e["RowKey"] for e in table.list_entities()) == ["added", "r"]

    table.set_table_access_policy({"readers": TableAccessPolicy(permission="r", expiry=expiry)})
    assert _read(one_worker, table.table_name, token).status == 200


@pytest.mark.parametrize("field", ["sig", "sp", "se"])
def test_a_tampered_token_is_refused_after_the_genuine_one_was_cached(
    one_worker: ServerProcess, table: TableClient, field: str
) -> None:
    expiry = datetime.now(UTC) + timedelta(hours=1)
    token = generate_table_sas(CREDENTIAL, table.table_name, permission="r", expiry=expiry)
    _warm(one_worker, table.table_name, token)
    signature = base64.b64decode(dict(parse_qsl(token))["sig"])
    changes = {
        "sig": base64.b64encode(bytes([signature[0] ^ 1]) + signature[1:]).decode(),
        "sp": "raud",
        "se": (expiry + timedelta(days=3650)).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    tampered = _tamper(token, **{field: changes[field]})
    assert_error(_read(one_worker, table.table_name, tampered), 403, "AuthenticationFailed")
    assert_error(_insert(one_worker, table.table_name, tampered, "forged"), 403, "AuthenticationFailed")
    assert [e["RowKey"] for e in table.list_entities()] == ["r"]
    assert _read(one_worker, table.table_name, token).status == 200  # the genuine one still works
