"""Table ACLs (stored access policies) and SAS tokens that use them."""

from __future__ import annotations

import asyncio
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from azure.core.credentials import AzureNamedKeyCredential, AzureSasCredential
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.data.tables import TableAccessPolicy, TableClient, TableServiceClient, generate_table_sas
from azure.data.tables.aio import TableClient as AsyncTableClient

from tests.rawhttp import RawClient, RawResponse
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess

CREDENTIAL = AzureNamedKeyCredential(DEV_ACCOUNT, DEV_KEY)
XML_HEADERS: dict[str, str | None] = {"Content-Type": "application/xml", "Accept": "application/xml"}
METADATA_NS = "http://schemas.microsoft.com/ado/2007/08/dataservices/metadata"
START = datetime(2024, 1, 1, tzinfo=UTC)
EXPIRY = datetime(2030, 1, 1, tzinfo=UTC)


def _in(hours: float) -> datetime:
    return datetime.now(UTC) + timedelta(hours=hours)


def _code(error: HttpResponseError) -> str | None:
    code = getattr(error, "error_code", None)
    if code is None and error.response is not None:
        code = error.response.headers.get("x-ms-error-code")
    return None if code is None else str(getattr(code, "value", code))


def _xml_error_code(response: RawResponse) -> str | None:
    """The code of an XML error body (``<Error><Code>`` or ``<m:error><m:code>``), as [PY] finds it."""
    root = ET.fromstring(response.body)
    for element in root.iter():
        if "code" in element.tag.lower():
            return element.text
    return None


def _assert_xml_error(response: RawResponse, status: int, codes: set[str]) -> None:
    assert response.status == status, response
    assert (response.header("Content-Type") or "").startswith("application/xml"), response
    code = _xml_error_code(response)
    assert code in codes, response
    assert response.header("x-ms-error-code") == code, response


def _identifiers_xml(identifiers: list[tuple[str, str | None]]) -> bytes:
    """``<SignedIdentifiers>`` with (Id, Permission) pairs; None means no AccessPolicy element."""
    parts = ["<?xml version='1.0' encoding='utf-8'?>\n<SignedIdentifiers>"]
    for identifier, permission in identifiers:
        parts.append(f"<SignedIdentifier><Id>{identifier}</Id>")
        if permission is not None:
            parts.append(
                "<AccessPolicy><Start>2024-01-01T00:00:00Z</Start><Expiry>2030-01-01T00:00:00Z</Expiry>"
                f"<Permission>{permission}</Permission></AccessPolicy>"
            )
        parts.append("</SignedIdentifier>")
    parts.append("</SignedIdentifiers>")
    return "".join(parts).encode()


def _put_acl(raw: RawClient, table: str, body: bytes) -> RawResponse:
    return raw.request("PUT", f"{table}?comp=acl", body, XML_HEADERS)


def _get_acl(raw: RawClient, table: str) -> RawResponse:
    return raw.request("GET", f"{table}?comp=acl", None, {"Accept": "application/xml"})


def _sas_table(server: ServerProcess, table: str, token: str) -> TableClient:
    return TableClient(
        endpoint=server.endpoint, table_name=table, credential=AzureSasCredential(token), retry_total=0
    )


def _rows(table: TableClient) -> list[tuple[str, str]]:
    return [(e["PartitionKey"], e["RowKey"]) for e in table.list_entities()]


# ------------------------------------------------------------------------------------------
# Get / Set Table ACL
# ------------------------------------------------------------------------------------------


def test_new_table_has_empty_acl(raw: RawClient, table: TableClient) -> None:
    assert table.get_table_access_policy() == {}
    response = _get_acl(raw, table.table_name)
    assert response.status == 200, response
    assert (response.header("Content-Type") or "").startswith("application/xml")
    root = ET.fromstring(response.body)
    assert root.tag == "SignedIdentifiers"
    assert list(root) == []


def test_five_identifiers_round_trip_including_one_without_policy(table: TableClient) -> None:
    policies: dict[str, TableAccessPolicy | None] = {
        "full": TableAccessPolicy(start=START, expiry=EXPIRY, permission="raud"),
        "readonly": TableAccessPolicy(expiry=EXPIRY, permission="r"),
        "addupdate": TableAccessPolicy(start=START, expiry=EXPIRY, permission="au"),
        "startonly": TableAccessPolicy(start=START),
        "nopolicy": None,
    }
    table.set_table_access_policy(policies)
    got = table.get_table_access_policy()
    assert set(got) == set(policies)
    assert got["nopolicy"] is None
    for name, policy in policies.items():
        if policy is None:
            continue
        back = got[name]
        assert back is not None, name
        assert back.start == policy.start, name
        assert back.expiry == policy.expiry, name
        assert (back.permission or None) == policy.permission, name


def test_acl_xml_shape(raw: RawClient, table: TableClient) -> None:
    put = _put_acl(raw, table.table_name, _identifiers_xml([("id1", "raud"), ("id2", None)]))
    assert put.status == 204, put
    assert put.header("Content-Length") == "0"
    assert put.body == b""
    response = _get_acl(raw, table.table_name)
    assert response.status == 200, response
    root = ET.fromstring(response.body)
    first, second = root.findall("SignedIdentifier")
    assert first.findtext("Id") == "id1"
    assert first.findtext("AccessPolicy/Start") == "2024-01-01T00:00:00.0000000Z"
    assert first.findtext("AccessPolicy/Expiry") == "2030-01-01T00:00:00.0000000Z"
    assert first.findtext("AccessPolicy/Permission") == "raud"
    assert second.findtext("Id") == "id2"
    assert second.find("AccessPolicy") is None


def test_identifier_with_an_empty_policy_comes_back_without_one(
    server: ServerProcess, raw: RawClient, table: TableClient
) -> None:
    """Azure's recorded answer: an empty ``<AccessPolicy />`` is left out of Get Table ACL, so the
    SDK reads the identifier as one without a policy; a partial policy keeps what it has."""
    table.set_table_access_policy(
        {"null": None, "empty": TableAccessPolicy(), "partial": TableAccessPolicy(permission="r")}
    )
    got = table.get_table_access_policy()
    assert got["null"] is None and got["empty"] is None
    partial = got["partial"]
    assert partial is not None and partial.permission == "r" and partial.start is None
    root = ET.fromstring(_get_acl(raw, table.table_name).body)
    by_id = {element.findtext("Id"): element for element in root.findall("SignedIdentifier")}
    assert [child.tag for child in by_id["empty"]] == ["Id"]
    policy = by_id["partial"].find("AccessPolicy")
    assert policy is not None and [child.tag for child in policy] == ["Permission"]

    async def read_async() -> dict[str, TableAccessPolicy | None]:
        async with AsyncTableClient.from_connection_string(
            server.connection_string, table.table_name
        ) as client:
            return await client.get_table_access_policy()

    assert asyncio.run(read_async())["empty"] is None
    raw_put = _put_acl(
        raw,
        table.table_name,
        b"<SignedIdentifiers><SignedIdentifier><Id>e</Id><AccessPolicy>"
        b"<Start></Start><Permission></Permission></AccessPolicy></SignedIdentifier></SignedIdentifiers>",
    )
    assert raw_put.status == 204, raw_put
    assert table.get_table_access_policy() == {"e": None}


def test_set_replaces_whole_acl_and_empty_clears(raw: RawClient, table: TableClient) -> None:
    table.set_table_access_policy({"a": TableAccessPolicy(permission="r", expiry=EXPIRY), "b": None})
    table.set_table_access_policy({"c": TableAccessPolicy(permission="d", expiry=EXPIRY)})
    assert list(table.get_table_access_policy()) == ["c"]
    table.set_table_access_policy({})
    assert table.get_table_access_policy() == {}
    table.set_table_access_policy({"d": None})
    assert _put_acl(raw, table.table_name, b"").status == 204
    assert table.get_table_access_policy() == {}


def test_six_identifiers_sdk_value_error(table: TableClient) -> None:
    table.set_table_access_policy({"keep": None})
    with pytest.raises(ValueError):
        table.set_table_access_policy({f"id{i}": None for i in range(6)})
    assert table.get_table_access_policy() == {"keep": None}


def test_six_identifiers_raw_invalid_xml_document(raw: RawClient, table: TableClient) -> None:
    response = _put_acl(raw, table.table_name, _identifiers_xml([(f"id{i}", "r") for i in range(6)]))
    _assert_xml_error(response, 400, {"InvalidXmlDocument"})
    assert table.get_table_access_policy() == {}


@pytest.mark.parametrize("permission", ["w", "rx", "l", "R"])
def test_bad_permission_letter_is_invalid_xml_node_value(
    raw: RawClient, table: TableClient, permission: str
) -> None:
    response = _put_acl(raw, table.table_name, _identifiers_xml([("id1", permission)]))
    _assert_xml_error(response, 400, {"InvalidXmlNodeValue"})
    assert table.get_table_access_policy() == {}


@pytest.mark.parametrize(
    "body",
    [
        b"<SignedIdentifiers><SignedIdentifier><Id>x</Id>",
        b"this is not xml",
        b"<?xml version='1.0'?><SignedIdentifiers><SignedIdentifier><Id>a</Id></SignedIdentifier>",
    ],
    ids=["unclosed", "text", "truncated"],
)
def test_malformed_acl_is_invalid_xml_document(raw: RawClient, table: TableClient, body: bytes) -> None:
    response = _put_acl(raw, table.table_name, body)
    _assert_xml_error(response, 400, {"InvalidXmlDocument"})
    assert table.get_table_access_policy() == {}


@pytest.mark.parametrize(
    "identifiers",
    [[("dup", "r"), ("dup", "a")], [("x" * 65, "r")]],
    ids=["duplicate-id", "id-too-long"],
)
def test_bad_identifier_ids_are_400(
    raw: RawClient, table: TableClient, identifiers: list[tuple[str, str]]
) -> None:
    response = _put_acl(raw, table.table_name, _identifiers_xml(identifiers))
    _assert_xml_error(response, 400, {"InvalidXmlDocument", "InvalidXmlNodeValue"})
    assert table.get_table_access_policy() == {}


@pytest.mark.parametrize("start", ["yesterday", "2024-13-45T00:00:00Z"])
def test_bad_policy_date_is_400(raw: RawClient, table: TableClient, start: str) -> None:
    body = (
        "<?xml version='1.0' encoding='utf-8'?><SignedIdentifiers><SignedIdentifier><Id>d</Id><AccessPolicy>"
        f"<Start>{start}</Start><Expiry>2030-01-01T00:00:00Z</Expiry><Permission>r</Permission>"
        "</AccessPolicy></SignedIdentifier></SignedIdentifiers>"
    ).encode()
    response = _put_acl(raw, table.table_name, body)
    _assert_xml_error(response, 400, {"InvalidXmlNodeValue", "InvalidXmlDocument"})
    assert table.get_table_access_policy() == {}


def test_id_of_64_characters_is_accepted(table: TableClient) -> None:
    table.set_table_access_policy({"x" * 64: TableAccessPolicy(permission="r", expiry=EXPIRY)})
    assert list(table.get_table_access_policy()) == ["x" * 64]


@pytest.mark.parametrize("method", ["GET", "PUT"])
def test_acl_of_missing_table_is_404_table_not_found_xml(
    raw: RawClient, table_name: str, method: str
) -> None:
    body = _identifiers_xml([("id1", "r")]) if method == "PUT" else None
    response = raw.request(method, f"{table_name}?comp=acl", body, XML_HEADERS)
    assert response.status == 404, response
    assert response.header("x-ms-error-code") == "TableNotFound"
    assert (response.header("Content-Type") or "").startswith("application/xml")
    root = ET.fromstring(response.body)
    assert root.tag == f"{{{METADATA_NS}}}error"
    assert root.findtext(f"{{{METADATA_NS}}}code") == "TableNotFound"
    message = root.find(f"{{{METADATA_NS}}}message")
    assert message is not None
    assert (message.text or "").startswith("The table specified does not exist.")


def test_sdk_acl_of_missing_table_raises_not_found(service: TableServiceClient, table_name: str) -> None:
    with pytest.raises(ResourceNotFoundError):
        service.get_table_client(table_name).get_table_access_policy()


# ------------------------------------------------------------------------------------------
# SAS tokens bound to a stored policy (si)
# ------------------------------------------------------------------------------------------


def _policy_token(table: str, policy_id: str, **kwargs: Any) -> str:
    return generate_table_sas(CREDENTIAL, table, policy_id=policy_id, **kwargs)


def _refused(client: TableClient, action: str) -> HttpResponseError:
    with pytest.raises(HttpResponseError) as caught:
        if action == "insert":
            client.create_entity({"PartitionKey": "p", "RowKey": "refused"})
        else:
            list(client.list_entities())
    return caught.value


def test_policy_token_grants_the_policy_permissions(server: ServerProcess, table: TableClient) -> None:
    table.set_table_access_policy({"writers": TableAccessPolicy(permission="raud", expiry=_in(1))})
    with _sas_table(server, table.table_name, _policy_token(table.table_name, "writers")) as client:
        client.create_entity({"PartitionKey": "p", "RowKey": "1"})
        client.upsert_entity({"PartitionKey": "p", "RowKey": "2"})
        assert _rows(client) == [("p", "1"), ("p", "2")]
        client.delete_entity("p", "2")
    assert _rows(table) == [("p", "1")]


def test_revoking_the_policy_revokes_the_token(server: ServerProcess, table: TableClient) -> None:
    table.set_table_access_policy({"temp": TableAccessPolicy(permission="ra", expiry=_in(1))})
    with _sas_table(server, table.table_name, _policy_token(table.table_name, "temp")) as client:
        client.create_entity({"PartitionKey": "p", "RowKey": "before"})
        table.set_table_access_policy({})
        # Several requests, so that every worker process of the server is likely to be asked.
        for action in ("insert", "query", "insert", "query"):
            error = _refused(client, action)
            assert error.status_code == 403
            assert _code(error) == "AuthenticationFailed"
        assert _rows(table) == [("p", "before")]
        table.set_table_access_policy({"temp": TableAccessPolicy(permission="ra", expiry=_in(1))})
        client.create_entity({"PartitionKey": "p", "RowKey": "after"})
    assert _rows(table) == [("p", "after"), ("p", "before")]


def test_narrowing_the_policy_narrows_the_token(server: ServerProcess, table: TableClient) -> None:
    table.set_table_access_policy({"p1": TableAccessPolicy(permission="raud", expiry=_in(1))})
    with _sas_table(server, table.table_name, _policy_token(table.table_name, "p1")) as client:
        client.create_entity({"PartitionKey": "p", "RowKey": "1"})
        table.set_table_access_policy({"p1": TableAccessPolicy(permission="r", expiry=_in(1))})
        for _ in range(4):
            error = _refused(client, "insert")
            assert error.status_code == 403
            assert _code(error) == "AuthorizationPermissionMismatch"
        assert _rows(client) == [("p", "1")]
        with pytest.raises(HttpResponseError) as deleted:
            client.delete_entity("p", "1")
        assert deleted.value.status_code == 403
    assert _rows(table) == [("p", "1")]


def test_expiring_the_policy_expires_the_token(server: ServerProcess, table: TableClient) -> None:
    table.set_table_access_policy({"p1": TableAccessPolicy(permission="r", expiry=_in(1))})
    with _sas_table(server, table.table_name, _policy_token(table.table_name, "p1")) as client:
        assert _rows(client) == []
        table.set_table_access_policy({"p1": TableAccessPolicy(permission="r", expiry=_in(-1))})
        error = _refused(client, "query")
        assert error.status_code == 403
        assert _code(error) == "AuthenticationFailed"


def test_policy_not_yet_started_refuses_the_token(server: ServerProcess, table: TableClient) -> None:
    table.set_table_access_policy({"later": TableAccessPolicy(permission="r", start=_in(1), expiry=_in(2))})
    with _sas_table(server, table.table_name, _policy_token(table.table_name, "later")) as client:
        error = _refused(client, "query")
    assert error.status_code == 403
    assert _code(error) == "AuthenticationFailed"


def test_identifier_replaced_by_one_without_policy_refuses_the_token(
    server: ServerProcess, table: TableClient
) -> None:
    table.set_table_access_policy({"p1": TableAccessPolicy(permission="ra", expiry=_in(1))})
    with _sas_table(server, table.table_name, _policy_token(table.table_name, "p1")) as client:
        table.set_table_access_policy({"p1": None})
        error = _refused(client, "insert")
    assert error.status_code == 403
    assert _code(error) == "AuthenticationFailed"
    assert _rows(table) == []


def test_field_in_both_token_and_policy_is_403(server: ServerProcess, table: TableClient) -> None:
    table.set_table_access_policy({"p1": TableAccessPolicy(permission="ra", expiry=_in(1))})
    token = _policy_token(table.table_name, "p1", permission="ra")
    with _sas_table(server, table.table_name, token) as client:
        error = _refused(client, "insert")
    assert error.status_code == 403
    assert _code(error) == "AuthenticationFailed"
    assert _rows(table) == []


def test_token_and_policy_may_split_the_fields(server: ServerProcess, table: TableClient) -> None:
    """Permission from the policy, expiry from the token: each field given once is fine."""
    table.set_table_access_policy({"perm": TableAccessPolicy(permission="ra")})
    token = _policy_token(table.table_name, "perm", expiry=_in(1))
    with _sas_table(server, table.table_name, token) as client:
        client.create_entity({"PartitionKey": "p", "RowKey": "split"})
    assert _rows(table) == [("p", "split")]


def test_policy_of_another_table_does_not_apply(
    server: ServerProcess, service: TableServiceClient, table: TableClient, table_name: str
) -> None:
    other = service.create_table(table_name + "o")
    try:
        other.set_table_access_policy({"onlyother": TableAccessPolicy(permission="raud", expiry=_in(1))})
        with _sas_table(server, table.table_name, _policy_token(table.table_name, "onlyother")) as client:
            error = _refused(client, "insert")
        assert error.status_code == 403
        assert _code(error) == "AuthenticationFailed"
        assert _rows(table) == []
    finally:
        service.delete_table(table_name + "o")
