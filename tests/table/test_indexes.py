"""Property indexes through a real server: ``tabulae index`` commands, the signed ``/-/indexes``
endpoint, and queries that switch to ``index-scan`` with the same answers (both stores)."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any
from urllib.parse import quote

import pytest
from azure.data.tables import TableClient, UpdateMode

from tests.consoleclient import ConsoleClient
from tests.rawhttp import RawClient, RawResponse, assert_error
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess


def _index(server: ServerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable,
        "-m",
        "tabulae",
        "index",
        *args,
        "--connection-string",
        server.connection_string,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def _query(raw: RawClient, table: str, text: str) -> tuple[RawResponse, list[str]]:
    response = raw.request("GET", f"{table}()?$filter={quote(text)}")
    assert response.status == 200, response
    return response, [entity["RowKey"] for entity in response.json()["value"]]


def _query_once_indexed(raw: RawClient, table: str, text: str) -> tuple[RawResponse, list[str]]:
    """The query once the front-end uses the new index: a PostgreSQL front-end (any worker)
    trusts its list of a table's indexes for up to a second, and meanwhile scans as before."""
    for _ in range(50):
        response, found = _query(raw, table, text)
        if response.header("x-tabulae-query-class") == "index-scan":
            break
        time.sleep(0.1)
    return response, found


def _admin(raw: RawClient, method: str, path: str, **kwargs: Any) -> RawResponse:
    return raw.request(method, f"/-/indexes/{raw.account}{path}", path_prefix="", **kwargs)


@pytest.fixture
def people(table: TableClient) -> TableClient:
    for i in range(120):
        entity = {"PartitionKey": f"p{i % 4}", "RowKey": f"r{i:03d}", "Email": f"user{i % 30}@example.com"}
        entity["Age"] = i % 50
        table.create_entity(entity)
    return table


def test_index_add_list_query_and_drop(server: ServerProcess, raw: RawClient, people: TableClient) -> None:
    name = people.table_name
    before, expected = _query(raw, name, "Email eq 'user7@example.com'")
    assert before.header("x-tabulae-query-class") == "table-scan"
    assert before.header("x-tabulae-scanned") == "120"

    added = _index(server, "add", name, "Email")
    assert added.returncode == 0, added.stderr
    assert added.stdout == f"{name}\tEmail\tEdm.String\tready\n"

    after, found = _query_once_indexed(raw, name, "Email eq 'user7@example.com'")
    assert found == expected and len(found) == 4
    assert (after.header("x-tabulae-query-class"), after.header("x-tabulae-scanned")) == ("index-scan", "4")

    # Writes keep the index exact: an insert, a change of the value and a delete are seen at once.
    people.create_entity({"PartitionKey": "p9", "RowKey": "new", "Email": "user7@example.com"})
    people.update_entity(
        {"PartitionKey": "p3", "RowKey": "r007", "Email": "moved@example.com"}, UpdateMode.MERGE
    )
    people.delete_entity("p1", "r037")
    _response, found = _query(raw, name, "Email eq 'user7@example.com' or Email eq 'moved@example.com'")
    assert found == ["r097", "r007", "r067", "new"]  # key order: p1, p3, p3, p9

    listed = _index(server, "list", name)
    assert listed.returncode == 0 and listed.stdout == f"{name}\tEmail\tEdm.String\tready\n"
    assert f"{name}\tEmail" in _index(server, "list").stdout

    dropped = _index(server, "drop", name, "Email")
    assert dropped.returncode == 0, dropped.stderr
    for _ in range(50):  # a PostgreSQL front-end may use its list of indexes for a second more
        again, _found = _query(raw, name, "Email eq 'user7@example.com'")
        if again.header("x-tabulae-query-class") == "table-scan":
            break
        time.sleep(0.1)
    assert again.header("x-tabulae-query-class") == "table-scan"
    assert _index(server, "list", name).stdout == ""


def test_numeric_index_serves_ranges_and_all_numeric_literals(
    server: ServerProcess, raw: RawClient, people: TableClient
) -> None:
    name = people.table_name
    expected = {
        text: _query(raw, name, text)[1] for text in ("Age eq 5", "Age eq 5L", "Age ge 47", "Age gt 2.5")
    }
    result = _index(server, "add", name, "Age", "--type", "Edm.Int32")
    assert result.returncode == 0, result.stderr
    for text, keys in expected.items():
        response, found = _query_once_indexed(raw, name, text)
        assert found == keys, text
        # a Double literal matches Double values only, which an index of every number holds too
        assert response.header("x-tabulae-query-class") == "index-scan", text


def test_no_wait_returns_at_once_and_the_index_becomes_ready(
    server: ServerProcess, raw: RawClient, people: TableClient
) -> None:
    result = _index(server, "add", people.table_name, "Email", "--no-wait")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\t")[3].strip() in ("building", "ready")
    for _ in range(200):
        if _index(server, "list", people.table_name).stdout.endswith("\tready\n"):
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the index never became ready")
    response, _found = _query_once_indexed(raw, people.table_name, "Email eq 'user1@example.com'")
    assert response.header("x-tabulae-query-class") == "index-scan"


def test_refusals_name_the_error(server: ServerProcess, table: TableClient) -> None:
    missing = _index(server, "add", "nosuchtable", "Email")
    assert missing.returncode == 1 and missing.stderr.startswith("tabulae: TableNotFound:")
    bad_type = _index(server, "add", table.table_name, "Data", "--type", "Edm.Binary")
    assert bad_type.returncode == 1 and "InvalidInput" in bad_type.stderr
    key = _index(server, "add", table.table_name, "RowKey")
    assert key.returncode == 1 and "InvalidInput" in key.stderr
    assert _index(server, "drop", table.table_name, "Email").stderr.startswith("tabulae: IndexNotFound:")
    assert _index(server, "add", table.table_name, "Email").returncode == 0
    clash = _index(server, "add", table.table_name, "Email", "--type", "Edm.Guid")
    assert clash.returncode == 1 and "IndexAlreadyExists" in clash.stderr


def test_the_endpoint_needs_the_account_key(raw: RawClient, table: TableClient) -> None:
    path = f"/{table.table_name}/Email?type=Edm.String"
    assert_error(_admin(raw, "PUT", path, auth="none"), 401, "NoAuthenticationInformation")
    wrong = "A" * 86 + "=="
    assert_error(_admin(raw, "PUT", path, sign_key=wrong), 403, "AuthenticationFailed")
    sas = raw.request(
        "PUT", f"/-/indexes/{raw.account}{path}&sv=2019-02-02&sig=x", path_prefix="", auth="none"
    )
    assert_error(sas, 401, "NoAuthenticationInformation")
    ok = _admin(raw, "PUT", path)
    assert ok.status == 200 and ok.json()["state"] == "ready"
    listed = _admin(raw, "GET", f"/{table.table_name}")
    assert [(i["property"], i["type"]) for i in listed.json()["value"]] == [("Email", "Edm.String")]
    assert _admin(raw, "DELETE", f"/{table.table_name}/Email").status == 204
    assert_error(_admin(raw, "POST", f"/{table.table_name}"), 405, "MethodNotAllowed")


def test_console_adds_shows_and_drops_an_index(
    server: ServerProcess, raw: RawClient, people: TableClient
) -> None:
    console = ConsoleClient(server.port)
    console.sign_in(DEV_ACCOUNT, DEV_KEY)
    name = people.table_name
    page = console.get(f"/tables/{name}")
    assert page.status == 200 and "Property indexes (0)" in page.text
    added = console.post(f"/tables/{name}/indexes", {"property": "Email", "type": "Edm.String"})
    assert added.status == 303
    for _ in range(200):
        listed = _admin(raw, "GET", f"/{name}").json()["value"]
        if listed and listed[0]["state"] == "ready":
            break
        time.sleep(0.1)
    text = quote("Email eq 'user3@example.com'")
    for _ in range(50):  # a PostgreSQL front-end notices a new index within a second
        shown = console.get(f"/tables/{name}?filter={text}")
        if 'data-testid="query-class">index scan<' in shown.text:
            break
        time.sleep(0.1)
    assert "Property indexes (1)" in shown.text and "<td>Email</td><td>Edm.String</td>" in shown.text
    assert 'data-testid="query-class">index scan<' in shown.text
    refused = console.post(f"/tables/{name}/indexes", {"property": "Row Key", "type": "Edm.String"})
    assert refused.status == 400 and "PropertyNameInvalid" in refused.text
    dropped = console.post(f"/tables/{name}/indexes/Email/drop", {})
    assert dropped.status == 303
    assert "Property indexes (0)" in console.get(f"/tables/{name}").text
