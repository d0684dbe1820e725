"""How PostgreSQL's SQL reads a stored entity, for :mod:`tabulae.storage.pushdown`.

``props`` is a ``bytea`` holding the entity's minimal-metadata JSON (see
:mod:`tabulae.model.entity`). A filtered scan parses it once per row, in the ``FROM`` clause,
into one ``jsonb`` column per property the condition reads (:func:`record_sql`), so the parse is
shared by every comparison on the row. In ``jsonb`` a number keeps its text but not its JSON
spelling, so an Int32 (a plain integer within 32 bits) is told from a finite Double (which our
JSON always writes with a fraction or, from 1e16 up, an exponent that ``jsonb`` expands beyond
32 bits) by its text and range. Strings compare under ``COLLATE "C"`` (UTF-8 byte order), Binary
after ``decode(…, 'base64')``, Doubles as ``float8`` (the stored text is the shortest that reads
back as the same double).

``jsonb`` cannot hold the character U+0000, which JSON text may carry escaped: such rows are
read as an object holding only a marker (:data:`UNDECIDED`) and always kept, and the store
reports the chunk inexact so that the evaluator decides them.
"""

from __future__ import annotations

from typing import Any

from tabulae.model import edm
from tabulae.storage.pushdown import DOUBLE_SPECIAL, Dialect, Fragment, sql_op

__all__ = ["NUL_ESCAPE", "UNDECIDED", "PostgresDialect", "record_sql"]

NUL_ESCAPE = b"\\u0000"
_NUL_BYTES = "'\\x5c7530303030'::bytea"  # the six bytes of NUL_ESCAPE, as a bytea literal
_HAS_NUL = f"(position({_NUL_BYTES} in e.props) > 0)"
UNDECIDED = 'x."@undecided" IS NOT NULL'
"""True for a row SQL cannot read (never a property name: those are identifiers)."""

_ANNOTATED = {
    edm.INT64: '"Edm.Int64"',
    DOUBLE_SPECIAL: '"Edm.Double"',
    edm.DATETIME: '"Edm.DateTime"',
    edm.GUID: '"Edm.Guid"',
    edm.BINARY: '"Edm.Binary"',
}


def _column(name: str) -> str:
    return f'x."{name}"'


def _annotation(name: str) -> str:
    return f'x."{name}@odata.type"'


def _int32(name: str) -> str:
    value = _column(name)
    return (
        f"(jsonb_typeof({value}) = 'number' AND strpos({value}::text, '.') = 0"
        f" AND {value}::numeric BETWEEN -2147483648 AND 2147483647)"
    )


def record_sql(names: set[str]) -> str:
    """The ``FROM`` item reading the named properties (and their annotations) as ``jsonb``."""
    columns = "".join(f', "{name}" jsonb, "{name}@odata.type" jsonb' for name in sorted(names))
    undecided = """'{"@undecided": true}'::jsonb"""
    document = f"CASE WHEN {_HAS_NUL} THEN {undecided} ELSE convert_from(e.props, 'UTF8')::jsonb END"
    return f'CROSS JOIN LATERAL jsonb_to_record({document}) AS x("@undecided" jsonb{columns})'


class PostgresDialect(Dialect):
    """Names reaching here are simple identifiers (the translator checks), so they are inlined."""

    def missing(self, name: str) -> Fragment:
        return Fragment(f"({_column(name)} IS NULL)")

    def stored_as(self, name: str, kind: str) -> Fragment:
        value = _column(name)
        if kind == edm.STRING:
            return Fragment(f"(jsonb_typeof({value}) = 'string' AND {_annotation(name)} IS NULL)")
        if kind == edm.BOOLEAN:
            return Fragment(f"(jsonb_typeof({value}) = 'boolean')")
        if kind == edm.INT32:
            return Fragment(_int32(name))
        if kind == edm.DOUBLE:
            return Fragment(f"(jsonb_typeof({value}) = 'number' AND NOT {_int32(name)})")
        return Fragment(f"({_annotation(name)} = '{_ANNOTATED[kind]}'::jsonb)")

    def compare(self, name: str, kind: str, op: str, value: Any) -> Fragment | None:
        column = _column(name)
        sql_operator = sql_op(op)
        if kind == edm.INT32:
            return Fragment(f"({column}::numeric {sql_operator} %s::numeric)", (value,))
        if kind == edm.INT64:
            return Fragment(f"(({column} #>> '{{}}')::numeric {sql_operator} %s::numeric)", (value,))
        if kind == edm.DOUBLE:
            return Fragment(f"({column}::float8 {sql_operator} %s::float8)", (float(value),))
        if kind == edm.BOOLEAN:
            return Fragment(f"({column}::boolean {sql_operator} %s::boolean)", (bool(value),))
        if kind == edm.BINARY:
            return Fragment(f"(decode({column} #>> '{{}}', 'base64') {sql_operator} %s::bytea)", (value,))
        if kind == edm.DATETIME:
            return Fragment(
                f"(rtrim({column} #>> '{{}}', 'Z') COLLATE \"C\" {sql_operator} %s::text)", (value,)
            )
        return Fragment(f"(({column} #>> '{{}}') COLLATE \"C\" {sql_operator} %s::text)", (value,))

    def compare_key(self, name: str, op: str, value: str) -> Fragment:
        column = "substring(e.dist from 9)" if name == "PartitionKey" else "e.rk"
        return Fragment(f"({column} {sql_op(op)} %s::bytea)", (edm.utf16_sort_key(value),))

    def compare_ticks(self, op: str, ticks: int) -> Fragment:
        return Fragment(f"(e.ticks {sql_op(op)} %s::bigint)", (ticks,))

    def special_text(self, name: str) -> Fragment:
        return Fragment(f"({_column(name)} #>> '{{}}')")
