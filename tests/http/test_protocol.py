"""Protocol-level behaviour over raw HTTP: URLs, common headers, errors and authorization."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from email.utils import parsedate_to_datetime
from urllib.parse import quote

import pytest
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError
from azure.data.tables import TableClient, TableServiceClient

from tests.rawhttp import (
    JSON_FULL,
    JSON_MINIMAL,
    JSON_NOMETADATA,
    RFC1123_RE,
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

OTHER_KEY = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+Pw=="
ERROR_VALUE_RE = re.compile(
    r"^(?P<text>.+)\nRequestId:(?P<rid>[^\n]+)\nTime:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{7}Z$", re.S
)
SPEC_DATE = "Mon, 01 Jan 2024 00:00:00 GMT"


# ------------------------------------------------------------------------------------------
# The harness itself: the signing helper reproduces known Shared Key and Shared Key Lite signatures
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("verb", "content_type", "target", "expected"),
    [
        ("POST", JSON_NOMETADATA, "/devstoreaccount1/Tables", "VVEni35dYYPP+Qk8tDErfbBKYUstV8A3uqbQVnV53eM="),
        (
            "GET",
            "",
            "/devstoreaccount1/mytable(PartitionKey='p%27%271',RowKey='r1')",
            "Wg+YofoC6gV5jMt8EsoXtgbxxymPhLB6cneU4nHHuMc=",
        ),
        (
            "PUT",
            "application/xml",
            "/devstoreaccount1/mytable?comp=acl",
            "Ug//XSlCQwAPh8Ev2fFxLqvfLZJa+i+FjrwIm4fFLhk=",
        ),
        (
            "GET",
            "",
            "/devstoreaccount1/?restype=service&comp=properties",
            "2liFgIiObl5aRPasZ3MFF1l6Gx0Kg+dzOux8uJ6xJnE=",
        ),
    ],
)
def test_signing_helper_matches_spec_examples(
    verb: str, content_type: str, target: str, expected: str
) -> None:
    resource = canonical_resource(DEV_ACCOUNT, target)
    assert shared_key_signature(DEV_KEY, verb, "", content_type, SPEC_DATE, resource) == expected


def test_lite_signing_helper_matches_spec_example() -> None:
    resource = canonical_resource(DEV_ACCOUNT, "/devstoreaccount1/mytable()")
    assert (
        shared_key_lite_signature(DEV_KEY, SPEC_DATE, resource)
        == "lFCDejCFjS/75gYw7uZDqxs5cV7dpD++gcWayVaulBs="
    )


# ------------------------------------------------------------------------------------------
# Common response headers
# ------------------------------------------------------------------------------------------


def _requests(raw: RawClient, table_name: str) -> list[Callable[[dict[str, str | None]], RawResponse]]:
    return [
        lambda h: raw.request("POST", "Tables", {"TableName": table_name}, h),
        lambda h: raw.request("GET", "Tables", None, h),
        lambda h: raw.request("POST", table_name, {"PartitionKey": "p", "RowKey": "r"}, h),
        lambda h: raw.request("GET", table_name + py_keys("p", "r"), None, h),
        lambda h: raw.request("GET", table_name + py_keys("p", "missing"), None, h),
        lambda h: raw.request("GET", table_name + "zz()", None, h),
        lambda h: raw.request("DELETE", table_name + py_keys("p", "r"), None, {**h, "If-Match": "*"}),
        lambda h: raw.request("DELETE", f"Tables('{table_name}')", None, h),
    ]


@pytest.mark.parametrize("version", ["2019-02-02", "2020-12-06", "2026-06-06"])
def test_common_headers_on_every_response(raw: RawClient, table_name: str, version: str) -> None:
    request_ids: set[str] = set()
    statuses: list[int] = []
    for i, send in enumerate(_requests(raw, table_name)):
        client_id = f"client-{version}-{i}-{{x}}"
        response = send({"x-ms-version": version, "x-ms-client-request-id": client_id})
        statuses.append(response.status)
        request_id = response.header("x-ms-request-id")
        assert request_id, response
        request_ids.add(request_id)
        assert response.header("x-ms-version") == version, response
        assert response.header("x-ms-client-request-id") == client_id, response
        date = response.header("Date") or ""
        assert RFC1123_RE.match(date), date
        assert parsedate_to_datetime(date).tzinfo is not None
    assert statuses == [201, 200, 201, 200, 404, 404, 204, 204]
    assert len(request_ids) == len(statuses)


def test_no_client_request_id_echo_without_one(raw: RawClient, table_name: str) -> None:
    for send in _requests(raw, table_name):
        response = send({})
        assert response.header("x-ms-client-request-id") is None, response
        assert response.header("x-ms-request-id")


def test_missing_version_header_is_accepted(raw: RawClient) -> None:
    response = raw.request("GET", "Tables", None, {"x-ms-version": None})
    assert response.status == 200, response
    assert isinstance(response.json()["value"], list)


@pytest.mark.parametrize("dsv", ["3.0", "3.0;NetFx", "3.0;", None])
def test_data_service_version_variants(raw: RawClient, dsv: str | None) -> None:
    response = raw.request("GET", "Tables", None, {"DataServiceVersion": dsv, "MaxDataServiceVersion": None})
    assert response.status == 200, response


def test_odata_response_headers(raw: RawClient) -> None:
    response = raw.request("GET", "Tables")
    assert response.status == 200, response
    assert (
        response.header("Content-Type")
        == "application/json;odata=minimalmetadata;streaming=true;charset=utf-8"
    )
    assert (response.header("X-Content-Type-Options") or "").lower() == "nosniff"
    assert (response.header("Cache-Control") or "").lower() == "no-cache"


def test_no_content_responses_are_empty(raw: RawClient, table_name: str) -> None:
    raw.create_table(table_name)
    response = raw.request("DELETE", f"Tables('{table_name}')")
    assert response.status == 204, response
    assert response.body == b""
    assert response.header("Content-Type") is None
    assert response.header("Content-Length") in (None, "0")


# ------------------------------------------------------------------------------------------
# Error body
# ------------------------------------------------------------------------------------------


def _error_producers(
    raw: RawClient, table_name: str, accept: str
) -> list[tuple[str, Callable[[], RawResponse], int, str]]:
    h: dict[str, str | None] = {"Accept": accept}
    raw.create_table(table_name)
    raw.insert(table_name, {"PartitionKey": "p", "RowKey": "r"})
    stale = {**h, "If-Match": "W/\"datetime'2000-01-01T00%3A00%3A00Z'\""}
    return [
        ("missing table", lambda: raw.request("GET", table_name + "zz()", None, h), 404, "TableNotFound"),
        ("missing entity", lambda: raw.get_entity(table_name, "p", "nope", h), 404, "ResourceNotFound"),
        ("duplicate table", lambda: raw.create_table(table_name, h), 409, "TableAlreadyExists"),
        ("duplicate entity", lambda: raw.insert(table_name, {"PartitionKey": "p", "RowKey": "r"}, h), 409,
         "EntityAlreadyExists"),
        ("bad json", lambda: raw.insert(table_name, b"{nope", h), 400, "InvalidInput"),
        ("bad signature", lambda: raw.request("GET", "Tables", None, h, sign_key=OTHER_KEY), 403,
         "AuthenticationFailed"),
        ("stale etag", lambda: raw.request("PUT", table_name + py_keys("p", "r"), {"a": 1}, stale), 412,
         "UpdateConditionNotSatisfied"),
    ]  # fmt: skip


@pytest.mark.parametrize("accept", [JSON_MINIMAL, JSON_NOMETADATA, JSON_FULL])
def test_json_error_shape(raw: RawClient, table_name: str, accept: str) -> None:
    for label, produce, status, code in _error_producers(raw, table_name, accept):
        response = produce()
        assert response.status == status, (label, response)
        assert (response.header("Content-Type") or "").startswith("application/json"), (label, response)
        assert response.header("x-ms-error-code") == code, (label, response)
        body = response.json()
        assert list(body) == ["odata.error"], (label, body)
        error = body["odata.error"]
        assert set(error) == {"code", "message"}, (label, body)
        assert error["code"] == code
        assert set(error["message"]) == {"lang", "value"}, (label, body)
        assert error["message"]["lang"] == "en-US"
        match = ERROR_VALUE_RE.match(error["message"]["value"])
        assert match, (label, error["message"]["value"])
        assert match.group("rid") == response.header("x-ms-request-id"), label
        # Compact JSON: no whitespace between tokens (the .NET batch regex relies on it).
        assert response.body == json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode(), label


# ------------------------------------------------------------------------------------------
# Content negotiation
# ------------------------------------------------------------------------------------------


def test_atom_accept_is_unsupported(raw: RawClient) -> None:
    response = raw.request("GET", "Tables", None, {"Accept": "application/atom+xml"})
    assert_error(response, 415, "AtomFormatNotSupported", "Atom format is not supported.")


def test_atom_content_type_is_unsupported(raw: RawClient, table_name: str) -> None:
    body = b'<?xml version="1.0"?><entry xmlns="http://www.w3.org/2005/Atom"/>'
    response = raw.request("POST", "Tables", body, {"Content-Type": "application/atom+xml"})
    assert_error(response, 415, "AtomFormatNotSupported")


def _level(response: RawResponse) -> str:
    assert response.status == 200, response
    body = response.json()
    if "odata.metadata" not in body:
        return "none"
    items = body["value"]
    return "full" if items and "odata.type" in items[0] else "minimal"


@pytest.mark.parametrize(
    ("accept", "fmt", "expected"),
    [
        (JSON_FULL, "application/json;odata=nometadata", "none"),
        (JSON_NOMETADATA, "application/json;odata=fullmetadata", "full"),
        (JSON_NOMETADATA, "application/json;odata=minimalmetadata", "minimal"),
        (JSON_NOMETADATA, "json", "minimal"),
        (JSON_FULL, "application/json", "minimal"),
        ("application/atom+xml", "application/json;odata=nometadata", "none"),
        (JSON_FULL, None, "full"),
        (JSON_NOMETADATA, None, "none"),
        ("application/json", None, "minimal"),
        ("*/*", None, "minimal"),
        (None, None, "minimal"),
        ("application/json; odata=nometadata", None, "none"),
        ("application/json;odata=fullmetadata;streaming=true;charset=utf-8", None, "full"),
    ],
)
def test_metadata_level_selection(
    raw: RawClient, table_name: str, accept: str | None, fmt: str | None, expected: str
) -> None:
    raw.create_table(table_name)
    target = "Tables?$filter=" + quote(f"TableName eq '{table_name}'", safe="")
    if fmt is not None:
        target += "&$format=" + quote(fmt, safe="")
    response = raw.request("GET", target, None, {"Accept": accept})
    assert _level(response) == expected, response
    content_type = response.header("Content-Type") or ""
    assert content_type.split(";")[0] == "application/json"
    level_param = {"none": "nometadata", "minimal": "minimalmetadata", "full": "fullmetadata"}[expected]
    assert f"odata={level_param}" in content_type


# ------------------------------------------------------------------------------------------
# Authentication
# ------------------------------------------------------------------------------------------


def test_anonymous_request_is_401(raw: RawClient) -> None:
    response = raw.request("GET", "Tables", auth="none")
    assert_error(response, 401, "NoAuthenticationInformation")
    assert (response.header("WWW-Authenticate") or "").startswith("Bearer ")


def test_bad_signature_is_403(raw: RawClient) -> None:
    response = raw.request("GET", "Tables", sign_key=OTHER_KEY)
    assert_error(response, 403, "AuthenticationFailed", "Server failed to authenticate the request.")
    lite = raw.request("GET", "Tables", auth="SharedKeyLite", sign_key=OTHER_KEY)
    assert_error(lite, 403, "AuthenticationFailed")


def test_sdk_with_wrong_key_raises_client_authentication_error(server: ServerProcess) -> None:
    connection_string = server.connection_string.replace(DEV_KEY, OTHER_KEY)
    with TableServiceClient.from_connection_string(connection_string) as service:
        with pytest.raises(ClientAuthenticationError):
            list(service.list_tables())
        with pytest.raises(ClientAuthenticationError):
            service.create_table("neverCreated")


def test_signature_over_decoded_path_is_rejected(raw: RawClient, table_name: str) -> None:
    raw.create_table(table_name)
    date = rfc1123_now()
    sent = f"/{DEV_ACCOUNT}/{table_name}(PartitionKey='a%20b',RowKey='r')"
    decoded = f"/{DEV_ACCOUNT}/{table_name}(PartitionKey='a b',RowKey='r')"
    wrong = shared_key_signature(DEV_KEY, "GET", "", "", date, canonical_resource(DEV_ACCOUNT, decoded))
    response = raw.request(
        "GET",
        sent[len(DEV_ACCOUNT) + 1 :],
        None,
        {"x-ms-date": date, "Date": date, "Authorization": f"SharedKey {DEV_ACCOUNT}:{wrong}"},
    )
    assert_error(response, 403, "AuthenticationFailed")
    right = raw.request("GET", sent[len(DEV_ACCOUNT) + 1 :])
    assert_error(right, 404, "ResourceNotFound")


def test_signature_covers_verb_and_content_type(raw: RawClient) -> None:
    date = rfc1123_now()
    resource = canonical_resource(DEV_ACCOUNT, f"/{DEV_ACCOUNT}/Tables")
    signed_as_get = shared_key_signature(DEV_KEY, "GET", "", "", date, resource)
    response = raw.request(
        "POST",
        "Tables",
        {"TableName": "neverCreated"},
        {"x-ms-date": date, "Date": date, "Authorization": f"SharedKey {DEV_ACCOUNT}:{signed_as_get}"},
    )
    assert_error(response, 403, "AuthenticationFailed")


def test_x_ms_date_wins_over_date(raw: RawClient) -> None:
    response = raw.request("GET", "Tables", None, {"Date": "Tue, 02 Jan 2024 00:00:00 GMT"})
    assert response.status == 200, response
    # Signed with the Date value while x-ms-date is present: rejected.
    date = "Tue, 02 Jan 2024 00:00:00 GMT"
    resource = canonical_resource(DEV_ACCOUNT, f"/{DEV_ACCOUNT}/Tables")
    signature = shared_key_signature(DEV_KEY, "GET", "", "", date, resource)
    rejected = raw.request(
        "GET", "Tables", None, {"Date": date, "Authorization": f"SharedKey {DEV_ACCOUNT}:{signature}"}
    )
    assert_error(rejected, 403, "AuthenticationFailed")


def test_date_header_alone_is_used_for_signing(raw: RawClient) -> None:
    response = raw.request("GET", "Tables", None, {"x-ms-date": None})
    assert response.status == 200, response
    lite = raw.request("GET", "Tables", None, {"x-ms-date": None}, auth="SharedKeyLite")
    assert lite.status == 200, lite


def test_missing_date_header_is_rejected(raw: RawClient) -> None:
    response = raw.request("GET", "Tables", None, {"x-ms-date": None, "Date": None})
    assert_error(response, 403, "AuthenticationFailed")


@pytest.mark.parametrize(
    "authorization",
    [
        "SharedKey devstoreaccount1",
        "SharedKey devstoreaccount1:not*base64",
        "Basic dXNlcjpwYXNz",
        "SharedKey",
    ],
)
def test_malformed_authorization(raw: RawClient, authorization: str) -> None:
    response = raw.request("GET", "Tables", None, {"Authorization": authorization})
    assert response.status in (400, 403), response
    expected = {400: "InvalidAuthenticationInfo", 403: "AuthenticationFailed"}[response.status]
    assert response.error_code == expected, response
    assert response.header("x-ms-error-code") == expected


def test_unknown_account_is_rejected(server: ServerProcess) -> None:
    response = RawClient(server.port, account="nosuchaccount").request("GET", "Tables")
    assert response.status in (400, 403), response
    assert response.error_code in ("AuthenticationFailed", "InvalidQueryParameterValue"), response


def test_shared_key_lite_is_accepted(raw: RawClient, table_name: str) -> None:
    created = raw.request("POST", "Tables", {"TableName": table_name}, auth="SharedKeyLite")
    assert created.status == 201, created
    inserted = raw.request(
        "POST", table_name, {"PartitionKey": "p", "RowKey": "r", "a": 1}, {"Prefer": "return-no-content"},
        auth="SharedKeyLite",
    )  # fmt: skip
    assert inserted.status == 204, inserted
    merged = raw.request(
        "MERGE", table_name + py_keys("p", "r"), {"b": 2}, {"If-Match": "*"}, auth="SharedKeyLite"
    )
    assert merged.status == 204, merged
    queried = raw.request(
        "GET",
        table_name + "()?$format=" + quote("application/json;odata=minimalmetadata", safe=""),
        auth="SharedKeyLite",
    )
    assert queried.status == 200, queried
    [entity] = queried.json()["value"]
    assert (entity["a"], entity["b"]) == (1, 2)
    deleted = raw.request("DELETE", f"Tables('{table_name}')", auth="SharedKeyLite")
    assert deleted.status == 204, deleted


def test_signature_with_query_string_ignores_all_but_comp(raw: RawClient, table_name: str) -> None:
    raw.create_table(table_name)
    target = f"{table_name}()?$top=1&timeout=30&$filter=" + quote("PartitionKey eq 'x'", safe="")
    response = raw.request("GET", target)
    assert response.status == 200, response
    assert response.json()["value"] == []


# ------------------------------------------------------------------------------------------
# URL forms
# ------------------------------------------------------------------------------------------


def test_tables_collection_url_forms(raw: RawClient, table_name: str) -> None:
    created = raw.request("POST", "Tables()", {"TableName": table_name}, {"Content-Type": JSON_NOMETADATA})
    assert created.status == 201, created
    flt = "$filter=" + quote(f"TableName eq '{table_name}'", safe="")
    for path in ("Tables", "Tables()"):
        response = raw.request("GET", f"{path}?{flt}")
        assert response.status == 200, (path, response)
        assert [t["TableName"] for t in response.json()["value"]] == [table_name]
    single = raw.request("GET", f"Tables('{table_name}')")
    assert single.status == 200, single
    legacy = raw.request("GET", f"Tables(%27{table_name}%27)")
    assert legacy.status == 200, legacy
    assert legacy.json()["TableName"] == table_name


def test_entity_collection_url_forms(raw: RawClient, table_name: str) -> None:
    raw.create_table(table_name)
    assert raw.request("POST", table_name, {"PartitionKey": "p", "RowKey": "1"}).status == 201
    assert raw.request("POST", f"{table_name}()", {"PartitionKey": "p", "RowKey": "2"}).status == 201
    for path in (f"{table_name}()", table_name, f"{table_name.upper()}()"):
        response = raw.request("GET", path)
        assert response.status == 200, (path, response)
        assert [e["RowKey"] for e in response.json()["value"]] == ["1", "2"]


def test_empty_filter_and_select_mean_unspecified(raw: RawClient, table_name: str) -> None:
    raw.create_table(table_name)
    raw.request("POST", table_name, {"PartitionKey": "p", "RowKey": "1", "a": 1})
    response = raw.request("GET", f"{table_name}?$select=&$filter=")
    assert response.status == 200, response
    [entity] = response.json()["value"]
    assert (entity["PartitionKey"], entity["a"]) == ("p", 1)


def test_unknown_query_parameters_are_ignored(raw: RawClient) -> None:
    response = raw.request("GET", "Tables?timeout=30&api-version=2019-02-02&foo=bar")
    assert response.status == 200, response


def test_host_style_addressing(raw: RawClient, server: ServerProcess, table_name: str) -> None:
    host = f"{DEV_ACCOUNT}.table.localhost:{server.port}"
    created = raw.request(
        "POST",
        "Tables",
        {"TableName": table_name},
        {"Host": host, "Content-Type": JSON_NOMETADATA},
        path_prefix="",
    )
    assert created.status == 201, created
    assert created.header("Location") == f"http://{host}/Tables('{table_name}')"
    # Visible through the path-style address too.
    listed = raw.request("GET", "Tables?$filter=" + quote(f"TableName eq '{table_name}'", safe=""))
    assert [t["TableName"] for t in listed.json()["value"]] == [table_name]
    inserted = raw.request(
        "POST", table_name, {"PartitionKey": "p", "RowKey": "r"}, {"Host": host}, path_prefix=""
    )
    assert inserted.status == 201, inserted
    got = raw.request("GET", table_name + py_keys("p", "r"), None, {"Host": host}, path_prefix="")
    assert got.status == 200, got
    assert got.json()["odata.metadata"] == f"http://{host}/$metadata#{table_name}/@Element"


def test_base_url_follows_host_header(raw: RawClient, server: ServerProcess, table_name: str) -> None:
    host = f"localhost:{server.port}"
    response = raw.create_table(table_name, {"Host": host})
    assert response.status == 201, response
    assert response.header("Location") == f"http://{host}/{DEV_ACCOUNT}/Tables('{table_name}')"


# ------------------------------------------------------------------------------------------
# Transport
# ------------------------------------------------------------------------------------------


def test_chunked_request_body_is_accepted(raw: RawClient, table_name: str) -> None:
    raw.create_table(table_name)
    response = raw.request(
        "POST", table_name, {"PartitionKey": "p", "RowKey": "r", "a": "x" * 5000}, chunked=True
    )
    assert response.status == 201, response
    assert response.json()["a"] == "x" * 5000


def test_body_over_4_mib_is_413(raw: RawClient, server: ServerProcess, table_name: str) -> None:
    raw.create_table(table_name)
    body = json.dumps({"PartitionKey": "p", "RowKey": "r", "s": "x" * (5 * 1024 * 1024)}).encode()
    response = raw.insert(table_name, body)
    assert_error(response, 413, "RequestBodyTooLarge")
    chunked = raw.request("POST", table_name, body, chunked=True)
    assert_error(chunked, 413, "RequestBodyTooLarge")
    replace = raw.request("PUT", table_name + py_keys("p", "r"), body)
    assert_error(replace, 413, "RequestBodyTooLarge")
    with TableServiceClient.from_connection_string(server.connection_string) as service:
        client = service.get_table_client(table_name)
        with pytest.raises(HttpResponseError) as info:
            client.create_entity({"PartitionKey": "p", "RowKey": "r", "s": "x" * (5 * 1024 * 1024)})
        assert info.value.status_code == 413
        assert list(client.list_entities()) == []


def test_repeated_query_parameters_are_joined_never_one_picked(raw: RawClient, table: TableClient) -> None:
    """A repeated query parameter reads as its values joined with commas, as on Azure, for every
    parameter: no first (or last) value wins, so none can be slipped past a check."""
    table.create_entity({"PartitionKey": "a", "RowKey": "1"})
    target = table.table_name + "()"
    assert_error(raw.request("GET", f"{target}?$top=1&$top=1"), 400, "InvalidInput")
    assert_error(
        raw.request("GET", f"{target}?$filter=PartitionKey%20eq%20'a'&$filter=PartitionKey%20eq%20'b'"),
        400,
        "InvalidInput",
    )
    token = "1!4!YQ"  # any well-formed continuation token, twice in two spellings
    response = raw.request("GET", f"{target}?NextPartitionKey={token}&nextpartitionkey={token}")
    assert_error(response, 400, "InvalidInput")
    # comp is signed: "acl,acl" is not what the client signed as "acl", so the signature fails.
    acl = raw.request("GET", f"{table.table_name}?comp=acl&comp=acl", headers={"Accept": "application/xml"})
    assert acl.status == 403 and acl.header("x-ms-error-code") == "AuthenticationFailed", acl
    assert raw.request("GET", f"{target}?$top=1").status == 200
