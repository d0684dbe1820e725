"""Query Entities and Query Tables errors over raw HTTP: exact status and error code.

Every case is a request a client could really send; the server must answer with a JSON OData
error and the code the spec names, never a 500.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from urllib.parse import quote

import pytest

from tests.rawhttp import RawClient, assert_error
from tests.serverproc import ServerProcess

NOT_IMPLEMENTED_MESSAGE = "The requested operation is not implemented on the specified resource."


def q(text: str) -> str:
    """Percent-encode a query parameter value the way the Python SDK does."""
    return quote(text, safe="")


class Loaded:
    """A table shared by this module's tests (they only read it)."""

    def __init__(self, name: str) -> None:
        self.table_name = name


@pytest.fixture(scope="module")
def loaded(server: ServerProcess) -> Iterator[Loaded]:
    """A table with six entities in two partitions (so a page of two can always continue)."""
    client = RawClient(server.port)
    name = f"qerr{os.getpid()}"
    assert client.create_table(name).status == 201
    for pk in ("a", "b"):
        for i in range(3):
            entity = {"PartitionKey": pk, "RowKey": f"r{i}", "n": i, "flag": i % 2 == 0}
            assert client.insert(name, entity).status == 201
    yield Loaded(name)
    client.request("DELETE", f"Tables('{name}')")


# ------------------------------------------------------------------------------ $filter syntax

SYNTAX_ERRORS = [
    "(n eq 1",
    "n eq 1)",
    "((n eq 1)",
    "n eq",
    "eq 1",
    "n eq 1 and",
    "and n eq 1",
    "n eq 1 or",
    "n eq 1 andd n eq 2",
    "n EQ 1",
    "n eq 1 AND n eq 2",
    "n eq 1 Or n eq 2",
    "NOT (n eq 1)",
    "n gtt 1",
    "n == 1",
    "n eq 'abc",
    "n eq 'ab''",
    'n eq "abc"',
    "n eq 1 n",
    "n eq 1 eq 2",
    "n eq 'a' 'b'",
    "not",
    "()",
    "n eq @p",
    "n eq 1;",
    "n eq 1.",
    "n eq 5LL",
    "n eq 1.5L",
    "n eq 0x10",
    "n eq guid'123'",
    "n eq guid'c9da6455-213d-42c9-9a79-3e9149a5783'",
    "n eq datetime'yesterday'",
    "n eq datetime'2020-13-01T00:00:00Z'",
    "n eq X'abc'",
    "n eq X'zz'",
    "n eq binary'0g'",
    "n eq foo'abc'",
    "Name eq 'x' or (n gt 3",
    "\x00",
    "n eq 1\x00",
    "n\u00a0eq 1",
]


@pytest.mark.parametrize("filter_text", SYNTAX_ERRORS)
def test_syntax_error_is_400_invalid_input(raw: RawClient, loaded: Loaded, filter_text: str) -> None:
    response = raw.request("GET", f"{loaded.table_name}()?$filter={q(filter_text)}")
    assert_error(response, 400, "InvalidInput")


def test_syntax_error_message_names_the_filter(raw: RawClient, loaded: Loaded) -> None:
    response = raw.request("GET", f"{loaded.table_name}()?$filter={q('(n eq 1')}")
    assert_error(response, 400, "InvalidInput")
    assert "(n eq 1" in response.error_message


# ------------------------------------------------------------------- functions and arithmetic

NOT_IMPLEMENTED = [
    "startswith(RowKey,'r')",
    "startswith(RowKey, 'r') eq true",
    "endswith(RowKey,'1')",
    "substringof('r', RowKey)",
    "contains(RowKey,'r')",
    "tolower(RowKey) eq 'r1'",
    "toupper(RowKey) eq 'R1'",
    "length(RowKey) eq 2",
    "indexof(RowKey,'1') eq 1",
    "trim(RowKey) eq 'r1'",
    "concat(RowKey,'x') eq 'r1x'",
    "year(Timestamp) eq 2020",
    "month(Timestamp) eq 1",
    "day(Timestamp) eq 1",
    "round(n) eq 1",
    "floor(n) eq 1",
    "ceiling(n) eq 1",
    "isof('Edm.String')",
    "cast(n,'Edm.Int64') eq 1L",
    "Tags/any(t: t eq 'a')",
    "Tags/all(t: t eq 'a')",
    "n add 1 eq 2",
    "n sub 1 eq 0",
    "n mul 2 eq 2",
    "n div 2 eq 1",
    "n mod 2 eq 0",
    "1 add n eq 2",
    "-n eq -1",
    "-(n) eq -1",
    "PartitionKey eq 'a' and n add 1 eq 2",
]


@pytest.mark.parametrize("filter_text", NOT_IMPLEMENTED)
def test_functions_and_arithmetic_are_501(raw: RawClient, loaded: Loaded, filter_text: str) -> None:
    response = raw.request("GET", f"{loaded.table_name}()?$filter={q(filter_text)}")
    assert_error(response, 501, "NotImplemented", NOT_IMPLEMENTED_MESSAGE)


@pytest.mark.parametrize(
    "filter_text",
    [
        "n eq flag",
        "PartitionKey eq RowKey",
        "RowKey lt PartitionKey",
        "Timestamp gt n",
        "1 eq 1",
        "'a' eq 'a'",
        "true eq true",
        "null eq null",
        "PartitionKey eq 'a' and 2 gt 1",
    ],
)
def test_property_vs_property_and_literal_vs_literal_are_501(
    raw: RawClient, loaded: Loaded, filter_text: str
) -> None:
    response = raw.request("GET", f"{loaded.table_name}()?$filter={q(filter_text)}")
    assert_error(response, 501, "NotImplemented", NOT_IMPLEMENTED_MESSAGE)


# ---------------------------------------------------------------------------- literal ranges


@pytest.mark.parametrize(
    "filter_text",
    [
        "n eq 2147483648",
        "n eq -2147483649",
        "n eq 3000000000",
        "n eq 4294967295",
        "2147483648 gt n",
        "n eq 99999999999999999999999999",
        "n eq 9223372036854775808L",
        "n eq -9223372036854775809L",
        "n eq 1e400",
    ],
)
def test_out_of_range_number_literal_is_400(raw: RawClient, loaded: Loaded, filter_text: str) -> None:
    response = raw.request("GET", f"{loaded.table_name}()?$filter={q(filter_text)}")
    assert_error(response, 400, "InvalidInput")


def test_int32_out_of_range_message(raw: RawClient, loaded: Loaded) -> None:
    response = raw.request("GET", f"{loaded.table_name}()?$filter={q('n eq 3000000000')}")
    assert_error(response, 400, "InvalidInput", "Unrecognized 'Edm.Int32' literal '3000000000'")


@pytest.mark.parametrize(
    "filter_text",
    [
        "n eq 2147483647",
        "n eq -2147483648",
        "n eq 2147483648L",
        "n eq 3000000000L",
        "n eq 9223372036854775807L",
        "n eq -9223372036854775808L",
        "n eq 1.7976931348623157E+308",
    ],
)
def test_in_range_number_literal_is_accepted(raw: RawClient, loaded: Loaded, filter_text: str) -> None:
    response = raw.request("GET", f"{loaded.table_name}()?$filter={q(filter_text)}")
    assert response.status == 200, response
    assert response.json()["value"] == []


# ------------------------------------------------------------------------------ comparisons


def _chain(count: int, joiner: str = " and ") -> str:
    return joiner.join(f"n ne {i}" for i in range(count))


def test_fifteen_comparisons_are_allowed(raw: RawClient, loaded: Loaded) -> None:
    response = raw.request("GET", f"{loaded.table_name}()?$filter={q(_chain(15))}")
    assert response.status == 200, response
    # n ne 0..14 excludes every stored n (0, 1, 2).
    assert response.json()["value"] == []


@pytest.mark.parametrize(
    "filter_text",
    [
        _chain(16),
        _chain(16, " or "),
        "not (" + _chain(8) + ") or (" + _chain(8) + ")",
        "("
        + _chain(10)
        + ") and (PartitionKey eq 'a' or RowKey eq 'r1' or n eq 1 or n eq 2 or n eq 3 or n eq 4)",
    ],
)
def test_more_than_fifteen_comparisons_is_400(raw: RawClient, loaded: Loaded, filter_text: str) -> None:
    response = raw.request("GET", f"{loaded.table_name}()?$filter={q(filter_text)}")
    assert_error(response, 400, "InvalidInput")


# ------------------------------------------------------------------------------------- $top


@pytest.mark.parametrize(
    "top",
    ["1001", "5000", "-1", "-0", "abc", "1.5", "1e2", "%201", "+1", "0x10", "%C2%B2", "%EF%BC%91", "%D9%A1"],
)
def test_bad_top_on_entities_is_400(raw: RawClient, loaded: Loaded, top: str) -> None:
    response = raw.request("GET", f"{loaded.table_name}()?$top={top}")
    assert_error(response, 400, "InvalidInput")


@pytest.mark.parametrize("top", ["1001", "-1", "abc", "%C2%B2"])
def test_bad_top_on_tables_is_400(raw: RawClient, loaded: Loaded, top: str) -> None:
    response = raw.request("GET", f"Tables?$top={top}")
    assert_error(response, 400, "InvalidInput")


def test_top_zero_on_entities_is_an_empty_page_without_continuation(raw: RawClient, loaded: Loaded) -> None:
    response = raw.request("GET", f"{loaded.table_name}()?$top=0")
    assert response.status == 200, response
    assert response.json()["value"] == []
    assert response.header("x-ms-continuation-NextPartitionKey") is None
    assert response.header("x-ms-continuation-NextRowKey") is None


def test_top_zero_on_tables_is_an_empty_page_without_continuation(raw: RawClient, loaded: Loaded) -> None:
    response = raw.request("GET", "Tables?$top=0")
    assert response.status == 200, response
    assert response.json()["value"] == []
    assert response.header("x-ms-continuation-NextTableName") is None


def test_top_1000_and_1_are_accepted(raw: RawClient, loaded: Loaded) -> None:
    assert len(raw.request("GET", f"{loaded.table_name}()?$top=1000").json()["value"]) == 6
    assert len(raw.request("GET", f"{loaded.table_name}()?$top=1").json()["value"]) == 1


def test_top_zero_still_validates_the_filter(raw: RawClient, loaded: Loaded) -> None:
    response = raw.request("GET", f"{loaded.table_name}()?$top=0&$filter={q('(n eq 1')}")
    assert_error(response, 400, "InvalidInput")


def test_top_zero_on_tables_still_validates_the_filter(raw: RawClient, loaded: Loaded) -> None:
    response = raw.request("GET", f"Tables?$top=0&$filter={q('((')}")
    assert_error(response, 400, "InvalidInput")
    response = raw.request("GET", f"Tables?$top=0&$filter={q('Name eq ' + repr('x'))}")
    assert_error(response, 400, "InvalidInput")


def test_top_zero_on_tables_still_validates_the_token(raw: RawClient, loaded: Loaded) -> None:
    response = raw.request("GET", "Tables?$top=0&NextTableName=garbage")
    assert_error(response, 400, "InvalidInput")


# ------------------------------------------------------------------------ unsupported options


@pytest.mark.parametrize(
    "option",
    ["$orderby=RowKey", "$orderby=n%20desc", "$skip=1", "$expand=x", "$inlinecount=allpages", "$count=true"],
)
def test_unsupported_option_on_entities_is_400(raw: RawClient, loaded: Loaded, option: str) -> None:
    response = raw.request("GET", f"{loaded.table_name}()?{option}")
    assert_error(response, 400, "InvalidInput")


@pytest.mark.parametrize("option", ["$orderby=TableName", "$skip=1"])
def test_unsupported_option_on_tables_is_400(raw: RawClient, loaded: Loaded, option: str) -> None:
    response = raw.request("GET", f"Tables?{option}")
    assert_error(response, 400, "InvalidInput")


# ------------------------------------------------------------------------ continuation tokens


def _first_page_tokens(raw: RawClient, table: str) -> tuple[str, str]:
    response = raw.request("GET", f"{table}()?$top=2")
    assert response.status == 200, response
    npk = response.header("x-ms-continuation-NextPartitionKey")
    nrk = response.header("x-ms-continuation-NextRowKey")
    assert npk and nrk, response
    return npk, nrk


def tampered(token: str) -> list[str]:
    """Ways to damage a real token, each of which it must reject. URL-encoded for the query."""
    head, length, data = token.split("!", 2)
    return [
        "garbage",
        "1!",
        "1!!",
        "!!!",
        f"{head}!{int(length) + 1}!{data}",
        f"{head}!{length}!{data}A",
        f"{head}!{length}!{data[:-1]}",
        f"2!{length}!{data}",
        f"1!x!{data}",
        f"1!-{length}!{data}",
        f"1!{length}!{data}%3D",  # base64 padding
        f"1!{length}{data}",
        f"{data}",
        "1!2!Y*",  # not base64url
        "1!2!YR",  # non-canonical base64 (stray low bits)
        "1!2!_w",  # decodes to 0xFF: not UTF-8
        "1!3!wIA",  # decodes to C0 80, an overlong (invalid) UTF-8 encoding of NUL
        "1!99999999999999999999999999999!YQ",
        "1!2!YQ%20",
        "1!2!%20YQ",
    ]


def test_tampered_partition_token_is_400(raw: RawClient, loaded: Loaded) -> None:
    npk, nrk = _first_page_tokens(raw, loaded.table_name)
    for bad in tampered(npk):
        response = raw.request("GET", f"{loaded.table_name}()?$top=2&NextPartitionKey={bad}&NextRowKey={nrk}")
        assert_error(response, 400, "InvalidInput")


def test_tampered_row_token_is_400(raw: RawClient, loaded: Loaded) -> None:
    npk, nrk = _first_page_tokens(raw, loaded.table_name)
    for bad in tampered(nrk):
        response = raw.request("GET", f"{loaded.table_name}()?$top=2&NextPartitionKey={npk}&NextRowKey={bad}")
        assert_error(response, 400, "InvalidInput")


def test_tampered_tokens_are_rejected_with_a_filter_and_top_zero(raw: RawClient, loaded: Loaded) -> None:
    npk, nrk = _first_page_tokens(raw, loaded.table_name)
    for query in (
        f"$filter={q('n ge 0')}&NextPartitionKey=garbage&NextRowKey={nrk}",
        f"$filter={q('PartitionKey eq ' + repr('a'))}&NextPartitionKey={npk}&NextRowKey=garbage",
        f"$top=0&NextPartitionKey=garbage&NextRowKey={nrk}",
        f"$filter=false&NextPartitionKey={npk}&NextRowKey=garbage",
    ):
        assert_error(raw.request("GET", f"{loaded.table_name}()?{query}"), 400, "InvalidInput")


def test_only_one_entity_token_is_400(raw: RawClient, loaded: Loaded) -> None:
    npk, nrk = _first_page_tokens(raw, loaded.table_name)
    for query in (
        f"NextPartitionKey={npk}",
        f"NextRowKey={nrk}",
        f"NextPartitionKey={npk}&NextRowKey=",
        f"NextPartitionKey=&NextRowKey={nrk}",
        f"$top=2&NextPartitionKey={npk}",
        f"$filter={q('n ge 0')}&NextRowKey={nrk}",
    ):
        assert_error(raw.request("GET", f"{loaded.table_name}()?{query}"), 400, "InvalidInput")


def test_tampered_table_token_is_400(raw: RawClient, loaded: Loaded, table_name: str) -> None:
    assert raw.create_table(table_name).status == 201
    assert raw.create_table(table_name + "z").status == 201
    try:
        prefix = f"TableName ge '{table_name}' and TableName le '{table_name}z'"
        response = raw.request("GET", f"Tables?$top=1&$filter={q(prefix)}")
        assert response.status == 200, response
        token = response.header("x-ms-continuation-NextTableName")
        assert token, response
        for bad in tampered(token):
            assert_error(raw.request("GET", f"Tables?$top=1&NextTableName={bad}"), 400, "InvalidInput")
    finally:
        raw.request("DELETE", f"Tables('{table_name}')")
        raw.request("DELETE", f"Tables('{table_name}z')")


@pytest.mark.parametrize("text", ["(" * 150 + "n eq 1" + ")" * 150, "not " * 150 + "n eq 1"])
def test_deep_nesting_never_crashes(raw: RawClient, loaded: Loaded, text: str) -> None:
    """The spec sets no nesting limit: answering or refusing with 400 are both fine; 500 is not."""
    response = raw.request("GET", f"{loaded.table_name}()?$filter={q(text)}")
    if response.status != 200:
        assert_error(response, 400, "InvalidInput")


# --------------------------------------------------------------------------- missing tables


@pytest.mark.parametrize(
    "query",
    [
        "",
        "$filter=" + q("n eq 1"),
        "$top=0",
        "$filter=false",
        "$filter=" + q("PartitionKey eq 'a' and RowKey eq 'b'"),
    ],
)
def test_query_on_missing_table_is_404(raw: RawClient, table_name: str, query: str) -> None:
    response = raw.request("GET", f"{table_name}nope()?{query}")
    assert_error(response, 404, "TableNotFound", "The table specified does not exist.")


# ------------------------------------------------------------------------------ Query Tables


@pytest.mark.parametrize(
    "filter_text",
    [
        "Name eq 'x'",
        "PartitionKey eq 'x'",
        "RowKey eq 'x'",
        "Timestamp gt datetime'2020-01-01T00:00:00Z'",
        "tablename eq 'x'",
        "TableName eq 'x' or Foo eq 'y'",
        "not (Foo eq 1)",
        "Foo",
    ],
)
def test_query_tables_filter_on_other_properties_is_400(
    raw: RawClient, loaded: Loaded, filter_text: str
) -> None:
    response = raw.request("GET", f"Tables?$filter={q(filter_text)}")
    assert_error(response, 400, "InvalidInput")


def test_query_tables_syntax_error_and_function(raw: RawClient, loaded: Loaded) -> None:
    assert_error(raw.request("GET", f"Tables?$filter={q('TableName eq')}"), 400, "InvalidInput")
    response = raw.request("GET", f"Tables?$filter={q('startswith(TableName,' + repr('t') + ')')}")
    assert_error(response, 501, "NotImplemented")
