"""Shared Key / Shared Key Lite, accounts and the secondary endpoint."""

from __future__ import annotations

import asyncio
import base64
import os
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from email.utils import formatdate
from pathlib import Path
from typing import Any

import pytest
from azure.core.credentials import AzureNamedKeyCredential
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError, ResourceNotFoundError
from azure.data.tables import TableClient, TableServiceClient, UpdateMode
from azure.data.tables.aio import TableServiceClient as AsyncTableServiceClient

from tests.queuehttp import QueueHttp
from tests.rawhttp import (
    JSON_NOMETADATA,
    RawClient,
    RawResponse,
    assert_error,
    canonical_resource,
    py_keys,
    rfc1123_now,
    shared_key_lite_signature,
    shared_key_signature,
)
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess

AUTH_FAILED_MESSAGE = "Server failed to authenticate the request."


def _random_key() -> str:
    return base64.b64encode(os.urandom(64)).decode("ascii")


def _forged_signature() -> str:
    return base64.b64encode(os.urandom(32)).decode("ascii")


def _service(port: int, account: str, key: str) -> TableServiceClient:
    return TableServiceClient(
        endpoint=f"http://127.0.0.1:{port}/{account}",
        credential=AzureNamedKeyCredential(account, key),
        retry_total=0,
    )


def _assert_json_auth_error(response: RawResponse, status: int, code: str) -> None:
    """A JSON OData error: only ``code`` and ``message`` under ``odata.error``."""
    assert_error(response, status, code)
    assert (response.header("Content-Type") or "").startswith("application/json"), response
    error = response.json()["odata.error"]
    assert set(error) == {"code", "message"}, response
    assert set(error["message"]) == {"lang", "value"}, response


def _code(error: HttpResponseError) -> str | None:
    """The error code, also for SDK calls that re-raise the undecoded error (create_entity)."""
    code = getattr(error, "error_code", None)
    if code is None and error.response is not None:
        code = error.response.headers.get("x-ms-error-code")
    return None if code is None else str(getattr(code, "value", code))


def _table_exists(service: TableServiceClient, name: str) -> bool:
    return any(t.name == name for t in service.query_tables(f"TableName eq '{name}'"))


def _entity_exists(table: TableClient, pk: str, rk: str) -> bool:
    try:
        table.get_entity(pk, rk)
    except ResourceNotFoundError:
        return False
    return True


# ------------------------------------------------------------------------------------------
# The two Shared Key schemes
# ------------------------------------------------------------------------------------------


def test_sdk_shared_key_entity_round_trip(table: TableClient) -> None:
    table.create_entity({"PartitionKey": "p", "RowKey": "r'1 %x", "Value": 1})
    table.upsert_entity({"PartitionKey": "p", "RowKey": "r'1 %x", "Value": 2}, mode=UpdateMode.REPLACE)
    assert table.get_entity("p", "r'1 %x")["Value"] == 2
    assert [e["RowKey"] for e in table.query_entities("PartitionKey eq 'p'")] == ["r'1 %x"]
    table.delete_entity("p", "r'1 %x")
    assert not _entity_exists(table, "p", "r'1 %x")


def test_shared_key_lite_accepted_for_table_entity_and_acl_ops(
    server: ServerProcess, service: TableServiceClient, table_name: str
) -> None:
    lite = RawClient(server.port)
    created = lite.request(
        "POST", "Tables", {"TableName": table_name}, {"Content-Type": JSON_NOMETADATA}, auth="SharedKeyLite"
    )
    assert created.status == 201, created
    try:
        inserted = lite.request(
            "POST", table_name, {"PartitionKey": "p", "RowKey": "r 1", "V": 7}, auth="SharedKeyLite"
        )
        assert inserted.status == 201, inserted
        got = lite.request("GET", table_name + py_keys("p", "r 1"), auth="SharedKeyLite")
        assert got.status == 200, got
        assert got.json()["V"] == 7
        queried = lite.request("GET", f"{table_name}()", auth="SharedKeyLite")
        assert queried.status == 200, queried
        assert [e["RowKey"] for e in queried.json()["value"]] == ["r 1"]
        acl = lite.request(
            "GET", f"{table_name}?comp=acl", headers={"Accept": "application/xml"}, auth="SharedKeyLite"
        )
        assert acl.status == 200, acl
        assert b"SignedIdentifiers" in acl.body
        deleted = lite.request(
            "DELETE", table_name + py_keys("p", "r 1"), headers={"If-Match": "*"}, auth="SharedKeyLite"
        )
        assert deleted.status == 204, deleted
    finally:
        service.delete_table(table_name)


def test_shared_key_lite_with_only_x_ms_date(raw: RawClient, table: TableClient) -> None:
    """JS and .NET send SharedKeyLite with x-ms-date and no Date header."""
    response = raw.request("GET", f"{table.table_name}()", headers={"Date": None}, auth="SharedKeyLite")
    assert response.status == 200, response


# ------------------------------------------------------------------------------------------
# Forged and replayed signatures
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["SharedKey", "SharedKeyLite"])
@pytest.mark.parametrize("operation", ["insert", "get", "query", "upsert", "merge", "delete"])
def test_forged_signature_is_403_json_and_writes_nothing(
    raw: RawClient, table: TableClient, scheme: str, operation: str
) -> None:
    table.create_entity({"PartitionKey": "p", "RowKey": "existing", "V": 1})
    name = table.table_name
    forged = {"Authorization": f"{scheme} {DEV_ACCOUNT}:{_forged_signature()}"}
    requests: dict[str, tuple[str, str, dict[str, Any] | None, dict[str, str]]] = {
        "insert": ("POST", name, {"PartitionKey": "p", "RowKey": "new", "V": 2}, {}),
        "get": ("GET", name + py_keys("p", "existing"), None, {}),
        "query": ("GET", f"{name}()", None, {}),
        "upsert": ("PUT", name + py_keys("p", "existing"), {"V": 3}, {}),
        "merge": ("PATCH", name + py_keys("p", "existing"), {"V": 4}, {"If-Match": "*"}),
        "delete": ("DELETE", name + py_keys("p", "existing"), None, {"If-Match": "*"}),
    }
    method, target, body, headers = requests[operation]
    response = raw.request(method, target, body, {**headers, **forged})
    _assert_json_auth_error(response, 403, "AuthenticationFailed")
    assert response.error_message.startswith(AUTH_FAILED_MESSAGE)
    assert [(e["RowKey"], e["V"]) for e in table.list_entities()] == [("existing", 1)]


def test_sdk_with_wrong_key_gets_client_authentication_error(server: ServerProcess, table_name: str) -> None:
    with _service(server.port, DEV_ACCOUNT, _random_key()) as bad:
        with pytest.raises(ClientAuthenticationError) as caught:
            bad.create_table(table_name)
        assert caught.value.status_code == 403
        assert caught.value.error_code == "AuthenticationFailed"
    with TableServiceClient.from_connection_string(server.connection_string) as good:
        assert not _table_exists(good, table_name)


def _signed_headers(verb: str, raw_target: str, content_type: str = "") -> dict[str, str]:
    """Headers with a valid SharedKey signature for ``verb raw_target`` (used to replay them)."""
    date = rfc1123_now()
    signature = shared_key_signature(
        DEV_KEY, verb, "", content_type, date, canonical_resource(DEV_ACCOUNT, raw_target)
    )
    return {"x-ms-date": date, "Date": date, "Authorization": f"SharedKey {DEV_ACCOUNT}:{signature}"}


def test_signature_replayed_on_another_table_is_refused(
    raw: RawClient, service: TableServiceClient, table: TableClient, table_name: str
) -> None:
    other = service.create_table(table_name + "b")
    try:
        other.create_entity({"PartitionKey": "secret", "RowKey": "1"})
        headers = _signed_headers("GET", f"/{DEV_ACCOUNT}/{table.table_name}()")
        assert raw.request("GET", f"{table.table_name}()", headers=headers).status == 200
        replayed = raw.request("GET", f"{other.table_name}()", headers=headers)
        _assert_json_auth_error(replayed, 403, "AuthenticationFailed")
        assert b"secret" not in replayed.body
    finally:
        service.delete_table(table_name + "b")


def test_signature_replayed_with_another_verb_is_refused(raw: RawClient, table: TableClient) -> None:
    table.create_entity({"PartitionKey": "p", "RowKey": "keep"})
    target = table.table_name + py_keys("p", "keep")
    headers = _signed_headers("GET", f"/{DEV_ACCOUNT}/{target}")
    assert raw.request("GET", target, headers=headers).status == 200
    replayed = raw.request("DELETE", target, headers={**headers, "If-Match": "*"})
    _assert_json_auth_error(replayed, 403, "AuthenticationFailed")
    assert _entity_exists(table, "p", "keep")


def test_signature_replayed_with_comp_added_is_refused(raw: RawClient, table: TableClient) -> None:
    """``?comp=`` is part of the signed resource: a query signature cannot read the ACL."""
    headers = _signed_headers("GET", f"/{DEV_ACCOUNT}/{table.table_name}")
    assert raw.request("GET", table.table_name, headers=headers).status == 200
    replayed = raw.request(
        "GET", f"{table.table_name}?comp=acl", headers={**headers, "Accept": "application/xml"}
    )
    assert replayed.status == 403, replayed
    assert replayed.header("x-ms-error-code") == "AuthenticationFailed"


def test_signature_over_other_content_type_is_refused(raw: RawClient, table: TableClient) -> None:
    target = f"/{DEV_ACCOUNT}/{table.table_name}"
    headers = _signed_headers("POST", target, content_type="application/json;odata=fullmetadata")
    response = raw.request(
        "POST",
        table.table_name,
        {"PartitionKey": "p", "RowKey": "ct"},
        {**headers, "Content-Type": "application/json"},
    )
    _assert_json_auth_error(response, 403, "AuthenticationFailed")
    assert not _entity_exists(table, "p", "ct")


# ------------------------------------------------------------------------------------------
# Accounts, missing credentials
# ------------------------------------------------------------------------------------------


def test_unknown_account_in_path_is_403(server: ServerProcess) -> None:
    stranger = RawClient(server.port, account="nosuchaccount", key=DEV_KEY)
    response = stranger.request("GET", "Tables")
    assert response.status == 403, response
    assert response.header("x-ms-error-code") == "AuthenticationFailed"


def test_authorization_naming_another_account_is_403(raw: RawClient, table: TableClient) -> None:
    date = rfc1123_now()
    target = f"{table.table_name}()"
    resource = canonical_resource("otheraccount", f"/{DEV_ACCOUNT}/{target}")
    signature = shared_key_lite_signature(DEV_KEY, date, resource)
    response = raw.request(
        "GET", target, headers={"x-ms-date": date, "Authorization": f"SharedKeyLite otheraccount:{signature}"}
    )
    _assert_json_auth_error(response, 403, "AuthenticationFailed")


@pytest.mark.parametrize(
    ("method", "target", "xml"),
    [
        ("GET", "Tables", False),
        ("POST", "Tables", False),
        ("GET", "?restype=service&comp=properties", True),
    ],
)
def test_anonymous_request_is_401_with_bearer_challenge(
    raw: RawClient, service: TableServiceClient, table_name: str, method: str, target: str, xml: bool
) -> None:
    body = {"TableName": table_name} if method == "POST" else None
    headers = {"Accept": "application/xml"} if xml else None
    response = raw.request(method, target, body, headers, auth="none")
    assert response.status == 401, response
    assert response.header("x-ms-error-code") == "NoAuthenticationInformation"
    challenge = response.header("WWW-Authenticate") or ""
    assert challenge.startswith("Bearer "), response
    assert "authorization_uri=https://login.microsoftonline.com/" in challenge
    assert "resource_id=https://storage.azure.com" in challenge
    if xml:
        assert (response.header("Content-Type") or "").startswith("application/xml"), response
        assert ET.fromstring(response.body).findtext("Code") == "NoAuthenticationInformation"
    else:
        _assert_json_auth_error(response, 401, "NoAuthenticationInformation")
    assert not _table_exists(service, table_name)


@pytest.mark.parametrize(
    "header",
    [
        f"SharedKey {DEV_ACCOUNT}",
        "Basic ZGV2OnB3",
        f"SharedKey {DEV_ACCOUNT}:!!not-base64!!",
        f"SharedKey :{base64.b64encode(bytes(32)).decode()}",
    ],
    ids=["no-colon", "unknown-scheme", "bad-base64", "no-account"],
)
def test_malformed_authorization_header_is_refused(
    raw: RawClient, service: TableServiceClient, table_name: str, header: str
) -> None:
    response = raw.request(
        "POST",
        "Tables",
        {"TableName": table_name},
        {"Content-Type": JSON_NOMETADATA, "Authorization": header},
    )
    assert (response.status, response.error_code) in {
        (400, "InvalidAuthenticationInfo"),
        (403, "AuthenticationFailed"),
    }, response
    assert response.header("x-ms-error-code") == response.error_code
    assert not _table_exists(service, table_name)


def test_forged_signature_on_xml_operation_is_xml_with_detail(raw: RawClient, table: TableClient) -> None:
    """XML operations answer auth failures with ``<Error>`` and the server's string-to-sign."""
    response = raw.request(
        "GET",
        f"{table.table_name}?comp=acl",
        headers={
            "Accept": "application/xml",
            "Authorization": f"SharedKey {DEV_ACCOUNT}:{_forged_signature()}",
        },
    )
    assert response.status == 403, response
    assert response.header("x-ms-error-code") == "AuthenticationFailed"
    assert (response.header("Content-Type") or "").startswith("application/xml"), response
    root = ET.fromstring(response.body)
    assert root.tag == "Error"
    assert root.findtext("Code") == "AuthenticationFailed"
    assert (root.findtext("Message") or "").startswith(AUTH_FAILED_MESSAGE)
    detail = root.findtext("AuthenticationErrorDetail") or ""
    assert f"/{DEV_ACCOUNT}/{DEV_ACCOUNT}/{table.table_name}?comp=acl" in detail, detail


def test_missing_date_header_is_403(raw: RawClient, table: TableClient) -> None:
    target = f"{table.table_name}()"
    signature = shared_key_signature(
        DEV_KEY, "GET", "", "", "", canonical_resource(DEV_ACCOUNT, f"/{DEV_ACCOUNT}/{target}")
    )
    response = raw.request(
        "GET",
        target,
        headers={"x-ms-date": None, "Date": None, "Authorization": f"SharedKey {DEV_ACCOUNT}:{signature}"},
    )
    _assert_json_auth_error(response, 403, "AuthenticationFailed")


# ------------------------------------------------------------------------------------------
# Several accounts with two keys each
# ------------------------------------------------------------------------------------------

ALPHA_KEYS = (_random_key(), _random_key())
BETA_KEY = _random_key()


@pytest.fixture(scope="module")
def accounts_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    process = ServerProcess(
        tmp_path_factory.mktemp("accounts"),
        extra_args=[
            "--workers", "1",
            "--account", f"alpha:{ALPHA_KEYS[0]}:{ALPHA_KEYS[1]}",
            "--account", f"beta:{BETA_KEY}",
        ],
        env={k: v for k, v in os.environ.items() if k not in ("TABULAE_ACCOUNTS", "AZURITE_ACCOUNTS")},
    ).start()  # fmt: skip
    yield process
    process.stop()


@pytest.mark.parametrize("key_index", [0, 1])
def test_primary_and_secondary_keys_both_work(
    accounts_server: ServerProcess, table_name: str, key_index: int
) -> None:
    with _service(accounts_server.port, "alpha", ALPHA_KEYS[key_index]) as alpha:
        table = alpha.create_table(table_name)
        table.create_entity({"PartitionKey": "p", "RowKey": "r", "K": key_index})
        assert table.get_entity("p", "r")["K"] == key_index
        # The other key sees the same data: both keys belong to one account.
        with _service(accounts_server.port, "alpha", ALPHA_KEYS[1 - key_index]) as other_key:
            assert [e["K"] for e in other_key.get_table_client(table_name).list_entities()] == [key_index]
        alpha.delete_table(table_name)


def test_third_random_key_is_refused(accounts_server: ServerProcess, table_name: str) -> None:
    with _service(accounts_server.port, "alpha", _random_key()) as intruder:
        with pytest.raises(ClientAuthenticationError) as caught:
            intruder.create_table(table_name)
        assert caught.value.status_code == 403
        assert caught.value.error_code == "AuthenticationFailed"
    with _service(accounts_server.port, "alpha", ALPHA_KEYS[0]) as alpha:
        assert not _table_exists(alpha, table_name)


def test_key_of_one_account_does_not_open_another(accounts_server: ServerProcess, table_name: str) -> None:
    with (
        _service(accounts_server.port, "beta", ALPHA_KEYS[0]) as wrong,
        pytest.raises(ClientAuthenticationError),
    ):
        wrong.create_table(table_name)
    with _service(accounts_server.port, "beta", BETA_KEY) as beta:
        assert not _table_exists(beta, table_name)


def test_accounts_are_isolated(accounts_server: ServerProcess, table_name: str) -> None:
    with (
        _service(accounts_server.port, "alpha", ALPHA_KEYS[0]) as alpha,
        _service(accounts_server.port, "beta", BETA_KEY) as beta,
    ):
        alpha.create_table(table_name)
        try:
            assert _table_exists(alpha, table_name)
            assert not _table_exists(beta, table_name)
            with pytest.raises(ResourceNotFoundError):
                beta.get_table_client(table_name).create_entity({"PartitionKey": "p", "RowKey": "r"})
        finally:
            alpha.delete_table(table_name)


def test_explicit_accounts_replace_the_development_account(accounts_server: ServerProcess) -> None:
    with _service(accounts_server.port, DEV_ACCOUNT, DEV_KEY) as dev:
        with pytest.raises(ClientAuthenticationError) as caught:
            list(dev.list_tables())
        assert caught.value.status_code == 403
        assert caught.value.error_code == "AuthenticationFailed"


def test_async_client_with_secondary_key(accounts_server: ServerProcess, table_name: str) -> None:
    async def scenario() -> list[str]:
        credential = AzureNamedKeyCredential("alpha", ALPHA_KEYS[1])
        endpoint = f"http://127.0.0.1:{accounts_server.port}/alpha"
        async with AsyncTableServiceClient(endpoint=endpoint, credential=credential) as client:
            table = await client.create_table(table_name)
            await table.create_entity({"PartitionKey": "p", "RowKey": "async"})
            rows = [e["RowKey"] async for e in table.list_entities()]
            await client.delete_table(table_name)
            return rows

    assert asyncio.run(scenario()) == ["async"]


def test_accounts_from_environment(tmp_path: Path, table_name: str) -> None:
    gamma, delta1, delta2 = _random_key(), _random_key(), _random_key()
    env = {k: v for k, v in os.environ.items() if k not in ("TABULAE_ACCOUNTS", "AZURITE_ACCOUNTS")}
    env["TABULAE_ACCOUNTS"] = f"gamma:{gamma};delta:{delta1}:{delta2}"
    process = ServerProcess(tmp_path / "data", extra_args=["--workers", "1"], env=env).start()
    try:
        for account, key in (("gamma", gamma), ("delta", delta1), ("delta", delta2)):
            with _service(process.port, account, key) as client:
                client.create_table(table_name)
                assert _table_exists(client, table_name)
                client.delete_table(table_name)
        with _service(process.port, "gamma", delta1) as wrong, pytest.raises(ClientAuthenticationError):
            wrong.create_table(table_name)
        with _service(process.port, DEV_ACCOUNT, DEV_KEY) as dev, pytest.raises(ClientAuthenticationError):
            list(dev.list_tables())
    finally:
        process.stop()


# ------------------------------------------------------------------------------------------
# Secondary endpoint
# ------------------------------------------------------------------------------------------


def _secondary_table(server: ServerProcess, name: str) -> TableClient:
    return TableClient(
        endpoint=f"http://127.0.0.1:{server.port}/{DEV_ACCOUNT}-secondary",
        table_name=name,
        credential=AzureNamedKeyCredential(DEV_ACCOUNT, DEV_KEY),
        retry_total=0,
    )


def test_secondary_endpoint_serves_reads(server: ServerProcess, table: TableClient) -> None:
    table.create_entity({"PartitionKey": "p", "RowKey": "r1", "V": 1})
    table.create_entity({"PartitionKey": "p", "RowKey": "r2", "V": 2})
    with _secondary_table(server, table.table_name) as secondary:
        assert [e["RowKey"] for e in secondary.query_entities("PartitionKey eq 'p'")] == ["r1", "r2"]
        assert secondary.get_entity("p", "r2")["V"] == 2
    with TableServiceClient(
        endpoint=f"http://127.0.0.1:{server.port}/{DEV_ACCOUNT}-secondary",
        credential=AzureNamedKeyCredential(DEV_ACCOUNT, DEV_KEY),
    ) as secondary_service:
        assert table.table_name in [t.name for t in secondary_service.list_tables()]


@pytest.mark.parametrize("operation", ["create", "upsert", "update", "delete", "batch"])
def test_secondary_endpoint_refuses_writes(server: ServerProcess, table: TableClient, operation: str) -> None:
    table.create_entity({"PartitionKey": "p", "RowKey": "r", "V": 1})
    with _secondary_table(server, table.table_name) as secondary, pytest.raises(HttpResponseError) as caught:
        if operation == "create":
            secondary.create_entity({"PartitionKey": "p", "RowKey": "new"})
        elif operation == "upsert":
            secondary.upsert_entity({"PartitionKey": "p", "RowKey": "r", "V": 9})
        elif operation == "update":
            secondary.update_entity({"PartitionKey": "p", "RowKey": "r", "V": 9})
        elif operation == "batch":
            secondary.submit_transaction([("upsert", {"PartitionKey": "p", "RowKey": "r", "V": 9})])
        else:
            secondary.delete_entity("p", "r")
    assert caught.value.status_code == 403
    assert _code(caught.value) == "InsufficientAccountPermissions"
    assert [(e["RowKey"], e["V"]) for e in table.list_entities()] == [("r", 1)]


def test_secondary_endpoint_refuses_table_writes_raw(
    server: ServerProcess, service: TableServiceClient, table_name: str
) -> None:
    raw = RawClient(server.port)
    prefix = f"/{DEV_ACCOUNT}-secondary"
    created = raw.request(
        "POST", "Tables", {"TableName": table_name}, {"Content-Type": JSON_NOMETADATA}, path_prefix=prefix
    )
    _assert_json_auth_error(created, 403, "InsufficientAccountPermissions")
    assert not _table_exists(service, table_name)
    listed = raw.request("GET", "Tables", path_prefix=prefix)
    assert listed.status == 200, listed


def test_secondary_request_signed_as_primary_is_accepted(server: ServerProcess, table: TableClient) -> None:
    """The docs' way: the canonicalized resource names the primary account."""
    table.create_entity({"PartitionKey": "p", "RowKey": "r"})
    target = f"/{DEV_ACCOUNT}-secondary/{table.table_name}()"
    date = rfc1123_now()
    resource = f"/{DEV_ACCOUNT}/{DEV_ACCOUNT}/{table.table_name}()"
    signature = shared_key_signature(DEV_KEY, "GET", "", "", date, resource)
    response = RawClient(server.port).request(
        "GET",
        target,
        headers={"x-ms-date": date, "Date": date, "Authorization": f"SharedKey {DEV_ACCOUNT}:{signature}"},
        path_prefix="",
    )
    assert response.status == 200, response
    assert [e["RowKey"] for e in response.json()["value"]] == ["r"]


def test_get_service_stats_through_python_path_style_quirk(service: TableServiceClient) -> None:
    paths: list[str] = []

    def hook(request: Any) -> None:
        paths.append(request.http_request.url)

    stats = service.get_service_stats(raw_request_hook=hook)
    assert stats["geo_replication"]["status"] == "live"
    assert stats["geo_replication"]["last_sync_time"] is not None
    # The SDK really did send the quirky path: secondary segment in front of the primary path.
    assert paths and f"/{DEV_ACCOUNT}-secondary/{DEV_ACCOUNT}/" in paths[-1], paths


@pytest.fixture(scope="module")
def replaying_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server with the request-date check off (``--clock-skew 0``), for captured requests."""
    process = ServerProcess(tmp_path_factory.mktemp("replay"), extra_args=["--clock-skew", "0"]).start()
    yield process
    process.stop()


def test_captured_python_stats_request_is_accepted(replaying_server: ServerProcess) -> None:
    """A captured Python SDK stats request, byte for byte, on a server that replays old dates."""
    raw = RawClient(replaying_server.port)
    response = raw.request(
        "GET",
        "/?restype=service&comp=stats",
        headers={
            "x-ms-date": "Sun, 22 Nov 2026 05:41:34 GMT",
            "Date": None,
            "Accept": "application/xml",
            "Authorization": f"SharedKey {DEV_ACCOUNT}:4RNiWm7SD/7Fe9cW1sU0C02w8447eb2A93OgHfr+ck0=",
        },
        path_prefix=f"/{DEV_ACCOUNT}-secondary/{DEV_ACCOUNT}",
    )
    assert response.status == 200, response
    assert b"<StorageServiceStats>" in response.body


# ------------------------------------------------------------------------------------------
# Request dates: a signed request is good for 15 minutes
# ------------------------------------------------------------------------------------------


def _signed_at(
    raw: RawClient, target: str, date: str, *, lite: bool = False, xml: bool = False
) -> RawResponse:
    """``GET target`` signed now with ``x-ms-date: date`` (so only the date can be wrong)."""
    headers: dict[str, str | None] = {"x-ms-date": date, "Date": None}
    if xml:
        headers["Accept"] = "application/xml"
    return raw.request("GET", target, None, headers, auth="SharedKeyLite" if lite else "SharedKey")


def _ago(seconds: float) -> str:
    return formatdate(time.time() - seconds, usegmt=True)


@pytest.mark.parametrize("lite", [False, True], ids=["SharedKey", "SharedKeyLite"])
def test_a_request_older_than_15_minutes_is_refused(raw: RawClient, lite: bool) -> None:
    assert _signed_at(raw, "Tables", _ago(14 * 60), lite=lite).status == 200
    for age in (16 * 60, 365 * 86400):
        _assert_json_auth_error(_signed_at(raw, "Tables", _ago(age), lite=lite), 403, "AuthenticationFailed")


def _dated(server: ServerProcess, service: str, header: str, lite: bool, date: str) -> tuple[int, str]:
    """``GET`` a listing of ``service`` signed with ``date`` in ``header`` (the other date header
    left out): (status, error code)."""
    scheme = "SharedKeyLite" if lite else "SharedKey"
    other = "Date" if header == "x-ms-date" else "x-ms-date"
    headers: dict[str, str | None] = {header: date, other: None}
    if service == "table":
        response = RawClient(server.port).request("GET", "Tables", None, headers, auth=scheme)
        return response.status, response.header("x-ms-error-code") or ""
    port = server.queue_port if service == "queue" else server.blob_port
    reply = QueueHttp(port).request("GET", "/?comp=list", headers=headers, auth=scheme)
    return reply.status, reply.header("x-ms-error-code") or ""


@pytest.mark.parametrize("service", ["table", "queue", "blob"])
@pytest.mark.parametrize("header", ["x-ms-date", "Date"])
@pytest.mark.parametrize("lite", [False, True], ids=["SharedKey", "SharedKeyLite"])
def test_a_request_dated_past_the_skew_ahead_is_refused(
    server: ServerProcess, service: str, header: str, lite: bool
) -> None:
    """The default skew (900 s) holds on both sides: a request signed for a minute ahead is
    served, one signed for later than the skew allows is refused, as an old one is."""
    assert _dated(server, service, header, lite, _ago(-60)) == (200, "")
    for ahead in (900 + 60, 86400):
        assert _dated(server, service, header, lite, _ago(-ahead)) == (403, "AuthenticationFailed"), ahead


def test_a_future_date_says_why(raw: RawClient) -> None:
    ahead = _ago(-86400)
    response = _signed_at(raw, "?restype=service&comp=properties", ahead, xml=True)
    assert response.status == 403, response
    detail = ET.fromstring(response.body).findtext("AuthenticationErrorDetail")
    assert detail == f"Request date header too far in the future: '{ahead}'"


def test_stale_and_malformed_dates_say_why(raw: RawClient) -> None:
    old = _ago(365 * 86400)
    response = _signed_at(raw, "?restype=service&comp=properties", old, xml=True)
    assert response.status == 403, response
    root = ET.fromstring(response.body)
    assert root.findtext("Code") == "AuthenticationFailed"
    assert root.findtext("AuthenticationErrorDetail") == f"Request date header too old: '{old}'"
    for bad in ("yesterday", "2026-01-01T00:00:00Z"):
        response = _signed_at(raw, "?restype=service&comp=properties", bad, xml=True)
        assert response.status == 403, response
        detail = ET.fromstring(response.body).findtext("AuthenticationErrorDetail")
        assert detail == "The Date header in the request is incorrect."
        _assert_json_auth_error(_signed_at(raw, "Tables", bad), 403, "AuthenticationFailed")


def test_a_replayed_write_is_refused_after_15_minutes(raw: RawClient, table: TableClient) -> None:
    response = raw.insert(
        table.table_name, {"PartitionKey": "p", "RowKey": "replayed"}, {"x-ms-date": _ago(3600), "Date": None}
    )
    _assert_json_auth_error(response, 403, "AuthenticationFailed")
    assert list(table.list_entities()) == []


def test_the_check_can_be_turned_off(replaying_server: ServerProcess) -> None:
    """``--clock-skew 0``: old signed requests are served (tests and tools that replay captures)."""
    assert _signed_at(RawClient(replaying_server.port), "Tables", _ago(365 * 86400)).status == 200


def test_the_sdk_signs_fresh_dates(service: TableServiceClient) -> None:
    """The default check never gets in a real client's way."""
    assert isinstance(list(service.list_tables()), list)
