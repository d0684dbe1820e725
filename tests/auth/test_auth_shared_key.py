"""Shared Key / Shared Key Lite verification: worked examples and the real SDK's signer."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests.utils
import yarl
from azure.core.credentials import AzureNamedKeyCredential
from azure.core.pipeline.transport import AsyncHttpTransport, HttpTransport
from azure.data.tables import TableAccessPolicy, TableClient, TableServiceClient, UpdateMode
from azure.data.tables.aio import TableClient as AsyncTableClient

from tabulae.auth.shared_key import (
    canonical_resources,
    parse_rfc1123,
    sign,
    string_to_sign_shared_key,
    string_to_sign_shared_key_lite,
    verify_authorization,
)
from tabulae.model.errors import ServiceError

DEV_ACCOUNT = "devstoreaccount1"
DEV_KEY_B64 = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
DEV_KEY = base64.b64decode(DEV_KEY_B64)
OTHER_KEY = bytes(range(64))
DATE = "Mon, 01 Jan 2024 00:00:00 GMT"
DATE_TS = 1704067200.0  # DATE as a Unix timestamp


def _verify(header: str, **overrides: Any) -> None:
    """verify_authorization with the spec's example defaults, overridable per test."""
    kwargs: dict[str, Any] = {
        "method": "GET",
        "raw_path": "/devstoreaccount1/mytable()",
        "comp": None,
        "content_md5": "",
        "content_type": "",
        "x_ms_date": DATE,
        "date": DATE,
        "account": DEV_ACCOUNT,
        "keys": [DEV_KEY],
    }
    kwargs.update(overrides)
    verify_authorization(header, **kwargs)


def _header(sts: str, key: bytes = DEV_KEY, scheme: str = "SharedKey", account: str = DEV_ACCOUNT) -> str:
    return f"{scheme} {account}:{sign(key, sts)}"


# --------------------------------------------------------------------------- spec worked examples

# Worked examples: (method, content type, raw path, comp, account, string-to-sign, signature).
SPEC_EXAMPLES = [
    (
        "POST",
        "application/json;odata=nometadata",
        "/devstoreaccount1/Tables",
        None,
        DEV_ACCOUNT,
        "POST\n\napplication/json;odata=nometadata\nMon, 01 Jan 2024 00:00:00 GMT\n"
        "/devstoreaccount1/devstoreaccount1/Tables",
        "VVEni35dYYPP+Qk8tDErfbBKYUstV8A3uqbQVnV53eM=",
    ),
    (
        "GET",
        "",
        "/devstoreaccount1/mytable(PartitionKey='p%27%271',RowKey='r1')",
        None,
        DEV_ACCOUNT,
        "GET\n\n\nMon, 01 Jan 2024 00:00:00 GMT\n"
        "/devstoreaccount1/devstoreaccount1/mytable(PartitionKey='p%27%271',RowKey='r1')",
        "Wg+YofoC6gV5jMt8EsoXtgbxxymPhLB6cneU4nHHuMc=",
    ),
    (
        "PUT",
        "application/xml",
        "/devstoreaccount1/mytable",
        "acl",
        DEV_ACCOUNT,
        "PUT\n\napplication/xml\nMon, 01 Jan 2024 00:00:00 GMT\n"
        "/devstoreaccount1/devstoreaccount1/mytable?comp=acl",
        "Ug//XSlCQwAPh8Ev2fFxLqvfLZJa+i+FjrwIm4fFLhk=",
    ),
    (
        "POST",
        "multipart/mixed; boundary=batch_00000000-0000-0000-0000-000000000000",
        "/devstoreaccount1/$batch",
        None,
        DEV_ACCOUNT,
        "POST\n\nmultipart/mixed; boundary=batch_00000000-0000-0000-0000-000000000000\n"
        "Mon, 01 Jan 2024 00:00:00 GMT\n/devstoreaccount1/devstoreaccount1/$batch",
        "b9iVn9+z5FGg8fH7r7b9sY3I/ZfNwg/cx3TokJU75Lc=",
    ),
    (
        "GET",
        "",
        "/devstoreaccount1/",
        "properties",
        DEV_ACCOUNT,
        "GET\n\n\nMon, 01 Jan 2024 00:00:00 GMT\n/devstoreaccount1/devstoreaccount1/?comp=properties",
        "2liFgIiObl5aRPasZ3MFF1l6Gx0Kg+dzOux8uJ6xJnE=",
    ),
    (
        "GET",
        "",
        "/mytable()",
        None,
        "myaccount",
        "GET\n\n\nMon, 01 Jan 2024 00:00:00 GMT\n/myaccount/mytable()",
        "j+mnvIloDsN5+gjEGnSYc68CKnc43o1dAn2/jxlBARQ=",
    ),
]


@pytest.mark.parametrize(
    ("method", "content_type", "raw_path", "comp", "account", "sts", "signature"), SPEC_EXAMPLES
)
def test_spec_shared_key_examples(
    method: str, content_type: str, raw_path: str, comp: str | None, account: str, sts: str, signature: str
) -> None:
    resource = canonical_resources(account, raw_path, comp)[0]
    built = string_to_sign_shared_key(method, "", content_type, DATE, resource)
    assert built == sts
    assert sign(DEV_KEY, built) == signature
    _verify(
        f"SharedKey {account}:{signature}",
        method=method,
        raw_path=raw_path,
        comp=comp,
        content_type=content_type,
        account=account,
    )


def test_spec_shared_key_lite_example() -> None:
    resource = canonical_resources(DEV_ACCOUNT, "/devstoreaccount1/mytable()", None)[0]
    sts = string_to_sign_shared_key_lite(DATE, resource)
    assert sts == "Mon, 01 Jan 2024 00:00:00 GMT\n/devstoreaccount1/devstoreaccount1/mytable()"
    assert sign(DEV_KEY, sts) == "lFCDejCFjS/75gYw7uZDqxs5cV7dpD++gcWayVaulBs="
    # Lite ignores method and content type: a POST with a body type verifies with the same header.
    _verify(
        "SharedKeyLite devstoreaccount1:lFCDejCFjS/75gYw7uZDqxs5cV7dpD++gcWayVaulBs=",
        method="POST",
        content_type="application/json",
    )


def test_captured_secondary_stats_request_matches_candidate_three() -> None:
    raw_path = "/devstoreaccount1-secondary/devstoreaccount1/"
    candidates = canonical_resources(DEV_ACCOUNT, raw_path, "stats")
    assert candidates == [
        "/devstoreaccount1/devstoreaccount1-secondary/devstoreaccount1/?comp=stats",
        "/devstoreaccount1/devstoreaccount1/devstoreaccount1/?comp=stats",
        "/devstoreaccount1/devstoreaccount1/?comp=stats",
    ]
    captured_date = "Sun, 22 Nov 2026 05:41:34 GMT"
    header = "SharedKey devstoreaccount1:4RNiWm7SD/7Fe9cW1sU0C02w8447eb2A93OgHfr+ck0="
    _verify(header, raw_path=raw_path, comp="stats", x_ms_date=captured_date, date=None)


# --------------------------------------------------------------------------- canonical resources


def test_canonical_resources_host_and_path_style() -> None:
    assert canonical_resources("acct", "/Tables", None) == ["/acct/Tables"]
    assert canonical_resources("acct", "/acct/Tables", None) == ["/acct/acct/Tables"]
    assert canonical_resources("acct", "/", "properties") == ["/acct/?comp=properties"]


def test_canonical_resources_secondary_path_style() -> None:
    assert canonical_resources("acct", "/acct-secondary/t()", None) == [
        "/acct/acct-secondary/t()",
        "/acct/acct/t()",
        "/acct/t()",
    ]
    assert canonical_resources("acct", "/acct-secondary", None) == [
        "/acct/acct-secondary",
        "/acct/acct",
        "/acct/",
    ]


def test_canonical_resources_only_whole_secondary_segment() -> None:
    assert canonical_resources("acct", "/acct-secondaryx/t()", None) == ["/acct/acct-secondaryx/t()"]
    assert canonical_resources("acct", "/t/acct-secondary/", None) == ["/acct/t/acct-secondary/"]


def test_path_is_signed_raw_not_decoded() -> None:
    raw_path = "/devstoreaccount1/mytable(PartitionKey='a%20b',RowKey='%C3%BC')"
    decoded_sts = string_to_sign_shared_key(
        "GET", "", "", DATE, "/devstoreaccount1/devstoreaccount1/mytable(PartitionKey='a b',RowKey='ü')"
    )
    with pytest.raises(ServiceError) as info:
        _verify(_header(decoded_sts), raw_path=raw_path)
    assert info.value.code == "AuthenticationFailed"
    raw_sts = string_to_sign_shared_key("GET", "", "", DATE, f"/devstoreaccount1{raw_path}")
    _verify(_header(raw_sts), raw_path=raw_path)


# --------------------------------------------------------------------------- the SDK's own signer


class _Captured(Exception):
    """Raised by the fake transports to hand the signed request back to the test."""

    def __init__(self, request: Any) -> None:
        super().__init__("captured")
        self.request = request


class _CaptureTransport(HttpTransport):
    def __enter__(self) -> _CaptureTransport:
        return self

    def __exit__(self, *args: object) -> None:
        return None

    def open(self) -> None:
        return None

    def close(self) -> None:
        return None

    def send(self, request: Any, **kwargs: Any) -> Any:
        raise _Captured(request)


class _AsyncCaptureTransport(AsyncHttpTransport):
    async def __aenter__(self) -> _AsyncCaptureTransport:
        return self

    async def __aexit__(self, *args: object) -> None:
        return None

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def send(self, request: Any, **kwargs: Any) -> Any:
        raise _Captured(request)


def _capture(call: Callable[[], Any]) -> Any:
    with pytest.raises(_Captured) as info:
        call()
    return info.value.request


def _verify_sdk_request(request: Any, wire_url: str, account: str) -> None:
    """Verify as the server would: raw path from the request line, only ``comp`` from the query."""
    parts = urlsplit(wire_url)
    comp = parse_qs(parts.query).get("comp", [None])[0]
    verify_authorization(
        request.headers["Authorization"],
        method=request.method,
        raw_path=parts.path,
        comp=comp,
        content_md5=request.headers.get("Content-MD5", ""),
        content_type=request.headers.get("Content-Type", ""),
        x_ms_date=request.headers.get("x-ms-date"),
        date=request.headers.get("Date"),
        account=account,
        keys=[OTHER_KEY, DEV_KEY],
    )


def _sync_wire_url(url: str) -> str:
    """What the requests transport puts on the request line (it re-quotes the URL)."""
    return requests.utils.requote_uri(url)


def _async_wire_url(url: str) -> str:
    """What aiohttp puts on the request line (yarl normalises percent-encoding)."""
    return str(yarl.URL(url))


SPECIAL_KEYS = ["p'1", "it's", "50%", "100%25", "a b", " lead", "ünïcødé", "€😀", "x/y?#&+=", "''"]
ENDPOINTS = [
    ("http://127.0.0.1:10002/devstoreaccount1", DEV_ACCOUNT),
    ("https://devstoreaccount1.table.core.windows.net", DEV_ACCOUNT),
]


def _credential() -> AzureNamedKeyCredential:
    return AzureNamedKeyCredential(DEV_ACCOUNT, DEV_KEY_B64)


@pytest.mark.parametrize(("endpoint", "account"), ENDPOINTS)
@pytest.mark.parametrize("key", SPECIAL_KEYS)
def test_sdk_entity_requests_verify(endpoint: str, account: str, key: str) -> None:
    client = TableClient(endpoint, "mytable", credential=_credential(), transport=_CaptureTransport())
    entity = {"PartitionKey": key, "RowKey": key + "r", "v": 1}
    calls: list[Callable[[], Any]] = [
        lambda: client.get_entity(key, key),
        lambda: client.upsert_entity(entity),
        lambda: client.upsert_entity(entity, mode=UpdateMode.REPLACE),
        lambda: client.update_entity(entity),
        lambda: client.delete_entity(key, key),
        lambda: client.create_entity(entity),
        lambda: list(client.query_entities("PartitionKey eq @pk", parameters={"pk": key})),
    ]
    for call in calls:
        request = _capture(call)
        _verify_sdk_request(request, _sync_wire_url(request.url), account)


@pytest.mark.parametrize("key", SPECIAL_KEYS)
def test_sdk_async_entity_requests_verify(key: str) -> None:
    async def run() -> list[Any]:
        client = AsyncTableClient(
            ENDPOINTS[0][0], "mytable", credential=_credential(), transport=_AsyncCaptureTransport()
        )
        captured = []
        for coro in (client.get_entity(key, key), client.delete_entity(key, key)):
            with pytest.raises(_Captured) as info:
                await coro
            captured.append(info.value.request)
        return captured

    for request in asyncio.run(run()):
        _verify_sdk_request(request, _async_wire_url(request.url), DEV_ACCOUNT)


@pytest.mark.parametrize(("endpoint", "account"), ENDPOINTS)
def test_sdk_table_and_service_requests_verify(endpoint: str, account: str) -> None:
    service = TableServiceClient(endpoint, credential=_credential(), transport=_CaptureTransport())
    table = service.get_table_client("mytable")
    calls: list[Callable[[], Any]] = [
        lambda: service.create_table("mytable"),
        lambda: service.delete_table("mytable"),
        lambda: list(service.list_tables()),
        lambda: service.get_service_properties(),
        lambda: service.set_service_properties(analytics_logging=None, cors=[]),
        lambda: table.get_table_access_policy(),
        lambda: table.set_table_access_policy({"id1": TableAccessPolicy(permission="r")}),
        lambda: table.submit_transaction([("upsert", {"PartitionKey": "p'1", "RowKey": "r 1"})]),
    ]
    for call in calls:
        request = _capture(call)
        _verify_sdk_request(request, _sync_wire_url(request.url), account)


@pytest.mark.parametrize(("endpoint", "account"), ENDPOINTS)
def test_sdk_secondary_stats_request_verifies(endpoint: str, account: str) -> None:
    service = TableServiceClient(endpoint, credential=_credential(), transport=_CaptureTransport())
    request = _capture(service.get_service_stats)
    assert "-secondary" in request.url
    _verify_sdk_request(request, _sync_wire_url(request.url), account)


def test_sdk_signs_with_secondary_key_too() -> None:
    """A client holding the secondary key authenticates: both account keys are tried."""
    credential = AzureNamedKeyCredential(DEV_ACCOUNT, base64.b64encode(OTHER_KEY).decode())
    client = TableClient(ENDPOINTS[0][0], "mytable", credential=credential, transport=_CaptureTransport())
    request = _capture(lambda: client.get_entity("p", "r"))
    _verify_sdk_request(request, request.url, DEV_ACCOUNT)


# --------------------------------------------------------------------------- adversarial

STS = string_to_sign_shared_key("GET", "", "", DATE, "/devstoreaccount1/devstoreaccount1/mytable()")


def _code(header: str, **overrides: Any) -> ServiceError:
    with pytest.raises(ServiceError) as info:
        _verify(header, **overrides)
    return info.value


def test_forged_signature_fails_and_detail_is_safe() -> None:
    forged = base64.b64encode(b"\x00" * 32).decode()
    error = _code(f"SharedKey devstoreaccount1:{forged}")
    assert error.code == "AuthenticationFailed"
    assert error.status == 403
    assert error.detail is not None
    assert f"'{STS}'" in error.detail
    for secret in (DEV_KEY_B64, forged, DEV_KEY.hex()):
        assert secret not in (error.detail + error.message)


def test_signature_with_unknown_key_fails() -> None:
    assert _code(_header(STS, key=OTHER_KEY)).code == "AuthenticationFailed"


def test_secondary_key_accepted() -> None:
    _verify(_header(STS, key=OTHER_KEY), keys=[DEV_KEY, OTHER_KEY])


def test_no_keys_never_verifies() -> None:
    assert _code(_header(STS), keys=[]).code == "AuthenticationFailed"


def test_wrong_account_in_header_fails() -> None:
    sts = string_to_sign_shared_key("GET", "", "", DATE, "/devstoreaccount1/devstoreaccount1/mytable()")
    assert _code(_header(sts, account="otheraccount")).code == "AuthenticationFailed"
    assert _code(_header(sts, account="DevStoreAccount1")).code == "AuthenticationFailed"


def test_secondary_account_names_normalised() -> None:
    _verify(_header(STS, account="devstoreaccount1-secondary"))
    _verify(_header(STS), account="devstoreaccount1-secondary")


def test_scheme_mismatch_fails() -> None:
    lite = string_to_sign_shared_key_lite(DATE, "/devstoreaccount1/devstoreaccount1/mytable()")
    assert _code(_header(lite, scheme="SharedKey")).code == "AuthenticationFailed"
    assert _code(_header(STS, scheme="SharedKeyLite")).code == "AuthenticationFailed"


def test_other_request_fields_are_covered() -> None:
    header = _header(STS)
    assert _code(header, method="DELETE").code == "AuthenticationFailed"
    assert _code(header, raw_path="/devstoreaccount1/other()").code == "AuthenticationFailed"
    assert _code(header, comp="acl").code == "AuthenticationFailed"
    assert _code(header, content_type="application/json").code == "AuthenticationFailed"
    assert _code(header, content_md5="1B2M2Y8AsgTpgAmY7PhCfg==").code == "AuthenticationFailed"
    assert _code(header, x_ms_date="Tue, 02 Jan 2024 00:00:00 GMT").code == "AuthenticationFailed"


@pytest.mark.parametrize(
    "header",
    [
        "",
        "   ",
        "SharedKey",
        "SharedKey devstoreaccount1",
        "SharedKey devstoreaccount1:",
        "SharedKey :abcd",
        "Basic devstoreaccount1:abcd",
        "Bearer eyJhbGciOi.x.y",
        "SharedKeyX devstoreaccount1:abcd",
        "SharedKey devstoreaccount1:not*base64!",
        "SharedKey devstoreaccount1:abc",
    ],
)
def test_malformed_headers(header: str) -> None:
    error = _code(header)
    assert error.code == "InvalidAuthenticationInfo"
    assert error.status == 400


def test_lenient_whitespace_and_scheme_case() -> None:
    signature = sign(DEV_KEY, STS)
    _verify(f"  SharedKey   devstoreaccount1 : {signature}  ")
    _verify(f"sharedkey devstoreaccount1:{signature}")
    _verify(f"\tSharedKey devstoreaccount1:{signature}\r\n")


def test_missing_date_fails() -> None:
    error = _code(_header(STS), x_ms_date=None, date=None)
    assert error.code == "AuthenticationFailed"
    assert _code(_header(STS), x_ms_date="", date="").code == "AuthenticationFailed"


def test_date_header_used_when_no_x_ms_date() -> None:
    _verify(_header(STS), x_ms_date=None, date=DATE)


def test_x_ms_date_takes_precedence_over_date() -> None:
    _verify(_header(STS), x_ms_date=DATE, date="Tue, 02 Jan 2024 00:00:00 GMT")
    other = string_to_sign_shared_key(
        "GET", "", "", "Tue, 02 Jan 2024 00:00:00 GMT", "/devstoreaccount1/devstoreaccount1/mytable()"
    )
    assert _code(_header(other), date="Tue, 02 Jan 2024 00:00:00 GMT").code == "AuthenticationFailed"


def test_skew_check_off_by_default() -> None:
    _verify(_header(STS), now=DATE_TS + 10 * 365 * 86400)


def test_skew_within_limit_passes() -> None:
    _verify(_header(STS), now=DATE_TS + 899, max_skew_seconds=900)
    _verify(_header(STS), now=DATE_TS - 899, max_skew_seconds=900)


def test_skew_too_old() -> None:
    error = _code(_header(STS), now=DATE_TS + 901, max_skew_seconds=900)
    assert error.code == "AuthenticationFailed"
    assert error.detail == f"Request date header too old: '{DATE}'"


def test_skew_too_far_ahead() -> None:
    """Ahead of the clock by more than the skew is refused like too old (Azure serves it)."""
    for ahead in (901, 86400):
        error = _code(_header(STS), now=DATE_TS - ahead, max_skew_seconds=900)
        assert error.code == "AuthenticationFailed"
        assert error.detail == f"Request date header too far in the future: '{DATE}'"


@pytest.mark.parametrize(
    "bad_date",
    ["2024-01-01T00:00:00Z", "Mon, 1 Jan 2024 00:00:00 GMT", "Mon, 01 Foo 2024 00:00:00 GMT", "yesterday"],
)
def test_unparseable_date_fails_when_skew_checked(bad_date: str) -> None:
    sts = string_to_sign_shared_key("GET", "", "", bad_date, "/devstoreaccount1/devstoreaccount1/mytable()")
    error = _code(_header(sts), x_ms_date=bad_date, now=DATE_TS, max_skew_seconds=900)
    assert error.code == "AuthenticationFailed"
    assert error.detail == "The Date header in the request is incorrect."


def test_parse_rfc1123() -> None:
    assert parse_rfc1123(DATE).timestamp() == DATE_TS
    with pytest.raises(ValueError):
        parse_rfc1123("Mon, 01 Jan 2024 25:00:00 GMT")
