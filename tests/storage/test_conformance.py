"""The storage contract of ``tabulae.storage.tables``, checked the same way on every backend.

The SQLite backend is the reference for semantics; a new backend is done when this file passes
against it unchanged. Tests are plain functions that run a coroutine with ``asyncio.run`` (see
``Backend.run``), so no asyncio plugin is needed.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Sequence
from typing import Any

import pytest

from tabulae.model import edm
from tabulae.model.edm import Properties
from tabulae.model.entity import StoredEntity
from tabulae.model.errors import ServiceError
from tabulae.model.mutation import Mutation, MutationKind
from tabulae.storage.scans import FULL_RANGE, KeyBound, KeyRange
from tabulae.storage.tables import TableStore as Store
from tests.storage.conftest import Backend

INSERT, REPLACE, MERGE, DELETE = (
    MutationKind.INSERT,
    MutationKind.REPLACE,
    MutationKind.MERGE,
    MutationKind.DELETE,
)
TABLE = "Things"


def props(**values: Any) -> Properties:
    """Typed properties from plain values: str -> Edm.String, int -> Edm.Int32."""
    out: Properties = {}
    for name, value in values.items():
        out[name] = (edm.STRING, value) if isinstance(value, str) else (edm.INT32, value)
    return out


def insert(pk: str, rk: str, **values: Any) -> Mutation:
    return Mutation(INSERT, pk, rk, props(**values))


async def raises(code: str, operation: Awaitable[Any], index: int | None = None) -> ServiceError:
    """Await ``operation`` and check it fails with ``code`` (and batch ``index`` when given)."""
    with pytest.raises(ServiceError) as info:
        await operation
    assert info.value.code == code, info.value
    if index is not None:
        assert info.value.index == index
    return info.value


async def keys_of(store: Store, account: str, table: str = TABLE) -> list[tuple[str, str]]:
    return [(e.pk, e.rk) for e in await store.scan(account, table, [FULL_RANGE], None, 10_000)]


async def with_table(store: Store, account: str, table: str = TABLE) -> None:
    await store.create_table(account, table)


def utf16(key: tuple[str, str]) -> tuple[bytes, bytes]:
    return edm.utf16_sort_key(key[0]), edm.utf16_sort_key(key[1])


# ----------------------------------------------------------------------------------------- tables


def test_create_get_list_tables(backend: Backend) -> None:
    async def body(store: Store) -> None:
        a = backend.account
        assert await store.list_tables(a, None, 100) == []
        for name in ("Gamma", "alpha", "Beta", "delta1"):
            await store.create_table(a, name)
        assert await store.get_table(a, "ALPHA") == "alpha"
        assert await store.get_table(a, "beta") == "Beta"
        assert await store.get_table(a, "nothere") is None
        assert await store.list_tables(a, None, 100) == ["alpha", "Beta", "delta1", "Gamma"]
        assert await store.list_tables(a, None, 2) == ["alpha", "Beta"]
        assert await store.list_tables(a, "beta", 100) == ["delta1", "Gamma"]
        assert await store.list_tables(a, "gamma", 100) == []
        await raises("TableAlreadyExists", store.create_table(a, "GAMMA"))
        await raises("TableAlreadyExists", store.create_table(a, "alpha"))
        # Accounts are separate name spaces.
        other = a + "x"
        assert await store.list_tables(other, None, 100) == []
        await store.create_table(other, "ALPHA")
        assert await store.get_table(other, "alpha") == "ALPHA"
        assert await store.get_table(a, "alpha") == "alpha"

    backend.run(body)


def test_delete_table(backend: Backend) -> None:
    async def body(store: Store) -> None:
        a = backend.account
        await store.create_table(a, "Doomed")
        await store.create_table(a, "Kept")
        await store.apply(a, "doomed", [insert("p", "1", v=1), insert("p", "2", v=2)])
        await store.apply(a, "kept", [insert("p", "1", v=1)])
        await store.delete_table(a, "DOOMED")
        assert await store.get_table(a, "doomed") is None
        assert await store.list_tables(a, None, 100) == ["Kept"]
        await raises("ResourceNotFound", store.delete_table(a, "doomed"))
        await raises("TableNotFound", store.get_entity(a, "doomed", "p", "1"))
        # A table re-created under the same name (any case) starts empty.
        await store.create_table(a, "DOOMED")
        assert await store.get_table(a, "doomed") == "DOOMED"
        assert await keys_of(store, a, "doomed") == []
        assert await store.get_entity(a, "doomed", "p", "1") is None
        assert await keys_of(store, a, "kept") == [("p", "1")]
        await store.apply(a, "doomed", [insert("p", "1", v=3)])
        entity = await store.get_entity(a, "doomed", "p", "1")
        assert entity is not None and entity.properties() == props(v=3)

    backend.run(body)


def test_table_not_found_everywhere(backend: Backend) -> None:
    async def body(store: Store) -> None:
        a = backend.account
        await raises("TableNotFound", store.get_entity(a, "missing", "p", "r"))
        await raises("TableNotFound", store.scan(a, "missing", [FULL_RANGE], None, 10))
        await raises("TableNotFound", store.scan(a, "missing", [FULL_RANGE], ("p", "r"), 10))
        await raises("TableNotFound", store.apply(a, "missing", [insert("p", "r")]))
        await raises("TableNotFound", store.apply(a, "missing", [Mutation(DELETE, "p", "r", if_match="*")]))
        await raises("TableNotFound", store.get_acl(a, "missing"))
        await raises("TableNotFound", store.set_acl(a, "missing", b"<acl/>"))
        await raises("ResourceNotFound", store.delete_table(a, "missing"))
        assert await store.get_table(a, "missing") is None

    backend.run(body)


def test_acl_and_service_properties(backend: Backend) -> None:
    async def body(store: Store) -> None:
        a = backend.account
        await with_table(store, a)
        assert await store.get_acl(a, "things") is None
        await store.set_acl(a, "THINGS", b"<SignedIdentifiers/>")
        assert await store.get_acl(a, "things") == b"<SignedIdentifiers/>"
        await store.set_acl(a, "things", b"\x00binary\xff")
        assert await store.get_acl(a, "Things") == b"\x00binary\xff"
        assert await store.get_service_properties(a) is None
        await store.set_service_properties(a, b"one")
        await store.set_service_properties(a, b"two")
        assert await store.get_service_properties(a) == b"two"
        assert await store.get_service_properties(a + "x") is None
        # The ACL goes with the table.
        await store.delete_table(a, "things")
        await store.create_table(a, "things")
        assert await store.get_acl(a, "things") is None

    backend.run(body)


# --------------------------------------------------------------------------------------- entities


def test_insert_get_replace_merge_delete(backend: Backend) -> None:
    async def body(store: Store) -> None:
        a = backend.account
        await with_table(store, a)
        assert await store.get_entity(a, "things", "p", "r") is None
        [created] = await store.apply(a, "THINGS", [insert("p", "r", x=1, s="a")])
        assert created is not None
        assert (created.pk, created.rk) == ("p", "r")
        assert created.properties() == props(x=1, s="a")
        assert await store.get_entity(a, "things", "p", "r") == created
        assert created.etag == edm.etag_for(edm.format_datetime(created.ticks))

        [replaced] = await store.apply(a, TABLE, [Mutation(REPLACE, "p", "r", props(y=2))])
        assert replaced is not None and replaced.properties() == props(y=2)  # x and s are gone

        [merged] = await store.apply(a, TABLE, [Mutation(MERGE, "p", "r", props(y=3, z="new"))])
        assert merged is not None and merged.properties() == props(y=3, z="new")
        assert await store.get_entity(a, TABLE, "p", "r") == merged

        assert await store.apply(a, TABLE, [Mutation(DELETE, "p", "r", if_match="*")]) == [None]
        assert await store.get_entity(a, TABLE, "p", "r") is None

        # REPLACE and MERGE without a condition are upserts.
        [upserted] = await store.apply(a, TABLE, [Mutation(REPLACE, "p", "u1", props(v=1))])
        assert upserted is not None and upserted.properties() == props(v=1)
        [upmerged] = await store.apply(a, TABLE, [Mutation(MERGE, "p", "u2", props(v=2))])
        assert upmerged is not None and upmerged.properties() == props(v=2)
        assert await keys_of(store, a) == [("p", "u1"), ("p", "u2")]

        # An unconditional DELETE of a missing entity is ResourceNotFound.
        await raises("ResourceNotFound", store.apply(a, TABLE, [Mutation(DELETE, "p", "nope")]), 0)
        assert await store.apply(a, TABLE, [Mutation(DELETE, "p", "u1")]) == [None]

    backend.run(body)


def test_insert_existing_is_conflict(backend: Backend) -> None:
    async def body(store: Store) -> None:
        a = backend.account
        await with_table(store, a)
        [first] = await store.apply(a, TABLE, [insert("p", "r", v=1)])
        await raises("EntityAlreadyExists", store.apply(a, TABLE, [insert("p", "r", v=2)]), 0)
        assert await store.get_entity(a, TABLE, "p", "r") == first

    backend.run(body)


def test_if_match(backend: Backend) -> None:
    async def body(store: Store) -> None:
        a = backend.account
        await with_table(store, a)
        [v1] = await store.apply(a, TABLE, [insert("p", "r", n=1)])
        assert v1 is not None
        [v2] = await store.apply(a, TABLE, [Mutation(REPLACE, "p", "r", props(n=2), if_match=v1.etag)])
        assert v2 is not None and v2.etag != v1.etag
        # The old ETag no longer matches, for every kind of conditional write.
        for kind in (REPLACE, MERGE, DELETE):
            mutation = Mutation(kind, "p", "r", props(n=9), if_match=v1.etag)
            await raises("UpdateConditionNotSatisfied", store.apply(a, TABLE, [mutation]), 0)
        assert await store.get_entity(a, TABLE, "p", "r") == v2
        [v3] = await store.apply(a, TABLE, [Mutation(MERGE, "p", "r", props(m=3), if_match=v2.etag)])
        assert v3 is not None and v3.properties() == props(n=2, m=3)
        [v4] = await store.apply(a, TABLE, [Mutation(REPLACE, "p", "r", props(k=4), if_match="*")])
        assert v4 is not None and v4.properties() == props(k=4)
        [v5] = await store.apply(a, TABLE, [Mutation(MERGE, "p", "r", props(j=5), if_match="*")])
        assert v5 is not None and v5.properties() == props(k=4, j=5)
        # A condition on a missing entity is ResourceNotFound, "*" or not.
        for kind in (REPLACE, MERGE, DELETE):
            for condition in ("*", v5.etag):
                mutation = Mutation(kind, "p", "missing", props(n=1), if_match=condition)
                await raises("ResourceNotFound", store.apply(a, TABLE, [mutation]), 0)
        assert await store.get_entity(a, TABLE, "p", "missing") is None
        assert await store.apply(a, TABLE, [Mutation(DELETE, "p", "r", if_match=v5.etag)]) == [None]
        assert await store.get_entity(a, TABLE, "p", "r") is None

    backend.run(body)


def test_batch_is_atomic_and_reports_the_failing_index(backend: Backend) -> None:
    async def body(store: Store) -> None:
        a = backend.account
        await with_table(store, a)
        [base] = await store.apply(a, TABLE, [insert("p", "base", n=0)])
        [gone] = await store.apply(a, TABLE, [insert("p", "gone", n=0)])
        assert base is not None and gone is not None
        before = await store.scan(a, TABLE, [FULL_RANGE], None, 100)
        failing = [
            ([insert("p", "a"), Mutation(REPLACE, "p", "b", props(v=1)), insert("p", "base")],
             2, "EntityAlreadyExists"),
            ([Mutation(DELETE, "p", "gone", if_match="*"), insert("p", "a"),
              Mutation(MERGE, "p", "base", props(v=1), if_match='W/"datetime\'2000-01-01T00%3A00%3A00Z\'"')],
             2, "UpdateConditionNotSatisfied"),
            ([Mutation(MERGE, "p", "base", props(v=1)), Mutation(DELETE, "p", "nope", if_match="*"),
              insert("p", "c")],
             1, "ResourceNotFound"),
            ([Mutation(REPLACE, "p", "missing", props(v=1), if_match=base.etag), insert("p", "d")],
             0, "ResourceNotFound"),
        ]  # fmt: skip
        for mutations, index, code in failing:
            await raises(code, store.apply(a, TABLE, mutations), index)
            assert await store.scan(a, TABLE, [FULL_RANGE], None, 100) == before

        # And a group that succeeds applies everything, in order.
        results = await store.apply(
            a,
            TABLE,
            [
                insert("p", "a", v=1),
                Mutation(MERGE, "p", "base", props(m=1), if_match=base.etag),
                Mutation(DELETE, "p", "gone", if_match=gone.etag),
                Mutation(REPLACE, "p", "b", props(v=2)),
            ],
        )
        assert results[2] is None
        assert await keys_of(store, a) == [("p", "a"), ("p", "b"), ("p", "base")]
        merged = await store.get_entity(a, TABLE, "p", "base")
        assert merged is not None and merged.properties() == props(n=0, m=1)

    backend.run(body)


@pytest.mark.parametrize("clash", [0, 3, 9])
def test_insert_only_batch_reports_the_clashing_insert(backend: Backend, clash: int) -> None:
    """A group of inserts alone takes the store's one-statement path; a clash still names its
    operation and leaves nothing of the group behind, whichever position it holds."""

    async def body(store: Store) -> None:
        a = backend.account
        await with_table(store, a)
        await store.apply(a, TABLE, [insert("p", f"r{clash}", n=-1)])
        before = await store.scan(a, TABLE, [FULL_RANGE], None, 100)
        group = [insert("p", f"r{i}", n=i) for i in range(10)]
        await raises("EntityAlreadyExists", store.apply(a, TABLE, group), clash)
        assert await store.scan(a, TABLE, [FULL_RANGE], None, 100) == before
        await store.apply(a, TABLE, [insert("p", "after", n=1)])  # the store still writes
        assert await keys_of(store, a) == [("p", "after"), ("p", f"r{clash}")]

    backend.run(body)


def test_merge_result_over_the_limits_fails_with_its_index(backend: Backend) -> None:
    async def body(store: Store) -> None:
        a = backend.account
        await with_table(store, a)
        many = {f"p{i}": (edm.INT32, i) for i in range(200)}
        more = {f"q{i}": (edm.INT32, i) for i in range(60)}
        [stored] = await store.apply(a, TABLE, [Mutation(INSERT, "p", "r", many)])
        mutations = [insert("p", "other"), Mutation(MERGE, "p", "r", more)]
        await raises("TooManyProperties", store.apply(a, TABLE, mutations), 1)
        assert await store.get_entity(a, TABLE, "p", "r") == stored
        assert await store.get_entity(a, TABLE, "p", "other") is None

    backend.run(body)


def test_one_timestamp_per_group(backend: Backend) -> None:
    async def body(store: Store) -> None:
        a = backend.account
        await with_table(store, a)
        await store.apply(a, TABLE, [insert("p", "old", n=1)])
        results = await store.apply(
            a,
            TABLE,
            [insert("p", "new1"), Mutation(MERGE, "p", "old", props(m=2)), Mutation(REPLACE, "p", "new2")],
        )
        ticks = {r.ticks for r in results if r is not None}
        assert len(ticks) == 1
        stored = await store.scan(a, TABLE, [FULL_RANGE], None, 10)
        assert {e.ticks for e in stored} == ticks

    backend.run(body)


def test_ticks_strictly_increase(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    async def body(store: Store) -> None:
        a = backend.account
        await with_table(store, a)
        seen: list[int] = []
        for i in range(30):
            kind = (REPLACE, MERGE)[i % 2]
            [entity] = await store.apply(a, TABLE, [Mutation(kind, "p", "r", props(i=i))])
            assert entity is not None
            seen.append(entity.ticks)
        assert seen == sorted(set(seen))

        # A front-end whose clock stands still, or runs behind, still moves the Timestamp on.
        frozen = seen[-1] - 10_000_000
        monkeypatch.setattr(edm, "now_ticks", lambda: frozen)
        later: list[int] = []
        for i in range(5):
            [entity] = await store.apply(a, TABLE, [Mutation(MERGE, "p", "r", props(j=i))])
            assert entity is not None
            later.append(entity.ticks)
        assert later == [seen[-1] + 1 + i for i in range(5)]
        # The group's Timestamp is later than every entity it touches.
        [x, y] = await store.apply(a, TABLE, [Mutation(MERGE, "p", "r", props(k=1)), insert("p", "s")])
        assert x is not None and y is not None
        assert x.ticks == y.ticks == later[-1] + 1
        etags = {e.etag for e in await store.scan(a, TABLE, [FULL_RANGE], None, 10)}
        assert len(etags) == 1

    backend.run(body)


# -------------------------------------------------------------------------------- order and scans

# UTF-16 code-unit order, which is not code-point order: an astral character (surrogates
# D800-DBFF first) sorts before U+E000..U+FFFF, and the empty key before everything.
ORDERED_KEYS = [
    "",
    "A",
    "Z",
    "a",
    "ab",
    "b",
    "\u00e9",
    "\ud7ff",
    "\U0001f600",
    "\U0010ffff",
    "\ue000",
    "\uffff",
]


def test_keys_are_in_ordinal_utf16_order(backend: Backend) -> None:
    assert sorted(ORDERED_KEYS, key=edm.utf16_sort_key) == ORDERED_KEYS
    assert sorted(ORDERED_KEYS) != ORDERED_KEYS  # code-point order would differ

    async def body(store: Store) -> None:
        a = backend.account
        await with_table(store, a)
        shuffled = [(pk, rk) for pk in ORDERED_KEYS for rk in ORDERED_KEYS]
        random.Random(7).shuffle(shuffled)
        for start in range(0, len(shuffled), 50):
            chunk = shuffled[start : start + 50]
            await store.apply(a, TABLE, [insert(pk, rk, v=f"{pk}|{rk}") for pk, rk in chunk])
        expected = [(pk, rk) for pk in ORDERED_KEYS for rk in ORDERED_KEYS]
        assert await keys_of(store, a) == expected
        empty = await store.get_entity(a, TABLE, "", "")
        assert empty is not None and empty.properties() == props(v="|")
        astral = await store.get_entity(a, TABLE, "\U0001f600", "\uffff")
        assert astral is not None and astral.properties() == props(v="\U0001f600|\uffff")
        # Paging through with a cursor visits the same order.
        paged: list[tuple[str, str]] = []
        after: tuple[str, str] | None = None
        while True:
            page = await store.scan(a, TABLE, [FULL_RANGE], after, 7)
            paged.extend((e.pk, e.rk) for e in page)
            if len(page) < 7:
                break
            after = (page[-1].pk, page[-1].rk)
        assert paged == expected

    backend.run(body)


def _satisfies(key: tuple[str, str], bound: KeyBound, lower: bool) -> bool:
    """The KeyBound semantics of base.py, written out plainly."""
    k_pk, k_rk = utf16(key)
    b_pk = edm.utf16_sort_key(bound.pk)
    if bound.rk is None:
        left, right = k_pk, b_pk
    else:
        left, right = (k_pk, k_rk), (b_pk, edm.utf16_sort_key(bound.rk))  # type: ignore[assignment]
    if lower:
        return left >= right if bound.inclusive else left > right  # type: ignore[operator]
    return left <= right if bound.inclusive else left < right  # type: ignore[operator]


def _in_range(key: tuple[str, str], key_range: KeyRange) -> bool:
    return (key_range.lower is None or _satisfies(key, key_range.lower, True)) and (
        key_range.upper is None or _satisfies(key, key_range.upper, False)
    )


def _expected_scan(
    keys: Sequence[tuple[str, str]], ranges: Sequence[KeyRange], after: tuple[str, str] | None, limit: int
) -> list[tuple[str, str]]:
    hits = [k for k in sorted(keys, key=utf16) if any(_in_range(k, r) for r in ranges)]
    if after is not None:
        hits = [k for k in hits if utf16(k) > utf16(after)]
    return hits[:limit]


SCAN_PKS = ["", "a", "a\U0001f600", "ab", "b", "\uffff"]
SCAN_RKS = ["", "1", "2", "2\U0001f600", "3", "\uffff"]


def test_scan_bounds_match_the_contract(backend: Backend) -> None:
    """Random ranges, cursors and limits against a plain Python model of base.py's semantics."""

    async def body(store: Store) -> None:
        a = backend.account
        await with_table(store, a)
        keys = [(pk, rk) for pk in SCAN_PKS for rk in SCAN_RKS if not (pk == "b" and rk == "2")]
        await store.apply(a, TABLE, [insert(pk, rk) for pk, rk in keys[:30]])
        await store.apply(a, TABLE, [insert(pk, rk) for pk, rk in keys[30:]])
        rng = random.Random(2024)
        probe_pks = [*SCAN_PKS, "a\u0000", "aa", "c"]
        probe_rks = [None, None, *SCAN_RKS, "0", "25"]

        def bound() -> KeyBound | None:
            if rng.random() < 0.2:
                return None
            return KeyBound(rng.choice(probe_pks), rng.choice(probe_rks), rng.random() < 0.5)

        for _ in range(150):
            ranges = [KeyRange(bound(), bound())]
            if rng.random() < 0.3:  # two ranges in key order, not overlapping
                cut = rng.choice(probe_pks)
                ranges = [
                    KeyRange(bound(), KeyBound(cut, None, False)),
                    KeyRange(KeyBound(cut, "2", True), bound()),
                ]
            after = rng.choice(keys) if rng.random() < 0.4 else None
            limit = rng.choice([1, 3, 10, 100])
            got = [(e.pk, e.rk) for e in await store.scan(a, TABLE, ranges, after, limit)]
            assert got == _expected_scan(keys, ranges, after, limit), (ranges, after, limit)

    backend.run(body)


def test_scans_within_one_partition_match_the_contract(backend: Backend) -> None:
    """Ranges whose ends name one PartitionKey (a partition, a RowKey range, a point), with
    every kind of bound, cursors before, inside and after the partition, and limits, against
    the same model: PostgreSQL reads these in a statement of their own."""

    async def body(store: Store) -> None:
        a = backend.account
        await with_table(store, a)
        keys = [(pk, rk) for pk in SCAN_PKS for rk in SCAN_RKS]
        await store.apply(a, TABLE, [insert(pk, rk, v=f"{pk}|{rk}") for pk, rk in keys if pk < "b"])
        await store.apply(a, TABLE, [insert(pk, rk, v=f"{pk}|{rk}") for pk, rk in keys if pk >= "b"])
        rng = random.Random(35)
        probe_rks = [None, None, *SCAN_RKS, "0", "25", "2\ud83d"]

        def bound(pk: str) -> KeyBound:
            return KeyBound(pk, rng.choice(probe_rks), rng.random() < 0.5)

        for _ in range(200):
            pk = rng.choice([*SCAN_PKS, "aa"])
            key_range = KeyRange(bound(pk), bound(pk))
            after = None
            if rng.random() < 0.5:
                after = (rng.choice([pk, pk, "a", "b", "\uffff"]), rng.choice(SCAN_RKS))
            limit = rng.choice([1, 2, 3, 100])
            got = await store.scan(a, TABLE, [key_range], after, limit)
            assert [(e.pk, e.rk) for e in got] == _expected_scan(keys, [key_range], after, limit), (
                key_range,
                after,
                limit,
            )
            assert all(e.properties() == props(v=f"{e.pk}|{e.rk}") for e in got)

    backend.run(body)


def test_scan_examples(backend: Backend) -> None:
    async def body(store: Store) -> None:
        a = backend.account
        await with_table(store, a)
        keys = [(pk, rk) for pk in ("a", "b", "c") for rk in ("1", "2", "3")]
        await store.apply(a, TABLE, [insert(pk, rk) for pk, rk in keys])

        async def scan(
            ranges: list[KeyRange], after: tuple[str, str] | None = None, limit: int = 100
        ) -> list[str]:
            return [e.pk + e.rk for e in await store.scan(a, TABLE, ranges, after, limit)]

        # A point query, a partition, a row range and a partition range.
        assert await scan([KeyRange(KeyBound("b", "2", True), KeyBound("b", "2", True))]) == ["b2"]
        assert await scan([KeyRange(KeyBound("b", None, True), KeyBound("b", None, True))]) == [
            "b1",
            "b2",
            "b3",
        ]
        assert await scan([KeyRange(KeyBound("b", "1", False), KeyBound("b", "3", False))]) == ["b2"]
        assert await scan([KeyRange(KeyBound("a", None, False), None)]) == [
            "b1",
            "b2",
            "b3",
            "c1",
            "c2",
            "c3",
        ]
        assert await scan([KeyRange(None, KeyBound("b", None, False))]) == ["a1", "a2", "a3"]
        assert await scan([KeyRange(None, KeyBound("b", "2", False))]) == ["a1", "a2", "a3", "b1"]
        # Several ranges, a cursor inside the second, and a limit across them.
        two = [
            KeyRange(KeyBound("a", "2", True), KeyBound("a", None, True)),
            KeyRange(KeyBound("c", None, True), KeyBound("c", "2", True)),
        ]
        assert await scan(two) == ["a2", "a3", "c1", "c2"]
        assert await scan(two, limit=3) == ["a2", "a3", "c1"]
        assert await scan(two, after=("a", "3")) == ["c1", "c2"]
        assert await scan(two, after=("c", "1")) == ["c2"]
        assert await scan(two, after=("c", "2")) == []
        assert await scan([FULL_RANGE], after=("b", "3"), limit=2) == ["c1", "c2"]
        assert await scan([KeyRange(KeyBound("x", None, True), None)]) == []
        assert await scan([]) == []

    backend.run(body)


# ---------------------------------------------------------------------------------- concurrency


def test_concurrent_if_match_increments_lose_no_update(backend: Backend) -> None:
    """20 read-modify-write loops through two store instances (two front-ends) at once."""

    async def main() -> None:
        engines = [await backend.open(), await backend.open()]
        first, second = (engine.tables for engine in engines)
        try:
            a = backend.account
            await first.create_table(a, TABLE)
            await first.apply(a, TABLE, [insert("p", "counter", n=0)])
            conflicts = 0

            async def increment(store: Store) -> None:
                nonlocal conflicts
                while True:
                    current = await store.get_entity(a, TABLE, "p", "counter")
                    assert current is not None
                    n = current.properties()["n"][1]
                    update = Mutation(REPLACE, "p", "counter", props(n=n + 1), if_match=current.etag)
                    try:
                        await store.apply(a, TABLE, [update])
                        return
                    except ServiceError as exc:
                        assert exc.code == "UpdateConditionNotSatisfied"
                        conflicts += 1

            await asyncio.gather(*(increment((first, second)[i % 2]) for i in range(20)))
            final = await second.get_entity(a, TABLE, "p", "counter")
            assert final is not None and final.properties() == props(n=20)
        finally:
            for engine in engines:
                await engine.close()

    asyncio.run(main())


def test_concurrent_writers_of_one_key(backend: Backend) -> None:
    """Racing inserts: exactly one wins. Racing upserts of a missing key and racing merges:
    all succeed, nothing is lost, and every version has its own Timestamp."""

    async def main() -> None:
        engines = [await backend.open(), await backend.open()]
        stores = [engine.tables for engine in engines]
        try:
            a = backend.account
            await stores[0].create_table(a, TABLE)

            async def attempt_insert(i: int) -> bool:
                try:
                    await stores[i % 2].apply(a, TABLE, [insert("p", "once", who=i)])
                    return True
                except ServiceError as exc:
                    assert exc.code == "EntityAlreadyExists" and exc.index == 0
                    return False

            wins = await asyncio.gather(*(attempt_insert(i) for i in range(12)))
            assert sum(wins) == 1

            async def upsert(i: int) -> StoredEntity | None:
                [entity] = await stores[i % 2].apply(a, TABLE, [Mutation(REPLACE, "p", "up", props(who=i))])
                return entity

            upserts = await asyncio.gather(*(upsert(i) for i in range(12)))
            assert len({e.ticks for e in upserts if e is not None}) == 12

            async def merge(i: int) -> StoredEntity | None:
                [entity] = await stores[i % 2].apply(
                    a, TABLE, [Mutation(MERGE, "p", "m", props(**{f"f{i}": i}))]
                )
                return entity

            merges = await asyncio.gather(*(merge(i) for i in range(12)))
            assert len({e.ticks for e in merges if e is not None}) == 12
            final = await stores[1].get_entity(a, TABLE, "p", "m")
            assert final is not None and final.properties() == props(**{f"f{i}": i for i in range(12)})
        finally:
            for engine in engines:
                await engine.close()

    asyncio.run(main())


def test_a_second_front_end_sees_deletion_and_recreation(backend: Backend) -> None:
    """What one instance did to a table, another that used it before sees at once."""

    async def main() -> None:
        engines = [await backend.open(), await backend.open()]
        one, two = (engine.tables for engine in engines)
        try:
            a = backend.account
            await one.create_table(a, TABLE)
            await one.apply(a, TABLE, [insert("p", "r", v=1)])
            assert await two.get_entity(a, TABLE, "p", "r") is not None
            assert len(await two.scan(a, TABLE, [FULL_RANGE], None, 10)) == 1
            await one.delete_table(a, TABLE)
            await raises("TableNotFound", two.get_entity(a, TABLE, "p", "r"))
            await raises("TableNotFound", two.scan(a, TABLE, [FULL_RANGE], None, 10))
            await raises("TableNotFound", two.apply(a, TABLE, [insert("p", "x")]))
            await one.create_table(a, TABLE)
            assert await two.get_entity(a, TABLE, "p", "r") is None
            assert await two.scan(a, TABLE, [FULL_RANGE], None, 10) == []
            [written] = await two.apply(a, TABLE, [insert("p", "r", v=2)])
            assert await one.get_entity(a, TABLE, "p", "r") == written
            # Both instances have used the current table; one replaces it behind the other's back,
            # and the other's next read, scan and write must all land in the new table.
            for step in range(3):
                await one.delete_table(a, TABLE)
                await one.create_table(a, TABLE)
                await one.apply(a, TABLE, [insert("p", "r", v=10 + step)])
                if step == 0:
                    entity = await two.get_entity(a, TABLE, "p", "r")
                    assert entity is not None and entity.properties() == props(v=10)
                elif step == 1:
                    assert await keys_of(two, a) == [("p", "r")]
                else:
                    [merged] = await two.apply(a, TABLE, [Mutation(MERGE, "p", "r", props(w=1))])
                    assert merged is not None and merged.properties() == props(v=12, w=1)
                await two.apply(a, TABLE, [insert("p", f"two{step}")])
                assert await keys_of(one, a) == [("p", "r"), ("p", f"two{step}")]
        finally:
            for engine in engines:
                await engine.close()

    asyncio.run(main())
