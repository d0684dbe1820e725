"""The files the data tools read and write: JSON Lines and CSV, both exact for every Edm type.

**JSONL** (``--format jsonl``, the default): one entity per line, in the service's own JSON form
with ``@odata.type`` annotations, as Query Entities returns it with minimal metadata::

    {"PartitionKey":"p","RowKey":"r","Timestamp":"2024-05-01T10:00:00.1234567Z",
     "Timestamp@odata.type":"Edm.DateTime","n":1,"big@odata.type":"Edm.Int64","big":"9223372036854775807",
     "x@odata.type":"Edm.Double","x":"NaN","d@odata.type":"Edm.Double","d":1.0, ...}

Every value keeps its type and its exact value: Int64 as a decimal string, DateTime with all 7
fraction digits (100 ns), Binary in base64, Guid, NaN and ±Infinity; a Double always carries its
annotation (so ``1.0`` never comes back as Int32). Unannotated strings, booleans and integers are
String, Boolean and Int32, as in the service's JSON. ``Timestamp`` is informational: the service
sets it on every write, so imports ignore it.

**CSV** (``--format csv``): a header row, then one row per entity. The columns are
``PartitionKey``, ``RowKey``, ``Timestamp``, then two per property: ``NAME`` (the value as text)
and ``NAME@type`` (its Edm type, per row, since one property may have different types in
different entities). An empty type cell means the entity has no such property; an empty value
with a type is an empty value (an empty String). Values are written in the same text forms as in
JSONL (Double as the shortest text that reads back to the same double, ``NaN``, ``Infinity``,
``-Infinity``; Boolean ``true``/``false``). This is the layout Azure Storage Explorer exports.
"""

from __future__ import annotations

import csv
import io
import math
import tempfile
from collections.abc import Iterator
from typing import IO, Any

import orjson

from tabulae.tools.failures import Failure

ANNOTATION = "@odata.type"
DOUBLE = "Edm.Double"
SPECIAL_DOUBLES = ("NaN", "Infinity", "-Infinity")
SYSTEM = ("PartitionKey", "RowKey", "Timestamp")
_SERVER_SET = frozenset({"Timestamp", "Timestamp" + ANNOTATION})  # the service sets it on every write
TYPES = (
    "Edm.String", "Edm.Boolean", "Edm.Int32", "Edm.Int64", DOUBLE, "Edm.DateTime", "Edm.Guid", "Edm.Binary",
)  # fmt: skip


class FormatError(Failure, ValueError):
    """A record that is not an entity; the message names its line (or row) number."""

    def __init__(self, message: str) -> None:
        super().__init__("InvalidFormat", message)


# ----------------------------------------------------------------------------- JSON form


def clean(entity: dict[str, Any]) -> dict[str, Any]:
    """An entity from a query page as a file holds it: OData control information dropped, and
    every Double annotated (the service leaves finite doubles unannotated)."""
    entity.pop("odata.etag", None)  # the one control member of minimal metadata
    doubles = [name for name, value in entity.items() if value.__class__ is float]
    for name in doubles:
        entity.setdefault(name + ANNOTATION, DOUBLE)
    if "odata.type" in entity or "odata.id" in entity:  # full metadata, from another tool's file
        for name in [n for n in entity if n.startswith("odata.")]:
            del entity[name]
    return entity


def upsert_body(entity: dict[str, Any], where: str) -> tuple[str, str, bytes]:
    """``(PartitionKey, RowKey, request body)`` of an entity read from a file or another table."""
    pk, rk = entity.get("PartitionKey"), entity.get("RowKey")
    if not isinstance(pk, str) or not isinstance(rk, str):
        raise FormatError(f"{where}: an entity needs string PartitionKey and RowKey")
    return pk, rk, orjson.dumps(writable(entity))


def writable(entity: dict[str, Any]) -> dict[str, Any]:
    """The entity without what the service sets itself (Timestamp) or ignores (OData control)."""
    return {n: v for n, v in entity.items() if n not in _SERVER_SET and not n.startswith("odata.")}


def read_jsonl(
    stream: IO[bytes], offset: int = 0, line: int = 0
) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """``(offset after the record, line number, entity)`` from byte ``offset`` (line ``line``)."""
    stream.seek(offset)
    for raw in stream:
        offset += len(raw)
        line += 1
        if not raw.strip():
            continue
        try:
            entity = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise FormatError(f"line {line}: not JSON ({exc})") from None
        if not isinstance(entity, dict):
            raise FormatError(f"line {line}: not a JSON object")
        yield offset, line, entity


def write_jsonl(stream: IO[bytes], entities: list[dict[str, Any]]) -> None:
    stream.write(b"".join(orjson.dumps(clean(e), option=orjson.OPT_APPEND_NEWLINE) for e in entities))


# ----------------------------------------------------------------------------------- CSV


def _type_of(entity: dict[str, Any], name: str, value: Any) -> str:
    annotation = entity.get(name + ANNOTATION)
    if annotation:
        return str(annotation)
    if isinstance(value, bool):
        return "Edm.Boolean"
    if isinstance(value, int):
        return "Edm.Int32"
    if isinstance(value, float):
        return DOUBLE
    return "Edm.String"


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _value(kind: str, text: str, where: str) -> tuple[Any, bool]:
    """The JSON value of a CSV cell of type ``kind``, and whether it needs its annotation."""
    try:
        if kind == "Edm.String":
            return text, False
        if kind == "Edm.Boolean":
            if text not in ("true", "false"):
                raise ValueError(text)
            return text == "true", False
        if kind == "Edm.Int32":
            return int(text), False
        if kind == DOUBLE:
            if text in SPECIAL_DOUBLES:
                return text, True
            number = float(text)
            if math.isnan(number) or math.isinf(number):
                raise ValueError(text)
            return number, True
    except ValueError:
        raise FormatError(f"{where}: {text[:40]!r} is not an {kind}") from None
    if kind not in TYPES:
        raise FormatError(f"{where}: unknown type {kind[:40]!r}")
    return text, True


class CsvWriter:
    """Writes entities as CSV; the columns are known only at the end, so rows are spooled first."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.names: dict[str, None] = {}
        self.spool = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()

    def write(self, entities: list[dict[str, Any]]) -> None:
        for entity in entities:
            clean(entity)
            for name in entity:
                if name not in SYSTEM and not name.endswith(ANNOTATION):
                    self.names.setdefault(name, None)
        self.spool.write(b"".join(orjson.dumps(e, option=orjson.OPT_APPEND_NEWLINE) for e in entities))

    def close(self) -> None:
        text = io.TextIOWrapper(self.stream, encoding="utf-8", newline="", write_through=True)
        writer = csv.writer(text)
        names = list(self.names)
        header = list(SYSTEM)
        for name in names:
            header += [name, name + "@type"]
        writer.writerow(header)
        self.spool.seek(0)
        for raw in self.spool:
            entity = orjson.loads(raw)
            row = [entity["PartitionKey"], entity["RowKey"], entity.get("Timestamp", "")]
            for name in names:
                if name in entity:
                    value = entity[name]
                    row += [_text(value), _type_of(entity, name, value)]
                else:
                    row += ["", ""]
            writer.writerow(row)
        text.detach()
        self.spool.close()


def read_csv(stream: IO[bytes], skip: int = 0) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """``(0, row number, entity)`` for each row after the first ``skip`` (a CSV file is resumed by
    row count: a quoted cell may hold line breaks, so byte offsets of lines mean nothing)."""
    text = io.TextIOWrapper(stream, encoding="utf-8-sig", newline="")
    reader = csv.reader(text)
    header = next(reader, None)
    if header is None:
        return
    if header[:2] != ["PartitionKey", "RowKey"]:
        raise FormatError("row 1: the header must start with PartitionKey,RowKey")
    columns: list[tuple[int, str, int]] = []  # (value column, name, type column)
    position = 2
    if len(header) > 2 and header[2] == "Timestamp":
        position = 3
    while position < len(header):
        name = header[position]
        if position + 1 >= len(header) or header[position + 1] != name + "@type":
            raise FormatError(f"row 1: column {name!r} must be followed by {name + '@type'!r}")
        columns.append((position, name, position + 1))
        position += 2
    for number, row in enumerate(reader, start=2):
        if number - 2 < skip:
            continue
        if len(row) != len(header):
            raise FormatError(f"row {number}: {len(row)} cells, the header has {len(header)}")
        entity: dict[str, Any] = {"PartitionKey": row[0], "RowKey": row[1]}
        for value_column, name, type_column in columns:
            kind = row[type_column]
            if not kind:
                continue
            value, annotated = _value(kind, row[value_column], f"row {number}, {name}")
            entity[name] = value
            if annotated:
                entity[name + ANNOTATION] = kind
        yield 0, number - 1, entity
