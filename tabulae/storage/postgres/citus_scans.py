"""A filtered scan across partitions on Citus, reading about as many rows as it returns.

Citus runs ``ORDER BY key LIMIT n`` over many shards by sending the same ``LIMIT n`` to every
shard and merging: each shard reads and returns up to ``n`` matches and the coordinator keeps
the first ``n`` of them all. Where matches are dense, every shard fills its ``n`` and nearly all
of it is thrown away, page after page. No statement can give each shard only its share, and a
shard cannot be named in SQL, but a PartitionKey can: all of a partition lives on one shard.

So this plan steps through partitions while matches are dense: it finds the next partition in
key order (a one-row probe of every shard's key index, no entity read) and reads that
partition alone (a statement Citus routes to its one shard), only as far as the page needs.
When a partition yields too few matches for stepping to pay (a sparse filter, or partitions of
a row or two), the rest of the range goes to one statement over every shard, as on PostgreSQL,
where each shard then reads what a scan must read anyway.
"""

from __future__ import annotations

from collections.abc import Sequence

from tabulae.model import edm
from tabulae.model.entity import StoredEntity
from tabulae.storage.plan import Plan, Sql
from tabulae.storage.rules import ranges_to_scan
from tabulae.storage.scans import KeyRange, ScanChunk
from tabulae.storage.table_plans import EntityLayout, Matching, range_sql

# Stepping goes on while the partitions read so far promise the page within this many more
# partitions; beyond that one statement over every shard costs fewer round trips.
STEP_PARTITIONS = 4


def scan_stepping(
    layout: EntityLayout,
    table: int,
    ranges: Sequence[KeyRange],
    after: tuple[str, str] | None,
    want: int,
    matching: Matching,
) -> Plan[ScanChunk]:
    """Up to ``want`` rows that pass ``matching``, in key order, and how many rows of the ranges
    were examined to find them: the contract of :func:`~tabulae.storage.table_plans.scan_matching`
    (without a window), with the same answer."""
    found: list[StoredEntity] = []
    exact = matching.exact
    examined = 0
    keys = f"e.{layout.partition}, e.rk"
    for key_range in ranges_to_scan(ranges, after):
        params = dict(matching.params)
        routed = layout.route(table, key_range, params, "e.")
        bounds = layout.table_where(table, params, "e.") + routed
        bounds += range_sql(layout, table, key_range, after, params, "e.")
        within = bounds + layout.alive
        params["tid"] = table
        stepping = not routed  # a range inside one partition is one shard's already
        beyond = ""  # past the partitions stepped through
        parts: list[bytes] = []  # the partitions stepped through, in key order
        stepped_matches = 0
        # a continuation most often resumes inside the partition where the last page ended
        resumed = None
        if after is not None and stepping and not found and not examined:
            resumed = layout.partition_value(table, after[0])
        while True:
            if stepping:
                if resumed is not None:
                    params["part"], resumed = resumed, None
                else:
                    # without the table's check (a join on every shard): the read checks it
                    probe = yield Sql(
                        f"SELECT e.{layout.partition} FROM entities e WHERE {bounds}{beyond}"
                        f" ORDER BY {keys} LIMIT 1",
                        params,
                        "one",
                    )
                    if probe is None:
                        break
                    params["part"] = bytes(probe[0])
                parts.append(params["part"])
                where = f"{within}{beyond} AND e.{layout.partition} = :part"
            else:
                where = within + beyond
            params["need"] = want - len(found)
            rows = yield Sql(
                f"SELECT {keys}, e.ticks, e.props FROM {matching.source}"
                f" WHERE {where} AND {matching.condition} ORDER BY {keys} LIMIT :need",
                params,
                "all",
            )
            matched = layout.entities(rows)
            if matching.row_exact is not None:
                exact = exact and all(matching.row_exact(entity.blob) for entity in matched)
            found.extend(matched)
            if len(found) >= want:  # stopped at a match: count the rows up to it
                last = found[-1]
                params.update(
                    last_p=layout.partition_value(table, last.pk), last_r=edm.utf16_sort_key(last.rk)
                )
                counted = yield Sql(
                    f"SELECT count(*) FROM entities e WHERE {within}{_among(layout, stepping, parts, params)}"
                    f" AND ({keys}) <= (:last_p, :last_r)",
                    params,
                    "one",
                )
                return ScanChunk(found, examined + int(counted[0]), (last.pk, last.rk), False, exact)
            if not stepping:
                break  # one statement over every shard read the rest of the range
            stepped_matches += len(matched)
            # the first partition may be the tail of one a previous chunk read: judge on two
            if len(parts) >= 2 and (want - len(found)) * len(parts) > stepped_matches * STEP_PARTITIONS:
                stepping = False
            beyond = f" AND e.{layout.partition} > :step"
            params["step"] = params["part"]
        count = f"SELECT count(*) FROM entities e WHERE {within}{_among(layout, stepping, parts, params)}"
        examined += int((yield Sql(count, params, "one"))[0])
    return ScanChunk(found, examined, None, True, exact)


def _among(layout: EntityLayout, stepping: bool, parts: list[bytes], params: dict[str, object]) -> str:
    """While stepping, the rows examined all lie in the partitions stepped through: a count
    confined to them goes to their shards only."""
    if not stepping or not parts:
        return ""
    params["parts"] = parts
    return f" AND e.{layout.partition} = ANY(:parts)"
