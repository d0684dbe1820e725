"""How SQLite's SQL reads a stored entity, for :mod:`tabulae.storage.pushdown`.

Properties are the minimal-metadata JSON of :mod:`tabulae.model.entity`, read with SQLite's JSON
functions (which parse a row's JSON once for all the calls on it): String, Boolean, Int32 and
finite Doubles are plain JSON values (``json_type`` text, true/false, integer, real); every other
type is a string with an ``@odata.type`` annotation. Keys are UTF-16BE blobs, whose byte order
is the service's string order, and Timestamp is an integer column. SQLite has no base64
decoder, so Binary compares exactly only for ``eq``/``ne`` (stored base64 is canonical).
"""

from __future__ import annotations

import base64
import sqlite3
from typing import Any

from tabulae.model import edm
from tabulae.storage.pushdown import DOUBLE_SPECIAL, Dialect, Fragment, sql_op

__all__ = ["PROPS", "SqliteDialect"]

# From 3.45 SQLite reads a BLOB argument of its JSON functions as JSONB; ours hold JSON text.
PROPS = "props" if sqlite3.sqlite_version_info < (3, 45) else "CAST(props AS TEXT)"

_ANNOTATED = {
    edm.INT64: "Edm.Int64",
    DOUBLE_SPECIAL: "Edm.Double",
    edm.DATETIME: "Edm.DateTime",
    edm.GUID: "Edm.Guid",
    edm.BINARY: "Edm.Binary",
}


def _type(name: str) -> str:
    return f"json_type({PROPS}, '$.\"{name}\"')"


def _value(name: str) -> str:
    return f"json_extract({PROPS}, '$.\"{name}\"')"


def _annotation(name: str) -> str:
    return f"json_extract({PROPS}, '$.\"{name}@odata.type\"')"


class SqliteDialect(Dialect):
    """Names reaching here are simple identifiers (the translator checks), so they are inlined."""

    true = "1"
    false = "0"
    lenient = True  # JSON functions, CAST and rtrim never raise

    def missing(self, name: str) -> Fragment:
        return Fragment(f"({_type(name)} IS NULL)")

    def stored_as(self, name: str, kind: str) -> Fragment:
        if kind == edm.STRING:
            return Fragment(f"({_type(name)} = 'text' AND {_annotation(name)} IS NULL)")
        if kind == edm.BOOLEAN:
            return Fragment(f"({_type(name)} IN ('true', 'false'))")
        if kind == edm.INT32:
            return Fragment(f"({_type(name)} = 'integer')")
        if kind == edm.DOUBLE:
            return Fragment(f"({_type(name)} = 'real')")
        return Fragment(f"({_annotation(name)} IS '{_ANNOTATED[kind]}')")  # never NULL

    def compare(self, name: str, kind: str, op: str, value: Any) -> Fragment | None:
        sql_operator = sql_op(op)
        if kind == edm.INT64:
            return Fragment(f"(CAST({_value(name)} AS INTEGER) {sql_operator} ?)", (value,))
        if kind == edm.DATETIME:
            return Fragment(f"(rtrim({_value(name)}, 'Z') {sql_operator} ?)", (value,))
        if kind == edm.BOOLEAN:
            return Fragment(f"({_value(name)} {sql_operator} ?)", (int(value),))
        if kind == edm.BINARY:
            if op not in ("eq", "ne"):
                return None
            return Fragment(f"({_value(name)} {sql_operator} ?)", (base64.b64encode(value).decode("ascii"),))
        return Fragment(f"({_value(name)} {sql_operator} ?)", (value,))

    def compare_key(self, name: str, op: str, value: str) -> Fragment:
        column = "pk" if name == "PartitionKey" else "rk"
        return Fragment(f"({column} {sql_op(op)} ?)", (edm.utf16_sort_key(value),))

    def compare_ticks(self, op: str, ticks: int) -> Fragment:
        return Fragment(f"(ticks {sql_op(op)} ?)", (ticks,))

    def special_text(self, name: str) -> Fragment:
        return Fragment(_value(name))
