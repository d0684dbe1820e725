"""Service properties, CORS and stats.

Properties are per account and shared by every test on a server, so nothing here writes them on
the session server: each test that sets them has a server of its own.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator

import pytest
from azure.core.exceptions import HttpResponseError
from azure.data.tables import (
    TableAnalyticsLogging,
    TableCorsRule,
    TableMetrics,
    TableRetentionPolicy,
    TableServiceClient,
)

from tests.rawhttp import JSON_NOMETADATA, RFC1123_RE, RawClient, RawResponse
from tests.serverproc import DEV_ACCOUNT, ServerProcess

PROPERTIES = "?restype=service&comp=properties"
XML_HEADERS: dict[str, str | None] = {"Content-Type": "application/xml", "Accept": "application/xml"}
DECLARATION = "<?xml version='1.0' encoding='utf-8'?>\n"


def _start(tmp_path_factory: pytest.TempPathFactory, name: str) -> ServerProcess:
    return ServerProcess(tmp_path_factory.mktemp(name), extra_args=["--workers", "1"]).start()


def _get_xml(raw: RawClient) -> ET.Element:
    response = raw.request("GET", PROPERTIES, None, {"Accept": "application/xml"})
    assert response.status == 200, response
    assert (response.header("Content-Type") or "").startswith("application/xml")
    return ET.fromstring(response.body)


def _put_xml(raw: RawClient, body: str | bytes) -> RawResponse:
    payload = body.encode() if isinstance(body, str) else body
    return raw.request("PUT", PROPERTIES, payload, XML_HEADERS)


def _xml_error_code(response: RawResponse) -> str | None:
    for element in ET.fromstring(response.body).iter():
        if "code" in element.tag.lower():
            return element.text
    return None


def _canonical(element: ET.Element) -> bytes:
    return ET.canonicalize(ET.tostring(element), strip_text=True).encode()


# ------------------------------------------------------------------------------------------
# Properties
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pristine_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server whose properties are never written."""
    process = _start(tmp_path_factory, "pristine")
    yield process
    process.stop()


@pytest.fixture(scope="module")
def writable_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server for tests that write properties; each such test sets everything it relies on.

    It runs the default number of worker processes, so a write and the reads after it may be
    served by different processes.
    """
    process = ServerProcess(tmp_path_factory.mktemp("writable")).start()
    yield process
    process.stop()


def test_default_service_properties(pristine_server: ServerProcess) -> None:
    with TableServiceClient.from_connection_string(pristine_server.connection_string) as client:
        properties = client.get_service_properties()
    logging = properties["analytics_logging"]
    assert (logging.version, logging.read, logging.write, logging.delete) == ("1.0", False, False, False)
    assert logging.retention_policy.enabled is False
    for name in ("hour_metrics", "minute_metrics"):
        metrics = properties[name]
        assert (metrics.version, metrics.enabled) == ("1.0", False), name
        assert metrics.retention_policy.enabled is False, name
    assert properties["cors"] == []

    root = _get_xml(RawClient(pristine_server.port))
    assert root.tag == "StorageServiceProperties"
    assert [child.tag for child in root] == ["Logging", "HourMetrics", "MinuteMetrics", "Cors"]
    assert list(root.find("Cors") or []) == []
    for name in ("HourMetrics", "MinuteMetrics"):
        assert root.find(f"{name}/IncludeAPIs") is None, name
        assert root.find(f"{name}/RetentionPolicy/Days") is None, name
    assert root.find("Logging/RetentionPolicy/Days") is None


RULES = [
    TableCorsRule(
        ["http://a.example", "http://b.example"],
        ["GET", "PUT"],
        allowed_headers=["x-ms-meta-*", "content-type"],
        exposed_headers=["x-ms-meta-*"],
        max_age_in_seconds=500,
    ),
    TableCorsRule(
        ["*"], ["DELETE", "MERGE"], allowed_headers=["*"], exposed_headers=[], max_age_in_seconds=0
    ),
]


def _set_everything(client: TableServiceClient) -> None:
    client.set_service_properties(
        analytics_logging=TableAnalyticsLogging(
            read=True, write=True, delete=False, retention_policy=TableRetentionPolicy(enabled=True, days=5)
        ),
        hour_metrics=TableMetrics(
            enabled=True, include_apis=True, retention_policy=TableRetentionPolicy(enabled=True, days=7)
        ),
        minute_metrics=TableMetrics(enabled=True, include_apis=False),
        cors=RULES,
    )


def _assert_everything(client: TableServiceClient) -> None:
    properties = client.get_service_properties()
    logging = properties["analytics_logging"]
    assert (logging.read, logging.write, logging.delete) == (True, True, False)
    assert (logging.retention_policy.enabled, logging.retention_policy.days) == (True, 5)
    hour = properties["hour_metrics"]
    assert (hour.enabled, hour.include_apis) == (True, True)
    assert (hour.retention_policy.enabled, hour.retention_policy.days) == (True, 7)
    minute = properties["minute_metrics"]
    assert (minute.enabled, minute.include_apis) == (True, False)
    assert minute.retention_policy.enabled is False
    cors = properties["cors"]
    assert len(cors) == 2
    for got, want in zip(cors, RULES, strict=True):
        assert got.allowed_origins == want.allowed_origins
        assert got.allowed_methods == want.allowed_methods
        # Azure reads exact names back before prefixes (tests/queue/test_queue_go_recordings.py)
        assert got.allowed_headers == sorted(want.allowed_headers, key=lambda name: name.endswith("*"))
        assert got.exposed_headers == want.exposed_headers
        assert got.max_age_in_seconds == want.max_age_in_seconds


def test_set_and_get_properties_persist_across_restart(fresh_server: ServerProcess) -> None:
    with TableServiceClient.from_connection_string(fresh_server.connection_string) as client:
        _set_everything(client)
        _assert_everything(client)
    fresh_server.restart()
    with TableServiceClient.from_connection_string(fresh_server.connection_string) as client:
        _assert_everything(client)


def test_set_properties_status_is_202_empty(writable_server: ServerProcess) -> None:
    raw = RawClient(writable_server.port)
    response = _put_xml(
        raw,
        DECLARATION + "<StorageServiceProperties><Logging><Version>1.0</Version><Delete>true</Delete>"
        "<Read>false</Read><Write>false</Write><RetentionPolicy><Enabled>false</Enabled></RetentionPolicy>"
        "</Logging></StorageServiceProperties>",
    )
    assert response.status == 202, response
    assert response.body == b""
    assert _get_xml(raw).findtext("Logging/Delete") == "true"


def test_omitted_elements_keep_previous_values(writable_server: ServerProcess) -> None:
    raw = RawClient(writable_server.port)
    with TableServiceClient.from_connection_string(writable_server.connection_string) as client:
        _set_everything(client)
    before = _get_xml(raw)

    only_logging = (
        DECLARATION + "<StorageServiceProperties><Logging><Version>1.0</Version><Delete>true</Delete>"
        "<Read>false</Read><Write>false</Write><RetentionPolicy><Enabled>false</Enabled></RetentionPolicy>"
        "</Logging></StorageServiceProperties>"
    )
    assert _put_xml(raw, only_logging).status == 202
    after = _get_xml(raw)
    assert after.findtext("Logging/Delete") == "true"
    assert after.findtext("Logging/Read") == "false"
    for name in ("HourMetrics", "MinuteMetrics", "Cors"):
        found_before, found_after = before.find(name), after.find(name)
        assert found_before is not None and found_after is not None
        assert _canonical(found_after) == _canonical(found_before), name
    assert len(after.findall("Cors/CorsRule")) == 2

    assert (
        _put_xml(raw, DECLARATION + "<StorageServiceProperties><Cors /></StorageServiceProperties>").status
        == 202
    )
    cleared = _get_xml(raw)
    assert cleared.findall("Cors/CorsRule") == []
    for name in ("Logging", "HourMetrics", "MinuteMetrics"):
        found_after, found_cleared = after.find(name), cleared.find(name)
        assert found_after is not None and found_cleared is not None
        assert _canonical(found_cleared) == _canonical(found_after), name


def test_include_apis_and_days_only_when_enabled(writable_server: ServerProcess) -> None:
    raw = RawClient(writable_server.port)
    disabled = "<Enabled>false</Enabled><IncludeAPIs>true</IncludeAPIs>"
    no_retention = "<RetentionPolicy><Enabled>false</Enabled><Days>5</Days></RetentionPolicy>"
    body = _properties(
        _metrics("HourMetrics", disabled + no_retention), _metrics("MinuteMetrics", disabled + no_retention)
    )
    assert _put_xml(raw, body).status == 202
    for _ in range(3):
        root = _get_xml(raw)
        for name in ("HourMetrics", "MinuteMetrics"):
            assert root.findtext(f"{name}/Enabled") == "false", name
            assert root.find(f"{name}/IncludeAPIs") is None, name
            assert root.findtext(f"{name}/RetentionPolicy/Enabled") == "false", name
            assert root.find(f"{name}/RetentionPolicy/Days") is None, name


def _metrics(tag: str, inner: str) -> str:
    return f"<{tag}><Version>1.0</Version>{inner}</{tag}>"


def _logging(read: str = "true", retention: str = "<Enabled>false</Enabled>") -> str:
    return (
        f"<Logging><Version>1.0</Version><Delete>false</Delete><Read>{read}</Read><Write>false</Write>"
        f"<RetentionPolicy>{retention}</RetentionPolicy></Logging>"
    )


def _rule(methods: str = "GET", max_age: str = "10", origins: str = "http://x.example") -> str:
    return (
        f"<CorsRule><AllowedOrigins>{origins}</AllowedOrigins><AllowedMethods>{methods}</AllowedMethods>"
        f"<AllowedHeaders>x-ms-*</AllowedHeaders><ExposedHeaders></ExposedHeaders>"
        f"<MaxAgeInSeconds>{max_age}</MaxAgeInSeconds></CorsRule>"
    )


def _properties(*elements: str) -> str:
    return DECLARATION + "<StorageServiceProperties>" + "".join(elements) + "</StorageServiceProperties>"


NODE_OR_DOCUMENT = {"InvalidXmlNodeValue", "InvalidXmlDocument"}
INVALID = [
    ("days-zero", _properties(_logging(retention="<Enabled>true</Enabled><Days>0</Days>")), NODE_OR_DOCUMENT),
    (
        "days-366",
        _properties(_logging(retention="<Enabled>true</Enabled><Days>366</Days>")),
        NODE_OR_DOCUMENT,
    ),
    (
        "days-text",
        _properties(_logging(retention="<Enabled>true</Enabled><Days>many</Days>")),
        NODE_OR_DOCUMENT,
    ),
    ("bool", _properties(_logging(read="yes")), NODE_OR_DOCUMENT),
    (
        "include-apis-missing",
        _properties(
            _metrics(
                "HourMetrics",
                "<Enabled>true</Enabled><RetentionPolicy><Enabled>false</Enabled></RetentionPolicy>",
            )
        ),
        NODE_OR_DOCUMENT,
    ),
    ("cors-method", _properties("<Cors>" + _rule(methods="GET,FETCH") + "</Cors>"), NODE_OR_DOCUMENT),
    ("cors-max-age", _properties("<Cors>" + _rule(max_age="-1") + "</Cors>"), NODE_OR_DOCUMENT),
    ("cors-six-rules", _properties("<Cors>" + _rule() * 6 + "</Cors>"), NODE_OR_DOCUMENT),
    ("malformed", DECLARATION + "<StorageServiceProperties><Logging>", {"InvalidXmlDocument"}),
    ("not-xml", "logging=on", {"InvalidXmlDocument"}),
]


@pytest.fixture(scope="module")
def configured_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """Every property set (CORS rules included) once; tests here only read or fail to write."""
    process = _start(tmp_path_factory, "configured")
    with TableServiceClient.from_connection_string(process.connection_string) as client:
        _set_everything(client)
    yield process
    process.stop()


@pytest.mark.parametrize(("case", "body", "codes"), INVALID, ids=[c[0] for c in INVALID])
def test_invalid_properties_are_400_and_change_nothing(
    configured_server: ServerProcess, case: str, body: str, codes: set[str]
) -> None:
    raw = RawClient(configured_server.port)
    before = _canonical(_get_xml(raw))
    response = _put_xml(raw, body)
    assert response.status == 400, response
    assert (response.header("Content-Type") or "").startswith("application/xml"), response
    code = _xml_error_code(response)
    assert code in codes, response
    assert response.header("x-ms-error-code") == code
    assert _canonical(_get_xml(raw)) == before


def test_sdk_six_cors_rules_is_http_400(configured_server: ServerProcess) -> None:
    with TableServiceClient.from_connection_string(configured_server.connection_string) as client:
        with pytest.raises(HttpResponseError) as caught:
            client.set_service_properties(cors=[TableCorsRule(["http://x.example"], ["GET"])] * 6)
        assert caught.value.status_code == 400
        assert len(client.get_service_properties()["cors"]) == 2


# ------------------------------------------------------------------------------------------
# CORS
# ------------------------------------------------------------------------------------------


def _preflight(server: ServerProcess, headers: dict[str, str | None], target: str = "Tables") -> RawResponse:
    return RawClient(server.port).request("OPTIONS", target, None, headers, auth="none")


def _cors_headers(response: RawResponse) -> dict[str, str]:
    return {k.lower(): v for k, v in response.headers.items() if k.lower().startswith("access-control-")}


@pytest.mark.parametrize("target", ["Tables", "sometable()", "sometable(PartitionKey='a',RowKey='b')", ""])
def test_preflight_allowed(configured_server: ServerProcess, target: str) -> None:
    response = _preflight(
        configured_server,
        {
            "Origin": "http://a.example",
            "Access-Control-Request-Method": "PUT",
            "Access-Control-Request-Headers": "x-ms-meta-color,Content-Type",
        },
        target,
    )
    assert response.status == 200, response
    assert response.header("Access-Control-Allow-Origin") == "http://a.example"
    assert "PUT" in (response.header("Access-Control-Allow-Methods") or "").upper()
    allowed = {h.strip().lower() for h in (response.header("Access-Control-Allow-Headers") or "").split(",")}
    assert {"x-ms-meta-color", "content-type"} <= allowed
    assert response.header("Access-Control-Max-Age") == "500"
    assert response.header("Access-Control-Allow-Credentials") == "true"


def test_preflight_origin_matches_case_insensitively(configured_server: ServerProcess) -> None:
    response = _preflight(
        configured_server, {"Origin": "HTTP://B.EXAMPLE", "Access-Control-Request-Method": "GET"}
    )
    assert response.status == 200, response
    assert (response.header("Access-Control-Allow-Origin") or "").lower() == "http://b.example"


def test_preflight_wildcard_rule(configured_server: ServerProcess) -> None:
    response = _preflight(
        configured_server,
        {
            "Origin": "http://anywhere.example",
            "Access-Control-Request-Method": "DELETE",
            "Access-Control-Request-Headers": "x-anything",
        },
    )
    assert response.status == 200, response
    assert response.header("Access-Control-Allow-Origin") == "*"
    assert response.header("Access-Control-Allow-Credentials") is None
    assert response.header("Access-Control-Max-Age") == "0"


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example", "Access-Control-Request-Method": "GET"},
        {"Origin": "http://a.example", "Access-Control-Request-Method": "POST"},
        {
            "Origin": "http://a.example",
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "x-ms-meta-a,x-secret",
        },
    ],
    ids=["origin", "method", "header"],
)
def test_preflight_refused_is_403_cors_preflight_failure(
    configured_server: ServerProcess, headers: dict[str, str | None]
) -> None:
    response = _preflight(configured_server, headers)
    assert response.status == 403, response
    assert response.header("x-ms-error-code") == "CorsPreflightFailure"
    assert _xml_error_code(response) == "CorsPreflightFailure"
    assert response.header("Access-Control-Allow-Origin") is None


def test_preflight_without_cors_rules_is_403(pristine_server: ServerProcess) -> None:
    response = _preflight(
        pristine_server, {"Origin": "http://a.example", "Access-Control-Request-Method": "GET"}
    )
    assert response.status == 403, response
    assert response.header("x-ms-error-code") == "CorsPreflightFailure"


@pytest.mark.parametrize(
    "headers",
    [{"Access-Control-Request-Method": "GET"}, {"Origin": "http://a.example"}],
    ids=["no-origin", "no-method"],
)
def test_preflight_missing_required_header_is_400(
    configured_server: ServerProcess, headers: dict[str, str | None]
) -> None:
    response = _preflight(configured_server, headers)
    assert response.status == 400, response
    assert response.header("x-ms-error-code")
    assert response.header("Access-Control-Allow-Origin") is None


def test_actual_request_from_allowed_origin_gets_cors_headers(configured_server: ServerProcess) -> None:
    response = RawClient(configured_server.port).request(
        "GET", "Tables", headers={"Origin": "http://a.example"}
    )
    assert response.status == 200, response
    assert response.header("Access-Control-Allow-Origin") == "http://a.example"
    assert response.header("Access-Control-Allow-Credentials") == "true"
    exposed = {h.strip().lower() for h in (response.header("Access-Control-Expose-Headers") or "").split(",")}
    assert "x-ms-meta-*" not in exposed  # a wildcard entry names the response's matching headers (none here)
    assert {"x-ms-request-id", "x-ms-version", "content-type"} <= exposed
    assert "origin" in (response.header("Vary") or "").lower()


def test_actual_request_from_wildcard_origin(configured_server: ServerProcess, table_name: str) -> None:
    raw = RawClient(configured_server.port)
    assert raw.create_table(table_name).status == 201
    response = raw.request("DELETE", f"Tables('{table_name}')", headers={"Origin": "http://z.example"})
    assert response.status == 204, response
    assert response.header("Access-Control-Allow-Origin") == "*"
    assert response.header("Access-Control-Expose-Headers")


@pytest.mark.parametrize(
    ("origin", "method"),
    [("http://evil.example", "GET"), ("http://a.example", "POST")],
    ids=["origin", "method"],
)
def test_actual_request_without_matching_rule_gets_no_cors_headers(
    configured_server: ServerProcess, table_name: str, origin: str, method: str
) -> None:
    raw = RawClient(configured_server.port)
    if method == "GET":
        response = raw.request("GET", "Tables", headers={"Origin": origin})
        assert response.status == 200, response
    else:
        response = raw.request(
            "POST", "Tables", {"TableName": table_name}, {"Origin": origin, "Content-Type": JSON_NOMETADATA}
        )
        assert response.status == 201, response
    assert _cors_headers(response) == {}


def test_preflight_needs_no_credentials_but_actual_request_does(configured_server: ServerProcess) -> None:
    anonymous = RawClient(configured_server.port).request(
        "GET", "Tables", headers={"Origin": "http://a.example"}, auth="none"
    )
    assert anonymous.status == 401, anonymous


# ------------------------------------------------------------------------------------------
# Stats
# ------------------------------------------------------------------------------------------


def test_stats_xml_shape(server: ServerProcess) -> None:
    response = RawClient(server.port).request(
        "GET",
        "/?restype=service&comp=stats",
        None,
        {"Accept": "application/xml"},
        path_prefix=f"/{DEV_ACCOUNT}-secondary",
    )
    assert response.status == 200, response
    assert (response.header("Content-Type") or "").startswith("application/xml")
    root = ET.fromstring(response.body)
    assert root.tag == "StorageServiceStats"
    assert [child.tag for child in root] == ["GeoReplication"]
    assert root.findtext("GeoReplication/Status") in {"live", "bootstrap", "unavailable"}
    assert RFC1123_RE.match(root.findtext("GeoReplication/LastSyncTime") or "")


def test_stats_on_the_primary_endpoint_is_400(server: ServerProcess) -> None:
    """Get Service Stats exists on the secondary endpoint only; Azure answers the primary with
    400 ``InvalidQueryParameterValue`` in the Table service's ``m:error`` form. (The SDK always
    sends it to the secondary, ``test_stats_via_sdk``.)"""
    response = RawClient(server.port).request(
        "GET", "/?restype=service&comp=stats", None, {"Accept": "application/xml"}
    )
    assert response.status == 400, response
    assert response.header("x-ms-error-code") == "InvalidQueryParameterValue"
    root = ET.fromstring(response.body)
    metadata = "{http://schemas.microsoft.com/ado/2007/08/dataservices/metadata}"
    assert root.tag == f"{metadata}error"
    assert root.findtext(f"{metadata}code") == "InvalidQueryParameterValue"
    assert (root.findtext(f"{metadata}message") or "").startswith(
        "Value for one of the query parameters specified in the request URI is invalid."
    )


def test_stats_via_sdk(service: TableServiceClient) -> None:
    stats = service.get_service_stats()
    assert stats["geo_replication"]["status"] in {"live", "bootstrap", "unavailable"}
    assert stats["geo_replication"]["last_sync_time"].tzinfo is not None


def test_bad_restype_or_comp_is_400(raw: RawClient) -> None:
    for query in ("?restype=service&comp=nonsense", "?restype=container&comp=properties"):
        response = raw.request("GET", query, None, {"Accept": "application/xml"})
        assert response.status == 400, response
        assert response.header("x-ms-error-code") == "InvalidQueryParameterValue"


def test_write_to_stats_is_refused(raw: RawClient) -> None:
    response = raw.request("PUT", "?restype=service&comp=stats", b"<x/>", XML_HEADERS)
    assert response.status == 405, response
    assert response.header("x-ms-error-code") == "MethodNotAllowed"
