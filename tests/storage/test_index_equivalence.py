"""A property index changes how candidates are found, never the answer.

Hypothesis draws a small table (property ``P`` of mixed Edm types, sometimes missing; strings
with U+0000, astral and private-use characters; Int32, Int64 and Double numbers that are equal
across types; NaN and infinities; DateTimes with and without fractions), an index type for
``P``, and filters that an index can serve (``eq``, ``or`` of ``eq``\\ s, ranges, with key
bounds and other conditions beside them) or must not (``ne``, ``lt`` alone, other types). The
same data goes into two tables, one indexed; every query is paged with a random ``$top``,
following continuation tokens, and both tables must give identical pages and tokens. The
test also checks that the index was really used where it can be.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabulae.model import edm
from tabulae.model.mutation import Mutation, MutationKind
from tabulae.storage.tables import TableStore
from tabulae.table.query.nodes import Literal
from tabulae.table.query.parser import render_literal
from tabulae.table.service import TableService
from tests.storage.conftest import Backend

_tables = itertools.count()

STRINGS = ["", "a", "ab", "b", "a\x00b", "\x00", "\x01", "\ud7ff", "\ue000", "\U00010000", "O'N", "\\u0000"]
INT32S = [-3, 0, 1, 2, 5]
INT64S = [-3, 1, 5, 2**53 + 1, 2**62]
DOUBLES = [-3.0, 0.5, 1.0, 5.0, float(2**53), float(2**62), -0.0, math.nan, math.inf, -math.inf]
DATETIMES = [
    edm.parse_datetime(text)
    for text in (
        "2020-01-01T00:00:00Z",
        "2020-01-01T00:00:00.5Z",
        "2020-01-01T00:00:00.05Z",
        "1999-12-31T23:59:59Z",
    )
]
GUIDS = ["00000000-0000-0000-0000-000000000000", "c9da6455-213d-42c9-9a79-3e9149a57833"]

VALUES = st.one_of(
    st.tuples(st.just(edm.STRING), st.sampled_from(STRINGS)),
    st.tuples(st.just(edm.INT32), st.sampled_from(INT32S)),
    st.tuples(st.just(edm.INT64), st.sampled_from(INT64S)),
    st.tuples(st.just(edm.DOUBLE), st.sampled_from(DOUBLES)),
    st.tuples(st.just(edm.BOOLEAN), st.booleans()),
    st.tuples(st.just(edm.DATETIME), st.sampled_from(DATETIMES)),
    st.tuples(st.just(edm.GUID), st.sampled_from(GUIDS)),
)
# Literals holding U+0000 are left out for now: the unindexed PostgreSQL scan (filter pushdown)
# answers 500 to them ("P eq 'a\x00b'"), a bug of the pushdown, not of indexes. Entities keep them.
LITERALS = VALUES.filter(
    lambda typed: (
        not (typed[0] == edm.DOUBLE and not math.isfinite(typed[1]))
        and not (typed[0] == edm.STRING and "\x00" in typed[1])
    )
)

INDEX_TYPES = [edm.STRING, edm.INT32, edm.INT64, edm.DOUBLE, edm.BOOLEAN, edm.DATETIME, edm.GUID]
ENTITY = st.tuples(
    st.sampled_from(["p0", "p1", "p2", "p\U00010000"]),
    st.sampled_from(["r0", "r1", "r2", "r3", "r\ue000"]),
    st.one_of(st.none(), VALUES),
    st.sampled_from([0, 1]),
)


def _lit(typed: tuple[str, Any]) -> str:
    return render_literal(Literal(typed[0], typed[1]))


@st.composite
def filters(draw: st.DrawFn) -> str:
    a, b = draw(LITERALS), draw(LITERALS)
    core = draw(
        st.sampled_from(
            [
                f"P eq {_lit(a)}",
                f"P eq {_lit(a)} or P eq {_lit(b)}",
                f"P gt {_lit(a)}",
                f"P ge {_lit(a)} and P le {_lit(b)}",
                f"P gt {_lit(a)} and P lt {_lit(b)}",
                f"P ne {_lit(a)}",
                f"P lt {_lit(a)}",
                "P",
            ]
        )
    )
    extra = draw(
        st.sampled_from(
            [
                "",
                " and PartitionKey eq 'p1'",
                " and PartitionKey ge 'p1'",
                " and RowKey lt 'r2'",
                " and Q eq 1",
            ]
        )
    )
    return f"({core}){extra}" if extra else core


async def _fill(store: TableStore, account: str, table: str, entities: list[Any]) -> None:
    seen: set[tuple[str, str]] = set()
    for pk, rk, value, q in entities:
        if (pk, rk) in seen:
            continue
        seen.add((pk, rk))
        properties: dict[str, Any] = {"Q": (edm.INT32, q)}
        if value is not None:
            properties["P"] = value
        await store.apply(account, table, [Mutation(MutationKind.INSERT, pk, rk, properties)])


async def _pages(service: TableService, account: str, table: str, text: str, top: int) -> list[Any]:
    pages: list[Any] = []
    token: tuple[str | None, str | None] = (None, None)
    for _ in range(100):
        page = await service.query_entities(account, table, text, top, *token)
        pages.append(
            ([(e.pk, e.rk, e.blob) for e in page.entities], page.next_partition_token, page.next_row_token)
        )
        if page.next_partition_token is None:
            return pages
        token = (page.next_partition_token, page.next_row_token)
    raise AssertionError("paging did not end")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    entities=st.lists(ENTITY, max_size=24),
    index_type=st.sampled_from(
        [edm.STRING, edm.INT32, edm.INT64, edm.DOUBLE, edm.BOOLEAN, edm.DATETIME, edm.GUID]
    ),
    queries=st.lists(st.tuples(filters(), st.integers(1, 6)), min_size=1, max_size=6),
)
def test_index_and_scan_give_identical_pages(
    backend: Backend, entities: list[Any], index_type: str, queries: list[tuple[str, int]]
) -> None:
    async def body(store: TableStore) -> None:
        service = TableService(store)
        number = next(_tables)
        plain, indexed = f"plain{number}", f"indexed{number}"
        for name in (plain, indexed):
            await service.create_table(backend.account, name)
            await _fill(store, backend.account, name, entities)
        info = await service.add_index(backend.account, indexed, "P", index_type, wait=True)
        assert info.state == "ready", info
        for text, top in queries:
            expected = await _pages(service, backend.account, plain, text, top)
            actual = await _pages(service, backend.account, indexed, text, top)
            assert actual == expected, (text, top)
        for name in (plain, indexed):  # on PostgreSQL every index costs every write a little
            await service.delete_table(backend.account, name)

    backend.run(body)


def test_index_is_used_for_eq_ranges_and_not_for_ne(backend: Backend) -> None:
    async def body(store: TableStore) -> None:
        service = TableService(store)
        account = backend.account
        await service.create_table(account, "people")
        await _fill(
            store,
            account,
            "people",
            [(f"p{i % 3}", f"r{i:03d}", (edm.INT32, i % 10), 1) for i in range(60)],
        )
        await service.add_index(account, "people", "P", edm.INT32, wait=True)
        eq = await service.query_entities(account, "people", "P eq 3", None, None, None)
        assert (eq.query_class, eq.scanned, len(eq.entities)) == ("index-scan", 6, 6)
        either = await service.query_entities(
            account, "people", "P eq 3 or P eq 4.0 or P eq 4", None, None, None
        )
        assert (either.query_class, len(either.entities)) == ("index-scan", 12)  # 4.0 matches no Int32
        wider = await service.query_entities(account, "people", "P eq 4L", None, None, None)
        assert (wider.query_class, len(wider.entities)) == ("index-scan", 0)  # Int64 literal: no Int32 match
        keys = [(e.pk, e.rk) for e in either.entities]
        assert keys == sorted(keys)  # two index streams, merged back into key order
        keyed = await service.query_entities(
            account, "people", "PartitionKey eq 'p1' and P eq 3", None, None, None
        )
        assert (keyed.query_class, len(keyed.entities)) == ("index-scan", 2)
        ranged = await service.query_entities(account, "people", "P gt 7", None, None, None)
        assert (ranged.query_class, len(ranged.entities)) == ("index-scan", 12)
        ne = await service.query_entities(account, "people", "P ne 3", None, None, None)
        assert (ne.query_class, len(ne.entities)) == ("table-scan", 54)
        other_type = await service.query_entities(account, "people", "P eq '3'", None, None, None)
        assert (other_type.query_class, len(other_type.entities)) == ("table-scan", 0)
        await service.delete_table(account, "people")

    backend.run(body)


def test_index_admin_rules(backend: Backend) -> None:
    async def body(store: TableStore) -> None:
        from tabulae.model.errors import ServiceError

        service = TableService(store)
        account = backend.account
        await service.create_table(account, "things")
        first = await service.add_index(account, "things", "Email", edm.STRING, wait=True)
        assert (first.table, first.property, first.edm_type, first.state) == (
            "things",
            "Email",
            edm.STRING,
            "ready",
        )
        again = await service.add_index(account, "things", "Email", edm.STRING, wait=True)
        assert again.state == "ready"
        for prop, edm_type, code in [
            ("Email", edm.INT32, "IndexAlreadyExists"),
            ("RowKey", edm.STRING, "InvalidInput"),
            ("1bad", edm.STRING, "PropertyNameInvalid"),
            ("Data", edm.BINARY, "InvalidInput"),
        ]:
            try:
                await service.add_index(account, "things", prop, edm_type, wait=True)
            except ServiceError as exc:
                assert exc.code == code, (prop, exc.code)
            else:
                raise AssertionError(f"{prop} {edm_type} was accepted")
        with pytest.raises(ServiceError) as missing:
            await service.add_index(account, "nosuch", "Email", edm.STRING, wait=True)
        assert missing.value.code == "TableNotFound"
        assert [i.property for i in await service.list_indexes(account, None)] == ["Email"]
        await service.drop_index(account, "things", "Email")
        assert await service.list_indexes(account, "things") == []
        await service.add_index(account, "things", "Email", edm.STRING, wait=True)
        await service.delete_table(account, "things")
        await service.create_table(account, "things")
        assert await service.list_indexes(account, "things") == []
        await service.delete_table(account, "things")

    backend.run(body)


def test_rows_the_residual_refuses_after_a_full_page_give_the_same_token(backend: Backend) -> None:
    """PostgreSQL cannot read JSON holding an escaped U+0000, so such rows come back from the
    pushed-down filter undecided and the residual refuses them. A page filled just before such
    a row ended there with a token on the scan, while the index, whose chunk read on to the
    end, gave none: a page ends with a token only when another match follows."""

    async def body(store: TableStore) -> None:
        service = TableService(store)
        account = backend.account
        values = [("r0", "b"), ("r1", "c"), ("r2", "\x00"), ("r3", "\x00z")]
        for name in ("plainnul", "indexednul"):
            await service.create_table(account, name)
            for rk, value in values:
                await store.apply(
                    account, name, [Mutation(MutationKind.INSERT, "p", rk, {"P": (edm.STRING, value)})]
                )
        await service.add_index(account, "indexednul", "P", edm.STRING, wait=True)
        for text in ("P ge 'b'", "P gt 'a'"):
            for top in (1, 2, 3, 4):
                expected = await _pages(service, account, "plainnul", text, top)
                actual = await _pages(service, account, "indexednul", text, top)
                assert actual == expected, (text, top)
        tail = await service.query_entities(account, "plainnul", "P ge 'b'", 2, None, None)
        assert [e.rk for e in tail.entities] == ["r0", "r1"] and tail.next_partition_token is None
        for name in ("plainnul", "indexednul"):
            await service.delete_table(account, name)

    backend.run(body)
