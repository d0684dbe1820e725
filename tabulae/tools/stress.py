"""``tabulae stress``: the partition stress test of the partitioning guide, automated.

Seed 001 describes it in four steps: create a test table; load it with entities under the
PartitionKey scheme you mean to use; drive peak load at one partition with the application's
mix of queries and writes; compare the throughput achieved with the partition's target. This
module does exactly that with the official ``azure-data-tables`` async SDK, so what it measures
is what an application would see, retries included, against Tabulae or against Azure itself.

Entities are counted the way Azure's targets count them: every entity written and every
entity *scanned* is one, so a row-range query that scanned 10 entities counts 10. Against
Tabulae the scanned count comes from the ``x-tabulae-scanned`` response header; elsewhere the
returned count stands in for it (exact for pure key ranges, which is what this test sends).
Throttling is observed on the wire: a response hook sees every attempt the SDK's retry policy
makes, so each 503 ``ServerBusy`` and 500 ``OperationTimedOut`` is counted even when the retry
then succeeds.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import math
import os
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal, TextIO

from tabulae.config import DEFAULT_HOST, DEFAULT_PORT, DEV_ACCOUNT, DEV_KEY
from tabulae.tools.failures import EXIT_USAGE, Failure, describe

__all__ = [
    "SCHEMES",
    "StressReport",
    "add_arguments",
    "judge",
    "main",
    "partition_keys",
    "render_report",
    "run_stress",
    "stress",
]

Scheme = Literal["hashed", "sequential", "single"]
SCHEMES: tuple[str, ...] = ("hashed", "sequential", "single")

VERDICT_WITHIN = "within target"
VERDICT_AT = "at target (throttled)"
VERDICT_OVER = "over target"
VERDICT_CLIENT_BOUND = "below target: client-bound"

_BATCH = 100
_NEAR = 0.8  # achieved/target at or above which an unthrottled run counts as reaching the target
_PACE_SLACK = 0.9  # achieved/peak_rate at or above which the offered peak load was delivered


@dataclass
class StressReport:
    """What one stress run did and what it means. ``achieved`` is entities/s during the drive."""

    table: str
    scheme: str
    partitions: int
    loaded: int
    hot_partition: str
    hot_entities: int
    load_seconds: float
    duration: float
    concurrency: int
    target: float
    peak_rate: float | None = None
    operations: dict[str, int] = field(default_factory=dict)  # successful: point, range, write
    failed: int = 0  # operations that failed even after the SDK's retries
    written: int = 0
    read: int = 0  # entities read by point queries
    scanned: int = 0  # entities scanned by row-range queries
    scanned_exact: bool = False  # the server reported scanned counts (x-tabulae-scanned)
    throttled: int = 0  # 503 ServerBusy responses during the drive (each SDK attempt)
    timeouts: int = 0  # 500 OperationTimedOut responses during the drive
    other_errors: int = 0  # other 5xx responses during the drive
    load_throttled: int = 0  # 503/500 responses while loading
    verdict: str = ""
    advice: str = ""

    @property
    def counted(self) -> int:
        """Entities that count against the target: written + read + scanned."""
        return self.written + self.read + self.scanned

    @property
    def achieved(self) -> float:
        return self.counted / self.duration if self.duration > 0 else 0.0


def partition_keys(scheme: str, partitions: int) -> list[str]:
    """The PartitionKeys of a scheme, in the order they are loaded.

    ``hashed``: hex digests, so consecutive loads land far apart (the recommended spread);
    ``sequential``: zero-padded counters, the append-only pattern the guide warns about;
    ``single``: one partition for everything.
    """
    if scheme == "single":
        return ["stress"]
    if partitions < 1:
        raise ValueError("partitions must be at least 1")
    if scheme == "hashed":
        return [hashlib.sha256(f"partition-{n}".encode()).hexdigest()[:16] for n in range(partitions)]
    if scheme == "sequential":
        width = max(8, len(str(partitions - 1)))
        return [f"{n:0{width}d}" for n in range(partitions)]
    raise ValueError(f"unknown scheme {scheme!r}; expected one of {', '.join(SCHEMES)}")


def _layout(scheme: str, partitions: int, entities: int) -> list[tuple[str, list[str]]]:
    """Each partition with its RowKeys: ``hashed`` deals entities round-robin, the others in blocks."""
    keys = partition_keys(scheme, partitions)
    rows: list[list[str]] = [[] for _ in keys]
    block = math.ceil(entities / len(keys)) if entities else 1
    for i in range(entities):
        slot = i % len(keys) if scheme == "hashed" else i // block
        rows[slot].append(f"{i:010d}")
    return [(pk, rks) for pk, rks in zip(keys, rows, strict=True) if rks]


def judge(
    achieved: float, target: float, throttled: int, peak_rate: float | None = None, failed: int = 0
) -> tuple[str, str]:
    """The verdict and the advice that goes with it (pure, so the wording is tested).

    Throttling decides first: the service refused load, so the partition is at its target
    whatever the numbers say. Without throttling, more than the target on one partition is what
    Azure would refuse; reaching the requested peak (or, with no peak given, 80% of the target)
    means the design fits; anything less says the client, not the partition, was the limit.
    """
    if throttled:
        advice = (
            f"the partition refused load above its target of {target:.0f} entities/s and the SDK's "
            f"back-off retried; achieved {achieved:.0f}/s. If this is the expected peak, spread it "
            f"over more PartitionKeys"
        )
        if failed:
            advice += f"; {failed} operations failed even after retries"
        return VERDICT_AT, advice
    if achieved > target:
        return VERDICT_OVER, (
            f"{achieved:.0f} entities/s on one partition is more than the {target:.0f}/s Azure allows: "
            f"Azure would throttle this load. Spread it over more PartitionKeys (to see it refused "
            f"here, run the server with --targets azure)"
        )
    if peak_rate is not None and achieved >= _PACE_SLACK * peak_rate:
        return VERDICT_WITHIN, (
            f"the peak load of {peak_rate:.0f} entities/s fits one partition: {achieved:.0f}/s achieved, "
            f"{achieved / target:.0%} of the {target:.0f}/s target"
        )
    if peak_rate is None and achieved >= _NEAR * target:
        return VERDICT_WITHIN, (
            f"the partition took {achieved:.0f} entities/s, {achieved / target:.0%} of its "
            f"{target:.0f}/s target, without being throttled"
        )
    wanted = f"the requested {peak_rate:.0f}/s" if peak_rate is not None else f"the {target:.0f}/s target"
    advice = (
        f"only {achieved:.0f} entities/s reached the partition, short of {wanted}, and nothing was "
        f"throttled: the client was the limit. Raise --concurrency or run several clients"
    )
    if failed:
        advice += f" ({failed} operations failed)"
    return VERDICT_CLIENT_BOUND, advice


def render_report(report: StressReport) -> str:
    """The report as printed by ``tabulae stress``."""
    ops = report.operations
    peak = f"{report.peak_rate:.0f}/s" if report.peak_rate is not None else "as fast as possible"
    scanned_note = "reported by the server" if report.scanned_exact else "returned entities"
    lines = [
        f"Partition stress test: table {report.table}, scheme {report.scheme}",
        f"  loaded       {report.loaded} entities in {report.partitions} partition(s) in "
        f"{report.load_seconds:.1f} s"
        + (f" ({report.load_throttled} throttled)" if report.load_throttled else ""),
        f"  hot partition {report.hot_partition!r} ({report.hot_entities} entities)",
        f"  drive        {report.duration:.1f} s, concurrency {report.concurrency}, offered {peak}",
        f"  operations   {ops.get('point', 0)} point, {ops.get('range', 0)} row-range, "
        f"{ops.get('write', 0)} write, {report.failed} failed",
        f"  entities     {report.written} written + {report.read} read + {report.scanned} scanned "
        f"({scanned_note}) = {report.counted}",
        f"  throttled    {report.throttled} × 503 ServerBusy, {report.timeouts} × 500 OperationTimedOut"
        + (f", {report.other_errors} other 5xx" if report.other_errors else ""),
        f"  achieved     {report.achieved:.0f} entities/s against a target of {report.target:.0f}/s "
        f"({report.achieved / report.target:.0%})",
        "",
        f"Verdict: {report.verdict}",
        f"  {report.advice}",
    ]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------ the run


class _Probe:
    """Sees every HTTP attempt (the SDK calls the hook inside its retry loop)."""

    def __init__(self) -> None:
        self.phase = "load"
        self.statuses: Counter[tuple[str, int, str]] = Counter()
        self.scanned = 0
        self.scanned_exact = False

    def __call__(self, response: Any) -> None:
        http = response.http_response
        status = int(http.status_code)
        code = http.headers.get("x-ms-error-code", "") if status >= 500 else ""
        self.statuses[(self.phase, status, code)] += 1
        header = http.headers.get("x-tabulae-scanned")
        if header is not None and status == 200 and self.phase == "drive":
            self.scanned += int(header)
            self.scanned_exact = True

    def count(self, phase: str, status: int, code: str | None = None) -> int:
        return sum(
            n for (p, s, c), n in self.statuses.items() if p == phase and s == status and code in (None, c)
        )


class _Pacer:
    """Spaces operations so that the offered load is ``rate`` entities/s (None: no pacing)."""

    def __init__(self, rate: float | None) -> None:
        self.rate = rate
        self._next = time.monotonic()

    async def wait(self, cost: int) -> None:
        if self.rate is None:
            return
        now = time.monotonic()
        slot = max(self._next, now)
        self._next = slot + cost / self.rate
        if slot > now:
            await asyncio.sleep(slot - now)


async def stress(
    connection_string: str,
    *,
    table: str = "stress",
    scheme: str = "hashed",
    partitions: int = 100,
    entities: int = 10_000,
    duration: float = 30.0,
    concurrency: int = 16,
    target: float = 2000.0,
    peak_rate: float | None = None,
    payload: int = 1000,
    range_size: int = 10,
    mix: tuple[float, float, float] = (0.5, 0.2, 0.3),
    seed: int = 0,
    keep: bool = False,
    out: TextIO | None = None,
    client_options: dict[str, Any] | None = None,
) -> StressReport:
    """Run the stress test (see :func:`run_stress`) on the running event loop."""
    try:
        from azure.core.exceptions import AzureError, HttpResponseError, ResourceExistsError
        from azure.data.tables import UpdateMode
        from azure.data.tables.aio import TableClient
    except ImportError as exc:
        raise Failure(
            "MissingDependency", "tabulae stress needs the SDK: pip install 'tabulae[stress]'"
        ) from exc

    if scheme not in SCHEMES:
        raise ValueError(f"unknown scheme {scheme!r}; expected one of {', '.join(SCHEMES)}")
    if entities < 1 or concurrency < 1 or duration <= 0 or range_size < 1:
        raise ValueError("entities, concurrency and range_size must be ≥ 1 and duration > 0")

    def say(text: str) -> None:
        if out is not None:
            print(text, file=out, flush=True)

    probe = _Probe()
    layout = _layout(scheme, partitions, entities)
    hot_pk, hot_rks = max(layout, key=lambda item: len(item[1]))
    data = "x" * payload
    rng = random.Random(seed)
    options = dict(client_options or {})
    async with TableClient.from_connection_string(
        connection_string, table, raw_response_hook=probe, **options
    ) as client:
        try:
            await client.create_table()
        except ResourceExistsError:
            raise ValueError(f"table {table!r} already exists: choose another --table or delete it") from None
        try:
            # --- load ---------------------------------------------------------------------
            say(f"loading {entities} entities into {len(layout)} partition(s) ({scheme} keys)...")
            started = time.monotonic()
            gate = asyncio.Semaphore(concurrency)

            async def load(pk: str, rks: list[str]) -> None:
                async with gate:
                    operations: list[Any] = [
                        ("upsert", {"PartitionKey": pk, "RowKey": rk, "data": data}) for rk in rks
                    ]
                    await client.submit_transaction(operations)

            batches = [(pk, rks[i : i + _BATCH]) for pk, rks in layout for i in range(0, len(rks), _BATCH)]
            await asyncio.gather(*(load(pk, rks) for pk, rks in batches))
            load_seconds = time.monotonic() - started

            # --- drive --------------------------------------------------------------------
            span = min(range_size, len(hot_rks))
            say(f"driving partition {hot_pk!r} for {duration:g} s with {concurrency} concurrent clients...")
            probe.phase = "drive"
            done: Counter[str] = Counter()
            tally = {"failed": 0, "written": 0, "read": 0, "returned": 0}
            pacer = _Pacer(peak_rate)
            weights = list(mix)
            started = time.monotonic()
            deadline = started + duration

            async def point() -> None:
                await client.get_entity(hot_pk, rng.choice(hot_rks))
                tally["read"] += 1

            async def row_range() -> None:
                first = rng.randrange(0, len(hot_rks) - span + 1)
                params = {"pk": hot_pk, "lo": hot_rks[first]}
                query = "PartitionKey eq @pk and RowKey ge @lo"
                if first + span < len(hot_rks):
                    params["hi"] = hot_rks[first + span]
                    query += " and RowKey lt @hi"
                pages = client.query_entities(query, parameters=params, results_per_page=span)
                async for _entity in pages:
                    tally["returned"] += 1

            async def write() -> None:
                entity = {"PartitionKey": hot_pk, "RowKey": rng.choice(hot_rks), "n": rng.randrange(1 << 30)}
                await client.upsert_entity(entity, mode=UpdateMode.MERGE)
                tally["written"] += 1

            kinds = {"point": (point, 1), "range": (row_range, span), "write": (write, 1)}
            names = list(kinds)

            async def worker() -> None:
                while time.monotonic() < deadline:
                    name = rng.choices(names, weights)[0]
                    run, cost = kinds[name]
                    await pacer.wait(cost)
                    if time.monotonic() >= deadline:
                        return
                    try:
                        await run()
                    except AzureError:  # what the SDK raises once its retries are spent
                        tally["failed"] += 1
                    else:
                        done[name] += 1

            await asyncio.gather(*(worker() for _ in range(concurrency)))
            elapsed = time.monotonic() - started
            probe.phase = "after"
        finally:
            if not keep:
                try:
                    await client.delete_table()
                except HttpResponseError:
                    say(f"could not delete table {table!r}")

    report = StressReport(
        table=table,
        scheme=scheme,
        partitions=len(layout),
        loaded=entities,
        hot_partition=hot_pk,
        hot_entities=len(hot_rks),
        load_seconds=load_seconds,
        duration=elapsed,
        concurrency=concurrency,
        target=target,
        peak_rate=peak_rate,
        operations={name: done.get(name, 0) for name in names},
        failed=tally["failed"],
        written=tally["written"],
        read=tally["read"],
        scanned=probe.scanned if probe.scanned_exact else tally["returned"],
        scanned_exact=probe.scanned_exact,
        throttled=probe.count("drive", 503),
        timeouts=probe.count("drive", 500, "OperationTimedOut"),
        other_errors=sum(
            n
            for (phase, status, code), n in probe.statuses.items()
            if phase == "drive" and status >= 500 and status != 503 and code != "OperationTimedOut"
        ),
        load_throttled=probe.count("load", 503) + probe.count("load", 500),
    )
    report.verdict, report.advice = judge(
        report.achieved, target, report.throttled + report.timeouts, peak_rate, report.failed
    )
    return report


def run_stress(connection_string: str, **options: Any) -> StressReport:
    """Create ``table``, load it, drive one partition, and judge the throughput.

    Takes the keyword options of :func:`stress`. ``scheme`` picks the PartitionKeys (see
    :func:`partition_keys`); ``entities`` are spread over ``partitions`` of them in batches of
    100, with a ``payload``-character property (about 1 KiB per entity, the size the targets
    assume). Then, for ``duration`` seconds, ``concurrency`` clients send the hottest partition a
    ``mix`` of point queries, row-range queries of ``range_size`` rows and merge-upserts, as fast
    as they can or paced to ``peak_rate`` entities/s. The table is deleted afterwards unless
    ``keep``. Progress goes to ``out``; ``client_options`` go to the SDK client (e.g.
    ``retry_total``). Returns the report; :func:`render_report` prints it.
    """
    return asyncio.run(stress(connection_string, **options))


# ------------------------------------------------------------------------------------ command

DEFAULT_CONNECTION_STRING = (
    f"DefaultEndpointsProtocol=http;AccountName={DEV_ACCOUNT};AccountKey={DEV_KEY};"
    f"TableEndpoint=http://{DEFAULT_HOST}:{DEFAULT_PORT}/{DEV_ACCOUNT};"
)
CONNECTION_STRING_ENV = "AZURE_TABLES_CONNECTION_STRING"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``tabulae stress`` (for the CLI to attach to its sub-parser)."""
    parser.add_argument(
        "--connection-string",
        default=None,
        help=f"the account to test (default: ${CONNECTION_STRING_ENV}, else the development account "
        "on http://127.0.0.1:10002)",
    )
    parser.add_argument(
        "--table", default=f"stress{os.getpid()}", help="test table to create (must not exist)"
    )
    parser.add_argument("--scheme", choices=SCHEMES, default="hashed", help="PartitionKey scheme to load")
    parser.add_argument("--partitions", type=int, default=100, help="number of partitions to load")
    parser.add_argument("--entities", type=int, default=10_000, help="entities to load")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of peak load")
    parser.add_argument("--concurrency", type=int, default=16, help="concurrent clients")
    parser.add_argument("--target", type=float, default=2000.0, help="the partition target, entities/s")
    parser.add_argument(
        "--peak-rate", type=float, default=None, help="entities/s to offer (default: as fast as possible)"
    )
    parser.add_argument("--range-size", type=int, default=10, help="rows per row-range query")
    parser.add_argument(
        "--mix",
        default="50,20,30",
        help="weights of point queries, row-range queries and writes (default 50,20,30)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random choices")
    parser.add_argument("--keep", action="store_true", help="keep the test table afterwards")


def main(args: argparse.Namespace) -> int:
    """Run ``tabulae stress`` from parsed arguments; print progress and the report."""
    connection_string = (
        args.connection_string or os.environ.get(CONNECTION_STRING_ENV) or DEFAULT_CONNECTION_STRING
    )
    try:
        weights = [float(part) for part in args.mix.split(",")]
        if len(weights) != 3 or min(weights) < 0 or sum(weights) <= 0:
            raise ValueError(args.mix)
    except ValueError:
        raise Failure(
            "InvalidArguments", "--mix takes three non-negative weights, e.g. 50,20,30", EXIT_USAGE
        ) from None
    from tabulae.tools.endpoints import check_connection_string

    check_connection_string(connection_string)
    try:
        report = run_stress(
            connection_string,
            table=args.table,
            scheme=args.scheme,
            partitions=args.partitions,
            entities=args.entities,
            duration=args.duration,
            concurrency=args.concurrency,
            target=args.target,
            peak_rate=args.peak_rate,
            range_size=args.range_size,
            mix=(weights[0], weights[1], weights[2]),
            seed=args.seed,
            keep=args.keep,
            out=sys.stdout,
        )
    except ValueError as exc:
        told = describe(exc)  # a service's refusal keeps its code (TableAlreadyExists)
        if told.code == "UnexpectedError":
            told = Failure("InvalidArguments", str(exc), EXIT_USAGE)
        raise told from None
    sys.stdout.write("\n" + render_report(report))
    return 0
