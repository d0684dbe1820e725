"""Hostile input over HTTP (issue #7): fuzzed requests to a real server (``--workers 2``) get a
well-formed Azure error or a success, never a 5xx, a hang or a dead worker.

Each case is one request built by Hypothesis from the strategies of the in-process fuzzer
(``tests/table/test_fuzz_parsers.py``): a method; a raw path with fuzzed table names and key
predicates; a query with fuzzed ``$filter``, ``$top``, ``$select``, ``$format``, ``comp``,
``restype`` and continuation tokens; fuzzed headers (``Content-Type``, ``Accept``, ``If-Match``,
``Prefer``, ``X-HTTP-Method`` once or twice, versions, CORS headers, …); and a fuzzed body (entity
JSON, ``$batch`` multipart, ACL or service-properties XML, random bytes), sometimes chunked.
Most requests are signed with Shared Key, correctly, so the fuzz reaches past authentication;
some carry a fuzzed SAS in the query instead (half of those correctly signed), a few nothing.

The property, for every response:

* a status below 500, or 501 ``NotImplemented`` (the service's answer to unsupported ``$filter``
  functions);
* 4xx/5xx bodies are Azure errors: JSON ``{"odata.error":{"code","message":{"lang","value"}}}``
  or XML ``<Error>``/``m:error``, with ``x-ms-error-code`` equal to the code in the body;
* a 202 batch response parses, and its failed part (if any) is such a JSON error;
* an answer within 15 s (a timeout is a hang) and never a dropped connection.

Afterwards both workers are the same processes as before (none died and was replaced), the
server logged no traceback, and the Azure SDK still works against it. The test prints the
number of cases and the statuses seen.
"""

from __future__ import annotations

import http.client
import json
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from azure.data.tables import TableServiceClient, UpdateMode
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabulae.auth.sas import parse_sas
from tabulae.table.api.sas import table_sas_string_to_sign
from tests.rawhttp import RawClient, RawResponse, py_keys
from tests.system.test_reliability_support import (
    BatchOp,
    IsolatedServer,
    azure_error_code,
    batch_request,
    parse_batch_response,
    wait_for_workers,
)
from tests.table.test_fuzz_parsers import (
    ACCOUNT,
    BATCH_WITH_SURROGATE_KEY,
    HUGE_INT64,
    LONE_SURROGATE_KEY,
    SUPERSCRIPT_INT64,
    Blob,
    _cors_rule,
    _properties_with,
    _signed_table_sas,
    batch_requests,
    dump_pairs,
    filter_texts,
    header_text,
    header_values,
    json_bodies,
    raw_fragment,
    raw_paths,
    sas_queries,
    sas_values,
    short_text,
    sign,
    typed_property,
    wire,
    xml_bodies,
)

CASES = 200
TABLE = "fuzztable"
TIMEOUT = 15.0
MAX_TARGET = 60_000


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IsolatedServer]:
    base = tmp_path_factory.mktemp("fuzz")
    server = IsolatedServer(base / "data", ["--workers", "2"], log_path=base / "server.log").start()
    try:
        wait_for_workers(server, 2)
        raw = server.raw()
        assert raw.create_table(TABLE).status == 201
        for pk, rk in (("p", "r"), ("p'x", ""), ("", "r")):
            assert raw.insert(TABLE, {"PartitionKey": pk, "RowKey": rk, "n": 1, "s": "x"}).status == 201
        yield server
    finally:
        server.stop()


# --------------------------------------------------------------------------------------------
# Requests
# --------------------------------------------------------------------------------------------


def _ascii_path(text: str) -> str:
    """Percent-encode what cannot go on a request line (the wire text is latin-1, one byte a char)."""
    return re.sub(r"[^\x21-\x7e]", lambda m: f"%{ord(m.group()):02X}", text)


def _header_safe(text: str) -> str:
    """A header value as HTTP carries it: bytes, which ``http.client`` writes from latin-1 text,
    so text beyond latin-1 goes as its UTF-8 bytes (what a client sending UTF-8 puts on the wire;
    ``http.client`` itself cannot send it); and without the controls an HTTP parser refuses
    (VCHAR, obs-text, space and tab remain)."""
    try:
        text.encode("latin-1")
    except UnicodeEncodeError:
        text = wire(text)
    return re.sub(r"[\x00-\x08\x0a-\x1f\x7f]", "", text)


def _query_value(value: str, raw: bool) -> str:
    return _ascii_path(value.encode("utf-8").decode("latin-1")) if raw else quote(value, safe="")


HEADER_NAMES = {
    "Content-Type": st.one_of(
        st.sampled_from(
            [
                "application/json",
                "application/json;odata=nometadata",
                "application/atom+xml",
                "application/xml",
                "text/plain",
                "multipart/mixed; boundary=x",
                "application/octet-stream",
            ]
        ),
        header_text,
    ),
    "Accept": header_values,
    "If-Match": st.one_of(
        st.sampled_from(["*", "W/\"datetime'2024-01-01T00%3A00%3A00Z'\"", 'W/""', "W/", '"x"', "*, *"]),
        header_text,
    ),
    "If-None-Match": st.sampled_from(["*", 'W/"x"']),
    "Prefer": st.one_of(
        st.sampled_from(["return-no-content", "return-content", "RETURN-CONTENT"]), header_text
    ),
    "X-HTTP-Method": st.one_of(
        st.sampled_from(["MERGE", "DELETE", "PUT", "PATCH", "GET", "merge"]), header_text
    ),
    "DataServiceVersion": st.one_of(st.sampled_from(["3.0", "1.0;NetFx", "4.0"]), header_text),
    "MaxDataServiceVersion": st.one_of(st.sampled_from(["3.0;NetFx", "2.0"]), header_text),
    "x-ms-version": st.one_of(
        st.sampled_from(["2019-02-02", "2020-12-06", "2009-09-19", "2099-01-01", "x"]), header_text
    ),
    "Content-MD5": header_text,
    "Origin": st.one_of(st.sampled_from(["http://example.com", "null", "*"]), header_text),
    "Access-Control-Request-Method": st.one_of(st.sampled_from(["GET", "PUT", "MERGE"]), header_text),
    "Access-Control-Request-Headers": header_text,
    "x-ms-client-request-id": header_text,
    "Range": header_text,
}
QUERY_NAMES = {
    "$filter": filter_texts,
    "$top": header_values,
    "$select": st.one_of(st.sampled_from(["*", "n,s", "n,,s", " ", "PartitionKey", "a/b"]), short_text),
    "$format": header_values,
    "comp": st.sampled_from(["acl", "properties", "stats", "list", "", "ACL"]),
    "restype": st.sampled_from(["service", "table", ""]),
    "NextPartitionKey": header_values,
    "NextRowKey": header_values,
    "NextTableName": header_values,
    "$orderby": short_text,
    "timeout": st.sampled_from(["30", "-1", "x"]),
}


class Case(dict[str, Any]):
    """One fuzzed request; its repr stays readable in Hypothesis reports however big it is."""

    def __repr__(self) -> str:
        shown = {
            key: (value if len(repr(value)) <= 800 else f"<{len(value)} long: {repr(value)[:400]}…>")
            for key, value in self.items()
        }
        return f"Case({shown!r})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


ACCOUNT_PATH = "/devstoreaccount1"
SCENARIOS = ["entity", "query", "batch"] * 2 + ["xml", "tables", "sas", "random", "random"]
ENTITY_PATHS = [
    f"{TABLE}(PartitionKey='p',RowKey='r')",
    f"{TABLE}(PartitionKey=%27p%27,RowKey=%27r%27)",
    f"{TABLE}(PartitionKey='p%27%27x',RowKey='')",
    f"{TABLE}(PartitionKey='new',RowKey='n1')",
    f"{TABLE}(RowKey='r',%20PartitionKey='p')",
    "missing(PartitionKey='p',RowKey='r')",
]
NUMERIC_EDGES = [
    "0",
    "1",
    "1000",
    "1001",
    "-1",
    "²",
    "٣",
    "１",
    "+5",
    "5.0",
    "1e3",
    " 5",
    "",
    "9" * 30,
    "9" * 4400,
]


def _entity_path(draw: st.DrawFn) -> str:
    if draw(st.booleans()):
        return draw(st.sampled_from(ENTITY_PATHS))
    pk, rk = draw(short_text), draw(short_text)
    return TABLE + py_keys(pk, rk)


@st.composite
def entity_bodies(draw: st.DrawFn, with_keys: bool) -> bytes:
    """Mostly-valid entity JSON: real keys (for inserts), plain properties and fuzzed typed ones."""
    pairs: list[tuple[str, Any]] = []
    if with_keys:
        pairs += [
            ("PartitionKey", draw(st.sampled_from(["p", "new", "", "p'x"]))),
            ("RowKey", draw(st.one_of(st.sampled_from(["r", "n1", "", "r'x"]), short_text))),
        ]
    for index in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            pairs.extend(draw(typed_property()))
        else:
            plain = st.one_of(st.integers(-(2**31), 2**31 - 1), st.booleans(), short_text)
            pairs.append((f"v{index}", draw(plain)))
    return Blob(dump_pairs(pairs))


@st.composite
def well_formed_batches(draw: st.DrawFn) -> tuple[str, bytes]:
    """A changeset the way the Python SDK writes it, with fuzzed operations and bodies."""
    partition = draw(st.sampled_from(["p", "new", "p'x"]))
    ops = []
    for index in range(draw(st.integers(1, 4))):
        method = draw(st.sampled_from(["POST", "PUT", "MERGE", "PATCH", "DELETE"]))
        row = draw(st.one_of(st.sampled_from(["r", f"b{index}", ""]), short_text))
        keys = py_keys(partition, row)
        headers = {}
        if method != "POST" and draw(st.booleans()):
            headers["If-Match"] = _header_safe(draw(HEADER_NAMES["If-Match"]))
        if draw(st.integers(0, 3)) == 0:
            headers["Prefer"] = _header_safe(draw(HEADER_NAMES["Prefer"]))
        if method == "POST":
            body = {"PartitionKey": partition, "RowKey": row, "n": draw(st.integers(-(2**40), 2**40))}
            ops.append(BatchOp("POST", TABLE, headers, body))
        elif method == "DELETE":
            ops.append(BatchOp("DELETE", TABLE + keys, {"If-Match": "*", **headers}))
        else:
            ops.append(
                BatchOp(method, TABLE + keys, headers, {"v": draw(st.one_of(st.integers(), short_text))})
            )
    return batch_request(f"http://127.0.0.1:10002/{ACCOUNT}", ops)


@st.composite
def valid_sas_queries(draw: st.DrawFn) -> dict[str, str]:
    """A table SAS that works, with up to two fields replaced by fuzzed values; signed correctly."""
    fields = {"sv": "2019-02-02", "tn": TABLE, "sp": "raud", "se": "2999-01-01T00:00:00Z"}
    for name in draw(
        st.lists(
            st.sampled_from(["sp", "st", "se", "sip", "spr", "spk", "srk", "epk", "erk", "tn", "si"]),
            max_size=2,
            unique=True,
        )
    ):
        fields[name] = draw(sas_values[name])
    token = parse_sas({**fields, "sig": "x"})
    assert token is not None
    fields["sig"] = sign(table_sas_string_to_sign(token, ACCOUNT))
    return fields


def _query(draw: st.DrawFn, names: list[str]) -> list[str]:
    query = []
    for name in names:
        if name in ("$top", "NextPartitionKey", "NextRowKey", "NextTableName") and draw(st.booleans()):
            value = draw(st.sampled_from(NUMERIC_EDGES))
        else:
            value = draw(QUERY_NAMES[name])
        query.append(f"{name}={_query_value(value, draw(st.booleans()))}")
    return query


@st.composite
def fuzz_requests(draw: st.DrawFn) -> Case:
    """One request from a scenario aimed at one parser, or a fully random one."""
    scenario = draw(st.sampled_from(SCENARIOS))
    headers: dict[str, str] = {}
    query: list[str] = []
    body: bytes | None = None
    auth = draw(st.sampled_from(["SharedKey"] * 9 + ["SharedKeyLite"]))
    if scenario == "entity":
        method = draw(st.sampled_from(["POST", "PUT", "MERGE", "PATCH", "DELETE", "GET"]))
        path = f"{ACCOUNT_PATH}/{TABLE}" if method == "POST" else f"{ACCOUNT_PATH}/{_entity_path(draw)}"
        if method == "GET":
            body = None
        elif draw(st.booleans()):
            body = draw(entity_bodies(method == "POST"))
        else:
            body = draw(json_bodies)
        headers["Content-Type"] = draw(
            st.sampled_from(["application/json", "application/json;odata=nometadata"])
        )
        if method in ("PUT", "MERGE", "PATCH", "DELETE") and draw(st.booleans()):
            headers["If-Match"] = _header_safe(draw(HEADER_NAMES["If-Match"]))
    elif scenario == "query":
        method = "GET"
        path = draw(
            st.sampled_from(
                [
                    f"{ACCOUNT_PATH}/{TABLE}()",
                    f"{ACCOUNT_PATH}/{TABLE}",
                    f"{ACCOUNT_PATH}/Tables",
                    f"{ACCOUNT_PATH}/{ENTITY_PATHS[0]}",
                ]
            )
        )
        query = _query(
            draw, draw(st.lists(st.sampled_from(sorted(QUERY_NAMES)), min_size=1, max_size=4, unique=True))
        )
    elif scenario == "batch":
        method, path = "POST", f"{ACCOUNT_PATH}/$batch"
        content_type, body = draw(st.one_of(well_formed_batches(), batch_requests()))
        headers["Content-Type"] = _header_safe(content_type)
    elif scenario == "xml":
        method = draw(st.sampled_from(["PUT", "PUT", "GET"]))
        if draw(st.booleans()):
            path, query = f"{ACCOUNT_PATH}/{TABLE}", ["comp=acl"]
        else:
            path, query = f"{ACCOUNT_PATH}/", ["restype=service", "comp=properties"]
        body = draw(xml_bodies) if method == "PUT" else None
    elif scenario == "tables":
        method = draw(st.sampled_from(["POST", "POST", "DELETE", "GET"]))
        if method == "POST":
            path = f"{ACCOUNT_PATH}/Tables"
            name = draw(
                st.one_of(short_text, st.sampled_from(["fuzzed", "Fuzzed2", "ab", "tables", "a" * 64]))
            )
            body = draw(st.one_of(st.just(f'{{"TableName":{_json_string(name)}}}'.encode()), json_bodies))
            headers["Content-Type"] = "application/json"
        elif method == "DELETE":
            path = f"{ACCOUNT_PATH}/Tables('{quote(draw(short_text), safe='')}')"
        else:
            path = f"{ACCOUNT_PATH}/Tables"
            query = _query(draw, ["$filter", "$top", "NextTableName"][: draw(st.integers(1, 3))])
    elif scenario == "sas":
        method = draw(st.sampled_from(["GET", "POST", "PUT", "DELETE"]))
        path = draw(
            st.sampled_from(
                [
                    f"{ACCOUNT_PATH}/{TABLE}()",
                    f"{ACCOUNT_PATH}/{TABLE}",
                    f"{ACCOUNT_PATH}/{ENTITY_PATHS[0]}",
                    f"{ACCOUNT_PATH}/Tables",
                ]
            )
        )
        body = draw(json_bodies) if method in ("POST", "PUT") else None
        sas = draw(st.one_of(valid_sas_queries(), valid_sas_queries(), sas_queries()))
        query = [f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in sas.items()]
        auth = "none"
    else:
        method = draw(st.sampled_from(["GET", "POST", "PUT", "MERGE", "PATCH", "DELETE", "OPTIONS", "HEAD"]))
        path = _ascii_path(draw(raw_paths()))
        query = _query(draw, draw(st.lists(st.sampled_from(sorted(QUERY_NAMES)), max_size=3, unique=True)))
        if draw(st.integers(0, 4)) == 0:
            query.append(f"{draw(raw_fragment)}={draw(raw_fragment)}")
        body = draw(st.one_of(st.none(), json_bodies, xml_bodies, st.binary(max_size=200).map(Blob)))
        auth = draw(st.sampled_from(["SharedKey", "SharedKey", "SharedKeyLite", "none"]))
        if auth == "none" and draw(st.booleans()):
            headers["Authorization"] = _header_safe(
                draw(st.one_of(st.sampled_from(["SharedKey x:y", "Bearer abc", "Basic Zm9v"]), header_text))
            )
    extra_names = (
        sorted(HEADER_NAMES) if scenario == "random" else sorted(set(HEADER_NAMES) - {"X-HTTP-Method"})
    )
    for name in draw(st.lists(st.sampled_from(extra_names), max_size=3, unique=True)):
        if draw(st.integers(0, 3)) == 0 or name not in headers:
            headers[name] = _header_safe(draw(HEADER_NAMES[name]))
    extra = [("X-HTTP-Method", "MERGE")] if scenario == "random" and draw(st.integers(0, 5)) == 0 else []
    # Longer request lines never reach the app (see test_overlong_url_gets_an_azure_error).
    target = _ascii_path(path + ("?" + "&".join(query) if query else ""))[:MAX_TARGET]
    return Case(
        {
            "scenario": scenario,
            "method": method,
            "target": target,
            "headers": headers,
            "extra": extra,
            "body": body,
            "auth": auth,
            "chunked": body is not None and draw(st.integers(0, 9)) == 0,
        }
    )


def _json_string(text: str) -> str:
    return json.dumps(text)


# --------------------------------------------------------------------------------------------
# Checking answers
# --------------------------------------------------------------------------------------------


def check_answer(method: str, response: RawResponse) -> None:
    status = response.status
    code = response.header("x-ms-error-code")
    assert status < 500 or (status == 501 and code == "NotImplemented"), f"server error: {response!r}"
    assert 200 <= status < 300 or status >= 400, f"unexpected status: {response!r}"
    if status >= 400:
        if method == "HEAD":
            assert code, response
        else:
            azure_error_code(response)
    elif status == 202 and (response.header("content-type") or "").startswith("multipart/mixed"):
        parts = parse_batch_response(response)
        assert parts, response
        failed = [part for part in parts if part.status >= 400]
        assert len(failed) <= 1 and (not failed or len(parts) == 1), response
        for part in failed:
            assert part.status < 500 or part.status == 501, f"server error in a batch part: {response!r}"
            assert part.body.startswith(b'{"odata.error":{"code":'), response


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(codec="utf-8")))
def test_header_values_are_what_http_can_carry(text: str) -> None:
    """Every fuzzed header value passes here; one ``http.client`` cannot encode (``Accept: ١``)
    failed the case as a client error, and Hypothesis's example database replayed it."""
    value = _header_safe(text)
    value.encode("latin-1")
    assert not re.search(r"[\x00-\x08\x0a-\x1f\x7f]", value)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(fuzz_requests())
def test_every_fuzzed_request_can_be_sent(case: dict[str, Any]) -> None:
    for _name, value in [*case["headers"].items(), *case["extra"]]:
        value.encode("latin-1")
    case["target"].encode("ascii")


def send(port: int, case: dict[str, Any]) -> RawResponse:
    client = RawClient(port)
    try:
        return client.request(
            case["method"],
            case["target"],
            case["body"],
            case["headers"],
            extra_headers=case["extra"],
            auth=case["auth"],
            path_prefix="",
            chunked=case["chunked"],
            timeout=TIMEOUT,
        )
    except TimeoutError as exc:
        raise AssertionError(f"no answer within {TIMEOUT}s (a hang)") from exc
    except (OSError, http.client.HTTPException) as exc:
        raise AssertionError(f"the connection broke without an answer: {exc!r}") from exc


@pytest.mark.timeout(300)
def test_fuzzed_requests_get_azure_errors_or_successes(
    fuzz_server: IsolatedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    workers_before = sorted(fuzz_server.worker_pids())
    assert len(workers_before) == 2
    statuses: Counter[int] = Counter()
    scenarios: Counter[tuple[str, int]] = Counter()

    @settings(
        max_examples=CASES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )
    @given(fuzz_requests())
    def check(case: dict[str, Any]) -> None:
        response = send(fuzz_server.port, case)
        statuses[response.status] += 1
        scenarios[(case["scenario"], response.status)] += 1
        check_answer(case["method"], response)

    try:
        check()
    finally:
        with capsys.disabled():
            total = sum(statuses.values())
            print(f"\n[fuzz] HTTP requests: {total} cases, statuses {dict(sorted(statuses.items()))}")
            by_scenario: dict[str, dict[int, int]] = {}
            for (scenario, status), number in sorted(scenarios.items()):
                by_scenario.setdefault(scenario, {})[status] = number
            print(f"[fuzz] by scenario: {by_scenario}")
    assert sum(statuses.values()) >= CASES

    # No worker died, nothing was logged as unexpected, and the SDK still works.
    assert fuzz_server.alive()
    assert sorted(fuzz_server.worker_pids()) == workers_before, "a worker died and was replaced"
    assert "Traceback" not in fuzz_server.log_text(), fuzz_server.log_tail()
    with TableServiceClient.from_connection_string(fuzz_server.connection_string, retry_total=0) as service:
        table = service.create_table("afterfuzz")
        table.upsert_entity({"PartitionKey": "p", "RowKey": "r", "v": 1}, mode=UpdateMode.REPLACE)
        assert table.get_entity("p", "r")["v"] == 1
        assert [e["RowKey"] for e in table.query_entities("PartitionKey eq 'p'")] == ["r"]
        service.delete_table("afterfuzz")


@pytest.mark.parametrize("length", [40_000, 70_000, 200_000])
def test_overlong_url_gets_an_azure_error(fuzz_server: IsolatedServer, length: int) -> None:
    """Azure accepts about 32 KiB of URL and answers longer ones with 414 RequestUrlTooLong;
    whatever the limit, the answer must be an Azure error, not the HTTP
    parser's plain-text 400."""
    target = f"{TABLE}()?$filter=" + quote("PartitionKey eq '" + "a" * length + "'", safe="")
    response = RawClient(fuzz_server.port).request("GET", target, timeout=TIMEOUT)
    if response.status == 200:
        assert response.json()["value"] == []
        return
    check_answer("GET", response)


def _known_cases() -> list[Any]:
    """Inputs the in-process fuzzer found to break a parser, replayed end to end over HTTP."""

    sas = _signed_table_sas(sv="2019-02-02", tn=TABLE, sp="r", st="0001-01-01T00:00Z", se="2999-01-01")
    sas_query = "&".join(f"{k}={quote(v, safe='')}" for k, v in sas.items())
    json_type = {"Content-Type": "application/json"}
    return [
        pytest.param(
            "POST", TABLE, LONE_SURROGATE_KEY, json_type, "SharedKey", id="insert-lone-surrogate-key"
        ),
        pytest.param(
            "POST", TABLE, SUPERSCRIPT_INT64, json_type, "SharedKey", id="insert-int64-superscript-two"
        ),
        pytest.param("POST", TABLE, HUGE_INT64, json_type, "SharedKey", id="insert-int64-4400-digits"),
        pytest.param(
            "PUT",
            f"{TABLE}(PartitionKey='p',RowKey='q')",
            SUPERSCRIPT_INT64,
            json_type,
            "SharedKey",
            id="upsert-int64-superscript-two",
        ),
        pytest.param(
            "POST",
            "$batch",
            BATCH_WITH_SURROGATE_KEY[1],
            {"Content-Type": BATCH_WITH_SURROGATE_KEY[0]},
            "SharedKey",
            id="batch-insert-lone-surrogate-key",
        ),
        pytest.param("GET", f"{TABLE}()?$top={'9' * 4301}", None, {}, "SharedKey", id="top-4301-digits"),
        pytest.param(
            "PUT",
            "?restype=service&comp=properties",
            _properties_with(_cors_rule("18446744073709551616")),
            {},
            "SharedKey",
            id="cors-max-age-2-to-the-64",
        ),
        pytest.param(
            "PUT",
            "?restype=service&comp=properties",
            _properties_with(_cors_rule("\u00b2")),
            {},
            "SharedKey",
            id="cors-max-age-superscript-two",
        ),
        pytest.param("GET", f"{TABLE}()?{sas_query}", None, {}, "none", id="sas-start-in-year-one"),
    ]


@pytest.mark.parametrize(("method", "target", "body", "headers", "auth"), _known_cases())
def test_known_hostile_inputs_get_azure_errors(
    fuzz_server: IsolatedServer,
    method: str,
    target: str,
    body: bytes | None,
    headers: dict[str, str],
    auth: str,
) -> None:
    response = RawClient(fuzz_server.port).request(method, target, body, headers, auth=auth, timeout=TIMEOUT)
    check_answer(method, response)
    if response.status == 202 and target == "$batch":
        assert parse_batch_response(response)[0].status < 500, response
