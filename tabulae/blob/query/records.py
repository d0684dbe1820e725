"""Records in and out: delimited text and JSON read from the blob's text as it streams, and the
result rows written in the request's output format.

Delimited text (``DelimitedTextConfiguration``): fields split by the column separator, records
by the record separator; a field that opens with the quote is quoted until the next lone quote
(a doubled quote is one quote character); the escape character takes the next character as it
is. With ``\\n`` as the record separator a ``\\r`` before it belongs to the separator, so Windows
line ends read as Unix ones. JSON (``JsonTextConfiguration``): a sequence of JSON values,
separated by white space or the record separator or nothing at all.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tabulae.blob.query.evaluate import MISSING, Columns, QueryError, Record, text
from tabulae.blob.query.sql import Name

MAX_RECORD = 4 * 1024 * 1024  # characters one record may hold before the query gives up on it
SPLIT_WINDOW = 64 * 1024  # characters of plain records split in one go


@dataclass(frozen=True, slots=True)
class Delimited:
    """A ``DelimitedTextConfiguration``: the defaults are Azure's (comma, double quote, newline)."""

    column: str = ","
    quote: str = '"'
    record: str = "\n"
    escape: str = ""
    headers: bool = False


@dataclass(frozen=True, slots=True)
class JsonLines:
    """A ``JsonTextConfiguration``."""

    record: str = "\n"


class DelimitedReader:
    """Records of delimited text fed in pieces; each comes with the byte offset it starts at."""

    def __init__(self, config: Delimited) -> None:
        self.config = config
        self.buffer = ""
        self.offset = 0  # bytes of the blob before ``buffer``
        self.columns: Columns | None = None
        self.header_pending = config.headers
        specials = config.quote + config.escape
        self._special = (
            re.compile("|".join(re.escape(c) for c in (config.quote, config.escape) if c))
            if specials
            else None
        )

    def feed(self, piece: str, final: bool) -> Iterator[Record]:
        self.buffer += piece
        buffer = self.buffer
        ascii_only = buffer.isascii()  # then a character is a byte, and offsets need no encoding
        separator = self.config.record
        start = 0
        while start < len(buffer):
            plain = self._plain_end(buffer, start)
            if plain >= start:  # records with no quote or escape: split in one go
                for line in buffer[start:plain].split(separator):
                    offset = self.offset
                    size = len(line) + len(separator)
                    self.offset += (
                        size if ascii_only else len((line + separator).encode("utf-8", "surrogatepass"))
                    )
                    record = self._take(self._fields(line.split(self.config.column)), offset)
                    if record is not None:
                        yield record
                start = plain + len(separator)
                continue
            parsed = self._record(buffer, start, final)
            if parsed is None:
                if len(buffer) - start > MAX_RECORD:
                    raise QueryError("RecordTooLarge", "A record is larger than 4 MiB.")
                break
            fields, end = parsed
            offset = self.offset
            self.offset += (
                end - start if ascii_only else len(buffer[start:end].encode("utf-8", "surrogatepass"))
            )
            start = end
            record = self._take(fields, offset)
            if record is not None:
                yield record
        self.buffer = buffer[start:]

    def _plain_end(self, buffer: str, start: int) -> int:
        """Where the last record separator before any quote or escape character is (-1: none),
        so that every record before it reads by splitting; at most ``SPLIT_WINDOW`` characters
        on, so the pieces split at once stay small whatever the size of the blob's chunks."""
        limit = min(len(buffer), start + SPLIT_WINDOW)
        if self._special is not None:
            found = self._special.search(buffer, start)
            if found is not None:
                limit = found.start()
        return buffer.rfind(self.config.record, start, limit)

    def _take(self, fields: list[str], offset: int) -> Record | None:
        if self.header_pending:
            self.header_pending = False
            self.columns = Columns(fields)
            return None
        return Record(offset, fields, None, self.columns)

    def _record(self, buffer: str, start: int, final: bool) -> tuple[list[str], int] | None:
        config = self.config
        separator = config.record
        end = buffer.find(separator, start)
        if end < 0 and not final:
            return None  # no record ends in what has come so far, quoted or not
        stop = end if end >= 0 else len(buffer)
        segment = buffer[start:stop]
        if (not config.quote or config.quote not in segment) and (
            not config.escape or config.escape not in segment
        ):
            return self._fields(segment.split(config.column)), stop + len(separator) if end >= 0 else stop
        return self._slow(buffer, start, final)

    def _fields(self, fields: list[str]) -> list[str]:
        if self.config.record == "\n" and fields and fields[-1].endswith("\r"):
            fields[-1] = fields[-1][:-1]
        return fields

    def _slow(self, buffer: str, start: int, final: bool) -> tuple[list[str], int] | None:
        """One record read character by character: quotes and escapes may hide separators."""
        config = self.config
        quote, escape, column, separator = config.quote, config.escape, config.column, config.record
        fields: list[str] = []
        current: list[str] = []
        quoted = False
        at_start = True
        i, size = start, len(buffer)
        while i < size:
            if escape and buffer.startswith(escape, i):
                if i + len(escape) >= size:
                    break
                current.append(buffer[i + len(escape)])
                i += len(escape) + 1
                at_start = False
            elif quote and buffer.startswith(quote, i):
                if quoted:
                    after = i + len(quote)
                    if buffer.startswith(quote, after):
                        current.append(quote)
                        i = after + len(quote)
                    elif after >= size and not final:
                        break
                    else:
                        quoted = False
                        i = after
                elif at_start:
                    quoted = True
                    at_start = False
                    i += len(quote)
                else:
                    current.append(quote)
                    i += len(quote)
            elif not quoted and buffer.startswith(column, i):
                fields.append("".join(current))
                current = []
                at_start = True
                i += len(column)
            elif not quoted and buffer.startswith(separator, i):
                fields.append("".join(current))
                return self._fields(fields), i + len(separator)
            else:
                current.append(buffer[i])
                at_start = False
                i += 1
        if not final:
            return None
        if quoted:
            raise QueryError("InvalidCsvRecord", "A quoted field is not closed before the end of the blob.")
        fields.append("".join(current))
        return self._fields(fields), size


class RawJson(Record):
    """A JSON record that keeps its text: ``SELECT *`` from JSON to JSON answers each document
    as it was written (spacing, order and a trailing comma kept), as real Azure does."""

    __slots__ = ("raw",)

    def __init__(self, offset: int, value: Any, raw: str) -> None:
        super().__init__(offset, None, value, None)
        self.raw = raw


class JsonReader:
    """JSON documents fed in pieces; a document that cannot be read ends the query. As Azure's
    reader does, a comma before a closing brace or bracket is allowed. With ``keep_raw`` each
    whole document comes as a :class:`RawJson`."""

    def __init__(self, config: JsonLines, table: Sequence[Name], keep_raw: bool = False) -> None:
        self.skip = " \t\r\n" + config.record
        self.separator = config.record
        self.decoder = json.JSONDecoder()
        self.buffer = ""
        self.offset = 0
        self.line_start = 0  # where the record (line) being read starts, for a fatal error's position
        self.last_start: int | None = None  # where the last document read began
        self.table = list(table)
        self.keep_raw = keep_raw and not table

    def feed(self, piece: str, final: bool) -> Iterator[Record]:
        buffer = self.buffer + piece
        start = 0
        while True:
            begin = start
            while begin < len(buffer) and buffer[begin] in self.skip:
                begin += 1
            if begin >= len(buffer):
                start = begin
                break
            try:
                try:
                    value, end = self.decoder.raw_decode(buffer, begin)
                except json.JSONDecodeError as first:
                    value, end = self._lenient(buffer, begin, first)
            except json.JSONDecodeError as error:
                incomplete = error.pos >= len(buffer) - 1 or error.msg.startswith("Unterminated string")
                if incomplete and not final and len(buffer) - begin <= MAX_RECORD:
                    start = begin
                    break
                position = self._record_offset(buffer, begin, error.pos)
                at = self.offset + len(buffer[: error.pos].encode("utf-8", "surrogatepass"))
                raise QueryError(
                    "ParseError", _unexpected(buffer, error.pos, at, error.pos == begin), position
                ) from None
            except RecursionError:
                position = self.offset + len(buffer[:begin].encode("utf-8", "surrogatepass"))
                raise QueryError("ParseError", "The JSON record nests too deeply.", position) from None
            offset = self.offset + len(buffer[:begin].encode("utf-8", "surrogatepass"))
            self.last_start = offset
            if self.keep_raw:
                yield RawJson(offset, value, buffer[begin:end])
            else:
                for sub in _expand(value, self.table):
                    yield Record(offset, None, sub, None)
            start = end
        if self.separator:
            last = buffer.rfind(self.separator, 0, start)
            if last >= 0:
                end = last + len(self.separator)
                self.line_start = self.offset + len(buffer[:end].encode("utf-8", "surrogatepass"))
        self.offset += len(buffer[:start].encode("utf-8", "surrogatepass"))
        self.buffer = buffer[start:]

    def _record_offset(self, buffer: str, begin: int, at: int) -> int:
        """A fatal error's ``position``, "the record offset in the blob at which the error
        occurred" (Azure's schema). Text that cannot even open a document is placed where the
        last document read began: the C++ SDK's DataLakeFileClientTest.QueryWithError
        (x-ms-version 2021-04-10) has five one-line documents, the last at byte 180, then ``xx``
        at byte 229, and Azure answers position 180. Otherwise (or before any document was
        read), where the record separator last ended before the error (the JS SDK's "query
        should work with fatal error event": ``100,200,...`` read as JSON fails at byte 3,
        position 0; Java's queryFatalError: byte 0, position 0); without a separator, where the
        failing document began."""
        if at == begin and self.last_start is not None:
            return self.last_start
        if not self.separator:
            return self.offset + len(buffer[:begin].encode("utf-8", "surrogatepass"))
        last = buffer.rfind(self.separator, 0, at)
        if last < 0:
            return self.line_start
        return self.offset + len(buffer[: last + len(self.separator)].encode("utf-8", "surrogatepass"))

    def _lenient(self, text: str, begin: int, error: json.JSONDecodeError) -> tuple[Any, int]:
        """The document at ``begin`` read again with each comma that stands before a closing
        brace or bracket blanked (a space keeps every offset); the last error when it still
        does not read. Only reached when the strict reading failed."""
        for _ in range(_MAX_TRAILING_COMMAS):
            at = error.pos
            if text[at : at + 1] not in ("}", "]"):
                break
            comma = at - 1
            while comma > begin and text[comma] in " \t\r\n":
                comma -= 1
            if text[comma] != ",":
                break
            text = text[:comma] + " " + text[comma + 1 :]
            try:
                return self.decoder.raw_decode(text, begin)  # type: ignore[no-any-return]
            except json.JSONDecodeError as again:
                error = again
        raise error


_MAX_TRAILING_COMMAS = 64  # per document: beyond, the document is a parse error
_PUNCTUATION = frozenset('{}[],:"')
_TOKEN_END = re.compile(r'[\s{}\[\],:"]')


def _unexpected(text: str, at: int, byte: int, document_start: bool) -> str:
    """Azure's description of JSON it cannot read: the token found (a punctuation mark, or the
    run of characters up to the next space or mark) and its byte offset; at the start of a
    document, what may open one. As real Azure words it, trailing space included."""
    char = text[at : at + 1]
    if char in _PUNCTUATION:
        token = char
    else:
        end = _TOKEN_END.search(text, at)
        token = text[at : end.start() if end is not None else len(text)]
    expecting = "Expecting tokens '{', or '['. " if document_start else ""
    return f"Unexpected token '{token}' at [byte: {byte}]. {expecting}"


def _expand(value: Any, steps: Sequence[Name]) -> Iterator[Any]:
    """The records a FROM path picks out of one document: ``[*]`` steps into each element."""
    if not steps:
        yield value
        return
    step, rest = steps[0], steps[1:]
    if step.text == "*" and step.index is None:
        if isinstance(value, list):
            for element in value:
                yield from _expand(element, rest)
        elif value is not MISSING:
            yield from _expand(value, rest)  # BlobStorage[*]: the document itself
        return
    if step.index is not None:
        if isinstance(value, list) and step.index < len(value):
            yield from _expand(value[step.index], rest)
        return
    if isinstance(value, dict) and step.text in value:
        yield from _expand(value[step.text], rest)


# ------------------------------------------------------------------------------ output


class DelimitedWriter:
    def __init__(self, config: Delimited) -> None:
        self.config = config
        # Every character of a separator, not just the whole: a field ":" before the separator
        # "::" would otherwise read back as an empty field and ":".
        self.specials = frozenset(config.column + config.quote + config.record + "\n\r")
        plain = self.specials | set(config.escape)
        self._needs_work = re.compile("[" + "".join(re.escape(c) for c in sorted(plain)) + "]")

    def field(self, value: Any) -> str:
        """A value as one field: the escape character doubled, the quote escaped (or doubled
        without an escape character), and the field quoted when it holds a separator, quote or
        line end (escaped character by character when there is no quote character)."""
        if value.__class__ is str and self._needs_work.search(value) is None:
            return value  # the common case: nothing to quote or escape
        if value is None or value is MISSING:
            return ""
        original = text(value)
        config = self.config
        escape, quote = config.escape, config.quote
        string = original.replace(escape, escape * 2) if escape else original
        if quote:
            string = string.replace(quote, escape + quote if escape else quote * 2)
            if not self.specials.isdisjoint(original):
                return quote + string + quote
            return string
        if escape:
            string = "".join(escape + char if char in self.specials else char for char in string)
        return string

    def row(self, values: Sequence[Any]) -> str:
        config = self.config
        if (
            all(value.__class__ is str for value in values)
            and self._needs_work.search("".join(values)) is None
        ):
            return config.column.join(values) + config.record  # no field needs quoting or escaping
        field = self.field
        return config.column.join([field(value) for value in values]) + config.record

    def names(self, names: Sequence[str]) -> str:
        return self.row(names)

    def whole(self, record: Record) -> str:
        """A record of ``SELECT *``."""
        if record.fields is not None:
            return self.row(record.fields)
        value = record.value
        return self.row(list(value.values()) if isinstance(value, dict) else [value])


class JsonWriter:
    def __init__(self, config: JsonLines) -> None:
        self.separator = config.record

    def _dump(self, value: Any) -> str:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=_json_default)

    def row_named(self, pairs: Sequence[tuple[str, Any]]) -> str:
        return self._dump({name: value for name, value in pairs if value is not MISSING}) + self.separator

    def whole(self, record: Record) -> str:
        if record.__class__ is RawJson:
            return record.raw + self.separator  # type: ignore[attr-defined]
        if record.fields is not None:
            names = record.names.names if record.names is not None else []
            keys = [names[i] if i < len(names) else f"_{i + 1}" for i in range(len(record.fields))]
            return self.row_named(list(zip(keys, record.fields, strict=True)))
        return self._dump(record.value) + self.separator


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return text(value)
    return str(value)
