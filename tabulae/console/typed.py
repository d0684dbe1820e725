"""Typed property values as the console shows and edits them: one text form per Edm type.

Each value is shown, and typed back, in the text form the service itself uses on the wire, so
what a user sees is exact and what they type is checked by the same rules as a request body
(:func:`tabulae.model.entity.entity_from_pairs`):

============  =================================================================
Edm.String    the text as it is
Edm.Boolean   ``true`` / ``false``
Edm.Int32     decimal
Edm.Int64     decimal, never through a float (all 64 bits kept)
Edm.Double    the shortest text that reads back to the same double; ``NaN``,
              ``Infinity``, ``-Infinity`` and ``-0.0`` included
Edm.DateTime  ISO 8601 in UTC with up to 7 fraction digits (100 ns)
Edm.Guid      8-4-4-4-12 hexadecimal
Edm.Binary    base64
============  =================================================================

A browser does not hand a text area's value back exactly: the HTML parser turns CR and CRLF into
LF, and the form sends every line break as CRLF. So a value the user left alone is taken from
the stored entity, exactly (:func:`settle_rows`), and an edited string has LF line breaks (CRLF
if the stored value had them).
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass
from typing import Any

from tabulae.model import edm
from tabulae.model.entity import ANNOTATION, Entity, entity_from_pairs
from tabulae.model.errors import ServiceError

TYPES = (edm.STRING, edm.INT32, edm.INT64, edm.DOUBLE, edm.BOOLEAN, edm.DATETIME, edm.GUID, edm.BINARY)


def value_text(kind: str, value: Any) -> str:
    """The exact text form of a typed value (the table above)."""
    if kind == edm.STRING:
        return str(value)
    if kind == edm.BOOLEAN:
        return "true" if value else "false"
    if kind in (edm.INT32, edm.INT64):
        return str(value)
    if kind == edm.DOUBLE:
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return repr(float(value))
    if kind == edm.DATETIME:
        return edm.format_datetime(value)
    if kind == edm.BINARY:
        return base64.b64encode(value).decode("ascii")
    return str(value)


def _as_a_form_returns(text: str) -> str:
    """A text as it comes back from a text area that showed it, line breaks aside (made LF)."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def settle_rows(rows: list[FieldRow], stored: edm.Properties | None) -> list[FieldRow]:
    """The rows as the user meant them (the module docstring says why): a value shown from
    ``stored`` and sent back unchanged is ``stored``'s exact text; an edited string's line breaks
    are LF, or CRLF where the stored value used CRLF."""
    settled = []
    for row in rows:
        found = stored.get(row.name) if stored is not None else None
        exact = value_text(*found) if found is not None else None
        unchanged = exact is not None and _as_a_form_returns(exact) == _as_a_form_returns(row.text)
        if found is not None and exact is not None and found[0] == row.kind and unchanged:
            settled.append(FieldRow(row.name, row.kind, exact))
            continue
        if row.kind == edm.STRING and not (exact is not None and "\r\n" in exact):
            row = FieldRow(row.name, row.kind, row.text.replace("\r\n", "\n"))
        settled.append(row)
    return settled


def short_type(kind: str) -> str:
    """``Edm.Int64`` -> ``Int64``, for the grid's type tags."""
    return kind.removeprefix("Edm.")


@dataclass(slots=True)
class FieldRow:
    """One property row of an entity form, as typed (strings, unchecked)."""

    name: str
    kind: str
    text: str


def rows_of(properties: edm.Properties) -> list[FieldRow]:
    return [FieldRow(name, kind, value_text(kind, value)) for name, (kind, value) in properties.items()]


def rows_from_form(form: Any) -> list[FieldRow]:
    """The rows of a submitted entity form: fields ``name.N``, ``type.N``, ``value.N``; a row
    whose name is blank is dropped (that is how a property is removed on replace)."""
    indexes = sorted(
        {int(key[5:]) for key in form if key.startswith("name.") and key[5:].isdigit() and len(key) < 12}
    )
    rows = []
    for index in indexes:
        name = str(form.get(f"name.{index}", "")).strip()
        kind = str(form.get(f"type.{index}", edm.STRING))
        text = str(form.get(f"value.{index}", ""))
        if name:
            rows.append(FieldRow(name, kind if kind in TYPES else edm.STRING, text))
    return rows


def entity_from_rows(pk: str, rk: str, rows: list[FieldRow]) -> Entity:
    """A validated entity from form rows, by the rules of a request body; bad input raises
    :class:`ServiceError` with the service's own code (``PropertyNameInvalid``, ``InvalidInput``...)."""
    pairs: list[tuple[str, Any]] = [("PartitionKey", pk), ("RowKey", rk)]
    for row in rows:
        if row.name in ("PartitionKey", "RowKey", "Timestamp") or "@" in row.name or "." in row.name:
            raise ServiceError("PropertyNameInvalid", f"'{row.name}' cannot be used as a property name.")
        text = row.text.strip() if row.kind != edm.STRING else row.text
        if row.kind == edm.BOOLEAN:
            text = text.lower()
        pairs.append((row.name, text))
        pairs.append((row.name + ANNOTATION, row.kind))
    return entity_from_pairs(pairs)
