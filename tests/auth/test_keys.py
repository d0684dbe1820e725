"""PartitionKey / RowKey handling: escaping, URL shapes, ordering, parsing."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import quote

import pytest
from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import TableClient, UpdateMode

from tests.rawhttp import (
    RawClient,
    assert_error,
    js_keys,
    legacy_keys,
    newer_js_keys,
    py_keys,
    spaced_keys,
)

KEYS = [
    "'",
    "''",
    "a'b''c'",
    "%",
    "%27",
    "%2F",
    "%%25",
    "+",
    "a+b",
    " ",
    " lead and trail ",
    ",",
    "=",
    "a,RowKey='x'",
    "(",
    ")",
    "x)",
    "(PartitionKey='p')",
    "&;:@$!*~",
    "é",
    "中文キー",
    "😀",
    "𝄞 astral 😀",
    "\uffff",
]

KEY_PAIRS = [(k, k + "r") for k in KEYS] + [(k + "p", k) for k in KEYS[:6]] + [("", ""), ("", "r"), ("p", "")]

URL_STYLES: dict[str, Callable[[str, str], str]] = {
    "python": py_keys,
    "js": js_keys,
    "newer-js": newer_js_keys,
    "legacy": legacy_keys,
    "spaced": spaced_keys,
}


def _ids(pairs: list[tuple[str, str]]) -> list[str]:
    return [f"{pk!r}|{rk!r}" for pk, rk in pairs]


@pytest.mark.parametrize(("pk", "rk"), KEY_PAIRS, ids=_ids(KEY_PAIRS))
def test_sdk_crud_with_special_keys(table: TableClient, pk: str, rk: str) -> None:
    table.create_entity({"PartitionKey": pk, "RowKey": rk, "v": 1})
    got = table.get_entity(pk, rk)
    assert (got["PartitionKey"], got["RowKey"], got["v"]) == (pk, rk, 1)

    table.update_entity({"PartitionKey": pk, "RowKey": rk, "w": 2}, mode=UpdateMode.MERGE)
    table.update_entity(
        {"PartitionKey": pk, "RowKey": rk, **dict(table.get_entity(pk, rk)), "x": 3}, mode=UpdateMode.REPLACE
    )
    table.upsert_entity({"PartitionKey": pk, "RowKey": rk, "y": 4}, mode=UpdateMode.MERGE)
    got = table.get_entity(pk, rk)
    assert {k: got[k] for k in ("v", "w", "x", "y")} == {"v": 1, "w": 2, "x": 3, "y": 4}

    listed = list(
        table.query_entities("PartitionKey eq @pk and RowKey eq @rk", parameters={"pk": pk, "rk": rk})
    )
    assert [(e["PartitionKey"], e["RowKey"]) for e in listed] == [(pk, rk)]
    assert [(e["PartitionKey"], e["RowKey"]) for e in table.list_entities()] == [(pk, rk)]

    table.delete_entity(pk, rk)
    with pytest.raises(ResourceNotFoundError):
        table.get_entity(pk, rk)


@pytest.mark.parametrize(("pk", "rk"), KEY_PAIRS, ids=_ids(KEY_PAIRS))
def test_all_client_url_shapes_address_the_same_entity(
    raw: RawClient, table: TableClient, pk: str, rk: str
) -> None:
    name = table.table_name
    table.create_entity({"PartitionKey": pk, "RowKey": rk})
    for style, shape in URL_STYLES.items():
        got = raw.request("GET", name + shape(pk, rk))
        assert got.status == 200, (style, got)
        body = got.json()
        assert (body["PartitionKey"], body["RowKey"]) == (pk, rk), style

        merged = raw.request(
            "MERGE", name + shape(pk, rk), {f"s_{style.replace('-', '_')}": 1}, {"If-Match": "*"}
        )
        assert merged.status == 204, (style, merged)

    stored = table.get_entity(pk, rk)
    assert {k for k in stored if k.startswith("s_")} == {
        "s_python",
        "s_js",
        "s_newer_js",
        "s_legacy",
        "s_spaced",
    }
    assert [(e["PartitionKey"], e["RowKey"]) for e in table.list_entities()] == [(pk, rk)]

    # Writes that create through a URL shape land on the same decoded keys.
    table.delete_entity(pk, rk)
    for style, shape in URL_STYLES.items():
        put = raw.request("PUT", name + shape(pk, rk), {"style": style})
        assert put.status == 204, (style, put)
        assert table.get_entity(pk, rk)["style"] == style
    assert len(list(table.list_entities())) == 1

    deleted = raw.request("DELETE", name + legacy_keys(pk, rk), None, {"If-Match": "*"})
    assert deleted.status == 204, deleted
    assert list(table.list_entities()) == []


def test_percent_is_decoded_exactly_once(raw: RawClient, table: TableClient) -> None:
    table.create_entity({"PartitionKey": "%41", "RowKey": "r"})
    table.create_entity({"PartitionKey": "A", "RowKey": "r"})
    body = raw.request("GET", table.table_name + "(PartitionKey='%2541',RowKey='r')").json()
    assert body["PartitionKey"] == "%41"
    body = raw.request("GET", table.table_name + "(PartitionKey='%41',RowKey='r')").json()
    assert body["PartitionKey"] == "A"


def test_plus_in_path_is_literal(raw: RawClient, table: TableClient) -> None:
    table.create_entity({"PartitionKey": "a+b", "RowKey": "r"})
    got = raw.request("GET", table.table_name + "(PartitionKey='a+b',RowKey='r')")
    assert got.status == 200, got
    assert got.json()["PartitionKey"] == "a+b"
    missing = raw.request("GET", table.table_name + "(PartitionKey='a%20b',RowKey='r')")
    assert_error(missing, 404, "ResourceNotFound")


def test_keys_in_either_order_and_with_whitespace(raw: RawClient, table: TableClient) -> None:
    table.create_entity({"PartitionKey": "a", "RowKey": "b"})
    for predicate in (
        "(RowKey='b',PartitionKey='a')",
        "(PartitionKey%20=%20'a'%20,%20RowKey%20=%20'b')",
        "(RowKey='b',%20PartitionKey='a')",
    ):
        got = raw.request("GET", table.table_name + predicate)
        assert got.status == 200, (predicate, got)
        assert (got.json()["PartitionKey"], got.json()["RowKey"]) == ("a", "b")


def test_location_header_encodes_keys_like_python(raw: RawClient, table: TableClient) -> None:
    response = raw.insert(table.table_name, {"PartitionKey": "p'1", "RowKey": "r 1%x"})
    assert response.status == 201, response
    expected = f"{raw.endpoint}/{table.table_name}(PartitionKey='p%27%271',RowKey='r%201%25x')"
    assert response.header("Location") == expected


# ------------------------------------------------------------------------------------------
# Ordering
# ------------------------------------------------------------------------------------------

ORDER_KEYS = [
    "",
    "B",
    "a",
    "aa",
    "ab",
    "b",
    "~",
    "é",
    "\u4e2d",
    "\ue000",
    "\uffff",
    "\U00010000",
    "\U0010ffff",
]


def _utf16(key: str) -> bytes:
    return key.encode("utf-16-be")


def test_row_keys_sort_by_utf16_code_units(table: TableClient) -> None:
    for rk in reversed(ORDER_KEYS):
        table.create_entity({"PartitionKey": "p", "RowKey": rk})
    expected = sorted(ORDER_KEYS, key=_utf16)
    # The surrogate pair D800 DC00 sorts before U+E000 and U+FFFF (unlike code-point/UTF-8 order).
    assert expected.index("\U00010000") < expected.index("\ue000") < expected.index("\uffff")
    assert [e["RowKey"] for e in table.list_entities()] == expected
    assert [e["RowKey"] for e in table.query_entities("PartitionKey eq 'p'")] == expected
    paged = [[e["RowKey"] for e in page] for page in table.list_entities(results_per_page=2).by_page()]
    assert [rk for page in paged for rk in page] == expected
    assert all(len(page) <= 2 for page in paged)


def test_partition_keys_sort_by_utf16_code_units(table: TableClient) -> None:
    for pk in ORDER_KEYS:
        table.create_entity({"PartitionKey": pk, "RowKey": "2"})
        table.create_entity({"PartitionKey": pk, "RowKey": "1"})
    expected = [(pk, rk) for pk in sorted(ORDER_KEYS, key=_utf16) for rk in ("1", "2")]
    assert [(e["PartitionKey"], e["RowKey"]) for e in table.list_entities()] == expected
    paged = [(e["PartitionKey"], e["RowKey"]) for e in table.list_entities(results_per_page=3)]
    assert paged == expected


def test_range_filters_use_utf16_order(table: TableClient) -> None:
    for rk in ORDER_KEYS:
        table.create_entity({"PartitionKey": "p", "RowKey": rk})
    above = [e["RowKey"] for e in table.query_entities("RowKey gt @k", parameters={"k": "\U00010000"})]
    assert above == [k for k in sorted(ORDER_KEYS, key=_utf16) if _utf16(k) > _utf16("\U00010000")]
    assert "\uffff" in above
    assert "\ue000" in above


# ------------------------------------------------------------------------------------------
# Malformed predicates
# ------------------------------------------------------------------------------------------

MALFORMED = [
    "(PartitionKey='a')",
    "(RowKey='b')",
    "(PartitionKey='a',RowKey='b',RowKey='c')",
    "(PartitionKey='a',PartitionKey='b')",
    "(PartitionKey='a,RowKey='b')",
    "(PartitionKey=a,RowKey='b')",
    "(Foo='a',RowKey='b')",
    "(PartitionKey='a'RowKey='b')",
    "('a','b')",
    "(PartitionKey='a',RowKey='b',)",
    "(PartitionKey='a';RowKey='b')",
    "(PartitionKey='a',RowKey=b')",
    "(partitionkey='a',rowkey='b')",
]


@pytest.mark.parametrize("predicate", MALFORMED)
@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT"])
def test_malformed_key_predicate_is_invalid_input(
    raw: RawClient, table: TableClient, predicate: str, method: str
) -> None:
    table.create_entity({"PartitionKey": "a", "RowKey": "b"})
    body = {"v": 1} if method == "PUT" else None
    headers: dict[str, str | None] = {"If-Match": "*"}
    response = raw.request(method, table.table_name + predicate, body, headers)
    assert_error(response, 400, "InvalidInput")
    assert table.get_entity("a", "b")["RowKey"] == "b"


def test_missing_key_message(raw: RawClient, table: TableClient) -> None:
    response = raw.request("GET", table.table_name + "(PartitionKey='a')")
    assert_error(
        response,
        400,
        "InvalidInput",
        "The number of keys specified in the URI does not match number of key properties for the resource.",
    )


def test_continuation_tokens_for_empty_keys(raw: RawClient, table: TableClient) -> None:
    for pk, rk in [("", ""), ("", "a"), ("a", ""), ("a", "b")]:
        table.create_entity({"PartitionKey": pk, "RowKey": rk})
    seen: list[tuple[str, str]] = []
    query = "$top=1"
    for _ in range(10):
        response = raw.request("GET", f"{table.table_name}()?{query}")
        assert response.status == 200, response
        seen.extend((e["PartitionKey"], e["RowKey"]) for e in response.json()["value"])
        npk = response.header("x-ms-continuation-NextPartitionKey")
        nrk = response.header("x-ms-continuation-NextRowKey")
        if npk is None and nrk is None:
            break
        # Both present, non-empty and free of spaces, even when the next key is empty.
        assert npk and nrk, response
        assert " " not in npk and " " not in nrk
        query = f"$top=1&NextPartitionKey={quote(npk, safe='')}&NextRowKey={quote(nrk, safe='')}"
    assert seen == [("", ""), ("", "a"), ("a", ""), ("a", "b")]
