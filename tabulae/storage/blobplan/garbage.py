"""Plans over garbage: extents no row names any more, kept for the grace period (a download that
began before may still read them) and then collected."""

from __future__ import annotations

from typing import Any

from tabulae.storage.plan import Plan, Sql

REFERENCED = (
    "SELECT EXISTS (SELECT 1 FROM blob_extents WHERE {key=} ref = :ref)"
    " OR EXISTS (SELECT 1 FROM blob_blocks WHERE {key=} ref = :ref)"
    " OR EXISTS (SELECT 1 FROM blob_pages WHERE {key=} ref = :ref)"
)


def drop(dkey: int, ref: str) -> Plan[None]:
    """An extent lost a reference: if no row names it any more, it becomes garbage."""
    row = yield Sql(REFERENCED, {"dkey": dkey, "ref": ref}, "one")
    if not row[0]:
        yield Sql(
            "INSERT INTO blob_garbage ({key,} ref, dropped) VALUES ({:key,} :ref, {now})"
            " ON CONFLICT ({key,} ref) DO UPDATE SET dropped = excluded.dropped",
            {"dkey": dkey, "ref": ref},
        )


def collect(expired: str, params: dict[str, Any], limit: int) -> Plan[tuple[int, list[tuple[int, str]]]]:
    """Take (delete) up to ``limit`` of the garbage rows that pass ``expired``, the engine's
    condition on ``dropped``; returns how many, and the (dkey, ref) of those nothing names
    again, whose bytes the engine then deletes. An engine runs it a transaction at a time until
    it takes fewer than ``limit``. Several collectors may run at once: each row is taken by
    one (a row another took meanwhile is not deleted, nor returned, again)."""
    rows = yield Sql(
        f"DELETE FROM blob_garbage WHERE ({{key,}} ref) IN (SELECT {{key,}} ref FROM blob_garbage"
        f" WHERE {expired} LIMIT :limit) RETURNING {{key,}} ref",
        {**params, "limit": limit},
        "all",
    )
    free: list[tuple[int, str]] = []
    for row in rows:
        dkey = row[0] if len(row) > 1 else 0  # engines without a distribution key return the ref alone
        named = yield Sql(REFERENCED, {"dkey": dkey, "ref": row[-1]}, "one")
        if not named[0]:
            free.append((dkey, str(row[-1])))
    return len(rows), free
