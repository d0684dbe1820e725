r"""Blob index tags: validation, the ``x-ms-tags`` header, and the tag filter language of Find
Blobs by Tags (``where``) and of the ``x-ms-if-tags`` condition.

Tags ("Manage and find Azure Blob data with blob index tags", "Set Blob Tags"): at most 10 per
blob; keys of 1 to 128 and values of 0 to 256 characters from ``a-z A-Z 0-9`` and
`` +-./:=_``; keys and values are case-sensitive strings. The error codes and texts for a bad set
(``TagsTooLarge``, ``EmptyTagName``, ``InvalidTag``, ``DuplicateTagNames``, all 400) are the ones
Azurite reproduces; Azure's reference names no code.

Filter grammar accepted by :func:`parse_filter` (tokens may be separated by whitespace;
keywords are case-insensitive, as the SDK's own recorded tests write ``and``)::

    filter      = or-expr
    or-expr     = and-expr *( "OR" and-expr )        ; x-ms-if-tags only
    and-expr    = term *( "AND" term )
    term        = "(" or-expr ")" / comparison
    comparison  = key operator value
    key         = DQUOTE 1*128tagchar DQUOTE / 1*( ALPHA / DIGIT / "_" ) / "@container"
    operator    = "=" / ">" / ">=" / "<" / "<=" / "<>"   ; "<>" in x-ms-if-tags only
    value       = "'" *256tagchar "'"
    tagchar     = ALPHA / DIGIT / " " / "+" / "-" / "." / "/" / ":" / "=" / "_"

``@container`` may only be compared with ``=`` in an account-level Find Blobs by Tags ("Find
Blobs by Tags": not supported when the container is in the URI, nor in ``x-ms-if-tags``). In a
``where`` expression at most 10 distinct tag keys may appear, and one key may not have two
conditions on the same side (``"Rank" > '1' AND "Rank" >= '2'``) or an equality beside another
condition ("Manage and find ... blob index tags"; Azurite's parser for the limit of 10).
Comparisons are ordinal on strings; a blob without the key never matches, ``<>`` included
(assumed: SQL's NULL, and Azurite evaluates so). Lengths are checked in ``where`` only: an
``x-ms-if-tags`` key no blob can have simply matches nothing (Azurite).

A syntax error in ``where`` is 400 ``InvalidQueryParameterValue`` naming ``where`` with a
message "Error parsing query at or near character position N: ..."; in ``x-ms-if-tags`` it is
400 ``InvalidHeaderValue`` naming the header (Azurite's tests, written against Azure).
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote

from tabulae.model.errors import ServiceError

MAX_TAGS = 10
MAX_KEY = 128
MAX_VALUE = 256
TAG_CHARS = frozenset(string.ascii_letters + string.digits + " +-./:=_")
CONTAINER = "@container"

OPERATORS = ("=", ">", ">=", "<", "<=", "<>")
_IDENTIFIER = frozenset(string.ascii_letters + string.digits + "_")

# ------------------------------------------------------------------------------- tag sets


def check_tags(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """A blob's tags from (key, value) pairs in the client's order, or the error Azure answers."""
    items = list(pairs)
    if len(items) > MAX_TAGS:
        raise ServiceError("TagsTooLarge")
    tags: dict[str, str] = {}
    for key, value in items:
        if not key:
            raise ServiceError("EmptyTagName")
        if len(key) > MAX_KEY or len(value) > MAX_VALUE:
            raise ServiceError("TagsTooLarge")
        if not TAG_CHARS.issuperset(key) or not TAG_CHARS.issuperset(value):
            raise ServiceError("InvalidTag")
        if key in tags:
            raise ServiceError("DuplicateTagNames")
        tags[key] = value
    return tags


def parse_tags_header(value: str) -> dict[str, str]:
    """``x-ms-tags``: a URL-encoded query string (``k1=v1&k2=v2``), as the SDKs write it.

    A piece without ``=`` is a key with an empty value, as the query form has it.
    """
    if not value.strip():
        return {}
    pairs = parse_qsl(value, keep_blank_values=True)
    if not pairs and value.strip("&"):
        raise ServiceError("InvalidTag")
    return check_tags(pairs)


def render_tags_header(tags: Mapping[str, str]) -> str:
    """The ``x-ms-tags`` form of ``tags`` (for copies that forward a source's tags)."""
    return "&".join(f"{quote(key, safe='')}={quote(value, safe='')}" for key, value in tags.items())


COPY_TAG_OPTIONS = ("REPLACE", "COPY")


def copy_source_tags(
    option: str | None, given: Mapping[str, str] | None, source: Mapping[str, str]
) -> dict[str, str]:
    """The tags a copy gives its destination by ``x-ms-copy-source-tag-option``: ``COPY`` takes
    the source's, ``REPLACE`` (the default) those of ``x-ms-tags`` (none without it). Any other
    value is 400 InvalidHeaderValue (case-sensitive, as the reference lists them)."""
    if option is not None and option not in COPY_TAG_OPTIONS:
        raise ServiceError(
            "InvalidHeaderValue",
            fields=(("HeaderName", "x-ms-copy-source-tag-option"), ("HeaderValue", option)),
        )
    if option == "COPY":
        return dict(source)
    return dict(given or {})


# ------------------------------------------------------------------------------- filters


@dataclass(frozen=True, slots=True)
class Comparison:
    """``key operator 'value'``; ``key`` is ``@container`` for the container scope."""

    key: str
    operator: str
    value: str


@dataclass(frozen=True, slots=True)
class AllOf:
    """Terms joined by AND (two or more)."""

    terms: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class AnyOf:
    """Terms joined by OR (two or more; ``x-ms-if-tags`` only)."""

    terms: tuple[Node, ...]


Node = Comparison | AllOf | AnyOf


# Azure's Reason for a ``where`` it cannot parse (the Java SDK's ServiceApiTests.findBlobsError,
# x-ms-version 2023-08-03: ``where=garbageTag``, 423 bytes); taken to come with every syntax error.
_WHERE_REASON = "This query parameter value is invalid."


def _syntax_error(text: str, position: int, message: str, header: str | None) -> ServiceError:
    if header is not None:
        return ServiceError("InvalidHeaderValue", fields=(("HeaderName", header), ("HeaderValue", text)))
    return ServiceError(
        "InvalidQueryParameterValue",
        f"Error parsing query at or near character position {position + 1}: {message}",
        fields=(("QueryParameterName", "where"), ("QueryParameterValue", text), ("Reason", _WHERE_REASON)),
    )


class _Parser:
    """A recursive-descent parser over the grammar in the module docstring."""

    def __init__(self, text: str, header: str | None, allow_container: bool) -> None:
        self.text = text
        self.position = 0
        self.header = header
        self.allow_container = allow_container

    def fail(self, message: str, at: int | None = None) -> ServiceError:
        return _syntax_error(self.text, self.position if at is None else at, message, self.header)

    def skip(self) -> None:
        while self.position < len(self.text) and self.text[self.position] in " \t\r\n":
            self.position += 1

    def keyword(self, word: str) -> bool:
        """Consume ``word`` (any case) when it stands alone here."""
        self.skip()
        end = self.position + len(word)
        if self.text[self.position : end].upper() != word:
            return False
        if end < len(self.text) and self.text[end] not in " \t\r\n(\"'":
            return False
        self.position = end
        return True

    def parse(self) -> Node:
        node = self.or_expr()
        self.skip()
        if self.position < len(self.text):
            raise self.fail(f"unexpected '{self.text[self.position]}'")
        return node

    def or_expr(self) -> Node:
        terms = [self.and_expr()]
        while True:
            start = self.position
            if not self.keyword("OR"):
                break
            if self.header is None:
                raise self.fail("unexpected or", start)
            terms.append(self.and_expr())
        flat: list[Node] = []
        for term in terms:
            flat.extend(term.terms if isinstance(term, AnyOf) else (term,))
        return flat[0] if len(flat) == 1 else AnyOf(tuple(flat))

    def and_expr(self) -> Node:
        terms = [self.term()]
        while self.keyword("AND"):
            terms.append(self.term())
        flat: list[Node] = []
        for term in terms:
            flat.extend(term.terms if isinstance(term, AllOf) else (term,))
        return flat[0] if len(flat) == 1 else AllOf(tuple(flat))

    def term(self) -> Node:
        self.skip()
        if self.text.startswith("(", self.position):
            self.position += 1
            node = self.or_expr()
            self.skip()
            if not self.text.startswith(")", self.position):
                raise self.fail("expected a ')' to close the expression group")
            self.position += 1
            return node
        return self.comparison()

    def comparison(self) -> Comparison:
        key_at = self.position
        key = self.key()
        self.skip()
        operator = next(
            (op for op in (">=", "<=", "<>", "=", ">", "<") if self.text.startswith(op, self.position)), None
        )
        if operator is None:
            # placed at the key the operator should follow, as Azure places it: 'garbageTag' is
            # "at or near character position 1: expected an operator" (findBlobsError above)
            raise self.fail("expected an operator", key_at)
        if operator == "<>" and self.header is None:
            raise self.fail("unexpected <>")
        self.position += len(operator)
        if key == CONTAINER and operator != "=":
            raise self.fail("only '=' applies to @container", key_at)
        value = self.value()
        return Comparison(key, operator, value)

    def key(self) -> str:
        start = self.position
        if self.text.startswith('"', start):
            end = self.text.find('"', start + 1)
            if end < 0:
                raise self.fail("expected a '\"' to close the tag name")
            key = self.text[start + 1 : end]
            self.position = end + 1
            if not key or (len(key) > MAX_KEY and self.header is None):
                raise self.fail("tag must be between 1 and 128 characters in length", start)
            if not TAG_CHARS.issuperset(key):
                raise self.fail("character not permitted in tag name or value", start)
            return key
        end = start
        while end < len(self.text) and (
            self.text[end] in _IDENTIFIER or (end == start and self.text[end] == "@")
        ):
            end += 1
        key = self.text[start:end]
        self.position = end
        if key.startswith("@"):
            if key != CONTAINER or not self.allow_container:
                raise self.fail(f"unsupported parameter '{key}'", start)
            return key
        if not key:
            raise self.fail("expected a tag name", start)
        if len(key) > MAX_KEY and self.header is None:
            raise self.fail("tag must be between 1 and 128 characters in length", start)
        return key

    def value(self) -> str:
        self.skip()
        start = self.position
        if not self.text.startswith("'", start):
            raise self.fail("expecting tag value")
        end = self.text.find("'", start + 1)
        if end < 0:
            raise self.fail("expected a ''' to close the tag value", start)
        value = self.text[start + 1 : end]
        self.position = end + 1
        if len(value) > MAX_VALUE and self.header is None:
            raise self.fail("tag value must be between 0 and 256 characters in length", start)
        if not TAG_CHARS.issuperset(value):
            raise self.fail("character not permitted in tag name or value", start)
        return value


def parse_filter(text: str, *, header: str | None = None, allow_container: bool = False) -> Node:
    """Parse a tag filter.

    ``header`` names the header it came from (``x-ms-if-tags``): OR, ``<>`` are then allowed,
    ``@container`` and the ``where`` rules are not, and errors name the header. Without it the
    text is a Find Blobs by Tags ``where``; ``allow_container`` is True for the account-level one.
    """
    parser = _Parser(text, header, allow_container and header is None)
    node = parser.parse()
    if header is None:
        _check_where(text, node)
    return node


def comparisons(node: Node) -> list[Comparison]:
    """Every comparison of a filter, in order (a ``where`` has no OR: all of them must hold)."""
    if isinstance(node, Comparison):
        return [node]
    return [c for term in node.terms for c in comparisons(term)]


_SIDE = {"=": "eq", ">": "low", ">=": "low", "<": "high", "<=": "high"}


def _check_where(text: str, node: Node) -> None:
    """The ``where`` limits: 10 distinct keys; per key one equality alone, or one bound per side."""
    seen: dict[str, list[str]] = {}
    for comparison in comparisons(node):
        sides = seen.setdefault(comparison.key, [])
        side = _SIDE[comparison.operator]
        if comparison.key != CONTAINER and ((sides and (side == "eq" or "eq" in sides)) or side in sides):
            raise _syntax_error(
                text, 0, "can't have multiple conditions for a single tag unless they define a range", None
            )
        sides.append(side)
    if sum(key != CONTAINER for key in seen) > MAX_TAGS:
        raise ServiceError(
            "InvalidQueryParameterValue",
            "Error parsing query: there can be at most 10 unique tags in a query",
            fields=(("QueryParameterName", "where"), ("QueryParameterValue", text)),
        )


def _holds(operator: str, actual: str, expected: str) -> bool:
    if operator == "=":
        return actual == expected
    if operator == "<>":
        return actual != expected
    if operator == ">":
        return actual > expected
    if operator == ">=":
        return actual >= expected
    if operator == "<":
        return actual < expected
    return actual <= expected


def matches(tags: Mapping[str, str], node: Node, container: str | None = None) -> bool:
    """Whether a blob with ``tags`` (in ``container``) satisfies the filter."""
    if isinstance(node, Comparison):
        actual = container if node.key == CONTAINER else tags.get(node.key)
        return actual is not None and _holds(node.operator, actual, node.value)
    if isinstance(node, AllOf):
        return all(matches(tags, term, container) for term in node.terms)
    return any(matches(tags, term, container) for term in node.terms)


def filter_keys(node: Node) -> list[str]:
    """The tag keys a filter names, in order, once each: Find Blobs by Tags returns only these."""
    keys: list[str] = []
    for comparison in comparisons(node):
        if comparison.key != CONTAINER and comparison.key not in keys:
            keys.append(comparison.key)
    return keys


def container_scope(node: Node) -> str | None:
    """The container an account-level ``where`` is limited to by ``@container = '...'``, if any."""
    for comparison in comparisons(node) if not isinstance(node, AnyOf) else ():
        if comparison.key == CONTAINER:
            return comparison.value
    return None


def render_filter(node: Node) -> str:
    """A filter's canonical text: keys in double quotes, AND/OR upper case, OR groups inside AND
    in parentheses; ``parse_filter(render_filter(n), ...) == n``."""
    if isinstance(node, Comparison):
        key = node.key if node.key == CONTAINER else f'"{node.key}"'
        return f"{key} {node.operator} '{node.value}'"
    if isinstance(node, AllOf):
        return " AND ".join(
            f"({render_filter(t)})" if isinstance(t, AnyOf) else render_filter(t) for t in node.terms
        )
    return " OR ".join(render_filter(t) for t in node.terms)
