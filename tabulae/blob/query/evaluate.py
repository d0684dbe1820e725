"""A parsed :class:`~.sql.Select` compiled once into Python closures, then run per record.

Values are ``None`` (SQL NULL), :data:`MISSING` (a JSON field the record does not have), ``int``,
``float``, ``str``, ``bool`` and aware ``datetime``. CSV fields are strings; an operator whose
other side is a number, timestamp or boolean converts them, as T-SQL's data type precedence
does, and a string that does not convert is an error of that record alone (a non-fatal error
message; the record is skipped). A comparison with NULL or MISSING is unknown, and WHERE keeps
only records for which it is true.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from tabulae.blob.query.sql import AGGREGATES, Binary, Call, Literal, Name, Path, Select, SqlError, Unary


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class RecordError(Exception):
    """An error of one record: reported as a non-fatal error message, the record skipped."""

    def __init__(self, name: str, description: str) -> None:
        super().__init__(description)
        self.name = name
        self.description = description


def conversion_error() -> RecordError:
    """A value that does not convert to the type an operator, function or CAST needs: Azure names
    it ``InvalidTypeConversion`` with this one description, whatever the value (the SDKs' tests
    against real Azure assert both)."""
    return RecordError("InvalidTypeConversion", "Invalid type conversion.")


def missing_column(position: int) -> RecordError:
    """A record too short for the column the query reads, in Azure's words: the ordinal it
    names counts from 0 (``_2`` is ordinal 1), as recorded for Microsoft's Java test
    queryNonFatalError."""
    return RecordError("InvalidColumnOrdinal", f"Column ordinal {position} does not exist in row.")


class QueryError(Exception):
    """An error that ends the query: reported as a fatal error message (at ``position``, the
    blob offset, when known)."""

    def __init__(self, name: str, description: str, position: int | None = None) -> None:
        super().__init__(description)
        self.name = name
        self.description = description
        self.position = position


class Record:
    """One input record: ``fields`` by position (CSV, Parquet) and/or ``values`` by name."""

    __slots__ = ("fields", "names", "offset", "value")

    def __init__(self, offset: int, fields: Sequence[Any] | None, value: Any, names: Columns | None) -> None:
        self.offset = offset
        self.fields = fields
        self.value = value  # a JSON document, or None for a CSV record
        self.names = names


class Columns:
    """A CSV header (or a Parquet schema): each column's position by exact and by folded name."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(names)
        self.exact = {name: i for i, name in reversed(list(enumerate(names)))}
        self.folded = {name.casefold(): i for i, name in reversed(list(enumerate(names)))}

    def find(self, step: Name) -> int | None:
        return self.exact.get(step.text) if step.exact else self.folded.get(step.text.casefold())


Evaluator = Callable[[Record], Any]
_ORDINAL = re.compile(r"_([1-9][0-9]*)\Z")


def _child(value: Any, step: Name) -> Any:
    if step.index is not None:
        if isinstance(value, list) and step.index < len(value):
            return value[step.index]
        return MISSING
    if not isinstance(value, dict):
        return MISSING
    if step.exact:
        return value.get(step.text, MISSING)
    if step.text in value:
        return value[step.text]
    folded = step.text.casefold()
    for key, child in value.items():
        if key.casefold() == folded:
            return child
    return MISSING


def _path(node: Path) -> Evaluator:
    first, rest = node.steps[0], node.steps[1:]
    ordinal = None if first.exact else _ORDINAL.match(first.text)

    if ordinal is not None and not rest:
        position = int(ordinal.group(1)) - 1

        def column(record: Record) -> Any:  # the common case, _N of a CSV record, kept short
            fields = record.fields
            if fields is None:
                return _child(record.value, first)
            if position < len(fields):
                return fields[position]
            raise missing_column(position)

        return column

    def lookup(record: Record) -> Any:
        fields = record.fields
        if fields is not None:
            if ordinal is not None:
                position = int(ordinal.group(1)) - 1
            else:
                found = None if record.names is None else record.names.find(first)
                if found is None:
                    if record.value is None:
                        raise QueryError("InvalidColumnName", f"The column {first.text!r} does not exist.")
                    return _descend(_child(record.value, first), rest)
                position = found
            if position >= len(fields):
                raise missing_column(position)
            return _descend(fields[position], rest)
        return _descend(_child(record.value, first), rest)

    return lookup


def _descend(value: Any, steps: Sequence[Name]) -> Any:
    for step in steps:
        value = _child(value, step)
    return value


# ------------------------------------------------------------------------------ conversions


def _number(value: Any) -> int | float:
    if isinstance(value, bool):
        raise conversion_error()
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            pass
        try:
            return float(text)
        except ValueError:
            raise conversion_error() from None
    raise conversion_error()


def _int(value: Any) -> int:
    number = _number(value)
    if isinstance(number, float):
        if math.isnan(number) or math.isinf(number):
            raise conversion_error()
        return int(number)
    return number


def timestamp(value: Any) -> datetime:
    """An ISO 8601 point in time (a date alone, ``2007T``, offsets, fractions); UTC when no offset."""
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str):
        raise conversion_error()
    text = value.strip()
    if text.endswith("T"):
        text = text[:-1]
    if re.fullmatch(r"\d{4}", text):
        text += "-01-01"
    elif re.fullmatch(r"\d{4}-\d{2}", text):
        text += "-01"
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise conversion_error() from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    if isinstance(value, (int, float)):
        return value != 0
    raise conversion_error()


def text(value: Any) -> str:
    """A value as the text CSV output writes and string functions see."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return repr(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return str(value)


def cast(value: Any, kind: str) -> Any:
    if value is None or value is MISSING:
        return value
    if kind in ("INT", "INTEGER"):
        return _int(value)
    if kind in ("FLOAT", "DOUBLE", "DECIMAL", "NUMERIC"):
        return float(_number(value))
    if kind in ("STRING", "VARCHAR"):
        return text(value)
    if kind == "TIMESTAMP":
        return timestamp(value)
    return _bool(value)


def _align(left: Any, right: Any) -> tuple[Any, Any]:
    """Both sides of a comparison in one type: the one of higher precedence."""
    for kind in (datetime, float, int, bool):
        if isinstance(left, kind) and not isinstance(right, kind):
            return left, _convert_like(left, right)
        if isinstance(right, kind) and not isinstance(left, kind):
            return _convert_like(right, left), right
    return left, right


def _convert_like(model: Any, value: Any) -> Any:
    if isinstance(model, datetime):
        return timestamp(value)
    if isinstance(model, bool):
        return _bool(value)
    return _number(value)


def _unknown(*values: Any) -> bool:
    return any(value is None or value is MISSING for value in values)


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": lambda a, b: a == b,
    "<>": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _comparer(op: str) -> Callable[[Any, Any], bool | None]:
    """The comparison ``op`` of two values: unknown with NULL or MISSING, else in one type."""
    test = _COMPARE[op]

    def compare_values(left: Any, right: Any) -> bool | None:
        if left is None or left is MISSING or right is None or right is MISSING:
            return None
        if left.__class__ is not right.__class__:
            left, right = _align(left, right)
        try:
            return test(left, right)
        except TypeError:
            raise RecordError("InvalidComparison", f"{left!r} and {right!r} cannot be compared.") from None

    return compare_values


_COMPARERS = {op: _comparer(op) for op in _COMPARE}


def compare(op: str, left: Any, right: Any) -> bool | None:
    return _COMPARERS[op](left, right)


def _arithmetic(op: str, left: Any, right: Any) -> Any:
    if _unknown(left, right):
        return None
    if op == "||":
        return text(left) + text(right)
    if isinstance(left, datetime) and op in "+-":
        days = timedelta(days=_number(right))
        return left + days if op == "+" else left - days
    a, b = _number(left), _number(right)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if b == 0:
        raise RecordError("DivideByZero", "Division by zero.")
    if op == "/":
        return a // b if isinstance(a, int) and isinstance(b, int) else a / b
    return math.fmod(a, b) if isinstance(a, float) or isinstance(b, float) else int(math.fmod(a, b))


def like(value: str, pattern: str, escape: str | None) -> bool:
    return _like_pattern(pattern, escape).fullmatch(value) is not None


def _like_pattern(pattern: str, escape: str | None) -> re.Pattern[str]:
    """A LIKE pattern as a regular expression (``%`` any run, ``_`` one character, the escape
    character taking the next one as it is)."""
    out = []
    chars = iter(pattern)
    for char in chars:
        if escape is not None and char == escape:
            out.append(re.escape(next(chars, "")))
        elif char == "%":
            out.append(".*")
        elif char == "_":
            out.append(".")
        else:
            out.append(re.escape(char))
    return re.compile("".join(out), re.DOTALL)


def _logic(op: str, left: Any, right: Any) -> bool | None:
    a = None if _unknown(left) else _bool(left)
    b = None if _unknown(right) else _bool(right)
    if op == "AND":
        if a is False or b is False:
            return False
        return None if a is None or b is None else True
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


# ------------------------------------------------------------------------------ functions

_PARTS = ("YEAR", "MONTH", "DAY", "HOUR", "MINUTE", "SECOND")


def _date_add(part: str, quantity: Any, moment: Any) -> Any:
    if _unknown(quantity, moment):
        return None
    when, amount = timestamp(moment), _int(quantity)
    if part in ("YEAR", "MONTH"):
        months = when.month - 1 + amount * (12 if part == "YEAR" else 1)
        year, month = when.year + months // 12, months % 12 + 1
        day = min(
            when.day, [31, 29 if _leap(year) else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
        )
        return when.replace(year=year, month=month, day=day)
    unit = {"DAY": "days", "HOUR": "hours", "MINUTE": "minutes", "SECOND": "seconds"}.get(part)
    if unit is None:
        raise QueryError("InvalidDatePart", f"DATE_ADD does not know the date part {part!r}.")
    return when + timedelta(**{unit: amount})


def _leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def _date_diff(part: str, start: Any, end: Any) -> Any:
    if _unknown(start, end):
        return None
    a, b = timestamp(start), timestamp(end)
    if part == "YEAR":
        return b.year - a.year
    if part == "MONTH":
        return (b.year - a.year) * 12 + b.month - a.month
    seconds = {"DAY": 86400, "HOUR": 3600, "MINUTE": 60, "SECOND": 1}.get(part)
    if seconds is None:
        raise QueryError("InvalidDatePart", f"DATE_DIFF does not know the date part {part!r}.")
    return int((b - a).total_seconds() // seconds)


def _extract(part: str, moment: Any) -> Any:
    if _unknown(moment):
        return None
    when = timestamp(moment)
    if part in _PARTS:
        return getattr(when, part.lower())
    offset = when.utcoffset() or timedelta()
    minutes = int(offset.total_seconds() // 60)
    if part == "TIMEZONE_HOUR":
        return int(minutes / 60)
    if part == "TIMEZONE_MINUTE":
        return int(math.copysign(abs(minutes) % 60, minutes))
    raise QueryError("InvalidDatePart", f"EXTRACT does not know the date part {part!r}.")


_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
           "October", "November", "December"]  # fmt: skip
_FORMAT = re.compile(r"y+|M+|d+|a|h+|H+|m+|s+|S+|X+|x+|'[^']*'|.", re.DOTALL)


def _to_string(moment: Any, pattern: Any) -> Any:
    if _unknown(moment, pattern):
        return None
    when, out = timestamp(moment), []
    for piece in _FORMAT.findall(text(pattern)):
        out.append(_format_piece(when, piece))
    return "".join(out)


def _format_piece(when: datetime, piece: str) -> str:
    head, size = piece[0], len(piece)
    offset = int((when.utcoffset() or timedelta()).total_seconds() // 60)
    sign, hours, minutes = "+" if offset >= 0 else "-", abs(offset) // 60, abs(offset) % 60
    if head == "y":
        return f"{when.year % 100:02d}" if size == 2 else f"{when.year:04d}"
    if head == "M":
        if size >= 4:
            return _MONTHS[when.month - 1]
        if size == 3:
            return _MONTHS[when.month - 1][:3].upper()
        return f"{when.month:0{size}d}"
    if head == "d":
        return f"{when.day:0{size}d}"
    if head == "a":
        return "AM" if when.hour < 12 else "PM"
    if head == "h":
        return f"{(when.hour % 12) or 12:0{size}d}"
    if head == "H":
        return f"{when.hour:0{size}d}"
    if head == "m":
        return f"{when.minute:0{size}d}"
    if head == "s":
        return f"{when.second:0{size}d}"
    if head == "S":
        return f"{when.microsecond:06d}"[: min(size, 6)]
    if head in "Xx":
        if head == "X" and offset == 0:
            return "Z"
        if size == 1:
            return f"{sign}{hours:02d}" if head == "X" else str(hours)
        if size in (3, 5):
            return f"{sign}{hours:02d}:{minutes:02d}"
        return f"{sign}{hours:02d}{minutes:02d}"
    if head == "'" and size > 1:
        return piece[1:-1]
    return piece


def _substring(value: Any, start: Any, length: Any = None) -> Any:
    if _unknown(value, start):
        return None
    string = text(value)
    begin = max(_int(start), 0)  # zero-based, as the reference's example shows
    if length is None or length is MISSING:
        return string[begin:]
    return string[begin : begin + max(_int(length), 0)]


def _trim(where: str, value: Any, chars: Any = " ") -> Any:
    if _unknown(value, chars):
        return None
    string, strip = text(value), text(chars)
    if where == "LEADING":
        return string.lstrip(strip)
    if where == "TRAILING":
        return string.rstrip(strip)
    return string.strip(strip)


def _nullable(function: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        return None if _unknown(*args) else function(*args)

    return call


_SCALARS: dict[str, tuple[int, int, Callable[..., Any]]] = {  # name: (least, most arguments, function)
    "LOWER": (1, 1, _nullable(lambda v: text(v).lower())),
    "UPPER": (1, 1, _nullable(lambda v: text(v).upper())),
    "CHAR_LENGTH": (1, 1, _nullable(lambda v: len(text(v)))),
    "CHARACTER_LENGTH": (1, 1, _nullable(lambda v: len(text(v)))),
    "SUBSTRING": (2, 3, _substring),
    "TO_TIMESTAMP": (1, 1, _nullable(timestamp)),
    "TO_STRING": (2, 2, _to_string),
    "UTCNOW": (0, 0, lambda: datetime.now(UTC)),
    "NULLIF": (2, 2, lambda a, b: None if compare("=", a, b) else a),
    "COALESCE": (1, 64, lambda *values: next((v for v in values if not _unknown(v)), None)),
}


def _fixed_pattern(nodes: Sequence[object]) -> re.Pattern[str] | None:
    """LIKE's pattern compiled now when it and its escape character are literals (a NULL one
    leaves it to the record: the answer is unknown)."""
    if not all(isinstance(node, Literal) and node.value is not None for node in nodes):
        return None
    pattern, *rest = [text(node.value) for node in nodes if isinstance(node, Literal)]
    return _like_pattern(pattern, rest[0] if rest else None)


def _call(node: Call) -> Evaluator:
    args = [compile_expression(arg) for arg in node.args]
    name = node.name
    if name == "CAST":
        inner, kind = args[0], node.option
        return lambda record: cast(inner(record), kind)
    if name == "LIKE":
        value, pattern = args[0], args[1]
        escape = args[2] if len(args) > 2 else None
        fixed = _fixed_pattern(node.args[1:])
        if fixed is not None:  # the common case: a literal pattern, translated once per query
            match = fixed.fullmatch

            def matches_fixed(record: Record) -> Any:
                subject = value(record)
                if subject is None or subject is MISSING:
                    return None
                return match(subject if subject.__class__ is str else text(subject)) is not None

            return matches_fixed

        def matches(record: Record) -> Any:
            subject, shape = value(record), pattern(record)
            mark = None if escape is None else escape(record)
            if _unknown(subject, shape):
                return None
            return like(text(subject), text(shape), None if mark is None else text(mark))

        return matches
    if name == "IN":
        subject, options = args[0], args[1:]

        def within(record: Record) -> Any:
            value = subject(record)
            results = [compare("=", value, option(record)) for option in options]
            if True in results:
                return True
            return None if None in results else False

        return within
    if name == "BETWEEN":
        subject, low, high = args

        def between(record: Record) -> Any:
            value = subject(record)
            return _logic("AND", compare(">=", value, low(record)), compare("<=", value, high(record)))

        return between
    if name == "TRIM":
        where = node.option
        return lambda record: _trim(where, *(arg(record) for arg in args))
    if name == "EXTRACT":
        part, inner = node.option, args[0]
        return lambda record: _extract(part, inner(record))
    if name in ("DATE_ADD", "DATE_DIFF"):
        if len(args) != 2:
            raise SqlError(f"{name} takes a date part and two arguments.")
        part, first, second = node.option, args[0], args[1]
        function = _date_add if name == "DATE_ADD" else _date_diff
        return lambda record: function(part, first(record), second(record))
    if name in AGGREGATES:
        raise SqlError(f"{name} is an aggregate: it may only stand alone in the SELECT list.")
    known = _SCALARS.get(name)
    if known is None:
        raise SqlError(f"Unknown function {name}.")
    least, most, function = known
    if not least <= len(args) <= most:
        raise SqlError(f"{name} takes {least} to {most} arguments, not {len(args)}.")
    return lambda record: function(*(arg(record) for arg in args))


def compile_expression(node: object) -> Evaluator:
    """``node`` as a function of a record."""
    if isinstance(node, Literal):
        value = node.value
        return lambda record: value
    if isinstance(node, Path):
        return _path(node)
    if isinstance(node, Unary):
        inner = compile_expression(node.operand)
        if node.op == "NOT":
            return lambda record: None if _unknown(v := inner(record)) else not _bool(v)
        if node.op == "IS NULL":
            return lambda record: inner(record) is None or inner(record) is MISSING
        if node.op == "IS MISSING":
            return lambda record: inner(record) is MISSING
        return lambda record: None if _unknown(v := inner(record)) else -_number(v)
    if isinstance(node, Binary):
        left, right, op = compile_expression(node.left), compile_expression(node.right), node.op
        if op in ("AND", "OR"):
            return lambda record: _logic(op, left(record), right(record))
        if op in _COMPARE:
            comparison = _COMPARERS[op]
            return lambda record: comparison(left(record), right(record))
        return lambda record: _arithmetic(op, left(record), right(record))
    if isinstance(node, Call):
        return _call(node)
    raise SqlError(f"Unexpected expression {node!r}.")


# ------------------------------------------------------------------------------ aggregates


@dataclass(slots=True)
class Aggregate:
    """One aggregate expression's running state over the records that pass WHERE."""

    name: str
    argument: Evaluator | None  # None: COUNT(*)
    count: int = 0
    total: Any = 0
    best: Any = None

    def add(self, record: Record) -> None:
        if self.argument is None:
            self.count += 1
            return
        value = self.argument(record)
        if _unknown(value):
            return
        self.count += 1
        if self.name in ("SUM", "AVG"):
            self.total += _number(value)
        elif self.name in ("MIN", "MAX"):
            if isinstance(value, str):
                with contextlib.suppress(RecordError):
                    value = _number(value)
            if self.best is None or compare("<" if self.name == "MIN" else ">", value, self.best):
                self.best = value

    def result(self) -> Any:
        if self.name == "COUNT":
            return self.count
        if self.count == 0:
            return None
        if self.name == "SUM":
            return self.total
        if self.name == "AVG":
            return self.total / self.count
        return self.best


@dataclass(frozen=True, slots=True)
class Compiled:
    """A query ready to run: its filter, its projections (or aggregates) and their names."""

    where: Evaluator | None
    projections: list[tuple[str, Evaluator]] | None  # None: SELECT *
    aggregates: list[tuple[str, Call]] | None
    limit: int | None
    table: tuple[Name, ...]
    split: int | None = None  # sys.split's batch size

    def new_aggregates(self) -> list[Aggregate]:
        assert self.aggregates is not None
        return [
            Aggregate(call.name, None if call.star else compile_expression(call.args[0]))
            for _, call in self.aggregates
        ]


def compile_select(select: Select) -> Compiled:
    """The query's closures, compiled once; :class:`SqlError` for a call the dialect lacks."""
    where = None if select.where is None else compile_expression(select.where)
    if select.items is None:
        return Compiled(where, None, None, select.limit, select.table, select.split)
    names = [_item_name(item.alias, item.expr, i) for i, item in enumerate(select.items, 1)]
    if select.aggregates:
        calls = []
        for name, item in zip(names, select.items, strict=True):
            call = item.expr
            assert isinstance(call, Call)
            if not call.star and len(call.args) != 1:
                raise SqlError(f"{call.name} takes one argument.")
            calls.append((name, call))
        return Compiled(where, None, calls, select.limit, select.table)
    projections = [
        (name, compile_expression(item.expr)) for name, item in zip(names, select.items, strict=True)
    ]
    return Compiled(where, projections, None, select.limit, select.table)


def _item_name(alias: str | None, expr: object, position: int) -> str:
    if alias is not None:
        return alias
    if isinstance(expr, Path) and expr.steps[-1].index is None:
        return expr.steps[-1].text
    return f"_{position}"
