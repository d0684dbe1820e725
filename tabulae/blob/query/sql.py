"""The query acceleration SQL dialect: text to a :class:`Select`, by recursive descent.

The grammar ("Query acceleration SQL language reference"; keywords in any case)::

    query      = SELECT [TOP integer] items FROM table [WHERE expr] [LIMIT integer] [";"]
               | SELECT sys.split "(" integer ")" FROM table [";"]
    items      = "*" | item {"," item}
    item       = expr [[AS] name]
    table      = name ["[" "*" "]"] {"." name ["[" ("*" | integer) "]"]}
    expr       = conj {OR conj}
    conj       = neg {AND neg}
    neg        = NOT neg | test
    test       = sum [compare sum | [NOT] LIKE sum [ESCAPE string]
                      | [NOT] IN "(" expr {"," expr} ")" | [NOT] BETWEEN sum AND sum
                      | IS [NOT] (NULL | MISSING)]
    sum        = product {("+" | "-" | "||") product}
    product    = unary {("*" | "/" | "%") unary}
    unary      = "-" unary | "+" unary | primary
    primary    = number | string | TRUE | FALSE | NULL | "(" expr ")"
               | CAST "(" expr AS type ")" | call | path
    path       = name {"." name | "[" integer "]"}
    name       = identifier | '"' quoted identifier '"'

Calls take their SQL forms besides the comma form: ``TRIM([BOTH|LEADING|TRAILING] [chars]
FROM s)``, ``SUBSTRING(s FROM n [FOR m])``, ``EXTRACT(part FROM t)``, ``COUNT(*)``. A bare name
is case-insensitive, a quoted one exact; ``_N`` names the N-th column of a CSV record.
``TOP n`` limits the rows as ``LIMIT n`` does (the smaller wins when both are given);
``AVERAGE`` is the reference's name for ``AVG``. ``sys.split(size)`` answers the sizes of the
batches of whole records, each at least ``size`` bytes (at least 10 MiB), a CSV blob splits into.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_EXPRESSION = 256 * 1024  # characters; the reference's limit on Expression
MAX_DEPTH = 200  # levels of an expression tree
MIN_SPLIT = 10 * 1024 * 1024  # bytes; the least split_size sys.split takes


class SqlError(ValueError):
    """The expression is not a query of the dialect; the message says where and why."""


@dataclass(frozen=True, slots=True)
class Literal:
    value: object


@dataclass(frozen=True, slots=True)
class Name:
    """One step of a path: a field name (``exact`` when it was quoted) or an array index."""

    text: str
    exact: bool = False
    index: int | None = None


@dataclass(frozen=True, slots=True)
class Path:
    steps: tuple[Name, ...]


@dataclass(frozen=True, slots=True)
class Unary:
    op: str
    operand: object


@dataclass(frozen=True, slots=True)
class Binary:
    op: str
    left: object
    right: object


@dataclass(frozen=True, slots=True)
class Call:
    name: str  # upper case
    args: tuple[object, ...]
    star: bool = False  # COUNT(*)
    option: str = ""  # TRIM's BOTH/LEADING/TRAILING, EXTRACT's and DATE_*'s part, CAST's type


@dataclass(frozen=True, slots=True)
class Item:
    expr: object
    alias: str | None


@dataclass(frozen=True, slots=True)
class Select:
    items: tuple[Item, ...] | None  # None: SELECT *
    table: tuple[Name, ...]  # the steps after BlobStorage; a "*" step is Name("*")
    where: object | None
    limit: int | None
    aggregates: bool = field(default=False)
    split: int | None = None  # sys.split's batch size: the query answers batch sizes, not records


AGGREGATES = frozenset({"COUNT", "SUM", "MIN", "MAX", "AVG"})
_ALIASES = {"AVERAGE": "AVG"}  # the reference's names for calls known by another
TYPES = frozenset({"INT", "INTEGER", "FLOAT", "DOUBLE", "DECIMAL", "NUMERIC", "STRING", "VARCHAR",
                   "TIMESTAMP", "BOOL", "BOOLEAN"})  # fmt: skip
_KEYWORDS = frozenset({"SELECT", "FROM", "WHERE", "LIMIT", "AND", "OR", "NOT", "LIKE", "ESCAPE", "IN",
                       "BETWEEN", "IS", "NULL", "MISSING", "TRUE", "FALSE", "AS", "CAST"})  # fmt: skip
_TOKEN = re.compile(
    r"""\s*(?:
      (?P<number>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)
    | (?P<string>'(?:[^']|'')*')
    | (?P<quoted>"(?:[^"]|"")*")
    | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<op><>|!=|<=|>=|\|\||[-+*/%=<>(),.\[\];])
    )""",
    re.VERBOSE,
)


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # number, string, quoted, name, op, end
    text: str
    at: int


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    at = 0
    while True:
        match = _TOKEN.match(text, at)
        if match is None or match.end() == at:
            if text[at:].strip():
                raise SqlError(f"Unexpected character at position {len(text) - len(text[at:].lstrip())}.")
            out.append(_Token("end", "", len(text)))
            return out
        kind = match.lastgroup or "end"
        out.append(_Token(kind, match.group(kind), match.start(kind)))
        at = match.end()


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.at = 0

    # -- token helpers
    @property
    def peek(self) -> _Token:
        return self.tokens[self.at]

    def fail(self, expected: str) -> SqlError:
        token = self.peek
        found = "the end of the expression" if token.kind == "end" else repr(token.text)
        return SqlError(f"Expected {expected} at position {token.at}, found {found}.")

    def word(self, *words: str) -> str | None:
        token = self.peek
        if token.kind == "name" and token.text.upper() in words:
            self.at += 1
            return token.text.upper()
        return None

    def op(self, *ops: str) -> str | None:
        token = self.peek
        if token.kind == "op" and token.text in ops:
            self.at += 1
            return token.text
        return None

    def need_word(self, word: str) -> None:
        if self.word(word) is None:
            raise self.fail(word)

    def need_op(self, op: str) -> None:
        if self.op(op) is None:
            raise self.fail(repr(op))

    # -- the statement
    def query(self) -> Select:
        self.need_word("SELECT")
        if self._split_ahead():
            return self.split()
        top = None
        if (
            self.peek.kind == "name"
            and self.peek.text.upper() == "TOP"
            and self.tokens[self.at + 1].kind == "number"
        ):
            self.at += 1  # TOP only before a number: a column may be called top
            top = self.whole()
        items = None if self.op("*") else self.items()
        self.need_word("FROM")
        table = self.table()
        where = self.expr() if self.word("WHERE") else None
        limit = self.whole() if self.word("LIMIT") else None
        if top is not None:
            limit = top if limit is None else min(top, limit)
        self.op(";")
        if self.peek.kind != "end":
            raise self.fail("the end of the expression")
        aggregates = items is not None and any(_has_aggregate(item.expr) for item in items)
        if aggregates and items is not None and not all(_is_aggregate(item.expr) for item in items):
            raise SqlError("A SELECT list holds either aggregate expressions or projections, not both.")
        return Select(items, table, where, limit, aggregates)

    def whole(self) -> int:
        token = self.peek
        if token.kind != "number" or not token.text.isdigit():
            raise self.fail("a whole number")
        self.at += 1
        return int(token.text)

    def _split_ahead(self) -> bool:
        """Whether ``sys.split(`` comes next (``sys`` would otherwise read as a path)."""
        ahead = self.tokens[self.at : self.at + 4]
        return (
            len(ahead) == 4
            and ahead[0].kind == "name"
            and ahead[0].text.upper() == "SYS"
            and ahead[1].text == "."
            and ahead[2].kind == "name"
            and ahead[2].text.upper() == "SPLIT"
            and ahead[3].text == "("
        )

    def split(self) -> Select:
        self.at += 4
        size = self.whole()
        self.need_op(")")
        self.need_word("FROM")
        table = self.table()
        self.op(";")
        if self.peek.kind != "end":
            raise self.fail("the end of the expression")
        if size < MIN_SPLIT:
            raise SqlError(f"The split size of sys.split must be at least {MIN_SPLIT} bytes.")
        return Select(None, table, None, None, split=size)

    def items(self) -> tuple[Item, ...]:
        out = []
        while True:
            expr = self.expr()
            alias = None
            bare = self.peek.kind in ("name", "quoted") and self.peek.text.upper() not in _KEYWORDS
            if self.word("AS") or bare:
                alias = self.name().text
            out.append(Item(expr, alias))
            if not self.op(","):
                return tuple(out)

    def table(self) -> tuple[Name, ...]:
        first = self.name()
        if first.text.upper() not in ("BLOBSTORAGE", "DATALAKESTORAGE"):
            raise SqlError(f"Unknown table {first.text!r}: the table is BlobStorage.")
        steps: list[Name] = []
        if self.op("["):
            self.need_op("*")
            self.need_op("]")
            steps.append(Name("*"))
        while self.op("."):
            steps.append(self.name())
            if self.op("["):
                if self.op("*"):
                    steps.append(Name("*"))
                else:
                    steps.append(Name("", index=self.index()))
                self.need_op("]")
        return tuple(steps)

    def name(self) -> Name:
        token = self.peek
        if token.kind == "quoted":
            self.at += 1
            return Name(token.text[1:-1].replace('""', '"'), exact=True)
        if token.kind == "name":
            self.at += 1
            return Name(token.text)
        raise self.fail("a name")

    def index(self) -> int:
        token = self.peek
        if token.kind != "number" or not token.text.isdigit():
            raise self.fail("an array index")
        self.at += 1
        return int(token.text)

    # -- expressions
    def expr(self) -> object:
        left = self.conj()
        while self.word("OR"):
            left = Binary("OR", left, self.conj())
        return left

    def conj(self) -> object:
        left = self.neg()
        while self.word("AND"):
            left = Binary("AND", left, self.neg())
        return left

    def neg(self) -> object:
        if self.word("NOT"):
            return Unary("NOT", self.neg())
        return self.test()

    def test(self) -> object:
        left = self.sum()
        op = self.op("=", "!=", "<>", "<", "<=", ">", ">=")
        if op is not None:
            return Binary("<>" if op == "!=" else op, left, self.sum())
        if self.word("IS"):
            negated = self.word("NOT") is not None
            what = self.word("NULL", "MISSING")
            if what is None:
                raise self.fail("NULL or MISSING")
            node: object = Unary("IS " + what, left)
            return Unary("NOT", node) if negated else node
        negated = self.word("NOT") is not None
        if self.word("LIKE"):
            pattern = self.sum()
            escape = self.sum() if self.word("ESCAPE") else None
            node = Call("LIKE", (left, pattern) if escape is None else (left, pattern, escape))
        elif self.word("IN"):
            self.need_op("(")
            values = [self.expr()]
            while self.op(","):
                values.append(self.expr())
            self.need_op(")")
            node = Call("IN", (left, *values))
        elif self.word("BETWEEN"):
            low = self.sum()
            self.need_word("AND")
            node = Call("BETWEEN", (left, low, self.sum()))
        elif negated:
            raise self.fail("LIKE, IN or BETWEEN")
        else:
            return left
        return Unary("NOT", node) if negated else node

    def sum(self) -> object:
        left = self.product()
        while (op := self.op("+", "-", "||")) is not None:
            left = Binary(op, left, self.product())
        return left

    def product(self) -> object:
        left = self.unary()
        while (op := self.op("*", "/", "%")) is not None:
            left = Binary(op, left, self.unary())
        return left

    def unary(self) -> object:
        if self.op("-"):
            return Unary("-", self.unary())
        if self.op("+"):
            return self.unary()
        return self.primary()

    def primary(self) -> object:
        token = self.peek
        if token.kind == "number":
            self.at += 1
            text = token.text
            return Literal(int(text) if text.isdigit() else float(text))
        if token.kind == "string":
            self.at += 1
            return Literal(token.text[1:-1].replace("''", "'"))
        if self.op("("):
            inner = self.expr()
            self.need_op(")")
            return inner
        word = self.word("TRUE", "FALSE", "NULL", "CAST")
        if word == "TRUE" or word == "FALSE":
            return Literal(word == "TRUE")
        if word == "NULL":
            return Literal(None)
        if word == "CAST":
            self.need_op("(")
            value = self.expr()
            self.need_word("AS")
            kind = self.peek
            if kind.kind != "name" or kind.text.upper() not in TYPES:
                raise self.fail("a type (INT, FLOAT, STRING, TIMESTAMP, BOOLEAN)")
            self.at += 1
            self.need_op(")")
            return Call("CAST", (value,), option=kind.text.upper())
        if (
            token.kind == "name"
            and self.tokens[self.at + 1].text == "("
            and token.text.upper() not in _KEYWORDS
        ):
            return self.call()
        if token.kind in ("name", "quoted") and not (
            token.kind == "name" and token.text.upper() in _KEYWORDS
        ):
            return self.path()
        raise self.fail("an expression")

    def path(self) -> Path:
        steps = [self.name()]
        while True:
            if self.op("."):
                steps.append(self.name())
            elif self.peek.text == "[" and self.peek.kind == "op":
                self.at += 1
                steps.append(Name("", index=self.index()))
                self.need_op("]")
            else:
                return Path(tuple(steps))

    def call(self) -> Call:
        name = self.peek.text.upper()
        name = _ALIASES.get(name, name)
        self.at += 2  # the name and "("
        if name == "COUNT" and self.op("*"):
            self.need_op(")")
            return Call(name, (), star=True)
        if name == "TRIM":
            return self._trim()
        if name in ("EXTRACT",):
            part = self.name().text.upper()
            self.need_word("FROM")
            value = self.expr()
            self.need_op(")")
            return Call(name, (value,), option=part)
        args: list[object] = []
        if not self.op(")"):
            args.append(self.expr())
            if name == "SUBSTRING" and self.word("FROM"):
                args.append(self.expr())
                if self.word("FOR"):
                    args.append(self.expr())
            while self.op(","):
                args.append(self.expr())
            self.need_op(")")
        if name in ("DATE_ADD", "DATE_DIFF") and args and isinstance(args[0], (Literal, Path)):
            first = args[0]
            unit = first.value if isinstance(first, Literal) else first.steps[0].text
            return Call(name, tuple(args[1:]), option=str(unit).upper())
        return Call(name, tuple(args))

    def _trim(self) -> Call:
        where = self.word("BOTH", "LEADING", "TRAILING") or "BOTH"
        if self.word("FROM"):
            value = self.expr()
            self.need_op(")")
            return Call("TRIM", (value,), option=where)
        first = self.expr()
        if self.word("FROM"):
            value = self.expr()
            self.need_op(")")
            return Call("TRIM", (value, first), option=where)
        self.need_op(")")
        return Call("TRIM", (first,), option=where)


def _is_aggregate(node: object) -> bool:
    return isinstance(node, Call) and node.name in AGGREGATES


def _has_aggregate(node: object) -> bool:
    if _is_aggregate(node):
        return True
    if isinstance(node, Unary):
        return _has_aggregate(node.operand)
    if isinstance(node, Binary):
        return _has_aggregate(node.left) or _has_aggregate(node.right)
    if isinstance(node, Call):
        return any(_has_aggregate(arg) for arg in node.args)
    return False


def _depth(node: object) -> int:
    """How deep an expression tree goes, counted without recursion (a long chain such as
    ``1+1+...`` is built by a loop, so its depth is not bounded by the parser's recursion)."""
    deepest = 0
    stack = [(node, 1)]
    while stack:
        current, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(current, Unary):
            stack.append((current.operand, depth + 1))
        elif isinstance(current, Binary):
            stack.extend(((current.left, depth + 1), (current.right, depth + 1)))
        elif isinstance(current, Call):
            stack.extend((arg, depth + 1) for arg in current.args)
    return deepest


def parse(text: str) -> Select:
    """The query ``text`` says; :class:`SqlError` when it is not one of the dialect, or nests
    deeper than ``MAX_DEPTH`` (evaluation recurses through the tree, once per record)."""
    if len(text) > MAX_EXPRESSION:
        raise SqlError("The expression is longer than 256 KiB.")
    try:
        select = _Parser(text).query()
    except RecursionError:
        raise SqlError(f"The expression nests deeper than {MAX_DEPTH} levels.") from None
    trees = [item.expr for item in select.items or ()] + ([select.where] if select.where is not None else [])
    if any(_depth(tree) > MAX_DEPTH for tree in trees):
        raise SqlError(f"The expression nests deeper than {MAX_DEPTH} levels.")
    return select
