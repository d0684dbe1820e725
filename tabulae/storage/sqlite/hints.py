"""Filter hints as SQL: the cheap part of a ``$filter`` run inside SQLite, on the stored JSON.

Each :class:`PropertyTest` becomes a condition that holds for every row on which the test could
be true (a superset, never a subset): rows failing it are skipped without leaving SQLite, and
the exact predicate still runs on the rest in Python. The stored form is the minimal-metadata
JSON of :mod:`tabulae.model.entity`: String, Boolean, Int32 and finite Doubles are plain JSON
values; every other type is a string with an ``@odata.type`` annotation, which is only ever used
here to keep rows whose value SQLite cannot compare exactly.
"""

from __future__ import annotations

import math
import sqlite3
from typing import Any

from tabulae.model import edm
from tabulae.storage.tables import PropertyTest

_SQL_OPS = {"eq": "=", "ne": "!=", "gt": ">", "ge": ">=", "lt": "<", "le": "<="}
_POSITIVE = ("eq", "gt", "ge")  # false on a type mismatch, so the type can be required

# From 3.45 SQLite reads a BLOB argument of its JSON functions as JSONB; ours hold JSON text.
PROPS = "props" if sqlite3.sqlite_version_info < (3, 45) else "CAST(props AS TEXT)"


def _paths(name: str) -> tuple[str, str]:
    return f'$."{name}"', f'$."{name}@odata.type"'


def hint_sql(test: PropertyTest) -> tuple[str, list[Any]] | None:
    """A superset condition for one test, with its parameters; ``None`` when nothing is gained."""
    if '"' in test.name or test.op not in _SQL_OPS or test.value is None:
        return None
    path, annotation_path = _paths(test.name)
    kind = f"json_type({PROPS}, ?)"
    value = f"json_extract({PROPS}, ?)"
    annotation = f"json_extract({PROPS}, ?)"
    op = _SQL_OPS[test.op]
    positive = test.op in _POSITIVE
    if test.edm_type == edm.STRING:
        plain = f"({kind} = 'text' AND {annotation} IS NULL)"
        if test.op == "eq":
            return f"({plain} AND {value} = ?)", [path, annotation_path, path, test.value]
        if positive:
            return plain, [path, annotation_path]
        return f"{kind} IS NOT NULL", [path]
    if test.edm_type in (edm.INT32, edm.DOUBLE):
        if isinstance(test.value, float) and not math.isfinite(test.value):
            return None
        numeric = "IN ('integer', 'real')" if test.edm_type == edm.INT32 else "= 'real'"
        others = "('Edm.Int64', 'Edm.Double')" if test.edm_type == edm.INT32 else "('Edm.Double')"
        if positive:
            sql = f"(({kind} {numeric} AND {value} {op} ?) OR {annotation} IN {others})"
            return sql, [path, path, test.value, annotation_path]
        sql = f"({kind} IS NOT NULL AND (NOT ({kind} {numeric}) OR {value} {op} ?))"
        return sql, [path, path, path, test.value]
    if test.edm_type == edm.INT64:
        exact = f"({annotation} = 'Edm.Int64' AND CAST({value} AS INTEGER) {op} ?)"
        if positive:
            sql = f"({exact} OR {kind} = 'real' OR {annotation} = 'Edm.Double')"
            return sql, [annotation_path, path, test.value, path, annotation_path]
        sql = f"({kind} IS NOT NULL AND ({annotation} IS NOT 'Edm.Int64' OR CAST({value} AS INTEGER) {op} ?))"
        return sql, [path, annotation_path, path, test.value]
    if test.edm_type == edm.BOOLEAN:
        literal = "true" if test.value else "false"
        if test.op == "eq":
            return f"{kind} = '{literal}'", [path]
        if test.op == "ne":
            return f"({kind} IS NOT NULL AND {kind} != '{literal}')", [path, path]
        return f"{kind} IS NOT NULL", [path]
    if test.edm_type in (edm.DATETIME, edm.GUID, edm.BINARY):
        if test.op == "eq" and test.edm_type == edm.GUID:
            return f"({annotation} = 'Edm.Guid' AND {value} = ?)", [annotation_path, path, test.value]
        if positive:
            return f"{annotation} = ?", [annotation_path, test.edm_type]
        return f"{kind} IS NOT NULL", [path]
    return None


def hints_sql(tests: list[PropertyTest] | tuple[PropertyTest, ...]) -> tuple[str, list[Any]] | None:
    """All usable tests ANDed, or ``None`` if none is usable."""
    parts: list[str] = []
    params: list[Any] = []
    for test in tests:
        converted = hint_sql(test)
        if converted is not None:
            parts.append(converted[0])
            params.extend(converted[1])
    if not parts:
        return None
    return " AND ".join(parts), params
