"""The SQLite pre-filter never drops a row the exact filter would accept (it may keep extras)."""

from __future__ import annotations

import math
import sqlite3
import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tabulae.model import edm
from tabulae.model.entity import encode_properties
from tabulae.storage.sqlite.hints import hints_sql
from tabulae.storage.tables import PropertyTest
from tabulae.table.query.evaluate import compile_predicate
from tabulae.table.query.nodes import Comparison, Literal, Property

OPS = ["eq", "ne", "gt", "ge", "lt", "le"]

typed_values = st.one_of(
    st.tuples(st.just(edm.STRING), st.text(max_size=4)),
    st.tuples(st.just(edm.BOOLEAN), st.booleans()),
    st.tuples(st.just(edm.INT32), st.integers(edm.INT32_MIN, edm.INT32_MAX)),
    st.tuples(st.just(edm.INT64), st.integers(edm.INT64_MIN, edm.INT64_MAX)),
    st.tuples(st.just(edm.DOUBLE), st.floats(allow_nan=True, allow_infinity=True)),
    st.tuples(st.just(edm.DOUBLE), st.sampled_from([0.0, -0.0, 1.0, 5.0, -3.5])),
    st.tuples(st.just(edm.INT32), st.sampled_from([0, 1, 5, -3])),
    st.tuples(st.just(edm.DATETIME), st.integers(edm.MIN_DATETIME_TICKS, edm.MAX_DATETIME_TICKS)),
    st.tuples(st.just(edm.GUID), st.uuids().map(str)),
    st.tuples(st.just(edm.BINARY), st.binary(max_size=4)),
)
literals = typed_values.filter(lambda tv: not (tv[0] == edm.DOUBLE and not math.isfinite(tv[1]))) | st.tuples(
    st.just(edm.DOUBLE), st.sampled_from([math.nan, math.inf])
)


def _sql_keeps(properties: dict[str, tuple[str, Any]], test: PropertyTest) -> bool:
    converted = hints_sql((test,))
    if converted is None:
        return True
    condition, params = converted
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE entities (props BLOB)")
    conn.execute("INSERT INTO entities VALUES (?)", (encode_properties(properties),))
    row = conn.execute(f"SELECT CASE WHEN {condition} THEN 1 END FROM entities", params).fetchone()
    conn.close()
    return row[0] == 1


@settings(max_examples=400, deadline=None, database=None)
@given(
    stored=st.one_of(st.none(), typed_values),
    literal=literals,
    op=st.sampled_from(OPS),
)
def test_hints_keep_every_row_the_filter_accepts(
    stored: tuple[str, Any] | None, literal: tuple[str, Any], op: str
) -> None:
    properties = {} if stored is None else {"X": stored}
    node = Comparison(op, Property("X"), Literal(literal[0], literal[1]))
    exact = compile_predicate(node)("pk", "rk", 0, properties)
    if exact:
        assert _sql_keeps(properties, PropertyTest("X", op, literal[0], literal[1]))


def test_hints_drop_rows_that_cannot_match() -> None:
    properties = {"Price": (edm.INT32, 5), "Name": (edm.STRING, "a"), "Id": (edm.GUID, str(uuid.UUID(int=1)))}
    assert not _sql_keeps(properties, PropertyTest("Price", "gt", edm.INT32, 10))
    assert _sql_keeps(properties, PropertyTest("Price", "lt", edm.INT32, 10))
    assert not _sql_keeps(properties, PropertyTest("Name", "eq", edm.STRING, "b"))
    assert not _sql_keeps(properties, PropertyTest("Missing", "eq", edm.STRING, "a"))
    assert not _sql_keeps(properties, PropertyTest("Missing", "ne", edm.STRING, "a"))
    assert not _sql_keeps(properties, PropertyTest("Id", "eq", edm.GUID, str(uuid.UUID(int=2))))
