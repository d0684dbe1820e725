"""Moving entities in bulk: export to a file, import from a file, copy between two tables.

**Loading** (import and copy) reads its source in *chunks* of about ``CHUNK`` entities. A chunk
is grouped by PartitionKey (the last record of a key wins, as it would if the records were
written one by one) and cut into entity group transactions of at most 100 Insert Or Replace
operations and 4 MiB, which are sent ``concurrency`` at a time, in random order: sent in key
order they would keep all the load on one range of partitions at a time (on Azure, one partition
server: the design guide's append-only pattern). A batch answered 500 or 503
(``ServerBusy``, ``OperationTimedOut``, ``InternalError``), 408, 429, or not answered at all, is
sent again after an exponential back-off with jitter (``wire.with_retries``: 0.25 s doubling to
20 s, 10 tries); any other refusal stops the load and names the record.

**Resuming.** Only when every batch of a chunk is acknowledged is the chunk's end recorded in the
*resume file*: the source position after the chunk (the byte offset and record count of the
input file, or the continuation keys of the source table) and the entities loaded so far,
written to a temporary file, fsynced, and renamed over the old one, so the file always holds a
whole, acknowledged position. A load that is interrupted, however (Ctrl-C, a kill, a crash, a
lost connection), leaves the position of its last complete chunk; run the same command again and
it starts there. Nothing is lost: a record past that position is sent again. Nothing is
duplicated: every operation is an upsert keyed by PartitionKey and RowKey, so sending a record
again writes the same entity again; chunks are loaded one after the other, so a later record of
a key is never overtaken by an earlier one. The resume file names its source and destination
and is refused for any other; it is deleted when the load completes.

**Exporting** streams Query Entities pages (1,000 entities each, the next page fetched while the
current one is written) into the file, in the service's JSON form, so nothing is converted.
"""

from __future__ import annotations

import os
import queue
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from azure.core.exceptions import ServiceRequestError, ServiceResponseError

from tabulae.tools.formats import upsert_body
from tabulae.tools.progress import Meter
from tabulae.tools.wire import BATCH_BYTES, BATCH_OPERATIONS, Page, ServiceError, TableWire, with_retries

CHUNK = 10_000  # entities per acknowledged step of a load

Record = tuple[dict[str, Any], str]  # an entity and where it came from ("line 12", "row 3")


class ResumeMismatch(Exception):
    """A resume file that belongs to another source or destination."""


class LoadFailed(Exception):
    """A record the service refused for good; the message names the record and the error."""


# ------------------------------------------------------------------------------ resume file


@dataclass(frozen=True, slots=True)
class ResumeFile:
    path: Path
    identity: dict[str, Any]  # what source and destination the position belongs to

    def load(self) -> dict[str, Any] | None:
        """The recorded position, or ``None`` if there is none; refused if it is another load's."""
        try:
            data = orjson.loads(self.path.read_bytes())
        except FileNotFoundError:
            return None
        except orjson.JSONDecodeError:
            raise ResumeMismatch(f"{self.path} is not a resume file") from None
        if data.get("identity") != self.identity:
            raise ResumeMismatch(
                f"{self.path} records another load ({data.get('identity')}); "
                "delete it, or pass --restart to start over"
            )
        position: dict[str, Any] = data["position"]
        return position

    def save(self, position: dict[str, Any]) -> None:
        temporary = self.path.with_name(self.path.name + ".tmp")
        with open(temporary, "wb") as handle:
            handle.write(orjson.dumps({"identity": self.identity, "position": position}))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.path)
        directory = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


# ---------------------------------------------------------------------------------- loading


def batches(records: list[Record]) -> list[list[tuple[str, str, bytes, str]]]:
    """A chunk's records as entity group transactions: one partition each, the last record of a
    key winning, at most 100 operations and ``BATCH_BYTES`` of bodies."""
    partitions: dict[str, dict[str, tuple[str, str, bytes, str]]] = {}
    for entity, where in records:
        pk, rk, body = upsert_body(entity, where)
        partitions.setdefault(pk, {})[rk] = (pk, rk, body, where)
    groups = []
    for rows in partitions.values():
        group: list[tuple[str, str, bytes, str]] = []
        size = 0
        for row in rows.values():
            if group and (len(group) == BATCH_OPERATIONS or size + len(row[2]) > BATCH_BYTES):
                groups.append(group)
                group, size = [], 0
            group.append(row)
            size += len(row[2]) + 300
        if group:
            groups.append(group)
    random.shuffle(groups)  # keys in order would walk one range partition at a time, as in Azure's
    return groups


def send_batch(
    wire: TableWire, group: list[tuple[str, str, bytes, str]], meter: Meter, sleep: Callable[[float], None]
) -> int:
    """Send one batch until it is acknowledged, retrying transient failures with back-off (a
    batch of upserts is idempotent); a refusal for good names the record the service refused."""
    bodies = [(pk, rk, body) for pk, rk, body, _ in group]
    try:
        with_retries(lambda: wire.upsert_batch(bodies), meter.retried, sleep)
    except ServiceError as error:
        index = error.index
        where = group[index][3] if index is not None and index < len(group) else None
        named = f"{where}: " if where else f"{group[0][3]} (a batch of {len(group)}): "
        raise LoadFailed(f"{named}{error.code or error.status}: {error.message}") from None
    except (ServiceRequestError, ServiceResponseError) as error:
        raise LoadFailed(f"{group[0][3]}: no answer from the service ({error})") from None
    return len(group)


def load(
    wire: TableWire,
    chunks: Iterable[tuple[list[Record], dict[str, Any]]],
    meter: Meter,
    *,
    resume: ResumeFile | None,
    concurrency: int = 4,
    loaded: int = 0,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Load ``(records, position after them)`` chunks; returns the entities loaded in all (with
    ``loaded`` from before a resume). The position is saved after each acknowledged chunk."""
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="load") as pool:
        for records, position in chunks:
            futures: list[Future[int]] = [
                pool.submit(send_batch, wire, group, meter, sleep) for group in batches(records)
            ]
            done, pending = wait(futures, return_when=FIRST_EXCEPTION)
            for future in done:
                if future.exception() is not None:
                    for other in pending:
                        other.cancel()
                    wait(pending)
                    raise future.exception()  # type: ignore[misc]
            loaded += len(records)
            if resume is not None:
                resume.save({**position, "loaded": loaded})
            meter.advance(len(records), position.get("offset"))
    return loaded


def file_chunks(
    records: Iterator[tuple[int, int, dict[str, Any]]], label: str, chunk: int = CHUNK
) -> Iterator[tuple[list[Record], dict[str, Any]]]:
    """Chunks of a file's records, each with the file position after it (byte offset, and the
    number of records before it, which is how a CSV file is resumed)."""
    batch: list[Record] = []
    offset = count = 0
    for offset, count, entity in records:
        batch.append((entity, f"{label} {count}"))
        if len(batch) >= chunk:
            yield batch, {"offset": offset, "records": count}
            batch = []
    if batch:
        yield batch, {"offset": offset, "records": count}


def table_chunks(pages: Iterator[Page], chunk: int = CHUNK) -> Iterator[tuple[list[Record], dict[str, Any]]]:
    """Chunks of a source table's pages, each with the continuation after it (``None``: the end)."""
    batch: list[Record] = []
    for page in pages:
        batch.extend(
            (entity, f"source entity ({entity.get('PartitionKey')!r}, {entity.get('RowKey')!r})")
            for entity in page.entities
        )
        if len(batch) >= chunk or page.next_keys is None:
            yield batch, {"next": list(page.next_keys) if page.next_keys else None}
            batch = []


# -------------------------------------------------------------------------------- exporting


def prefetched(pages: Iterator[Page], depth: int = 2) -> Iterator[Page]:
    """``pages``, the next ones fetched in a thread while the caller works on the current one."""
    box: queue.Queue[Page | BaseException | None] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def fetch() -> None:
        try:
            for page in pages:
                if stop.is_set():
                    return
                box.put(page)
        except BaseException as error:  # handed to the consumer, which raises it
            box.put(error)
            return
        box.put(None)

    worker = threading.Thread(target=fetch, name="prefetch", daemon=True)
    worker.start()
    try:
        while True:
            item = box.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        while worker.is_alive():  # unblock a fetcher waiting on a full queue
            try:
                box.get_nowait()
            except queue.Empty:
                worker.join(0.05)


def export(pages: Iterator[Page], write: Callable[[list[dict[str, Any]]], None], meter: Meter) -> int:
    """Write every page's entities; returns how many."""
    for page in prefetched(pages):
        write(page.entities)
        meter.advance(len(page.entities))
    return meter.entities


def count(wire: TableWire) -> int:
    """The entities of a table, counted with a keys-only query."""
    return sum(len(page.entities) for page in wire.pages(select="RowKey"))
