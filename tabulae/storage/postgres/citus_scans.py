"""A filtered scan across partitions on Citus, reading about as many rows as it returns.

Citus runs ``ORDER BY key LIMIT n`` over many shards by sending the same ``LIMIT n`` to every
shard and merging: each shard reads and returns up to ``n`` matches and the coordinator keeps
the first ``n`` of them all. Where matches are dense, every shard fills its ``n`` and nearly all
of it is thrown away, page after page. No statement can give each shard only its share, and a
shard cannot be named in SQL, but a PartitionKey can: all of a partition lives on one shard.

So this plan steps through partitions while matches are dense: it reads a partition at a time
(a statement Citus routes to its one shard), or the few it expects to read to their end in one
statement (``= ANY``, sent to their shards only), only as far as the page needs. Which partition
comes next is found by a probe of every shard's key index (no entity read), and a probe costs a
task per shard whatever it asks, so one probe asks many questions: for each of several points,
every shard's first partition after it (:func:`_successor_statements`). The first point is where the scan
stands; the others are the partitions it expects next (those the previous probe saw, or those a
previous page of the same scan left in :class:`ScanHints`). Each answer holds the true next
partition after every point, so the expected partitions are checked, not trusted: the scan
steps through them as far as each one is the true successor of the one before, and a partition
created since (or a hint gone stale) only shortens the run. A page thus costs one probe however
many partitions it crosses, where it cost one per partition. Until the partitions read promise
the page, a probe asks for the next partition alone, as a sparse scan needs no more.

A page that resumes where the previous one read a partition to its end, or inside a partition
whose rest will likely not fill it, does not wait for its probe: it sends the probe aside, on
another connection (:func:`~tabulae.storage.plan.aside`), and meanwhile reads, in one
statement, that rest and as many of the partitions the hint expects as the page likely needs
(by the matches a partition gave); then it keeps the rows of those the probe confirms, in
order, and steps on from the first it disowns. A scan in steady state thus pays for its probe
in the time of its reads.

Between pages, what a probe found stays true until a partition is made. Every write that
inserts an entity moves the partition epoch (a sequence on the coordinator,
``entity_partition_epoch``) on after its commit and before it is acknowledged, and every probe
reads the epoch before it asks the shards. So a page left a chain of partitions a probe made
certain (each the next after the one before), with the epoch that probe read, and the next page
of the scan finds the epoch unmoved: no partition can have appeared in the chain since, and
the page reads along it without a probe. The epoch is read beside the page's first read; moved,
a probe sent aside then checks what that read took, as above. A write still in flight when a
probe ran may be missed, as any read may miss a write it overlaps; one acknowledged before the
page began moves the epoch first. A partition emptied meanwhile only reads as empty. A schema
distributed before the epoch existed has none until ``db init --citus`` runs again, and then
every page probes as before.

The rows a page examined are counted without a round trip of their own where the page ends in
a read of one partition (most often the partition it resumes in, or the one row a page reads
past its end, to know whether another page follows): that read counts, beside the row that
fills the page, the rows of its partition up to it, and the partitions read to their end
before it are counted in the same pipeline. Elsewhere one count of the partitions not yet
counted follows the page's last row.

When a partition yields too few matches for stepping to pay (a sparse filter, or partitions of a
row or two), the rest of the range goes to one statement over every shard, as on PostgreSQL,
where each shard then reads what a scan must read anyway.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, NamedTuple

from tabulae.model import edm
from tabulae.model.entity import StoredEntity
from tabulae.storage.plan import Plan, Sql, aside, collect
from tabulae.storage.plan import batch as plan_batch
from tabulae.storage.rules import ranges_to_scan
from tabulae.storage.scans import KeyRange, ScanChunk
from tabulae.storage.table_plans import EntityLayout, Matching, range_sql

# Stepping goes on while the partitions read so far promise the page within this many more
# partitions; beyond that one statement over every shard costs fewer round trips.
STEP_PARTITIONS = 4
# The expected partitions one probe checks besides where the scan stands: each is one more
# index probe on every shard, within the same task.
EXPECTED = 8
HINTS = 1024  # scans whose expected partitions a store remembers between pages

_START = b""  # a point before every partition of every table: the probe's ranges bound it


# the partitions certain to follow, those seen beyond them, and whether the range ends after them
Following = tuple[list[bytes], list[bytes], bool]


# the partition epoch as a probe read it: ``last_value`` and ``is_called`` of its sequence
Epoch = tuple[int, bool]
_EPOCH = Sql("SELECT last_value, is_called FROM entity_partition_epoch", fetch="one")


class Hint(NamedTuple):
    """What a page that ended in a partition expected of the next page's."""

    expected: tuple[bytes, ...]  # the partitions after it
    read_out: bool  # the partition was read to its end
    density: int  # matches a partition read to its end gave (0: none was)
    left: int  # matches its rest likely holds: ``density`` less those the page took of it
    # the partitions certain to follow it (each the next after the one before), and whether the
    # range ends after them, as probes found them while the partition epoch was ``epoch``
    # (None: not known) over ``scope``, the key range of the scan that left the hint
    chain: tuple[bytes, ...] = ()
    ends: bool = False
    epoch: Epoch | None = None
    scope: KeyRange | None = None


_NO_HINT = Hint((), False, 0, 0)


class _PageEpoch:
    """The partition epoch the probes of one page read: the chain a page leaves is certain
    while the epoch stays, so long as every probe that made it read the same epoch."""

    __slots__ = ("known", "value")

    def __init__(self) -> None:
        self.value: Epoch | None = None
        self.known = True  # no probe of the page read another epoch, or none

    def saw(self, value: Epoch | None) -> None:
        if value is None or (self.value is not None and value != self.value):
            self.known = False
        elif self.value is None:
            self.value = value

    def certain(self) -> Epoch | None:
        return self.value if self.known else None


class ScanHints:
    """Where a scan expected to go when its page ended, by table and the partition the next page
    resumes in: the partitions it expected next, and whether it had read that partition to its
    end, and how many matches a partition gave. A hint only: the probe checks the partitions,
    and a partition's rest is read all the same (with the next one, in one statement, when it
    was read to its end; and with them the partitions that will likely be read to their end
    too, by how many matches the earlier ones gave; the hint wrong, that statement reads more
    than it returns). The continuation token names the entity, so nothing
    of this goes to the client; a page that reaches another process, or a hint forgotten, costs
    one more statement."""

    def __init__(self, limit: int = HINTS, wide_probes: bool = True, epochs: bool = False) -> None:
        self._limit = limit
        # a Citus without ``citus.subquery_pushdown`` (a setting it discourages, so a later
        # release may drop it) steps by asking for one partition at a time, as sparse scans do
        self.wide_probes = wide_probes
        # the schema has the partition epoch and every write that inserts moves it on: a page
        # whose hint's epoch is still the epoch trusts the hint's chain without a probe
        self.epochs = epochs
        self._hints: OrderedDict[tuple[int, bytes], Hint] = OrderedDict()

    def take(self, table: int, partition: bytes) -> Hint:
        return self._hints.pop((table, partition), _NO_HINT)

    def leave(self, table: int, partition: bytes, hint: Hint) -> None:
        self._hints[(table, partition)] = hint
        while len(self._hints) > self._limit:
            self._hints.popitem(last=False)


def _successor_statements(
    layout: EntityLayout, bounds: str, params: dict[str, object], points: list[bytes], epoch: bool
) -> tuple[Sql, ...]:
    """For each point, every shard's first partition after it within ``bounds``: one statement
    over every shard, each answering for every point with one step of its key index (read from
    the replies by :func:`_answer`). With ``epoch``, the partition epoch is read first, so that
    a partition whose write moved the epoch on after this read is one the probe may miss, and
    one whose write moved it before is one the probe sees.

    The ``LIMIT 1`` of the lateral subquery is meant per shard: that is what
    ``citus.subquery_pushdown`` makes Citus do (its planner otherwise refuses a limit in a
    lateral subquery), so every shard sends its own next partition after each point and the
    least of them is the table's. The setting lives for this statement's transaction only."""
    part = layout.partition
    return (
        Sql("BEGIN"),
        Sql("SET LOCAL citus.subquery_pushdown TO on"),
        *((_EPOCH,) if epoch else ()),
        Sql(
            f"SELECT p.x, n.{part} FROM unnest(CAST(:points AS bytea[])) AS p(x) CROSS JOIN LATERAL"
            f" (SELECT e.{part} FROM entities e WHERE {bounds} AND e.{part} > p.x"
            f" ORDER BY e.{part}, e.rk LIMIT 1) n ORDER BY 1, 2 LIMIT :answers",
            {**params, "points": points, "answers": 1024 * len(points)},
            "all",
        ),
        Sql("COMMIT"),
    )


def _answer(replies: list[Any]) -> tuple[list[tuple[bytes, bytes]], Epoch | None]:
    """A wide probe's rows, and the partition epoch it read first (None: it read none)."""
    if len(replies) == 5:
        return replies[3], _epoch(replies[2])
    return replies[2], None


def _epoch(row: Sequence[Any]) -> Epoch:
    return int(row[0]), bool(row[1])


def _following(rows: list[tuple[bytes, bytes]], at: bytes, points: list[bytes]) -> Following:
    """From a probe's rows: the partitions that follow ``at``, in key order, as far as they are
    certain (each the successor of a point every shard answered for); the partitions seen
    beyond them; and whether the range ends after them."""
    first: dict[bytes, bytes] = {}
    seen: set[bytes] = set()
    for point, partition in rows:
        point, partition = bytes(point), bytes(partition)
        seen.add(partition)
        if point not in first or partition < first[point]:
            first[point] = partition
    asked = set(points)
    following: list[bytes] = []
    point = at
    while point in asked:
        successor = first.get(point)
        if successor is None:
            return following, [], True
        following.append(successor)
        point = successor
    return following, sorted(p for p in seen if p > point), False


def _probe(
    layout: EntityLayout,
    bounds: str,
    params: dict[str, object],
    at: bytes,
    expected: Sequence[bytes],
    wide: bool,
    page: _PageEpoch,
    epoch: bool,
) -> Plan[Following]:
    """The partitions that follow ``at``, in key order, as far as one probe makes them certain;
    the partitions seen beyond them (to expect next); and whether the range ends after them.
    With ``epoch``, the probe reads the partition epoch first and tells ``page``.

    Unless ``wide`` (stepping looks like it will go on), nothing is expected and only the next
    partition is asked for, without a transaction: a sparse scan leaves stepping soon after."""
    if not wide and not expected:
        params["step"] = at
        step = Sql(
            f"SELECT e.{layout.partition} FROM entities e WHERE {bounds} AND e.{layout.partition} > :step"
            f" ORDER BY e.{layout.partition}, e.rk LIMIT 1",
            params,
            "one",
        )
        if epoch:
            read, found = yield plan_batch(_EPOCH, step)
            page.saw(_epoch(read))
        else:
            found = yield step
            page.saw(None)
        return ([], [], True) if found is None else ([bytes(found[0])], [], False)
    points = _points(at, expected)
    rows, read_epoch = _answer(
        (yield plan_batch(*_successor_statements(layout, bounds, params, points, epoch)))
    )
    page.saw(read_epoch)
    return _following(rows, at, points)


def _points(at: bytes, expected: Sequence[bytes]) -> list[bytes]:
    """What a probe asks about: ``at``, and the expected partitions after it."""
    return [at, *sorted({p for p in expected if p > at})[:EXPECTED]]


def scan_stepping(
    layout: EntityLayout,
    table: int,
    ranges: Sequence[KeyRange],
    after: tuple[str, str] | None,
    want: int,
    matching: Matching,
    hints: ScanHints | None = None,
) -> Plan[ScanChunk]:
    """Up to ``want`` rows that pass ``matching``, in key order, and how many rows of the ranges
    were examined to find them: the contract of :func:`~tabulae.storage.table_plans.scan_matching`
    (without a window), with the same answer."""
    found: list[StoredEntity] = []
    exact = matching.exact
    examined = 0
    keys = f"e.{layout.partition}, e.rk"
    wide_ok = hints is None or hints.wide_probes
    epochs = hints is not None and hints.epochs

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
        coming: list[bytes] = []  # the partitions certain to follow the last one read
        expected: list[bytes] = []  # partitions seen further on
        ended = False  # no partition follows ``coming``
        at = _START
        # a continuation most often resumes inside the partition where the last page ended
        resumed = None
        hint = _NO_HINT
        full_matches = full_parts = 0  # of the partitions this chunk read to their end
        counted = 0  # the first partitions of ``parts`` whose rows ``examined`` holds already
        page = _PageEpoch()
        trusted = False  # the hint's chain holds: no partition was made since a probe found it
        unchecked: Epoch | None = None  # the epoch it held at, read beside the page's first read
        if after is not None and stepping and not found and not examined:
            resumed = layout.partition_value(table, after[0])
            if hints is not None:
                hint = hints.take(table, resumed)
                expected = list(hint.expected)
            if epochs and hint.epoch is not None and hint.scope == key_range and _reaches(hint, want):
                trusted, coming, ended, unchecked = True, list(hint.chain), hint.ends, hint.epoch
                expected = [p for p in hint.expected if p not in hint.chain]
        density = hint.density
        probe: Any = None  # the ticket of a probe sent aside, and what it asks about
        points: list[bytes] = []
        while True:
            batch: list[bytes] = []
            tail = resumed is not None  # the batch begins with the rest of the resumed partition
            if stepping:
                if resumed is not None:
                    batch, resumed = [resumed], None
                    unfilled = hint.read_out or hint.left < want  # its rest will not fill the page
                    if trusted:
                        if hint.read_out and coming and not density:
                            batch.append(coming.pop(0))
                    elif unfilled and density and wide_ok and expected:
                        # read its rest with what the hint expects while a probe beside checks it
                        points = _points(batch[0], expected)
                        probe = yield aside(*_successor_statements(layout, bounds, params, points, epochs))
                        coming, expected = points[1:], []
                    elif hint.read_out:  # its rest likely holds nothing: read it with what follows
                        coming, expected, ended = yield from _probe(
                            layout,
                            bounds,
                            params,
                            batch[0],
                            expected if wide_ok else [],
                            wide_ok,
                            page,
                            epochs,
                        )
                        if coming and not density:
                            batch.append(coming.pop(0))
                else:
                    if not coming and not ended:
                        wide = stepped_matches * STEP_PARTITIONS >= want - len(found)
                        coming, expected, ended = yield from _probe(
                            layout,
                            bounds,
                            params,
                            at,
                            expected if wide_ok else [],
                            wide and wide_ok,
                            page,
                            epochs,
                        )
                    if not coming:
                        break
                    batch = [coming.pop(0)]
                # with them, as many partitions as the page likely needs, the one it likely ends
                # in too when the page likely takes half of that one's matches or more: a shard
                # reads up to the whole page from its partitions, so a partition read for a few
                # rows costs more than the statement it saves
                if density and (probe is not None or trusted or not tail or hint.read_out):
                    likely = (hint.left if tail else 0) + density * (len(batch) - tail)
                    while coming and (short := want - len(found) - likely) > 0:
                        if likely and 2 * short < density:
                            break
                        batch.append(coming.pop(0))
                        likely += density
                at = batch[-1]
                params["part"] = at
                parts.extend(batch)
                if len(batch) == 1:
                    where = f"{within}{beyond} AND e.{layout.partition} = :part"
                else:  # bounded too, or a shard's planner may read all its partitions and sort
                    params["batch"] = batch
                    where = (
                        f"{within}{beyond} AND e.{layout.partition} = ANY(:batch)"
                        f" AND e.{layout.partition} <= :part"
                    )
            else:
                where = within + beyond
            params["need"] = want - len(found)
            # one partition's read counts the rows it examined up to the row that fills the page,
            # so a page ending there needs no count of its own; the partitions read to their end
            # before it are counted alongside
            ranked = stepping and len(batch) == 1
            read = Sql(
                _read_sql(layout, table, key_range, after, matching, where, params, ranked), params, "all"
            )
            statements = [read]
            if ranked and counted < len(parts) - 1:
                done = _within_parts(layout, parts[counted:-1], params, "done")
                statements.append(Sql(f"SELECT count(*) FROM entities e WHERE {within}{done}", params, "one"))
            if unchecked is not None:  # the epoch, read before the rows
                statements.insert(0, _EPOCH)
            replies = (yield plan_batch(*statements)) if len(statements) > 1 else [(yield read)]
            if unchecked is not None:
                now = _epoch(replies.pop(0))
                page.saw(now)
                if now != unchecked:  # a write since may have made a partition: check what was read
                    points = _points(batch[0], [*batch[1:], *coming, *expected])
                    probe = yield aside(*_successor_statements(layout, bounds, params, points, epochs))
                    trusted = False
                unchecked = None
            rows = replies[0]
            if len(replies) > 1:
                examined += int(replies[1][0])
                counted = len(parts) - 1
            if ranked:
                ranks = [row[4] for row in rows]
                rows = [row[:4] for row in rows]
            if probe is not None:  # keep what the probe confirms: partitions that follow each other
                answer, read_epoch = _answer((yield collect(probe)))
                page.saw(read_epoch)
                probe = None
                certain, expected, ended = _following(answer, batch[0], points)
                kept = 1
                while kept < len(batch) and kept <= len(certain) and batch[kept] == certain[kept - 1]:
                    kept += 1
                if kept < len(batch):  # a partition came between, or one was emptied
                    del parts[len(parts) - len(batch) + kept :]
                    batch = batch[:kept]
                    at = params["part"] = batch[-1]
                    rows = rows[: next((n for n, row in enumerate(rows) if bytes(row[0]) > at), len(rows))]
                coming = certain[kept - 1 :]
            matched = layout.entities(rows)
            if matching.row_exact is not None:
                exact = exact and all(matching.row_exact(entity.blob) for entity in matched)
            found.extend(matched)
            if len(found) >= want:  # stopped at a match: count the rows up to it
                last = found[-1]
                params.update(
                    last_p=layout.partition_value(table, last.pk), last_r=edm.utf16_sort_key(last.rk)
                )
                if stepping:  # partitions a batch read past the page's last row come next
                    cut = bisect_right(parts, params["last_p"])
                    coming = [*parts[cut:], *coming]
                    del parts[cut:]
                if ranked and rows:  # the rows its one partition examined up to the page's last
                    # (the read filled the page, so its last row is the :need-th, the one counted)
                    examined += int(ranks[-1])
                else:
                    uncounted = _uncounted(layout, stepping, parts, counted, params)
                    tally = yield Sql(
                        f"SELECT count(*) FROM entities e WHERE {within}{uncounted}"
                        f" AND ({keys}) <= (:last_p, :last_r)",
                        params,
                        "one",
                    )
                    examined += int(tally[0])
                if stepping and hints is not None and parts:  # the next page resumes in one of the last two
                    gave = full_matches // full_parts if full_parts else density
                    taken = _taken_from_last(found)
                    epoch, tail_chain, tail_ends = page.certain(), tuple(coming), ended
                    if page.value is None and page.known:  # read the resumed partition alone: what
                        epoch, tail_chain, tail_ends = hint.epoch, hint.chain, hint.ends  # held holds
                    for index in range(max(0, len(parts) - 2), len(parts)):
                        chain = (*parts[index + 1 :], *tail_chain)  # each the next after the one before
                        ahead = (*chain, *expected)
                        last_one = index == len(parts) - 1
                        left = max(0, gave - taken) if last_one else 0
                        left_behind = Hint(
                            ahead[: len(chain) + EXPECTED],
                            not last_one,
                            gave,
                            left,
                            chain,
                            tail_ends,
                            epoch,
                            key_range,
                        )
                        hints.leave(table, parts[index], left_behind)
                return ScanChunk(found, examined, (last.pk, last.rk), False, exact)
            if not stepping:
                break  # one statement over every shard read the rest of the range
            stepped_matches += len(matched)
            full_parts += len(batch) - tail
            full_matches += len(matched)
            if full_parts:
                density = full_matches // full_parts
            # the first partition may be the tail of one a previous chunk read: judge on two
            if len(parts) >= 2 and (want - len(found)) * len(parts) > stepped_matches * STEP_PARTITIONS:
                stepping = False
            beyond = f" AND e.{layout.partition} > :step"
            params["step"] = params["part"]
        uncounted = _uncounted(layout, stepping, parts, counted, params)
        examined += int(
            (yield Sql(f"SELECT count(*) FROM entities e WHERE {within}{uncounted}", params, "one"))[0]
        )
    return ScanChunk(found, examined, None, True, exact)


def _reaches(hint: Hint, want: int) -> bool:
    """Whether the hint's chain likely holds the page: it ends the range, or its partitions
    (and the rest of the one the page resumes in) likely give ``want`` matches, or it is not
    empty and no partition was read to its end to tell. A shorter chain is not worth trusting:
    the page would probe for the partitions after it on its way, where a probe sent aside at
    its start (checking the partitions it expects) costs no wait."""
    if hint.ends:
        return True
    if not hint.density:
        return bool(hint.chain)
    return hint.left + hint.density * len(hint.chain) >= want


def _taken_from_last(found: list[StoredEntity]) -> int:
    """How many of the page's entities, at its end, share the last one's partition."""
    last = found[-1].pk
    taken = 0
    for entity in reversed(found):
        if entity.pk != last:
            break
        taken += 1
    return taken


def _read_sql(
    layout: EntityLayout,
    table: int,
    key_range: KeyRange,
    after: tuple[str, str] | None,
    matching: Matching,
    where: str,
    params: dict[str, Any],
    ranked: bool,
) -> str:
    """The read of a step: the matching rows in key order, up to the page. ``ranked`` (a read of
    the one partition ``:part``, routed to its shard) gives the match that fills the page (the
    ``:need``-th) a fifth column: the rows of that partition within the range up to it,
    matching or not, which are the rows the page examined there; the other rows have None.
    That one index-only count runs once, for that row: the matches are numbered as they
    stream out of the key index, so the limit still stops the read (a count over every row,
    matching or not, would need a window over a subquery, which the planner plans for every
    row of the partition, not for the limit)."""
    keys = f"e.{layout.partition}, e.rk"
    ranks = ""
    if ranked:
        part = layout.partition
        bounds = " AND " + layout.table_where(table, params, "c.")
        bounds += range_sql(layout, table, key_range, after, params, "c.")
        ranks = (
            f", CASE WHEN row_number() OVER (ORDER BY {keys}) = :need THEN"
            f" (SELECT count(*) FROM entities c WHERE c.{part} = :part AND c.rk <= e.rk{bounds}) END"
        )
    return (
        f"SELECT {keys}, e.ticks, e.props{ranks} FROM {matching.source}"
        f" WHERE {where} AND {matching.condition} ORDER BY {keys} LIMIT :need"
    )


def _uncounted(
    layout: EntityLayout, stepping: bool, parts: list[bytes], counted: int, params: dict[str, object]
) -> str:
    """The rows examined that ``examined`` does not hold yet: while stepping, those of the
    partitions stepped through and not counted; otherwise every row of the range after the
    partitions counted (the first of ``parts``, in key order)."""
    if stepping:
        return _within_parts(layout, parts[counted:], params, "parts")
    if not counted:
        return ""
    params["counted_hi"] = parts[counted - 1]
    return f" AND e.{layout.partition} > :counted_hi"


def _within_parts(layout: EntityLayout, parts: list[bytes], params: dict[str, object], name: str) -> str:
    """The rows of ``parts`` (partitions stepped through), as parameters named ``name``: a count
    confined to them goes to their shards only, and bounded by the first and last of them, so
    that each shard counts along its key index rather than through every row it holds."""
    if not parts:
        return " AND false"
    params.update({name: parts, f"{name}_lo": parts[0], f"{name}_hi": parts[-1]})
    column = f"e.{layout.partition}"
    return f" AND {column} = ANY(:{name}) AND {column} >= :{name}_lo AND {column} <= :{name}_hi"
