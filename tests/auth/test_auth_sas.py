"""SAS verification: worked table and account SAS examples, tokens from the real SDK, and attacks on them."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any
from urllib.parse import parse_qsl

import pytest
from azure.core.credentials import AzureNamedKeyCredential
from azure.data.tables import (
    AccountSasPermissions,
    ResourceTypes,
    SASProtocol,
    TableSasPermissions,
    generate_account_sas,
    generate_table_sas,
)

from tabulae.auth.sas import (
    SasToken,
    StoredPolicy,
    VerifiedSignatures,
    account_sas_string_to_sign,
    parse_iso8601,
    parse_sas,
)
from tabulae.model.errors import ServiceError
from tabulae.table.api.operations import Operation
from tabulae.table.api.sas import SasGrant, table_sas_string_to_sign, verify_sas

ACCOUNT = "devstoreaccount1"
DEV_KEY_B64 = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
DEV_KEY = base64.b64decode(DEV_KEY_B64)
OTHER_KEY = bytes(range(64))
START = datetime(2024, 1, 1, tzinfo=UTC)
EXPIRY = datetime(2024, 12, 31, tzinfo=UTC)
MID = datetime(2024, 6, 1, tzinfo=UTC)

ENTITY_OPS = [
    Operation.QUERY_ENTITIES,
    Operation.GET_ENTITY,
    Operation.INSERT_ENTITY,
    Operation.UPDATE_ENTITY,
    Operation.MERGE_ENTITY,
    Operation.UPSERT_REPLACE,
    Operation.UPSERT_MERGE,
    Operation.DELETE_ENTITY,
]
TABLE_OPS = [Operation.QUERY_TABLES, Operation.CREATE_TABLE, Operation.DELETE_TABLE, Operation.GET_TABLE]
SERVICE_OPS = [
    Operation.GET_SERVICE_PROPERTIES,
    Operation.SET_SERVICE_PROPERTIES,
    Operation.GET_SERVICE_STATS,
]
ACL_OPS = [Operation.GET_ACL, Operation.SET_ACL]


def _query(token: str) -> dict[str, str]:
    """Decode a token the way the HTTP layer will before calling parse_sas."""
    return dict(parse_qsl(token.lstrip("?"), keep_blank_values=True))


def _token(token: str) -> SasToken:
    parsed = parse_sas(_query(token))
    assert parsed is not None
    return parsed


def _verify(token: SasToken | str, **overrides: Any) -> SasGrant:
    kwargs: dict[str, Any] = {
        "account": ACCOUNT,
        "keys": [DEV_KEY],
        "table": "mytable",
        "policy_lookup": None,
        "is_https": True,
        "client_ip": "127.0.0.1",
        "now": MID,
    }
    kwargs.update(overrides)
    return verify_sas(_token(token) if isinstance(token, str) else token, **kwargs)


def _error(call: Callable[[], object]) -> ServiceError:
    with pytest.raises(ServiceError) as info:
        call()
    return info.value


def _signed(token: SasToken, key: bytes = DEV_KEY, account: str = ACCOUNT) -> SasToken:
    """Sign a hand-built token (string-to-sign formats are pinned by the spec examples below)."""
    sts = (
        account_sas_string_to_sign(token, account)
        if token.is_account
        else table_sas_string_to_sign(token, account)
    )
    sig = base64.b64encode(hmac.new(key, sts.encode(), hashlib.sha256).digest()).decode()
    return replace(token, sig=sig)


def _table_token(**fields: str | None) -> SasToken:
    base: dict[str, Any] = {
        "sig": "",
        "sv": "2019-02-02",
        "tn": "mytable",
        "sp": "raud",
        "st": "2024-01-01T00:00:00Z",
        "se": "2024-12-31T00:00:00Z",
    }
    base.update(fields)
    return _signed(SasToken(**base))


def _account_token(**fields: str | None) -> SasToken:
    base: dict[str, Any] = {
        "sig": "",
        "sv": "2019-02-02",
        "ss": "t",
        "srt": "sco",
        "sp": "rwdlacu",
        "st": "2024-01-01T00:00:00Z",
        "se": "2024-12-31T00:00:00Z",
    }
    base.update(fields)
    return _signed(SasToken(**base))


def _credential(key: bytes = DEV_KEY) -> AzureNamedKeyCredential:
    return AzureNamedKeyCredential(ACCOUNT, base64.b64encode(key).decode())


# --------------------------------------------------------------------------- spec worked examples

SPEC_TABLE_TOKEN = (
    "st=2024-01-01T00%3A00%3A00Z&se=2024-12-31T00%3A00%3A00Z&sp=raud&spr=https%2Chttp&sv=2019-02-02"
    "&tn=mytable&spk=a&epk=m&sig=F%2BND2bHRQNmMBKhJphAw0EFHhpgLTqtWGBprzS2/gNw%3D"
)
SPEC_ACCOUNT_TOKEN = (
    "st=2024-01-01T00%3A00%3A00Z&se=2024-12-31T00%3A00%3A00Z&sp=rwdlacu&sv=2019-02-02&ss=t&srt=soc"
    "&sig=cHVdxNV5gBK1Fpm%2BMIGmivCc9HSnuuVM1nJuCOEaefM%3D"
)


def test_spec_table_sas_example() -> None:
    token = _token(SPEC_TABLE_TOKEN)
    assert not token.is_account
    assert table_sas_string_to_sign(token, ACCOUNT) == (
        "raud\n2024-01-01T00:00:00Z\n2024-12-31T00:00:00Z\n/table/devstoreaccount1/mytable\n\n\n"
        "https,http\n2019-02-02\na\n\nm\n"
    )
    assert token.sig == "F+ND2bHRQNmMBKhJphAw0EFHhpgLTqtWGBprzS2/gNw="
    grant = _verify(token, is_https=False)
    assert grant.key_range == ("a", None, "m", None)
    assert grant.permissions == frozenset("raud")


def test_sdk_reproduces_spec_table_token_exactly() -> None:
    generated = generate_table_sas(
        _credential(),
        "mytable",
        permission="raud",
        start=START,
        expiry=EXPIRY,
        protocol="https,http",
        start_pk="a",
        end_pk="m",
    )
    assert generated == SPEC_TABLE_TOKEN


def test_spec_wire_token_with_mixed_case_table() -> None:
    wire = (
        "?st=2020-01-01T00%3A00%3A00Z&se=2030-01-01T00%3A00%3A00Z&sp=ra&sv=2019-02-02&tn=SasTable"
        "&spk=a&epk=z&sig=lidOwHKCBpV/1oTmN1T56dtf5v1ufRKT5SHEVqXs5uk%3D"
    )
    assert "/table/devstoreaccount1/sastable\n" in table_sas_string_to_sign(_token(wire), ACCOUNT)
    for table in ("SasTable", "sastable", "SASTABLE"):
        _verify(wire, table=table)


def test_spec_account_sas_example_one() -> None:
    token = _token(SPEC_ACCOUNT_TOKEN)
    assert token.is_account
    assert account_sas_string_to_sign(token, ACCOUNT) == (
        "devstoreaccount1\nrwdlacu\nt\nsoc\n2024-01-01T00:00:00Z\n2024-12-31T00:00:00Z\n\n\n2019-02-02\n"
    )
    grant = _verify(token, table=None)
    assert grant.resource_types == frozenset("soc")


def test_spec_account_sas_example_two_with_ses_line() -> None:
    token = SasToken(
        sig="/JyzSxLR2LyeMNLQdOIvjSHphsHXQL0ihsBFZ1XXldA=",
        sp="rwdlacu",
        ss="t",
        srt="sco",
        st="2024-01-01T00:00:00Z",
        se="2024-12-31T00:00:00Z",
        spr="https",
        sv="2021-06-08",
    )
    assert account_sas_string_to_sign(token, ACCOUNT) == (
        "devstoreaccount1\nrwdlacu\nt\nsco\n2024-01-01T00:00:00Z\n2024-12-31T00:00:00Z\n\nhttps\n2021-06-08\n\n"
    )
    _verify(token)


def test_sdk_reproduces_spec_account_token_exactly() -> None:
    generated = generate_account_sas(
        _credential(),
        ResourceTypes(service=True, container=True, object=True),
        "rwdlacu",
        EXPIRY,
        start=START,
    )
    assert generated == SPEC_ACCOUNT_TOKEN


def test_ses_is_signed_from_2020_12_06() -> None:
    with_scope = _account_token(sv="2020-12-06", ses="scope1")
    assert account_sas_string_to_sign(with_scope, ACCOUNT).endswith("\n2020-12-06\nscope1\n")
    _verify(with_scope)
    old = _account_token(sv="2020-10-02", ses="scope1")
    assert account_sas_string_to_sign(old, ACCOUNT).endswith("\n2020-10-02\n")


# --------------------------------------------------------------------------- tokens from the SDK

TABLE_SAS_VARIANTS: list[dict[str, Any]] = [
    {"permission": "r", "expiry": EXPIRY},
    {"permission": TableSasPermissions(read=True, add=True, update=True, delete=True), "expiry": EXPIRY},
    {"permission": "raud", "expiry": EXPIRY, "start": START},
    {"permission": "ra", "expiry": EXPIRY, "ip_address_or_range": "127.0.0.1"},
    {"permission": "ra", "expiry": EXPIRY, "ip_address_or_range": "127.0.0.0-127.0.0.255"},
    {"permission": "ra", "expiry": EXPIRY, "protocol": "https"},
    {"permission": "ra", "expiry": EXPIRY, "protocol": "https,http"},
    {"permission": "r", "expiry": EXPIRY, "start_pk": "a", "start_rk": "b", "end_pk": "y", "end_rk": "z"},
    {"permission": "r", "expiry": EXPIRY, "start_pk": "p'1 ü€", "end_pk": "q%2F&=+ x"},
    {"policy_id": "policy-all"},
    {"policy_id": "policy-partial", "permission": "r"},
    {
        "permission": "raud",
        "expiry": EXPIRY,
        "start": START,
        "ip_address_or_range": "10.0.0.0-127.255.255.255",
        "protocol": "https",
        "start_pk": "a",
        "start_rk": "0",
        "end_pk": "z",
        "end_rk": "9",
    },
    {"permission": "raud", "expiry": "2024-12-31", "start": "2024-01-01T00:00Z"},
    {"permission": "raud", "expiry": "2024-12-31T00:00:00.0000000Z", "start": "2023-12-31T19:00:00-05:00"},
]

POLICIES = {
    "policy-all": StoredPolicy(
        start="2024-01-01T00:00:00Z", expiry="2024-12-31T00:00:00Z", permission="raud"
    ),
    "policy-partial": StoredPolicy(start=None, expiry="2024-12-31T00:00:00Z", permission=None),
}


@pytest.mark.parametrize("table_name", ["mytable", "MyTable"])
@pytest.mark.parametrize("variant", TABLE_SAS_VARIANTS)
def test_sdk_table_sas_verifies(variant: dict[str, Any], table_name: str) -> None:
    generated = generate_table_sas(_credential(), table_name, **variant)
    token = _token(generated)
    assert token.sv == "2019-02-02"  # the SDK's default signed version
    grant = _verify(token, table="MYTABLE", policy_lookup=POLICIES.get)
    assert grant.table == table_name
    assert grant.key_range == (
        variant.get("start_pk"),
        variant.get("start_rk"),
        variant.get("end_pk"),
        variant.get("end_rk"),
    )
    grant.check(Operation.QUERY_ENTITIES)


def test_sdk_protocol_enum_is_signed_as_its_repr_and_refused() -> None:
    """On Python 3.11+ the SDK signs ``str(SASProtocol.HTTPS)``, i.e. ``spr=SASProtocol.HTTPS``.

    Azure only documents ``https`` and ``https,http``, so the token is refused as malformed
    (Azure's exact answer is unverified); callers should pass the plain string ``"https"``.
    """
    token = _token(
        generate_table_sas(
            _credential(), "mytable", permission="r", expiry=EXPIRY, protocol=SASProtocol.HTTPS
        )
    )
    assert token.spr == "SASProtocol.HTTPS"
    assert _error(lambda: _verify(token)).code == "AuthenticationFailed"


def test_sdk_table_sas_made_with_secondary_key_verifies() -> None:
    token = generate_table_sas(_credential(OTHER_KEY), "mytable", permission="r", expiry=EXPIRY)
    _verify(token, keys=[DEV_KEY, OTHER_KEY])
    assert _error(lambda: _verify(token)).code == "AuthenticationFailed"


ACCOUNT_SAS_VARIANTS: list[dict[str, Any]] = [
    {},
    {"start": START},
    {"ip_address_or_range": "127.0.0.1"},
    {"ip_address_or_range": "127.0.0.0-127.0.0.10"},
    {"protocol": "https"},
    {"protocol": "https,http"},
    {"start": START, "ip_address_or_range": "127.0.0.1", "protocol": "https"},
]


@pytest.mark.parametrize("variant", ACCOUNT_SAS_VARIANTS)
def test_sdk_account_sas_verifies(variant: dict[str, Any]) -> None:
    permission = AccountSasPermissions(
        read=True, write=True, delete=True, list=True, add=True, create=True, update=True, process=True
    )
    resource_types = ResourceTypes(service=True, container=True, object=True)
    token = _token(generate_account_sas(_credential(), resource_types, permission, EXPIRY, **variant))
    assert token.sv == "2019-02-02"
    grant = _verify(token, table=None)
    for op in ENTITY_OPS + TABLE_OPS + SERVICE_OPS:
        grant.check(op, pk="p", rk="r")


@pytest.mark.parametrize(
    ("resource_types", "allowed"),
    [
        (ResourceTypes(service=True), SERVICE_OPS),
        (ResourceTypes(container=True), TABLE_OPS),
        (ResourceTypes(object=True), ENTITY_OPS),
    ],
)
def test_sdk_account_sas_resource_types(resource_types: ResourceTypes, allowed: list[Operation]) -> None:
    token = generate_account_sas(_credential(), resource_types, "rwdlacu", EXPIRY)
    grant = _verify(token)
    for op in ENTITY_OPS + TABLE_OPS + SERVICE_OPS + ACL_OPS:
        if op in allowed:
            grant.check(op)
        else:
            assert _error(partial(grant.check, op)).code == "AuthorizationResourceTypeMismatch"


# --------------------------------------------------------------------------- parsing


def test_parse_sas_none_without_sig() -> None:
    assert parse_sas({"sv": "2019-02-02", "sp": "r"}) is None
    assert parse_sas({}) is None


def test_parse_sas_names_case_insensitive_and_others_ignored() -> None:
    token = parse_sas({"SIG": "abc", "Sp": "r", "TN": "t", "$filter": "x", "api-version": "1"})
    assert token == SasToken(sig="abc", sp="r", tn="t")


def test_parse_sas_repeated_name_in_other_case_is_refused() -> None:
    error = _error(lambda: parse_sas({"sig": "abc", "sp": "r", "SP": "raud"}))
    assert error.code == "AuthenticationFailed"


def test_parse_sas_kinds() -> None:
    assert parse_sas({"sig": "x", "tn": "t"}).is_account is False  # type: ignore[union-attr]
    assert parse_sas({"sig": "x", "ss": "t"}).is_account is True  # type: ignore[union-attr]
    assert parse_sas({"sig": "x", "srt": "o"}).is_account is True  # type: ignore[union-attr]
    assert parse_sas({"sig": "x", "ss": "t", "tn": "t"}).is_account is True  # type: ignore[union-attr]


def test_form_decoded_plus_in_signature_still_verifies() -> None:
    token = _token(SPEC_TABLE_TOKEN)
    assert "+" in token.sig
    _verify(replace(token, sig=token.sig.replace("+", " ")))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2024-01-01", datetime(2024, 1, 1, tzinfo=UTC)),
        ("2024-01-01T10:20Z", datetime(2024, 1, 1, 10, 20, tzinfo=UTC)),
        ("2024-01-01T10:20:30", datetime(2024, 1, 1, 10, 20, 30, tzinfo=UTC)),
        ("2024-01-01T10:20:30.1234567Z", datetime(2024, 1, 1, 10, 20, 30, 123456, tzinfo=UTC)),
        ("2024-01-01T10:20:30+02:00", datetime(2024, 1, 1, 8, 20, 30, tzinfo=UTC)),
    ],
)
def test_parse_iso8601(value: str, expected: datetime) -> None:
    assert parse_iso8601(value) == expected


# --------------------------------------------------------------------------- adversarial: authentication


def test_forged_signature() -> None:
    token = _token(SPEC_TABLE_TOKEN)
    forged = base64.b64encode(b"\x01" * 32).decode()
    error = _error(lambda: _verify(replace(token, sig=forged)))
    assert error.code == "AuthenticationFailed"
    assert error.detail is not None and table_sas_string_to_sign(token, ACCOUNT) in error.detail
    assert DEV_KEY_B64 not in error.detail + error.message
    for bad in ("", "not base64!", "abc"):
        assert _error(partial(_verify, replace(token, sig=bad))).code == "AuthenticationFailed"


@pytest.mark.parametrize(
    "field", [{"sp": "raud"}, {"se": "2099-01-01T00:00:00Z"}, {"tn": "other"}, {"spk": ""}, {"epk": "z"}]
)
def test_tampered_field_breaks_signature(field: dict[str, str]) -> None:
    token = replace(_table_token(sp="r", spk="a", epk="m"), **field)
    assert _error(lambda: _verify(token, table=None)).code == "AuthenticationFailed"


def test_tampered_account_token_breaks_signature() -> None:
    token = _token(SPEC_ACCOUNT_TOKEN)
    for field in ({"srt": "sco"}, {"sp": "rwdlacup"}, {"ss": "tb"}, {"spr": "https"}):
        assert _error(partial(_verify, replace(token, **field))).code == "AuthenticationFailed"


def test_other_account_fails() -> None:
    assert _error(lambda: _verify(SPEC_TABLE_TOKEN, account="otheraccount")).code == "AuthenticationFailed"


def test_expired() -> None:
    token = _token(SPEC_TABLE_TOKEN)
    _verify(token, now=EXPIRY)
    error = _error(lambda: _verify(token, now=EXPIRY + timedelta(seconds=1)))
    assert error.code == "AuthenticationFailed"


def test_not_yet_valid_with_five_minute_skew() -> None:
    token = _token(SPEC_TABLE_TOKEN)
    _verify(token, now=START - timedelta(minutes=5))
    error = _error(lambda: _verify(token, now=START - timedelta(minutes=5, seconds=1)))
    assert error.code == "AuthenticationFailed"


def test_naive_now_is_utc() -> None:
    _verify(SPEC_TABLE_TOKEN, now=datetime(2024, 6, 1))


def test_start_after_expiry() -> None:
    token = _table_token(st="2024-12-31T00:00:00Z", se="2024-01-01T00:00:00Z")
    assert _error(lambda: _verify(token)).code == "AuthenticationFailed"


@pytest.mark.parametrize(
    "field",
    [
        {"se": None},
        {"sp": None},
        {"se": "31/12/2024"},
        {"st": "2024-13-01T00:00:00Z"},
        {"se": "2024-12-31T00:00:00ZZ"},
        {"sv": None},
        {"sv": "latest"},
        {"tn": None},
        {"spr": "http"},
        {"spr": "ftp,https"},
        {"sip": "not-an-ip"},
        {"sip": "10.0.0.9-10.0.0.1"},
        {"sip": "10.0.0.1-::1"},
    ],
)
def test_bad_or_missing_table_fields(field: dict[str, str | None]) -> None:
    token = _table_token(**field)
    assert _error(lambda: _verify(token)).code == "AuthenticationFailed"


@pytest.mark.parametrize("field", [{"ss": None, "srt": "sco"}, {"srt": None}, {"sp": None}, {"se": None}])
def test_bad_or_missing_account_fields(field: dict[str, str | None]) -> None:
    token = _account_token(**field)
    assert _error(lambda: _verify(token)).code == "AuthenticationFailed"


def test_account_sas_without_table_service() -> None:
    token = _account_token(ss="bqf")
    assert _error(lambda: _verify(token)).code == "AuthorizationServiceMismatch"
    _verify(_account_token(ss="bqtf"))


def test_other_table() -> None:
    error = _error(lambda: _verify(SPEC_TABLE_TOKEN, table="othertable"))
    assert error.code == "AuthorizationResourceTypeMismatch"


# --------------------------------------------------------------------------- protocol and IP


def test_https_required() -> None:
    token = _table_token(spr="https")
    _verify(token, is_https=True)
    assert _error(lambda: _verify(token, is_https=False)).code == "AuthorizationProtocolMismatch"
    account = _account_token(spr="https")
    assert _error(lambda: _verify(account, is_https=False)).code == "AuthorizationProtocolMismatch"


def test_https_or_http_accepts_both() -> None:
    token = _table_token(spr="https,http")
    _verify(token, is_https=True)
    _verify(token, is_https=False)


@pytest.mark.parametrize(
    ("sip", "client", "ok"),
    [
        ("127.0.0.1", "127.0.0.1", True),
        ("127.0.0.1", "127.0.0.2", False),
        ("10.0.0.1-10.0.0.9", "10.0.0.1", True),
        ("10.0.0.1-10.0.0.9", "10.0.0.9", True),
        ("10.0.0.1-10.0.0.9", "10.0.0.10", False),
        ("10.0.0.1-10.0.0.9", "10.0.0.0", False),
        ("10.0.0.1-10.0.0.9", "::ffff:10.0.0.5", True),
        ("10.0.0.1-10.0.0.9", "::1", False),
        ("10.0.0.1-10.0.0.9", None, False),
        ("10.0.0.1-10.0.0.9", "garbage", False),
        ("::1", "::1", True),
        ("2001:db8::1-2001:db8::ff", "2001:db8::80", True),
        ("2001:db8::1-2001:db8::ff", "2001:db8::100", False),
        ("2001:db8::1-2001:db8::ff", "10.0.0.1", False),
    ],
)
def test_source_ip(sip: str, client: str | None, ok: bool) -> None:
    token = _table_token(sip=sip)
    if ok:
        _verify(token, client_ip=client)
    else:
        error = _error(lambda: _verify(token, client_ip=client))
        assert error.code == "AuthorizationSourceIPMismatch"
        assert error.status == 403


# --------------------------------------------------------------------------- stored policies


def _lookup(policies: Mapping[str, StoredPolicy]) -> Callable[[str], StoredPolicy | None]:
    return policies.get


def test_policy_supplies_missing_fields() -> None:
    token = _table_token(si="p1", sp=None, st=None, se=None)
    grant = _verify(token, policy_lookup=_lookup({"p1": StoredPolicy("2024-01-01", "2024-12-31", "r")}))
    assert grant.permissions == frozenset("r")


def test_revoked_or_missing_policy() -> None:
    token = _table_token(si="p1", sp=None, se=None)
    assert _error(lambda: _verify(token, policy_lookup=_lookup({}))).code == "AuthenticationFailed"
    assert _error(lambda: _verify(token, policy_lookup=None)).code == "AuthenticationFailed"


@pytest.mark.parametrize(
    ("in_token", "policy"),
    [
        ({"sp": "r"}, StoredPolicy(None, "2024-12-31", "r")),
        ({"se": "2024-12-31"}, StoredPolicy(None, "2024-12-31", "r")),
        ({"st": "2024-01-01"}, StoredPolicy("2024-01-01", "2024-12-31", "r")),
    ],
)
def test_field_in_both_token_and_policy(in_token: dict[str, str], policy: StoredPolicy) -> None:
    base: dict[str, str | None] = {"si": "p1", "sp": None, "st": None, "se": None}
    token = _table_token(**{**base, **in_token})
    error = _error(lambda: _verify(token, policy_lookup=_lookup({"p1": policy})))
    assert error.code == "AuthenticationFailed"


def test_policy_changes_take_effect() -> None:
    token = _table_token(si="p1", sp=None, se=None, st=None)
    expired = StoredPolicy(None, "2024-02-01", "r")
    assert (
        _error(lambda: _verify(token, policy_lookup=_lookup({"p1": expired}))).code == "AuthenticationFailed"
    )
    narrowed = _verify(token, policy_lookup=_lookup({"p1": StoredPolicy(None, "2024-12-31", "r")}))
    error = _error(lambda: narrowed.check(Operation.INSERT_ENTITY, pk="p", rk="r"))
    assert error.code == "AuthorizationPermissionMismatch"


def test_policy_without_expiry_and_token_without_expiry() -> None:
    token = _table_token(si="p1", sp=None, se=None, st=None)
    policy = StoredPolicy(None, None, "r")
    assert (
        _error(lambda: _verify(token, policy_lookup=_lookup({"p1": policy}))).code == "AuthenticationFailed"
    )


# --------------------------------------------------------------------------- authorisation: operations

# Which single-letter (or combined) table permissions each entity operation accepts.
TABLE_NEEDS: dict[Operation, set[str]] = {
    Operation.QUERY_ENTITIES: {"r"},
    Operation.GET_ENTITY: {"r"},
    Operation.INSERT_ENTITY: {"a"},
    Operation.UPDATE_ENTITY: {"u"},
    Operation.MERGE_ENTITY: {"u"},
    Operation.UPSERT_REPLACE: {"a", "u"},
    Operation.UPSERT_MERGE: {"a", "u"},
    Operation.DELETE_ENTITY: {"d"},
}


@pytest.mark.parametrize("sp", ["r", "a", "u", "d", "au", "ra", "ud", "raud"])
@pytest.mark.parametrize("op", ENTITY_OPS)
def test_table_sas_permission_per_operation(op: Operation, sp: str) -> None:
    grant = _verify(_table_token(sp=sp))
    if TABLE_NEEDS[op] <= set(sp):
        grant.check(op, pk="p", rk="r")
    else:
        error = _error(lambda: grant.check(op, pk="p", rk="r"))
        assert error.code == "AuthorizationPermissionMismatch"


@pytest.mark.parametrize("op", TABLE_OPS + SERVICE_OPS + ACL_OPS)
def test_table_sas_cannot_leave_entities(op: Operation) -> None:
    grant = _verify(_table_token(sp="raud"), table=None)
    assert _error(lambda: grant.check(op)).code == "AuthorizationResourceTypeMismatch"


ACCOUNT_NEEDS: dict[Operation, list[set[str]]] = {
    # any one of the listed sets suffices
    Operation.GET_SERVICE_PROPERTIES: [{"r"}],
    Operation.SET_SERVICE_PROPERTIES: [{"w"}],
    Operation.GET_SERVICE_STATS: [{"r"}],
    Operation.QUERY_TABLES: [{"l"}],
    Operation.GET_TABLE: [{"l"}, {"r"}],
    Operation.CREATE_TABLE: [{"a"}, {"c"}, {"w"}],
    Operation.DELETE_TABLE: [{"d"}],
    **{op: [needs] for op, needs in TABLE_NEEDS.items()},
}


@pytest.mark.parametrize("sp", ["r", "w", "d", "l", "a", "c", "u", "p", "au", "rwdlacup"])
@pytest.mark.parametrize("op", list(ACCOUNT_NEEDS))
def test_account_sas_permission_per_operation(op: Operation, sp: str) -> None:
    grant = _verify(_account_token(sp=sp))
    if any(needs <= set(sp) for needs in ACCOUNT_NEEDS[op]):
        grant.check(op, pk="p", rk="r")
    else:
        error = _error(lambda: grant.check(op, pk="p", rk="r"))
        assert error.code == "AuthorizationPermissionMismatch"


@pytest.mark.parametrize("op", ACL_OPS)
def test_acl_never_with_account_sas(op: Operation) -> None:
    grant = _verify(_account_token(sp="rwdlacup", srt="sco"))
    assert _error(lambda: grant.check(op)).code == "AuthorizationResourceTypeMismatch"


def test_resource_type_checked_before_permission() -> None:
    grant = _verify(_account_token(sp="r", srt="s"))
    assert _error(lambda: grant.check(Operation.DELETE_ENTITY)).code == "AuthorizationResourceTypeMismatch"


# --------------------------------------------------------------------------- key ranges


@pytest.mark.parametrize(
    ("pk", "rk", "inside"),
    [
        ("b", "b", True),  # start, inclusive
        ("b", "a", False),  # same partition, row before start
        ("b", "", False),
        ("a", "zzz", False),  # partition before start
        ("c", "", True),  # partition strictly inside: any row
        ("c", "\uffff", True),
        ("m", "n", True),  # end, inclusive
        ("m", "", True),
        ("m", "o", False),  # same partition, row after end
        ("n", "", False),  # partition after end
        ("mm", "a", False),
    ],
)
def test_key_range_boundaries(pk: str, rk: str, inside: bool) -> None:
    grant = _verify(_table_token(spk="b", srk="b", epk="m", erk="n"))
    assert grant.key_range == ("b", "b", "m", "n")
    assert grant.in_range(pk, rk) is inside
    for op in (Operation.GET_ENTITY, Operation.INSERT_ENTITY, Operation.DELETE_ENTITY):
        if inside:
            grant.check(op, pk=pk, rk=rk)
        else:
            expected = "ResourceNotFound" if op is Operation.GET_ENTITY else "AuthorizationFailure"
            assert _error(partial(grant.check, op, pk=pk, rk=rk)).code == expected


def test_key_range_partition_only_bounds() -> None:
    grant = _verify(_table_token(spk="b", epk="m"))
    assert grant.in_range("b", "")
    assert grant.in_range("m", "\uffff")
    assert not grant.in_range("a", "\uffff")
    assert not grant.in_range("ma", "")


def test_open_range_and_queries_are_not_refused() -> None:
    open_grant = _verify(_table_token())
    assert open_grant.key_range == (None, None, None, None)
    open_grant.check(Operation.GET_ENTITY, pk="anything", rk="at all")
    ranged = _verify(_table_token(spk="b", epk="m"))
    ranged.check(Operation.QUERY_ENTITIES)  # the query layer clips with key_range instead
    ranged.check(Operation.QUERY_ENTITIES, pk="z")  # only a full key is checked


def test_permission_checked_before_key_range() -> None:
    grant = _verify(_table_token(sp="r", spk="b", epk="m"))
    error = _error(lambda: grant.check(Operation.INSERT_ENTITY, pk="z", rk="z"))
    assert error.code == "AuthorizationPermissionMismatch"


# --------------------------------------------------------------------------- the per-token caches
# A token that verified once is remembered (its signature, its parsed times and IP range); what can
# change between two uses of the same token must still be checked on every request.


def _cached(token: SasToken, **overrides: Any) -> SasGrant:
    """Verify ``token`` twice, so that the second answer comes from the caches."""
    _verify(token, **overrides)
    return _verify(token, **overrides)


def test_expired_token_is_refused_after_it_was_cached() -> None:
    token = _table_token(sp="r")
    assert _cached(token).permissions == frozenset("r")
    late = EXPIRY + timedelta(seconds=1)
    assert _error(lambda: _verify(token, now=late)).code == "AuthenticationFailed"
    early = START - timedelta(minutes=6)
    assert _error(lambda: _verify(token, now=early)).code == "AuthenticationFailed"


def test_revoked_or_edited_policy_takes_effect_after_the_token_was_cached() -> None:
    token = _table_token(si="p1", sp=None, st=None, se=None)
    policies = {"p1": StoredPolicy(None, "2024-12-31", "r")}
    assert _cached(token, policy_lookup=_lookup(policies)).permissions == frozenset("r")
    edited = {"p1": StoredPolicy(None, "2024-12-31", "a")}
    grant = _verify(token, policy_lookup=_lookup(edited))
    assert _error(lambda: grant.check(Operation.GET_ENTITY, pk="p", rk="r")).code == (
        "AuthorizationPermissionMismatch"
    )
    shortened = {"p1": StoredPolicy(None, "2024-02-01", "r")}
    assert _error(lambda: _verify(token, policy_lookup=_lookup(shortened))).code == "AuthenticationFailed"
    assert _error(lambda: _verify(token, policy_lookup=_lookup({}))).code == "AuthenticationFailed"


@pytest.mark.parametrize(
    "change",
    [{"sig": "flip"}, {"sp": "raud"}, {"se": "2025-12-31T00:00:00Z"}, {"tn": "other"}, {"spk": "a"}],
    ids=["sig", "sp", "se", "tn", "spk"],
)
def test_tampered_token_is_refused_after_the_genuine_one_was_cached(change: dict[str, str]) -> None:
    genuine = _table_token(sp="r")
    _cached(genuine)
    if change.get("sig") == "flip":
        change = {"sig": ("A" if genuine.sig[0] != "A" else "B") + genuine.sig[1:]}
    tampered = replace(genuine, **change)
    assert _error(lambda: _verify(tampered, table=tampered.tn)).code == "AuthenticationFailed"


def test_a_cached_token_from_another_key_or_account_is_refused() -> None:
    token = _table_token(sp="r")
    _cached(token)
    assert _error(lambda: _verify(token, keys=[OTHER_KEY])).code == "AuthenticationFailed"
    assert _error(lambda: _verify(token, account="otheraccount")).code == "AuthenticationFailed"


def test_ip_and_protocol_are_checked_after_the_token_was_cached() -> None:
    token = _table_token(sp="r", sip="10.0.0.1-10.0.0.9", spr="https")
    _cached(token, client_ip="10.0.0.5")
    error = _error(lambda: _verify(token, client_ip="10.0.0.10"))
    assert error.code == "AuthorizationSourceIPMismatch"
    assert _error(lambda: _verify(token, client_ip="10.0.0.5", is_https=False)).code == (
        "AuthorizationProtocolMismatch"
    )


def test_account_sas_expiry_and_permissions_after_it_was_cached() -> None:
    token = _account_token(sp="r", srt="o")
    grant = _cached(token)
    assert _error(lambda: grant.check(Operation.INSERT_ENTITY, pk="p", rk="r")).code == (
        "AuthorizationPermissionMismatch"
    )
    late = EXPIRY + timedelta(seconds=1)
    assert _error(lambda: _verify(token, now=late)).code == "AuthenticationFailed"


def test_verified_signatures_are_bounded_least_recently_used_first() -> None:
    cache = VerifiedSignatures(capacity=2)
    first, second, third = (("s", str(i), (DEV_KEY,)) for i in range(3))
    cache.add(first)
    cache.add(second)
    assert first in cache  # now the most recently used
    cache.add(third)
    assert first in cache and third in cache and second not in cache


def test_verified_signatures_skip_overlong_strings_to_sign() -> None:
    cache = VerifiedSignatures(capacity=4, max_length=10)
    cache.add(("s", "x" * 11, (DEV_KEY,)))
    cache.add(("s", "x" * 10, (DEV_KEY,)))
    assert ("s", "x" * 11, (DEV_KEY,)) not in cache
    assert ("s", "x" * 10, (DEV_KEY,)) in cache


# --------------------------------------------------------------------------- a verified token again


def test_token_verified_before_is_still_checked_against_clock_request_and_keys() -> None:
    """A table SAS that verified once keeps its grant, yet each later request is still held to
    the window, the protocol, the source IP and the table, and a key change verifies it anew."""
    token = _table_token(sip="10.0.0.1-10.0.0.9", spr="https", tn="cachedtable")
    table = "cachedtable"
    first = _verify(token, table=table, client_ip="10.0.0.5")
    assert _verify(token, table=table, client_ip="10.0.0.5") is first  # the same grant, kept
    assert first.permissions == frozenset("raud")
    expired = _error(
        lambda: _verify(token, table=table, client_ip="10.0.0.5", now=EXPIRY + timedelta(days=1))
    )
    assert expired.code == "AuthenticationFailed"
    early = _error(lambda: _verify(token, table=table, client_ip="10.0.0.5", now=START - timedelta(hours=1)))
    assert early.code == "AuthenticationFailed"
    assert (
        _error(lambda: _verify(token, table=table, client_ip="10.0.1.5")).code
        == "AuthorizationSourceIPMismatch"
    )
    plain = _error(lambda: _verify(token, table=table, client_ip="10.0.0.5", is_https=False))
    assert plain.code == "AuthorizationProtocolMismatch"
    other = _error(lambda: _verify(token, table="othertable", client_ip="10.0.0.5"))
    assert other.code == "AuthorizationResourceTypeMismatch"
    rotated = _error(lambda: _verify(token, table=table, client_ip="10.0.0.5", keys=[OTHER_KEY]))
    assert rotated.code == "AuthenticationFailed"
    tampered = replace(token, sp="raudx")  # another token: verified on its own, and refused
    assert _error(lambda: _verify(tampered, table=table, client_ip="10.0.0.5")).code == "AuthenticationFailed"
