"""A query run over a blob's content as it streams: records read, filtered, projected or
aggregated, and the answer's Avro messages produced as they are ready.

The messages, in the order Azure sends them (recorded for the JS SDK's query tests: "progress
event" data, progress, end; "non fatal error event" data, then the error of a record that came
before the data's row, progress, end; "fatal error event" data, the error, progress, end): each
piece of result data (at most ``FLUSH_BYTES``) is followed by the error messages of the records
that failed meanwhile (non-fatal: the record is skipped) or of what ended the query (fatal),
then a progress message; at the end the last piece (empty if no data was sent yet), its errors,
a progress message and the end message. So no progress message comes before the first data
(the JS SDK's first progress event is the bytes scanned by then), an error never comes first
(the SDKs' readers take the first message before they can report one), and a small answer is
one data message however many records failed; an answer with no rows still has one (empty)
data message.
"""

from __future__ import annotations

import codecs
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

from tabulae.blob.query.avro import Framer
from tabulae.blob.query.evaluate import Compiled, QueryError, Record, RecordError, compile_select
from tabulae.blob.query.records import (
    Delimited,
    DelimitedReader,
    DelimitedWriter,
    JsonLines,
    JsonReader,
    JsonWriter,
)
from tabulae.blob.query.sql import SqlError, parse

FLUSH_BYTES = 256 * 1024

Format = Delimited | JsonLines | str  # str: "parquet" (input) or "arrow" (output)


@dataclass(frozen=True, slots=True)
class QuerySpec:
    """A ``QueryRequest``: the expression and the input and output serialisations."""

    expression: str
    input: Format = field(default_factory=Delimited)
    output: Format = field(default_factory=Delimited)
    arrow_schema: tuple[tuple[str, str, int | None, int | None], ...] = ()  # type, name, precision, scale


def prepare(spec: QuerySpec) -> Compiled:
    """The query compiled; :class:`~.sql.SqlError` when the expression is not one (or is
    ``sys.split`` over input that is not delimited text, the only kind it splits)."""
    query = compile_select(parse(spec.expression))
    if query.split is not None and not isinstance(spec.input, Delimited):
        raise SqlError("sys.split is available only for CSV-formatted data.")
    return query


_SPLIT_NAME = "_1"  # the column of sys.split's answer


class _Limit(Exception):
    """LIMIT reached: no more records are read."""


class Run:
    """The state of one query: what is written so far and what is still to be sent."""

    def __init__(self, spec: QuerySpec, query: Compiled, total: int) -> None:
        self.spec = spec
        self.query = query
        self.total = total
        self.framer = Framer()
        self.data: list[str] = []
        self.data_size = 0
        self.sent_data = False
        self.errors: list[bytes] = []  # error messages held for the next piece of data
        self.rows = 0
        self.aggregates = query.new_aggregates() if query.aggregates is not None else None
        output = spec.output
        self.writer: DelimitedWriter | JsonWriter | None
        if isinstance(output, Delimited):
            self.writer = DelimitedWriter(output)
        elif isinstance(output, JsonLines):
            self.writer = JsonWriter(output)
        else:
            self.writer = None
        self.arrow_rows: list[list[Any]] = []
        self.arrow: Any = None
        if output == "arrow":
            from tabulae.blob.query.arrow import ArrowStream

            self.arrow = ArrowStream(spec.arrow_schema)
        self.header_written = not (isinstance(output, Delimited) and output.headers)
        self.batch_start = 0  # sys.split: where the batch being measured starts
        if query.split is not None:
            self.take = self._take_split  # type: ignore[method-assign]

    # -- output
    def _emit(self, piece: str) -> None:
        self.data.append(piece)
        self.data_size += len(piece)

    @property
    def _pending(self) -> bool:
        return bool(self.data or self.arrow_rows)

    def _header(self, record: Record | None) -> None:
        if self.header_written:
            return
        self.header_written = True
        assert isinstance(self.writer, DelimitedWriter)
        if self.query.projections is not None:
            self._emit(self.writer.names([name for name, _ in self.query.projections]))
        elif self.query.split is not None:
            self._emit(self.writer.names([_SPLIT_NAME]))
        elif self.query.aggregates is not None:
            self._emit(self.writer.names([name for name, _ in self.query.aggregates]))
        elif record is not None and record.names is not None:
            self._emit(self.writer.names(record.names.names))

    def _row(self, names: list[str], values: list[Any]) -> None:
        if self.writer is None:
            self.arrow_rows.append(values)
            self.data_size += 64  # roughly: flushed as a batch with the others
        elif isinstance(self.writer, JsonWriter):
            self._emit(self.writer.row_named(list(zip(names, values, strict=True))))
        else:
            self._emit(self.writer.row(values))

    def take(self, record: Record) -> bytes | None:
        """One input record through the query; the error message of a record that fails."""
        query = self.query
        try:
            if query.where is not None and query.where(record) is not True:
                return None
            if self.aggregates is not None:
                for aggregate in self.aggregates:
                    aggregate.add(record)
                return None
            self._header(record)
            if query.projections is None:
                if self.writer is None:
                    self._row([], list(record.fields or []))
                else:
                    self._emit(self.writer.whole(record))
            else:
                names = [name for name, _ in query.projections]
                self._row(names, [evaluate(record) for _, evaluate in query.projections])
        except RecordError as error:
            return self.framer.error(False, error.name, error.description, record.offset)
        self.rows += 1
        if query.limit is not None and self.rows >= query.limit:
            raise _Limit
        return None

    def _take_split(self, record: Record) -> bytes | None:
        """``sys.split``: a batch ends before the first record that starts ``split`` bytes or
        more after the batch's start, so every batch holds whole records."""
        assert self.query.split is not None
        if record.offset - self.batch_start >= self.query.split:
            self._header(None)
            self._row([_SPLIT_NAME], [record.offset - self.batch_start])
            self.batch_start = record.offset
        return None

    def hold(self, error: bytes) -> None:
        """An error message, sent after the next piece of result data."""
        self.errors.append(error)
        self.data_size += len(error)

    def _data_and_errors(self) -> bytes:
        self.sent_data = True
        data = self.framer.data(self._result()) + b"".join(self.errors)
        self.data, self.data_size, self.errors = [], 0, []
        return data

    def piece(self, scanned: int) -> bytes:
        """The result data gathered so far, its errors, and a progress message."""
        return self._data_and_errors() + self.framer.progress(scanned, self.total)

    def last(self, scanned: int) -> bytes:
        """What is left of the result data (an empty piece when none was sent) and its errors,
        then the progress and end messages."""
        out = b""
        if self._pending or not self.sent_data or self.errors:
            out = self._data_and_errors()
        return out + self.framer.progress(scanned, self.total) + self.framer.end(self.total)

    def _result(self) -> bytes:
        if self.writer is not None:
            return "".join(self.data).encode("utf-8", "surrogatepass")
        rows, self.arrow_rows = self.arrow_rows, []
        piece: bytes = self.arrow.piece(rows)
        return piece

    def finish(self) -> None:
        if self.query.split is not None:
            self._header(None)
            if self.total > self.batch_start:
                self._row([_SPLIT_NAME], [self.total - self.batch_start])
        elif self.aggregates is not None:
            self._header(None)
            assert self.query.aggregates is not None
            names = [name for name, _ in self.query.aggregates]
            self._row(names, [aggregate.result() for aggregate in self.aggregates])
        elif not self.header_written:
            self._header(None)


def _records(spec: QuerySpec, query: Compiled) -> DelimitedReader | JsonReader:
    if isinstance(spec.input, JsonLines):
        whole = query.projections is None and query.aggregates is None and isinstance(spec.output, JsonLines)
        return JsonReader(spec.input, query.table, keep_raw=whole)
    assert isinstance(spec.input, Delimited)
    return DelimitedReader(spec.input)


async def run(
    spec: QuerySpec, query: Compiled, chunks: AsyncIterator[bytes], total: int
) -> AsyncIterator[bytes]:
    """The answer's bytes for ``query`` over the blob's ``chunks`` (``total`` bytes in all)."""
    state = Run(spec, query, total)
    framer = state.framer
    yield framer.header()
    scanned = 0
    records: AsyncGenerator[tuple[int, Iterator[Record]], None] = (
        _parquet(chunks, total) if spec.input == "parquet" else _text(_records(spec, query), chunks)
    )
    try:
        async for scanned, batch in records:
            for record in batch:
                error = state.take(record)
                if error is not None:
                    state.hold(error)
                if state.data_size >= FLUSH_BYTES:
                    yield state.piece(scanned)
        state.finish()
    except _Limit:
        pass
    except QueryError as error:
        position = error.position if error.position is not None else scanned
        state.hold(framer.error(True, error.name, error.description, position))
    except RecordError as error:  # outside a record: a fatal error after all
        state.hold(framer.error(True, error.name, error.description, scanned))
    finally:
        await records.aclose()
        close = getattr(chunks, "aclose", None)
        if close is not None:
            await close()
    yield state.last(scanned)


async def _text(
    reader: DelimitedReader | JsonReader, chunks: AsyncIterator[bytes]
) -> AsyncGenerator[tuple[int, Iterator[Record]], None]:
    """The records of each chunk of text, with the bytes read so far."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    scanned = 0
    async for chunk in chunks:
        scanned += len(chunk)
        yield scanned, reader.feed(decoder.decode(chunk), False)
    yield scanned, reader.feed(decoder.decode(b"", True), True)


async def _parquet(
    chunks: AsyncIterator[bytes], total: int
) -> AsyncGenerator[tuple[int, Iterator[Record]], None]:
    from tabulae.blob.query.parquet import parquet_records

    async for record in parquet_records(chunks):
        yield total, iter((record,))
