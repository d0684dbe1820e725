"""The query engine's pure parts: the dialect's grammar and its errors, evaluation (three-valued
logic, conversions, functions), and delimited text written then read back (a property test over
separators, quotes and escapes, fed in arbitrary pieces)."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from typing import Any

import fastavro
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tabulae.blob.query.evaluate import MISSING, Columns, Record, compile_expression, compile_select
from tabulae.blob.query.records import Delimited, DelimitedReader, DelimitedWriter, JsonLines
from tabulae.blob.query.run import QuerySpec, prepare, run
from tabulae.blob.query.sql import Call, Path, SqlError, parse


def value(
    expression: str, fields: list[str] | None = None, document: Any = None, header: list[str] | None = None
) -> Any:
    select = parse(f"SELECT {expression} FROM BlobStorage")
    assert select.items is not None
    record = Record(0, fields, document, Columns(header) if header else None)
    return compile_expression(select.items[0].expr)(record)


def test_grammar() -> None:
    select = parse('select a.b[2], "Quoted Name" AS q, c d FROM BlobStorage[*].x[*] where _1 > 2 limit 5;')
    assert select.limit == 5 and select.items is not None
    assert [item.alias for item in select.items] == [None, "q", "d"]
    first = select.items[0].expr
    assert isinstance(first, Path) and [s.index for s in first.steps] == [None, None, 2]
    counted = parse("SELECT COUNT(*), max(a) FROM BlobStorage").items
    assert counted is not None and isinstance(counted[0].expr, Call) and counted[0].expr.star
    assert [step.text for step in select.table] == ["*", "x", "*"]
    assert parse("SELECT * FROM DataLakeStorage").items is None


def test_top_average_and_split_grammar() -> None:
    assert parse("SELECT TOP 5 a FROM BlobStorage LIMIT 9").limit == 5
    assert parse("SELECT top 5 * FROM BlobStorage").limit == 5
    column = parse("SELECT top, Top AS t FROM BlobStorage").items  # TOP only before a number
    assert column is not None and [item.alias for item in column] == [None, "t"]
    averaged = parse("SELECT average(a) FROM BlobStorage").items
    assert averaged is not None and isinstance(averaged[0].expr, Call) and averaged[0].expr.name == "AVG"
    split = parse("SELECT Sys.Split(10485760) FROM BlobStorage;")
    assert (split.split, split.items, split.where) == (10485760, None, None)
    for refused in (
        "SELECT sys.split(10485759) FROM BlobStorage",
        "SELECT sys.split(10485760) FROM BlobStorage LIMIT 1",
        "SELECT sys.split(x) FROM BlobStorage",
    ):
        with pytest.raises(SqlError):
            parse(refused)
    with pytest.raises(SqlError):  # delimited text only
        prepare(QuerySpec("SELECT sys.split(10485760) FROM BlobStorage", JsonLines()))


@pytest.mark.parametrize(
    "expression",
    [
        "",
        "SELECT",
        "SELECT * FROM",
        "SELECT * FROM Other",
        "SELECT * FROM BlobStorage WHERE",
        "SELECT * FROM BlobStorage LIMIT x",
        "SELECT a FROM BlobStorage extra words",
        "SELECT 'open FROM BlobStorage",
        "SELECT a, COUNT(*) FROM BlobStorage",
        "SELECT CAST(a AS BLOB) FROM BlobStorage",
        "SELECT a NOT 3 FROM BlobStorage",
        "SELECT # FROM BlobStorage",
    ],
)
def test_syntax_errors(expression: str) -> None:
    with pytest.raises(SqlError):
        compile_select(parse(expression))


def test_deep_expressions_are_refused() -> None:
    for text in ("(" * 5000 + "1" + ")" * 5000, "1" + "+1" * 20000, "NOT " * 5000 + "TRUE", "-" * 5000 + "1"):
        with pytest.raises(SqlError):
            parse(f"SELECT * FROM BlobStorage WHERE {text} = 1")
    assert parse("SELECT * FROM BlobStorage WHERE " + "1" + "+1" * 150 + " = 151").where is not None


def test_unknown_function_and_arity() -> None:
    with pytest.raises(SqlError):
        compile_select(parse("SELECT NOPE(a) FROM BlobStorage"))
    with pytest.raises(SqlError):
        compile_select(parse("SELECT LOWER(a, b) FROM BlobStorage"))


def test_values_and_logic() -> None:
    assert value("_2 > 10", ["x", "9"]) is False  # "9" read as a number against 10
    assert value("_2 > '10'", ["x", "9"]) is True  # two strings: compared as text
    assert value("NULL = 1") is None and value("NOT (NULL = 1)") is None
    assert value("NULL = 1 OR 1 = 1") is True and value("NULL = 1 AND 1 = 2") is False
    assert value("a IS MISSING", document={"b": 1}) is True
    assert value("a IS NULL", document={"a": None}) is True
    assert value("A", document={"a": 3}) == 3 and value('"A"', document={"a": 3}) is MISSING
    assert value("city", ["x", "Oslo"], header=["name", "City"]) == "Oslo"
    assert value("'ab' || 'cd'") == "abcd" and value("7 / 2") == 3 and value("7.0 / 2") == 3.5
    assert value("CHARACTER_LENGTH('abcdefg')") == 7
    assert value("SUBSTRING('123456789', 1, 5)") == "23456"  # the reference's own example
    assert value("TRIM(BOTH '123' FROM '1112211Microsoft22211122')") == "Microsoft"
    assert value("TRIM(LEADING FROM '  x  ')") == "x  "
    assert value("DATE_DIFF('hour', '2018-11-09T00:00+05:30', '2018-11-09T01:00:23-08:00')") == 14
    assert value("EXTRACT(TIMEZONE_HOUR FROM '2018-11-09T00:00+05:30')") == 5
    assert value(
        "TO_STRING(DATE_ADD('minute', 1, CAST('2017-01-02T03:04:05.006Z' AS TIMESTAMP)), 'yyyy-MM-dd HH:mm')"
    ) == ("2017-01-02 03:05")
    assert value("TO_STRING(CAST('1969-07-20T20:18Z' AS TIMESTAMP), 'MMMM d, y')") == "July 20, 1969"
    assert value("'abc' LIKE 'a%'") is True and value("'a_c' LIKE 'a!_c' ESCAPE '!'") is True
    assert value("'abc' LIKE 'a!_c' ESCAPE '!'") is False and value("'a\nb' LIKE 'a_b'") is True
    assert value("_2 LIKE '1%'", ["x", "12"]) is True and value("12 LIKE '1_'") is True  # as text
    assert value("NULL LIKE 'a%'") is None and value("'a' LIKE NULL") is None
    assert value("'a' LIKE _2", ["x", "%"]) is True  # a pattern from the record
    assert value("3 IN (1, NULL)") is None and value("3 IN (1, 3)") is True


_SEPARATORS = st.sampled_from([",", ";", "\t", "|", "::"])
_RECORDS = st.sampled_from(["\n", "\r\n", "%", "$$"])
_QUOTES = st.sampled_from(['"', "'", ""])
_ESCAPES = st.sampled_from(["", "\\"])
_FIELD = st.text(alphabet=st.sampled_from(list("ab ,;:|%$\"'\\\n\té")), max_size=8)


@settings(deadline=None, max_examples=150)
@given(
    column=_SEPARATORS,
    record=_RECORDS,
    quote=_QUOTES,
    escape=_ESCAPES,
    rows=st.lists(st.lists(_FIELD, min_size=1, max_size=4), min_size=1, max_size=6),
    cut=st.lists(st.integers(min_value=0, max_value=200), max_size=6),
)
def test_delimited_round_trip(
    column: str, record: str, quote: str, escape: str, rows: list[list[str]], cut: list[int]
) -> None:
    assume(quote or escape)  # with neither, a separator in a field cannot be written
    config = Delimited(column=column, quote=quote, record=record, escape=escape)
    writer = DelimitedWriter(config)
    rows = [row for row in rows if row != [""]]  # an empty line is a record of one empty field
    if record == "\n":  # a "\r" before the separator belongs to it
        rows = [[field.replace("\r", "") for field in row] for row in rows]
    text = "".join(writer.row(row) for row in rows)
    reader = DelimitedReader(config)
    read: list[list[str]] = []
    start = 0
    for at in sorted(min(c, len(text)) for c in cut):
        read += [list(r.fields or []) for r in reader.feed(text[start:at], False)]
        start = max(start, at)
    read += [list(r.fields or []) for r in reader.feed(text[start:], True)]
    assert read == rows


def _answer(spec: QuerySpec, body: bytes, piece: int = 7) -> list[dict[str, Any]]:
    async def chunks() -> AsyncIterator[bytes]:
        for i in range(0, len(body), piece):
            yield body[i : i + piece]

    async def collect() -> bytes:
        return b"".join([part async for part in run(spec, prepare(spec), chunks(), len(body))])

    return list(fastavro.reader(io.BytesIO(asyncio.run(collect()))))  # type: ignore[arg-type]


def test_messages() -> None:
    spec = QuerySpec("SELECT b FROM BlobStorage", Delimited(headers=True), Delimited())
    messages = _answer(spec, b"a,b\n1,2\n3\n4,5\n")
    # Azure's order (recorded for the JS SDK's "query should work with non fatal error event"):
    # the data, then the error of a record that came before some of its rows, progress, end
    assert messages[0] == {"data": b"2\n5\n"}
    assert {k: messages[1][k] for k in ("fatal", "name", "position")} == {
        "fatal": False,
        "name": "InvalidColumnOrdinal",
        "position": 8,
    }
    assert messages[2:] == [{"bytesScanned": 14, "totalBytes": 14}, {"totalBytes": 14}]
    empty = _answer(QuerySpec("SELECT * FROM BlobStorage WHERE _1 = 'x'"), b"a\nb\n")
    assert [m for m in empty if "data" in m] == [{"data": b""}]  # one data message, empty
    json = _answer(
        QuerySpec("SELECT a FROM BlobStorage", JsonLines(), JsonLines(";")), b'{"a":1}{"a":"\xc3\xa9"}\n'
    )
    assert [m for m in json if "data" in m] == [{"data": '{"a":1};{"a":"é"};'.encode()}]
    deep = _answer(
        QuerySpec("SELECT * FROM BlobStorage", JsonLines(), JsonLines()), b'{"a":1}\n' + b"[" * 100_000, 4096
    )
    assert [(m["name"], m["fatal"], m["position"]) for m in deep if "fatal" in m] == [("ParseError", True, 8)]
    assert [m for m in deep if "data" in m] == [{"data": b'{"a":1}\n'}]


def test_trailing_commas_and_raw_documents_in_pieces() -> None:
    body = b'{"a": [1, 2, ], "b": {"c": 1,},}\n{"d": ",}" , }\n{"e": 1,,}'
    for piece in (1, 3, 7, len(body)):
        raw = _answer(QuerySpec("SELECT * FROM BlobStorage", JsonLines(), JsonLines()), body, piece)
        assert [m for m in raw if "data" in m] == [
            {"data": b'{"a": [1, 2, ], "b": {"c": 1,},}\n{"d": ",}" , }\n'}
        ]
        assert [(m["name"], m["position"]) for m in raw if "fatal" in m] == [("ParseError", 48)]
        named = _answer(
            QuerySpec("SELECT a[1], b.c, d FROM BlobStorage", JsonLines(), Delimited()), body, piece
        )
        assert [m for m in named if "data" in m] == [{"data": b'2,1,\n,,",}"\n'}]
