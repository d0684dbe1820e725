"""Parse a `$filter` into a ``Node`` tree, and render a tree back to text.

Grammar (ABNF-ish; keywords lower-case and case-sensitive, ``ws`` is one or more spaces)::

    filter      = ws orExpr ws
    orExpr      = andExpr *( ws "or" ws andExpr )
    andExpr     = notExpr *( ws "and" ws notExpr )
    notExpr     = "not" ws notExpr / primary              ; also "not(" … ")"
    primary     = "(" ws orExpr ws ")" / comparison / boolTerm
    comparison  = operand ws relOp ws operand             ; exactly one operand a property
    relOp       = "eq" / "ne" / "gt" / "ge" / "lt" / "le"
    operand     = propertyName / literal
    boolTerm    = propertyName / "true" / "false"
    literal     = string / datetime / guid / binary / int64 / double / int32
                / "true" / "false" / "null"
    string      = "'" *( any-char-except-' / "''" ) "'"
    datetime    = "datetime" "'" iso8601 "'"
    guid        = "guid" "'" 8HEX "-" 4HEX "-" 4HEX "-" 4HEX "-" 12HEX "'"
    binary      = ( "X" / "binary" ) "'" *( 2HEXDIG ) "'"
    int64       = [ "-" ] 1*DIGIT ( "L" / "l" )
    double      = [ "-" ] 1*DIGIT "." 1*DIGIT [ exp ] [ "d" / "D" ]
                / [ "-" ] 1*DIGIT exp [ "d" / "D" ]
                / [ "-" ] 1*DIGIT ( "d" / "D" )
    exp         = ( "e" / "E" ) [ "+" / "-" ] 1*DIGIT
    int32       = [ "-" ] 1*DIGIT                          ; must fit in Int32

Where the spec leaves room, this parser is lenient in the ways real clients need and strict
elsewhere:

* ``not X eq 1`` reads as ``not (X eq 1)`` (the grammar lets ``not`` cover a comparison).
* Typed-literal prefixes (``datetime``, ``guid``, ``X``, ``binary``) are accepted in any case.
* A blank filter means "no condition" and parses to ``true`` (Storage Explorer sends ``$filter=``).
* DateTime literals may lie anywhere in .NET's range (0001-01-01 … 9999-12-31): a filter bound
  older than the 1601 storage limit is still meaningful.

Errors are always ``ServiceError``: syntax → 400 ``InvalidInput`` "Syntax error at position <n>
in '<filter>'." (n is the 0-based offset of the offending token, or just past it when a whole
expression is followed by more, as Azure reports it); a number that does not fit
its type → 400 ``InvalidInput`` "Unrecognized 'Edm.Int32' literal …"; functions, arithmetic,
member access and property-vs-property or literal-vs-literal comparisons → 501
``NotImplemented``; more than 15 comparisons or nesting deeper than 100 → 400 ``InvalidInput``.
Lexing is one left-to-right pass and recursion is capped, so hostile input costs linear time.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any, NamedTuple

from tabulae.model import edm
from tabulae.model.errors import ServiceError
from tabulae.table.query.nodes import (
    FALSE,
    MAX_COMPARISONS,
    MAX_DEPTH,
    NULL,
    REL_OPS,
    TRUE,
    And,
    Comparison,
    Literal,
    Node,
    Not,
    Operand,
    Or,
    Property,
)

__all__ = ["parse_filter", "render_filter"]

FUNCTIONS = frozenset(
    {
        "startswith", "endswith", "substringof", "contains", "tolower", "toupper", "length",
        "indexof", "trim", "concat", "year", "month", "day", "hour", "minute", "second",
        "round", "floor", "ceiling", "isof", "cast", "any", "all", "replace", "substring",
    }
)  # fmt: skip
ARITHMETIC = frozenset({"add", "sub", "mul", "div", "mod"})
KEYWORDS = frozenset({"and", "or", "not", "true", "false", "null"}) | REL_OPS

_IDENT = re.compile(r"[^\W\d]\w*")
_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?[dDlL]?")
_DIGITS = frozenset("0123456789")
_GUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_HEX = re.compile(r"(?:[0-9a-fA-F]{2})*")
_MAX_INT_DIGITS = 20  # longer digit strings are out of range without converting them
_PUNCTUATION = frozenset("(),/")

# Token kinds.
_IDENT_T, _LITERAL_T, _MINUS_T, _UNKNOWN_T, _END_T = "ident", "literal", "-", "unknown", "end"


class _Token(NamedTuple):
    kind: str  # one of the kinds above or a punctuation character
    pos: int
    end: int  # the offset just past the token, where Azure's lexer stands once it has read it
    text: str = ""
    literal: Literal | None = None


def _syntax_error(text: str, pos: int) -> ServiceError:
    return ServiceError("InvalidInput", f"Syntax error at position {pos} in '{text}'.")


def _not_implemented() -> ServiceError:
    return ServiceError("NotImplemented")


class _Lexer:
    """Splits the filter into tokens in one lazy pass; literals come out already typed.

    Lazy so that the parser's first error stops the work: hostile text costs no more than the
    prefix that was read.
    """

    def __init__(self, text: str) -> None:
        self.text = text

    def tokens(self) -> Iterator[_Token]:
        text, pos = self.text, 0
        end = len(text)
        while pos < end:
            char = text[pos]
            if char == " ":
                pos += 1
            elif char in _PUNCTUATION:
                yield _Token(char, pos, pos + 1)
                pos += 1
            elif char == "'":
                value, pos_after = self._string(pos)
                yield _Token(_LITERAL_T, pos, pos_after, literal=Literal(edm.STRING, value))
                pos = pos_after
            elif char in _DIGITS or (char == "-" and pos + 1 < end and text[pos + 1] in _DIGITS):
                token, pos = self._number(pos)
                yield token
            elif char == "-":
                yield _Token(_MINUS_T, pos, pos + 1)
                pos += 1
            else:
                match = _IDENT.match(text, pos)
                if match is None:  # left for the parser to reject, so errors come in text order
                    yield _Token(_UNKNOWN_T, pos, pos + 1, text=char)
                    pos += 1
                    continue
                word = match.group()
                if match.end() < end and text[match.end()] == "'":
                    value, pos_after = self._string(match.end())
                    yield _Token(_LITERAL_T, pos, pos_after, literal=self._typed(word, value, pos))
                    pos = pos_after
                else:
                    yield _Token(_IDENT_T, pos, match.end(), text=word)
                    pos = match.end()
        while True:  # the parser may look at the end more than once
            yield _Token(_END_T, end, end)

    def _string(self, start: int) -> tuple[str, int]:
        """The value of the quoted string at ``start`` (``''`` unescaped) and the offset after it."""
        text, pos, parts = self.text, start + 1, []
        while True:
            close = text.find("'", pos)
            if close < 0:
                raise _syntax_error(text, start)
            parts.append(text[pos:close])
            if text.startswith("'", close + 1):
                parts.append("'")
                pos = close + 2
            else:
                return "".join(parts), close + 1

    def _typed(self, prefix: str, body: str, pos: int) -> Literal:
        """A ``prefix'body'`` literal: datetime, guid or binary."""
        kind = prefix.lower()
        if kind == "datetime":
            ticks = edm.parse_datetime(body) if body == body.strip() else None
            if ticks is None or not 0 <= ticks <= edm.MAX_DATETIME_TICKS:
                raise self._unrecognized(edm.DATETIME, f"{prefix}'{body}'", pos)
            return Literal(edm.DATETIME, ticks)
        if kind == "guid":
            if _GUID.fullmatch(body) is None:
                raise self._unrecognized(edm.GUID, f"{prefix}'{body}'", pos)
            return Literal(edm.GUID, body.lower())
        if kind in ("x", "binary"):
            if _HEX.fullmatch(body) is None:
                raise self._unrecognized(edm.BINARY, f"{prefix}'{body}'", pos)
            return Literal(edm.BINARY, bytes.fromhex(body))
        raise _syntax_error(self.text, pos)

    def _number(self, start: int) -> tuple[_Token, int]:
        text = self.text
        match = _NUMBER.match(text, start)
        assert match is not None  # the caller saw a digit
        end = match.end()
        if end < len(text) and (text[end] == "." or text[end] == "_" or text[end].isalnum()):
            raise _syntax_error(text, start)
        word = match.group()
        suffix = word[-1] if word[-1] in "dDlL" else ""
        digits = word[: len(word) - len(suffix)]
        fractional = "." in digits or "e" in digits or "E" in digits
        if suffix in ("l", "L"):
            if fractional:
                raise _syntax_error(text, start)
            literal = self._integer(edm.INT64, digits, word, start, edm.INT64_MIN, edm.INT64_MAX)
        elif suffix or fractional:
            value = float(digits)
            if math.isinf(value):
                raise self._unrecognized(edm.DOUBLE, word, start)
            literal = Literal(edm.DOUBLE, value)
        else:
            literal = self._integer(edm.INT32, digits, word, start, edm.INT32_MIN, edm.INT32_MAX)
        return _Token(_LITERAL_T, start, end, text=word, literal=literal), end

    def _integer(self, edm_type: str, digits: str, word: str, pos: int, low: int, high: int) -> Literal:
        significant = digits.lstrip("-").lstrip("0")
        if len(significant) > _MAX_INT_DIGITS:  # also keeps int() clear of its 4300-digit limit
            raise self._unrecognized(edm_type, word, pos)
        value = int(significant or "0") * (-1 if digits.startswith("-") else 1)
        if not low <= value <= high:
            raise self._unrecognized(edm_type, word, pos)
        return Literal(edm_type, value)

    def _unrecognized(self, edm_type: str, word: str, pos: int) -> ServiceError:
        return ServiceError(
            "InvalidInput", f"Unrecognized '{edm_type}' literal '{word}' at '{pos}' in '{self.text}'."
        )


class _Parser:
    """Recursive descent over the token list.

    Each parse method returns the node and its tree depth, so the depth cap is enforced while
    building (no second walk), and ``nesting`` (open parentheses plus ``not``\\ s) caps recursion.
    """

    def __init__(self, text: str, tokens: Iterator[_Token]) -> None:
        self.text = text
        self.tokens = tokens
        self.current = next(tokens)
        self.comparisons = 0

    # -- token helpers ---------------------------------------------------------------------
    def _peek(self) -> _Token:
        return self.current

    def _advance(self) -> _Token:
        token = self.current
        self.current = next(self.tokens)
        return token

    def _is_word(self, token: _Token, *words: str) -> bool:
        return token.kind == _IDENT_T and token.text in words

    def _error(self, token: _Token | None = None) -> ServiceError:
        return _syntax_error(self.text, (token or self._peek()).pos)

    def _deeper(self, level: int) -> int:
        if level > MAX_DEPTH:
            raise ServiceError("InvalidInput", f"The $filter is nested more than {MAX_DEPTH} levels deep.")
        return level

    def _count_comparison(self) -> None:
        self.comparisons += 1
        if self.comparisons > MAX_COMPARISONS:
            raise ServiceError(
                "InvalidInput", f"The $filter has more than {MAX_COMPARISONS} discrete comparisons."
            )

    # -- grammar ---------------------------------------------------------------------------
    def parse(self) -> Node:
        node, _ = self._or(0)
        leftover = self._peek()
        if leftover.kind != _END_T:
            # A whole expression followed by more: Azure names the offset just past the token it
            # could not take, where its lexer stands ('aaa bbb ccc' is refused at position 7, as
            # Azure answered azure-data-tables' test_query_invalid_filter, x-ms-version 2019-02-02).
            # A character no token starts with is named where it stands, as before (unrecorded).
            raise _syntax_error(self.text, leftover.pos if leftover.kind == _UNKNOWN_T else leftover.end)
        return node

    def _or(self, nesting: int) -> tuple[Node, int]:
        node, level = self._and(nesting)
        while self._is_word(self._peek(), "or"):
            self._advance()
            right, right_level = self._and(nesting)
            node, level = Or(node, right), self._deeper(max(level, right_level) + 1)
        return node, level

    def _and(self, nesting: int) -> tuple[Node, int]:
        node, level = self._not(nesting)
        while self._is_word(self._peek(), "and"):
            self._advance()
            right, right_level = self._not(nesting)
            node, level = And(node, right), self._deeper(max(level, right_level) + 1)
        return node, level

    def _not(self, nesting: int) -> tuple[Node, int]:
        if self._is_word(self._peek(), "not"):
            self._advance()
            operand, level = self._not(self._deeper(nesting + 1))
            return Not(operand), self._deeper(level + 1)
        return self._primary(nesting)

    def _primary(self, nesting: int) -> tuple[Node, int]:
        token = self._peek()
        if token.kind == "(":
            self._advance()
            node, level = self._or(self._deeper(nesting + 1))
            if self._peek().kind != ")":
                raise self._error()
            self._advance()
            return node, level
        left = self._operand()
        following = self._peek()
        if self._is_word(following, *REL_OPS):
            self._advance()
            right = self._operand()
            return self._comparison(following.text, left, right), 1
        if isinstance(left, Property):
            self._count_comparison()
            return left, 1
        if left in (TRUE, FALSE):
            return left, 1
        raise self._error(following)

    def _comparison(self, op: str, left: Operand, right: Operand) -> Comparison:
        if type(left) is type(right):
            raise _not_implemented()  # property vs property, or literal vs literal
        self._count_comparison()
        return Comparison(op, left, right)

    def _operand(self) -> Operand:
        token = self._advance()
        if token.kind == _LITERAL_T:
            assert token.literal is not None
            operand: Operand = token.literal
        elif token.kind == _IDENT_T:
            operand = self._word_operand(token)
        elif token.kind == _MINUS_T and self._peek().kind in (_IDENT_T, "("):
            raise _not_implemented()  # unary minus on a property or an expression
        else:
            raise self._error(token)
        following = self._peek()
        if self._is_word(following, *ARITHMETIC):
            raise _not_implemented()
        if following.kind in ("(", "/"):
            raise _not_implemented() if isinstance(operand, Property) else self._error(following)
        return operand

    def _word_operand(self, token: _Token) -> Operand:
        word = token.text
        if self._peek().kind == "(":
            if word in FUNCTIONS:
                raise _not_implemented()
            raise self._error(token)
        if word == "true":
            return TRUE
        if word == "false":
            return FALSE
        if word == "null":
            return Literal(NULL, None)
        if word in KEYWORDS:
            raise self._error(token)
        return Property(word)


def parse_filter(text: str) -> Node:
    """Parse a URL-decoded `$filter`; a blank one means "everything" and parses to ``true``.

    Raises only ``ServiceError`` (see the module docstring for which code when).
    """
    if not text.strip(" "):
        return TRUE
    return _Parser(text, _Lexer(text).tokens()).parse()


# -- rendering ------------------------------------------------------------------------------


def render_literal(literal: Literal) -> str:
    """The canonical text of a literal; parsing it gives back an equal ``Literal``."""
    kind, value = literal.edm_type, literal.value
    if kind == edm.STRING:
        return "'" + value.replace("'", "''") + "'"
    if kind == edm.BOOLEAN:
        return "true" if value else "false"
    if kind == NULL:
        return "null"
    if kind == edm.INT32:
        return str(value)
    if kind == edm.INT64:
        return f"{value}L"
    if kind == edm.DOUBLE:
        if not math.isfinite(value):
            raise ValueError(f"{value!r} has no $filter literal form")
        return repr(float(value))
    if kind == edm.DATETIME:
        return f"datetime'{edm.format_datetime(value)}'"
    if kind == edm.GUID:
        return f"guid'{value}'"
    if kind == edm.BINARY:
        return f"X'{bytes(value).hex()}'"
    raise ValueError(f"unknown literal type {kind!r}")


def _render_operand(operand: Any) -> str:
    return operand.name if isinstance(operand, Property) else render_literal(operand)


def render_filter(node: Node) -> str:
    """Text that ``parse_filter`` turns back into ``node``: the inverse used by property tests,
    logs and SAS-clipped queries. Parentheses appear only where the tree shape needs them."""
    if isinstance(node, Comparison):
        return f"{_render_operand(node.left)} {node.op} {_render_operand(node.right)}"
    if isinstance(node, Property | Literal):
        return _render_operand(node)
    if isinstance(node, Not):
        inner = render_filter(node.operand)
        return f"not ({inner})" if isinstance(node.operand, And | Or) else f"not {inner}"
    if isinstance(node, And):
        left = render_filter(node.left)
        right = render_filter(node.right)
        if isinstance(node.left, Or):
            left = f"({left})"
        if isinstance(node.right, And | Or):
            right = f"({right})"
        return f"{left} and {right}"
    if isinstance(node, Or):
        right = render_filter(node.right)
        if isinstance(node.right, Or):
            right = f"({right})"
        return f"{render_filter(node.left)} or {right}"
    raise TypeError(f"not a filter node: {node!r}")
