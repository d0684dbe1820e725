"""Rules every engine applies the same way, kept in one place so the engines cannot drift.

An engine module holds only what is specific to its SQL: these functions decide what a write
does to an entity (existence and ETag checks, the next Timestamp, the merged and checked
properties) and which ranges a scan still reads (their SQL is in :mod:`.table_plans`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from tabulae.model import edm
from tabulae.model.entity import StoredEntity, check_merged, decode_properties, encode_properties
from tabulae.model.errors import ServiceError
from tabulae.model.mutation import Mutation, MutationKind
from tabulae.storage.scans import KeyRange

# What an engine has read of an entity before writing it: (Timestamp ticks, stored properties).
Stored = tuple[int, bytes]


def range_before_cursor(key_range: KeyRange, after: tuple[str, str]) -> bool:
    """True when the whole range lies at or before the cursor, so a scan can skip it."""
    upper = key_range.upper
    if upper is None:
        return False
    a_pk, a_rk = edm.utf16_sort_key(after[0]), edm.utf16_sort_key(after[1])
    u_pk = edm.utf16_sort_key(upper.pk)
    if upper.rk is None:
        return u_pk < a_pk or (u_pk == a_pk and not upper.inclusive)
    return (u_pk, edm.utf16_sort_key(upper.rk)) <= (a_pk, a_rk)


def ranges_to_scan(ranges: Sequence[KeyRange], after: tuple[str, str] | None) -> Iterator[KeyRange]:
    """The ranges a scan still has to read, in key order: those wholly before the cursor are skipped."""
    for key_range in ranges:
        if after is None or not range_before_cursor(key_range, after):
            yield key_range


def check_condition(mutation: Mutation, existing: Stored | None) -> None:
    """The existence and ETag rules of one write, given the stored (ticks, properties) or None."""
    if mutation.kind is MutationKind.INSERT:
        if existing is not None:
            raise ServiceError("EntityAlreadyExists")
        return
    condition = mutation.if_match
    if condition is None and mutation.kind is not MutationKind.DELETE:
        return  # an upsert
    if existing is None:
        raise ServiceError("ResourceNotFound")
    if condition not in (None, "*") and edm.etag_for(edm.format_datetime(existing[0])) != condition:
        raise ServiceError("UpdateConditionNotSatisfied")


def group_ticks(existing: Iterable[Stored | None]) -> int:
    """The one Timestamp of a write group: now, but strictly later than every stored version it
    touches. Clocks tick coarsely and differ between processes; without the ``+ 1`` two writes in
    one tick would share an ETag, and an If-Match meant for the old version would pass."""
    return max([edm.now_ticks()] + [stored[0] + 1 for stored in existing if stored is not None])


def written_properties(mutation: Mutation, existing: Stored | None) -> bytes | None:
    """The stored form of the entity after ``mutation`` (``None`` for DELETE). A merge is checked
    against the entity limits, as its result can exceed what the request alone did."""
    if mutation.kind is MutationKind.DELETE:
        return None
    properties = mutation.properties or {}
    if mutation.kind is MutationKind.MERGE and existing is not None:
        merged = decode_properties(existing[1])
        merged.update(properties)
        check_merged(mutation.pk, mutation.rk, merged)
        properties = merged
    return encode_properties(properties)


def decide(
    mutations: Sequence[Mutation], keys: Sequence[Any], state: dict[Any, Stored | None], ticks: int
) -> list[tuple[Stored | None, bytes | None]]:
    """A write group decided before anything is written: per mutation, the entity it finds
    (as the group's earlier mutations leave it: ``state`` holds each key's stored entity and is
    updated here) and what it writes (``None``: a delete). The first mutation that fails raises
    its error tagged with its index, so the group is undone and that operation reported."""
    decisions: list[tuple[Stored | None, bytes | None]] = []
    for index, (mutation, key) in enumerate(zip(mutations, keys, strict=True)):
        existing = state.get(key)
        try:
            check_condition(mutation, existing)
            blob = written_properties(mutation, existing)
        except ServiceError as exc:
            raise exc.at(index) from None
        state[key] = None if blob is None else (ticks, blob)
        decisions.append((existing, blob))
    return decisions


def written(
    mutations: Sequence[Mutation], blobs: Iterable[bytes | None], ticks: int
) -> list[StoredEntity | None]:
    """The group's answer: each entity as stored (``None`` for a delete)."""
    return [
        None if blob is None else StoredEntity(mutation.pk, mutation.rk, ticks, blob)
        for mutation, blob in zip(mutations, blobs, strict=True)
    ]
