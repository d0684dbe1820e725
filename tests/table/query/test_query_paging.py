"""Paging and continuation tokens, and the query cost headers.

Tokens are checked on the wire: both entity headers present and non-empty together, no spaces,
nothing that changes under URL decoding; they resume exactly after the last row
returned, survive writes between pages and a server restart. ``x-tabulae-query-class`` and
``x-tabulae-scanned`` (README) are checked against data whose cost is known exactly.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from urllib.parse import quote, unquote, unquote_plus

import pytest
from azure.data.tables import TableClient, TableServiceClient

from tests.rawhttp import RawClient, py_keys
from tests.serverproc import ServerProcess

# Continuation tokens: base64url or a [A-Za-z0-9!*_-] alphabet; certainly no spaces.
TOKEN_RE = re.compile(r"^[A-Za-z0-9!*_\-]+$")
MAX_PAGES = 500


def q(text: str) -> str:
    return quote(text, safe="")


def utf16(text: str) -> bytes:
    return text.encode("utf-16-be", "surrogatepass")


def key_order(keys: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return sorted(keys, key=lambda k: (utf16(k[0]), utf16(k[1])))


@dataclass
class Page:
    keys: list[tuple[str, str]]
    npk: str | None
    nrk: str | None
    query_class: str | None
    scanned: int | None


def get_page(
    raw: RawClient, table: str, query: str = "", npk: str | None = None, nrk: str | None = None
) -> Page:
    parts = [query] if query else []
    if npk is not None:
        parts.append(f"NextPartitionKey={npk}")
    if nrk is not None:
        parts.append(f"NextRowKey={nrk}")
    response = raw.request("GET", f"{table}()?{'&'.join(parts)}")
    assert response.status == 200, response
    rows = response.json()["value"]
    scanned = response.header("x-tabulae-scanned")
    return Page(
        [(row["PartitionKey"], row["RowKey"]) for row in rows],
        response.header("x-ms-continuation-NextPartitionKey"),
        response.header("x-ms-continuation-NextRowKey"),
        response.header("x-tabulae-query-class"),
        None if scanned is None else int(scanned),
    )


def check_tokens(page: Page) -> None:
    """Continuation tokens: both or neither; non-empty; URL-safe; no spaces."""
    assert (page.npk is None) == (page.nrk is None), page
    for token in (page.npk, page.nrk):
        if token is None:
            continue
        assert token != "", page
        assert " " not in token, page
        assert TOKEN_RE.match(token), page
        assert unquote(token) == token and unquote_plus(token) == token, page


def all_pages(raw: RawClient, table: str, query: str = "") -> list[Page]:
    """Follow continuations, copying the header values verbatim (as every SDK does)."""
    pages = [get_page(raw, table, query)]
    while pages[-1].npk is not None:
        assert len(pages) < MAX_PAGES, "continuations never end"
        check_tokens(pages[-1])
        pages.append(get_page(raw, table, query, pages[-1].npk, pages[-1].nrk))
    check_tokens(pages[-1])
    return pages


def flatten(pages: list[Page]) -> list[tuple[str, str]]:
    return [key for page in pages for key in page.keys]


def insert_all(raw: RawClient, table: str, entities: list[dict[str, object]]) -> None:
    for entity in entities:
        response = raw.insert(table, entity)
        assert response.status == 201, response


def delete(raw: RawClient, table: str, pk: str, rk: str) -> None:
    response = raw.request("DELETE", table + py_keys(pk, rk), headers={"If-Match": "*"})
    assert response.status == 204, response


# ------------------------------------------------------------------------ token shape

AWKWARD_KEYS = [
    "",
    " ",
    "a b",
    "O'Neil",
    "''",
    "100%",
    "%20",
    "+plus+",
    "a=b&c",
    "~tilde",
    "é",
    "日本語",
    "\U0001f600",
    "\ufffd",
    "\ue000",
    "x" * 400,
]


def test_tokens_are_present_together_non_empty_and_url_safe(raw: RawClient, table: TableClient) -> None:
    keys = [(pk, rk) for pk in AWKWARD_KEYS[:6] for rk in AWKWARD_KEYS] + [(k, k) for k in AWKWARD_KEYS[6:]]
    insert_all(raw, table.table_name, [{"PartitionKey": pk, "RowKey": rk, "v": 1} for pk, rk in keys])
    expected = key_order(keys)

    pages = all_pages(raw, table.table_name, "$top=1")
    assert flatten(pages) == expected
    assert all(len(page.keys) == 1 for page in pages)
    tokens = [(page.npk, page.nrk) for page in pages[:-1]]
    assert all(npk and nrk for npk, nrk in tokens)
    assert pages[-1].npk is None and pages[-1].nrk is None

    # .NET joins the two tokens with a space and splits them again on the way back.
    for npk, nrk in tokens:
        assert npk is not None and nrk is not None
        joined = f"{npk} {nrk}"
        assert joined.split(" ") == [npk, nrk]

    # The same walk with a residual filter and a larger page.
    pages = all_pages(raw, table.table_name, f"$top=4&$filter={q('v eq 1')}")
    assert flatten(pages) == expected


def test_empty_keys_still_give_non_empty_tokens(raw: RawClient, table: TableClient) -> None:
    keys = [("", ""), ("", "a"), ("a", ""), ("a", "b"), ("b", "")]
    insert_all(raw, table.table_name, [{"PartitionKey": pk, "RowKey": rk} for pk, rk in keys])
    pages = all_pages(raw, table.table_name, "$top=1")
    assert flatten(pages) == keys
    assert len(pages) == len(keys)
    for page in pages[:-1]:
        assert page.npk and page.nrk, page  # JS stops paging on an empty header


def test_tokens_survive_url_encoding_by_clients(raw: RawClient, table: TableClient) -> None:
    """A client that percent-encodes the token value anyway (as SDK query builders may) still resumes."""
    insert_all(raw, table.table_name, [{"PartitionKey": "p", "RowKey": f"{i:02d}"} for i in range(6)])
    first = get_page(raw, table.table_name, "$top=2")
    assert first.npk and first.nrk
    encoded = get_page(raw, table.table_name, "$top=2", q(first.npk), q(first.nrk))
    verbatim = get_page(raw, table.table_name, "$top=2", first.npk, first.nrk)
    assert encoded.keys == verbatim.keys == [("p", "02"), ("p", "03")]


# ----------------------------------------------------------------------- resuming exactly


RESUME_ROWS = [
    {"PartitionKey": f"p{p}", "RowKey": f"{r:02d}", "n": p * 8 + r, "m3": (p * 8 + r) % 3}
    for p in range(4)
    for r in range(8)
]


@pytest.fixture(scope="module")
def resume_table(server: ServerProcess) -> Iterator[str]:
    """Four partitions of eight rows (read-only for the tests that use it)."""
    raw = RawClient(server.port)
    name = f"qresume{os.getpid()}"
    assert raw.create_table(name).status == 201
    insert_all(raw, name, RESUME_ROWS)
    yield name
    raw.request("DELETE", f"Tables('{name}')")


@pytest.mark.parametrize(
    ("query", "selected"),
    [
        ("", lambda pk, rk, n: True),
        (f"$filter={q('n ge 10')}", lambda pk, rk, n: n >= 10),
        (f"$filter={q('m3 eq 0')}", lambda pk, rk, n: n % 3 == 0),
        (f"$filter={q('PartitionKey eq ' + repr('p1'))}", lambda pk, rk, n: pk == "p1"),
        (
            f"$filter={q('PartitionKey ge ' + repr('p1') + ' and PartitionKey le ' + repr('p2'))}",
            lambda pk, rk, n: pk in ("p1", "p2"),
        ),
        (f"$filter={q('RowKey lt ' + repr('03'))}", lambda pk, rk, n: rk < "03"),
        (
            f"$filter={q('PartitionKey eq ' + repr('p2') + ' and RowKey gt ' + repr('02'))}",
            lambda pk, rk, n: pk == "p2" and rk > "02",
        ),
    ],
)
@pytest.mark.parametrize("top", [1, 4, 7, 1000])
def test_tokens_resume_exactly_where_the_page_stopped(
    raw: RawClient, resume_table: str, query: str, selected: Callable[[str, str, int], bool], top: int
) -> None:
    expected = [
        (row["PartitionKey"], row["RowKey"])
        for row in RESUME_ROWS
        if selected(row["PartitionKey"], row["RowKey"], row["n"])  # type: ignore[arg-type]
    ]
    joined = f"$top={top}&{query}" if query else f"$top={top}"
    pages = all_pages(raw, resume_table, joined)
    assert flatten(pages) == expected
    assert all(len(page.keys) <= top for page in pages)
    # Every page but the last is full (page size = min($top, 1000); on a few dozen
    # rows no time budget can end a page early), and the last page carries no token: no
    # further match exists.
    assert all(len(page.keys) == top for page in pages[:-1])
    assert pages[-1].npk is None
    # A token can be replayed: the same page comes back.
    for before, after in itertools.pairwise(pages):
        again = get_page(raw, resume_table, joined, before.npk, before.nrk)
        assert again.keys == after.keys


def test_no_token_when_top_equals_the_remaining_matches(raw: RawClient, table: TableClient) -> None:
    insert_all(raw, table.table_name, [{"PartitionKey": "p", "RowKey": f"{i}", "n": i} for i in range(10)])
    for query in ("$top=10", f"$top=5&$filter={q('n lt 5')}", f"$top=3&$filter={q('n ge 7')}"):
        page = get_page(raw, table.table_name, query)
        assert page.npk is None and page.nrk is None, (query, page)
    page = get_page(raw, table.table_name, f"$top=4&$filter={q('n lt 5')}")
    assert len(page.keys) == 4 and page.npk and page.nrk


def test_top_limits_the_page_not_the_total(raw: RawClient, table: TableClient) -> None:
    insert_all(raw, table.table_name, [{"PartitionKey": "p", "RowKey": f"{i:02d}"} for i in range(11)])
    first = get_page(raw, table.table_name, "$top=3")
    assert first.keys == [("p", "00"), ("p", "01"), ("p", "02")]
    assert first.npk and first.nrk
    pages = all_pages(raw, table.table_name, "$top=3")
    assert [len(page.keys) for page in pages] == [3, 3, 3, 2]


def test_rows_written_between_pages_cause_no_duplicates_or_skips(raw: RawClient, table: TableClient) -> None:
    name = table.table_name
    initial = [(f"p{p}", f"{r:02d}") for p in range(3) for r in range(0, 20, 2)]
    insert_all(raw, name, [{"PartitionKey": pk, "RowKey": rk} for pk, rk in initial])
    first = get_page(raw, name, "$top=12")
    assert first.keys == key_order(initial)[:12]
    last = first.keys[-1]
    assert last == ("p1", "02")

    # Writes between pages: before the cursor, at it, just after it and far after it.
    delete(raw, name, *last)  # the row the token points after
    delete(raw, name, "p1", "04")  # the next one
    delete(raw, name, "p2", "10")
    added = [("p0", "01"), ("p1", "01"), ("p1", "02x"), ("p1", "03"), ("p1", "99"), ("p15", "00"), ("p9", "")]
    insert_all(raw, name, [{"PartitionKey": pk, "RowKey": rk} for pk, rk in added])

    seen = list(first.keys)
    npk, nrk = first.npk, first.nrk
    while npk is not None:
        page = get_page(raw, name, "$top=5", npk, nrk)
        check_tokens(page)
        seen.extend(page.keys)
        npk, nrk = page.npk, page.nrk
        if len(seen) > 1000:
            pytest.fail("continuations never end")

    current = set(initial) - {last, ("p1", "04"), ("p2", "10")} | set(added)
    cursor = (utf16(last[0]), utf16(last[1]))
    expected_after = [key for key in key_order(list(current)) if (utf16(key[0]), utf16(key[1])) > cursor]
    assert seen == first.keys + expected_after
    assert len(seen) == len(set(seen))
    # Every surviving row after the cursor was returned; rows added before it were not.
    assert ("p0", "01") not in seen and ("p1", "01") not in seen
    assert {("p1", "02x"), ("p1", "03"), ("p1", "99"), ("p15", "00"), ("p9", "")} <= set(seen)


def test_tokens_survive_a_server_restart(fresh_server: ServerProcess) -> None:
    raw = RawClient(fresh_server.port)
    assert raw.create_table("restartpaging").status == 201
    keys = [(f"p{p}", f"r{r}") for p in range(3) for r in range(4)]
    insert_all(raw, "restartpaging", [{"PartitionKey": pk, "RowKey": rk, "n": 1} for pk, rk in keys])
    first = get_page(raw, "restartpaging", f"$top=5&$filter={q('n eq 1')}")
    assert first.keys == keys[:5] and first.npk and first.nrk
    names = [f"restart{i}" for i in range(4)]
    for name in names:
        assert raw.create_table(name).status == 201
    tables_filter = q("TableName ge 'restart'")
    tables_query = f"Tables?$top=2&$filter={tables_filter}"
    response = raw.request("GET", tables_query)
    assert [t["TableName"] for t in response.json()["value"]] == names[:2]
    table_token = response.header("x-ms-continuation-NextTableName")
    assert table_token

    fresh_server.restart()
    raw = RawClient(fresh_server.port)

    pages = [first]
    while pages[-1].npk is not None:
        pages.append(
            get_page(raw, "restartpaging", f"$top=5&$filter={q('n eq 1')}", pages[-1].npk, pages[-1].nrk)
        )
    assert flatten(pages) == keys

    seen = names[:2]
    while table_token:
        response = raw.request("GET", f"{tables_query}&NextTableName={table_token}")
        assert response.status == 200, response
        seen.extend(t["TableName"] for t in response.json()["value"])
        table_token = response.header("x-ms-continuation-NextTableName")
    assert seen == [*names, "restartpaging"]


# ------------------------------------------------------------------------------ Query Tables


def test_query_tables_paging_resumes_exactly(
    raw: RawClient, service: TableServiceClient, table_name: str
) -> None:
    names = [f"{table_name}q{i:02d}" for i in range(7)]
    for name in names:
        assert raw.create_table(name).status == 201
    try:
        prefix = q(f"TableName ge '{table_name}q' and TableName lt '{table_name}r'")
        seen: list[str] = []
        token: str | None = None
        pages = 0
        while True:
            target = f"Tables?$top=3&$filter={prefix}" + (f"&NextTableName={token}" if token else "")
            response = raw.request("GET", target)
            assert response.status == 200, response
            values = [t["TableName"] for t in response.json()["value"]]
            assert len(values) <= 3
            seen.extend(values)
            pages += 1
            token = response.header("x-ms-continuation-NextTableName")
            if token is None:
                break
            assert TOKEN_RE.match(token) and unquote_plus(token) == token, token
            if pages == 1:
                # Between pages: drop a table not yet returned, add one after the cursor and one before.
                assert raw.request("DELETE", f"Tables('{names[4]}')").status == 204
                assert raw.create_table(f"{table_name}q05a").status == 201
                assert raw.create_table(f"{table_name}q00a").status == 201
        assert seen == [*names[:4], names[5], f"{table_name}q05a", *names[6:]]
        assert pages == 3
        # The SDK pages the same way.
        listed = [
            t.name
            for t in service.query_tables(
                "TableName ge @lo and TableName lt @hi",
                parameters={"lo": f"{table_name}q", "hi": f"{table_name}r"},
                results_per_page=2,
            )
        ]
        assert listed == sorted([*names[:4], *names[5:], f"{table_name}q05a", f"{table_name}q00a"])
    finally:
        for name in [*names, f"{table_name}q05a", f"{table_name}q00a"]:
            raw.request("DELETE", f"Tables('{name}')")


# ------------------------------------------------------------------ cost headers: query class

CLASS_CASES = [
    ("PartitionKey eq 'p1' and RowKey eq '03'", "point"),
    ("RowKey eq '03' and PartitionKey eq 'p1'", "point"),
    ("'p1' eq PartitionKey and '03' eq RowKey", "point"),
    ("PartitionKey eq 'p1' and RowKey eq '03' and n gt 0", "point"),
    ("PartitionKey eq 'p1'", "row-range"),
    ("PartitionKey eq 'p1' and n gt 3", "row-range"),
    ("PartitionKey eq 'p1' and RowKey ge '02' and RowKey lt '05'", "row-range"),
    ("PartitionKey eq 'p1' and RowKey gt '02'", "row-range"),
    ("PartitionKey eq 'p1' and (RowKey eq '01' or RowKey eq '05')", "row-range"),
    ("PartitionKey ge 'p1' and PartitionKey lt 'p3'", "partition-scan"),
    ("PartitionKey gt 'p1'", "partition-scan"),
    ("PartitionKey le 'p1'", "partition-scan"),
    ("PartitionKey eq 'p0' or PartitionKey eq 'p2'", "partition-scan"),
    ("PartitionKey ge 'p1' and PartitionKey le 'p2' and RowKey eq '03'", "partition-scan"),
    ("n eq 3", "table-scan"),
    ("RowKey eq '03'", "table-scan"),
    ("PartitionKey ne 'p1'", "table-scan"),
    ("PartitionKey eq 'p1' or n eq 3", "table-scan"),
    ("true", "table-scan"),
]


@pytest.fixture(scope="module")
def costed(server: ServerProcess) -> Iterator[str]:
    """Four partitions of ten rows, ``n`` 0..9 in each, ``tag`` on rows 03 and 07."""
    raw = RawClient(server.port)
    name = f"costheaders{os.getpid()}"
    assert raw.create_table(name).status == 201
    for p in range(4):
        for r in range(10):
            entity = {"PartitionKey": f"p{p}", "RowKey": f"{r:02d}", "n": r}
            if r in (3, 7):
                entity["tag"] = "x"
            assert raw.insert(name, entity).status == 201
    yield name
    raw.request("DELETE", f"Tables('{name}')")


@pytest.mark.parametrize(("filter_text", "expected"), CLASS_CASES)
def test_query_class_header(raw: RawClient, costed: str, filter_text: str, expected: str) -> None:
    page = get_page(raw, costed, f"$filter={q(filter_text)}")
    assert page.query_class == expected, (filter_text, page)


def test_query_class_without_filter_is_table_scan(raw: RawClient, costed: str) -> None:
    assert get_page(raw, costed).query_class == "table-scan"


@pytest.mark.parametrize(
    ("filter_text", "rows", "scanned"),
    [
        ("PartitionKey eq 'p1' and RowKey eq '03'", 1, 1),
        ("PartitionKey eq 'p1' and RowKey eq 'zz'", 0, 0),
        ("PartitionKey eq 'p9'", 0, 0),
        ("PartitionKey eq 'p1' and tag eq 'x'", 2, 10),
        ("PartitionKey eq 'p1'", 10, 10),
        ("PartitionKey eq 'p1' and RowKey ge '02' and RowKey lt '06'", 4, 4),
        ("PartitionKey ge 'p1' and PartitionKey le 'p2'", 20, 20),
        ("PartitionKey ge 'p1' and PartitionKey le 'p2' and n eq 9", 2, 20),
        ("n eq 9", 4, 40),
        ("tag eq 'x'", 8, 40),
        ("RowKey eq '03'", 4, 40),
        ("true", 40, 40),
        ("PartitionKey eq 'p1' and PartitionKey eq 'p2'", 0, 0),
    ],
)
def test_scanned_header_is_exact(
    raw: RawClient, costed: str, filter_text: str, rows: int, scanned: int
) -> None:
    page = get_page(raw, costed, f"$filter={q(filter_text)}")
    assert len(page.keys) == rows, (filter_text, page)
    assert page.scanned == scanned, (filter_text, page)


def test_scanned_header_without_filter(raw: RawClient, costed: str) -> None:
    page = get_page(raw, costed)
    assert len(page.keys) == 40 and page.scanned == 40


def test_continuation_parameter_names_match_case_insensitively(raw: RawClient, table: TableClient) -> None:
    """Continuation parameter names SHOULD be matched case-insensitively."""
    insert_all(raw, table.table_name, [{"PartitionKey": "p", "RowKey": f"{i}"} for i in range(5)])
    first = get_page(raw, table.table_name, "$top=2")
    assert first.npk and first.nrk
    response = raw.request(
        "GET", f"{table.table_name}()?$top=2&nextpartitionkey={first.npk}&NEXTROWKEY={first.nrk}"
    )
    assert response.status == 200, response
    assert [e["RowKey"] for e in response.json()["value"]] == ["2", "3"]


def test_tables_page_in_lower_case_order_and_filter_case_sensitively(raw: RawClient, table_name: str) -> None:
    """Listed by lower-cased name; ``TableName`` compares the stored name ordinally.

    The listing order is not settled against Azure."""
    prefix = table_name + "c"
    names = [prefix + suffix for suffix in ("Zeta", "alpha", "Beta", "betax", "ALPHA2")]
    for name in names:
        assert raw.create_table(name).status == 201
    try:
        everything = q(f"TableName ge '{prefix}' and TableName lt '{table_name}d'")
        seen: list[list[str]] = []
        token = None
        while True:
            target = f"Tables?$top=2&$filter={everything}" + (f"&NextTableName={token}" if token else "")
            response = raw.request("GET", target)
            assert response.status == 200, response
            seen.append([t["TableName"] for t in response.json()["value"]])
            token = response.header("x-ms-continuation-NextTableName")
            if not token:
                break
        assert [name for page in seen for name in page] == sorted(names, key=str.lower)
        assert all(len(page) <= 2 for page in seen)
        # Ordinal, case-sensitive: 'B' <= 'Beta' < 'Zeta' < 'alpha' < 'b'; 'ALPHA2' < 'B'; 'betax' >= 'b'.
        window = q(f"TableName ge '{prefix}B' and TableName lt '{prefix}b'")
        response = raw.request("GET", f"Tables?$filter={window}")
        assert [t["TableName"] for t in response.json()["value"]] == [
            prefix + "alpha",
            prefix + "Beta",
            prefix + "Zeta",
        ]
    finally:
        for name in names:
            raw.request("DELETE", f"Tables('{name}')")
