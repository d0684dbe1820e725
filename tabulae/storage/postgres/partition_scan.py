"""A range within one partition, the commonest query (``PartitionKey eq … and RowKey ge … and
RowKey lt …``, or a partition's rows), in one statement of its own sent through libpq directly.

The plan's scan (:func:`tabulae.storage.table_plans.scan_rows`) is written for every range: it
bounds the table's ``dist`` span, compares ``(dist, rk)`` pairs and returns ``dist`` with every
row. Within one partition all of that is known: the statement names the partition's ``dist``
once and bounds ``rk`` alone, so the index scan checks three keys per entry instead of seven,
and no row carries the ``dist`` every row shares (one value fewer for the server to copy and
send and for the event loop to decode, per row). The ``int8`` column decodes in one call for
the whole answer. Rows, order, the table's existence check and Citus's routing (``dist =``, the
distribution column) are the plan's.
"""

from __future__ import annotations

import codecs
import functools
import struct
from collections.abc import Sequence
from typing import Any

from tabulae.model import edm
from tabulae.model.entity import StoredEntity
from tabulae.storage.postgres import wire
from tabulae.storage.scans import KeyRange

_ID = struct.Struct(">q")
_COLUMNS = (wire.BYTEA, wire.INT8, wire.BYTEA)  # rk, ticks, props
_decode = codecs.utf_16_be_decode

# a bound's comparison and its RowKey as stored; None where the range is open at that end
Bound = tuple[str, bytes] | None


@functools.cache
def statement(lower: str | None, upper: str | None) -> wire.Statement:
    """The rows of partition ``$1`` with ``rk`` within the bounds' comparisons, in key order,
    at most ``$3``, and none once table ``$2`` is gone (ids are never reused)."""
    where, types = "", [wire.BYTEA, wire.INT8, wire.INT8]
    for op in (lower, upper):
        if op is not None:
            types.append(wire.BYTEA)
            where += f" AND rk {op} ${len(types)}"
    return wire.Statement.of(
        f"SELECT rk, ticks, props FROM entities WHERE dist = $1{where}"
        " AND EXISTS (SELECT 1 FROM tables WHERE id = $2) ORDER BY rk LIMIT $3",
        *types,
    )


def call(
    table_id: int, ranges: Sequence[KeyRange], after: tuple[str, str] | None, limit: int
) -> tuple[wire.Call, str] | None:
    """The statement reading ``ranges`` after ``after``, with its parameters, and the
    PartitionKey, when that is one range within one partition; else None (the plan reads it)."""
    if len(ranges) != 1:
        return None
    lo, hi = ranges[0].lower, ranges[0].upper
    if lo is None or hi is None or lo.pk != hi.pk:
        return None
    if (lo.rk is None and not lo.inclusive) or (hi.rk is None and not hi.inclusive):
        return None  # past the partition's end, or before its start: nothing, as the plan finds
    pk = lo.pk
    key = edm.utf16_sort_key
    lower: Bound = None if lo.rk is None else (">=" if lo.inclusive else ">", key(lo.rk))
    upper: Bound = None if hi.rk is None else ("<=" if hi.inclusive else "<", key(hi.rk))
    if after is not None:
        cursor_pk = key(after[0])
        if cursor_pk > key(pk):
            return None  # the range lies before the cursor
        if cursor_pk == key(pk):
            cursor = key(after[1])
            if lower is None or cursor >= lower[1]:
                lower = (">", cursor)
    params: list[bytes | None] = [_ID.pack(table_id) + key(pk), _ID.pack(table_id), _ID.pack(limit)]
    params += [bound[1] for bound in (lower, upper) if bound is not None]
    chosen = statement(None if lower is None else lower[0], None if upper is None else upper[0])
    return (chosen, params), pk


def entities(result: Any, pk: str) -> list[StoredEntity]:
    """The rows ``(rk, ticks, props)`` of partition ``pk``, read in binary format."""
    return [
        StoredEntity(pk, _decode(rk, "surrogatepass", True)[0], ticks, props)
        for rk, ticks, props in wire.load_rows(result, _COLUMNS)
    ]
