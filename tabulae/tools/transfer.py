"""Moving entities in bulk: the sources of a load, the resume file, export, counting.

A load (import, copy) reads *items* from a source, each with the source position that reads it
again, and hands them to :class:`tabulae.tools.loader.Loader`, which batches, sends and records
the watermark in the :class:`ResumeFile`. A file's position is its byte offset and record number
(a CSV file is resumed by record number: a quoted cell may hold line breaks); a table's is the
continuation of the page an entity came on.

**Exporting** streams Query Entities pages (1,000 entities each, the next page fetched while the
current one is written) into the file, in the service's JSON form, so nothing is converted.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tabulae.tools.failures import EXIT_USAGE, Failure
from tabulae.tools.formats import upsert_body
from tabulae.tools.loader import Item
from tabulae.tools.progress import Meter
from tabulae.tools.wire import Page, TableWire


class ResumeMismatch(Failure):
    """A resume file that belongs to another source or destination."""

    def __init__(self, message: str) -> None:
        super().__init__("ResumeMismatch", message, EXIT_USAGE)


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


# ---------------------------------------------------------------------------------- sources


class FileSource:
    """The records of a file as items, from a resume position (``offset``, ``records``)."""

    def __init__(
        self, records: Iterator[tuple[int, int, dict[str, Any]]], label: str, offset: int, seq: int
    ) -> None:
        self.records = records
        self.label = label
        self.offset = offset
        self.seq = seq

    def items(self) -> Iterator[Item]:
        for after, number, entity in self.records:
            where = f"{self.label} {number}"
            pk, rk, body = upsert_body(entity, where)
            yield Item(self.seq, {"offset": self.offset, "records": self.seq}, pk, rk, body, where)
            self.offset = after
            self.seq += 1

    def end(self) -> dict[str, Any]:
        return {"offset": self.offset, "records": self.seq}


class TableSource:
    """A table's entities as items, page by page from a continuation (``next``, ``records``)."""

    def __init__(self, pages: Iterator[Page], start: list[str] | None, seq: int) -> None:
        self.pages = pages
        self.start = start
        self.seq = seq

    def items(self) -> Iterator[Item]:
        for page in self.pages:
            position = {"next": self.start, "records": self.seq}
            for entity in page.entities:
                where = f"source entity ({entity.get('PartitionKey')!r}, {entity.get('RowKey')!r})"
                pk, rk, body = upsert_body(entity, where)
                yield Item(self.seq, position, pk, rk, body, where)
                self.seq += 1
            self.start = list(page.next_keys) if page.next_keys else None

    def end(self) -> dict[str, Any]:
        return {"done": True, "records": self.seq}


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
