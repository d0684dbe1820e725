"""Rules every backend applies the same way, kept in one place so the backends cannot drift."""

from __future__ import annotations

from tabulae.model import edm
from tabulae.model.errors import TableError
from tabulae.storage.tables import KeyRange, Mutation, MutationKind


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


def check_condition(mutation: Mutation, existing: tuple[int, bytes] | None) -> None:
    """The existence and ETag rules of one write, given the stored (ticks, properties) or None."""
    if mutation.kind is MutationKind.INSERT:
        if existing is not None:
            raise TableError("EntityAlreadyExists")
        return
    condition = mutation.if_match
    if condition is None and mutation.kind is not MutationKind.DELETE:
        return  # an upsert
    if existing is None:
        raise TableError("ResourceNotFound")
    if condition not in (None, "*") and edm.etag_for(edm.format_datetime(existing[0])) != condition:
        raise TableError("UpdateConditionNotSatisfied")
