"""CORS headers on actual (non-preflight) requests, row by row of Azure's table ("CORS support for
the Azure Storage services", "Understanding how the Vary header is set"):

=======  =====  ==========  ============  ===========  ==========  =========
Origin   rules  ``*`` rule  exact match   Vary Origin  ACAO ``*``  expose
=======  =====  ==========  ============  ===========  ==========  =========
no       no     -           -             no           no          no
no       yes    no          -             yes          no          no
no       yes    yes         -             no           yes         yes
yes      no     -           -             no           no          no
yes      yes    no          yes           yes          no (origin) yes
yes      yes    no          no            yes          no          no
yes      yes    yes         no            no           yes         yes
=======  =====  ==========  ============  ===========  ==========  =========

for GET and HEAD; other methods never get ``Vary``. Each test sets the rules it needs on a
server of its own (one worker, so the rules apply at once), on every store.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from azure.data.tables import TableCorsRule, TableServiceClient

from tests.backends import backend_names
from tests.conftest import fresh_store
from tests.rawhttp import JSON_NOMETADATA, RawClient, RawResponse
from tests.serverproc import ServerProcess

EXACT = TableCorsRule(["http://a.example"], ["GET", "HEAD", "POST"], exposed_headers=["x-ms-meta-*"])
WILDCARD = TableCorsRule(["*"], ["GET", "HEAD", "POST"])


@pytest.fixture(scope="module", params=backend_names())
def cors_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    extra = ["--workers", "1"]
    extra += fresh_store(request.param)
    process = ServerProcess(tmp_path_factory.mktemp("cors"), extra_args=extra).start()
    yield process
    process.stop()


def _rules(server: ServerProcess, rules: list[TableCorsRule]) -> RawClient:
    with TableServiceClient.from_connection_string(server.connection_string) as client:
        client.set_service_properties(cors=rules)
    return RawClient(server.port)


def _get(raw: RawClient, origin: str | None) -> RawResponse:
    response = raw.request("GET", "Tables", headers={"Origin": origin})
    assert response.status == 200, response
    return response


def _summary(response: RawResponse) -> tuple[str | None, str | None, bool]:
    """(Vary, Access-Control-Allow-Origin, whether Access-Control-Expose-Headers is there)."""
    exposed = response.header("Access-Control-Expose-Headers") is not None
    return response.header("Vary"), response.header("Access-Control-Allow-Origin"), exposed


def test_no_rules(cors_server: ServerProcess) -> None:
    raw = _rules(cors_server, [])
    assert _summary(_get(raw, None)) == (None, None, False)
    assert _summary(_get(raw, "http://a.example")) == (None, None, False)


def test_rules_for_exact_origins(cors_server: ServerProcess) -> None:
    raw = _rules(cors_server, [EXACT])
    assert _summary(_get(raw, None)) == ("Origin", None, False)
    matched = _get(raw, "http://a.example")
    assert _summary(matched) == ("Origin", "http://a.example", True)
    assert matched.header("Access-Control-Allow-Credentials") == "true"
    assert "x-ms-request-id" in (matched.header("Access-Control-Expose-Headers") or "")
    assert _summary(_get(raw, "http://evil.example")) == ("Origin", None, False)


def test_a_rule_for_every_origin(cors_server: ServerProcess) -> None:
    raw = _rules(cors_server, [WILDCARD])
    assert _summary(_get(raw, None)) == (None, "*", True)
    assert _summary(_get(raw, "http://anywhere.example")) == (None, "*", True)
    assert _get(raw, "http://anywhere.example").header("Access-Control-Allow-Credentials") is None


def test_exact_and_wildcard_rules_together(cors_server: ServerProcess) -> None:
    raw = _rules(cors_server, [EXACT, WILDCARD])
    assert _summary(_get(raw, "http://a.example")) == ("Origin", "http://a.example", True)
    assert _summary(_get(raw, "http://b.example")) == (None, "*", True)
    assert _summary(_get(raw, None)) == (None, "*", True)


def test_other_methods_never_vary(cors_server: ServerProcess, table_name: str) -> None:
    raw = _rules(cors_server, [EXACT])
    headers: dict[str, str | None] = {"Content-Type": JSON_NOMETADATA}
    created = raw.request(
        "POST", "Tables", {"TableName": table_name}, {**headers, "Origin": "http://a.example"}
    )
    assert created.status == 201, created
    assert _summary(created) == (None, "http://a.example", True)
    refused = raw.request(
        "POST", "Tables", {"TableName": table_name + "x"}, {**headers, "Origin": "http://e.example"}
    )
    assert _summary(refused) == (None, None, False)
    plain = raw.request("POST", "Tables", {"TableName": table_name + "y"}, headers)
    assert _summary(plain) == (None, None, False)


def test_service_properties_through_the_sdk(cors_server: ServerProcess) -> None:
    """The recorded case: Get Service Properties without Origin carries Vary: Origin when the
    account has rules, Set Service Properties never does."""
    _rules(cors_server, [EXACT])
    seen: dict[str, str | None] = {}

    def hook(response: object) -> None:
        http = response.http_response  # type: ignore[attr-defined]
        seen[http.request.method] = http.headers.get("Vary")

    with TableServiceClient.from_connection_string(cors_server.connection_string) as client:
        client.get_service_properties(raw_response_hook=hook)
        client.set_service_properties(cors=[EXACT], raw_response_hook=hook)
    assert seen == {"GET": "Origin", "PUT": None}


def test_errors_carry_vary_too(cors_server: ServerProcess) -> None:
    raw = _rules(cors_server, [EXACT])
    response = raw.request("GET", "nosuchtable()", headers={"Origin": "http://evil.example"})
    assert response.status == 404, response
    assert _summary(response) == ("Origin", None, False)
