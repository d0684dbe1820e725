"""Store operations written once: a plan says what to read, decide and write; an engine runs it.

A *plan* is a generator. It yields :class:`Sql` steps (one statement each, in the plan's own
notation) and receives each step's result; it returns the operation's answer. The plan holds
every decision of the operation, and no database: the same plan runs on SQLite's writer thread
(:func:`run_sync`, plain calls on a ``sqlite3`` connection) and on PostgreSQL's async pool
(:func:`run_async`, awaited calls on a psycopg connection). A sub-plan is composed with
``yield from``, so a helper that reads a blob's extents is written once and used by both.

The notation is the SQL both engines understand, with three things an engine spells its own way,
which a :class:`Dialect` renders (once per distinct text, then cached):

- parameters are named, ``:name``, and passed as a mapping (SQLite's own style; PostgreSQL's
  ``%(name)s`` is rendered from it, with literal ``%`` doubled);
- ``{key=}`` stands before the first condition on a row of a distributed table: on PostgreSQL it
  becomes ``dkey = :dkey AND`` (the distribution column, which Citus routes on), on SQLite
  nothing; ``{key,}`` and ``{:key,}`` do the same in an INSERT's column and value lists;
- ``{lock}`` ends a read whose rows the transaction goes on to change: ``FOR UPDATE`` on
  PostgreSQL, nothing on SQLite, whose one writer already excludes every other.

Anything an engine does differently beyond that (SQLite's blob content files, PostgreSQL's
chunk rows, advisory locks, Citus routing) is a step kind or an engine method, not a branch in
the plan.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

T = TypeVar("T")

Fetch = Literal["none", "one", "all", "rowcount"]


@dataclass(frozen=True, slots=True)
class Sql:
    """One statement of a plan. ``fetch`` says what the plan receives back: nothing, the first
    row (or None), every row, or the number of rows changed. ``rows`` makes it an
    ``executemany`` over those parameter mappings (``params`` is then ignored)."""

    text: str
    params: Mapping[str, Any] = field(default_factory=dict)
    fetch: Fetch = "none"
    rows: Sequence[Mapping[str, Any]] | None = None


Plan = Generator[Sql, Any, T]
"""A store operation: yields statements, is sent their results, returns the answer."""


RENDERED_LIMIT = 4096  # rendered texts a dialect keeps
_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


class Dialect:
    """How one engine spells the plan notation. Subclasses set what the markers become (in the
    plan's notation: parameters stay ``:name``) and may rewrite the result; the default is
    SQLite's, where every marker is empty and parameters are native."""

    key_condition = ""  # what ``{key=}`` becomes
    key_column = ""  # what ``{key,}`` becomes
    key_value = ""  # what ``{:key,}`` becomes
    lock = ""  # what ``{lock}`` becomes

    def __init__(self) -> None:
        self._rendered: dict[str, str] = {}

    def render(self, text: str) -> str:
        """The statement as this engine's driver takes it; the same text renders once."""
        done = self._rendered.get(text)
        if done is None:
            if len(self._rendered) >= RENDERED_LIMIT:  # texts built per query (filters) come and go
                self._rendered.clear()
            done = self._rendered[text] = self._render(text)
        return done

    def _render(self, text: str) -> str:
        return (
            text.replace("{key=}", self.key_condition)
            .replace("{key,}", self.key_column)
            .replace("{:key,}", self.key_value)
            .replace("{lock}", self.lock)
        )


class SqliteDialect(Dialect):
    """SQLite takes ``:name`` parameters itself and has no distribution column or row locks."""


class PostgresDialect(Dialect):
    """psycopg takes ``%(name)s``; rows carry the distribution column ``dkey``, and a read whose
    rows the transaction changes next locks them."""

    key_condition = "dkey = :dkey AND"
    key_column = "dkey,"
    key_value = ":dkey,"
    lock = "FOR UPDATE"

    def _render(self, text: str) -> str:
        return _PARAM.sub(r"%(\1)s", super()._render(text).replace("%", "%%"))


def _result(fetch: Fetch, cursor: Any) -> Any:
    if fetch == "one":
        return cursor.fetchone()
    if fetch == "all":
        return cursor.fetchall()
    if fetch == "rowcount":
        return cursor.rowcount
    return None


def run_sync(plan: Plan[T], conn: Any, dialect: Dialect) -> T:
    """Run ``plan`` on a DB-API connection whose calls block (``sqlite3``), step by step."""
    reply: Any = None
    try:
        while True:
            step = plan.send(reply)
            text = dialect.render(step.text)
            if step.rows is not None:
                conn.executemany(text, step.rows)
                reply = None
            else:
                reply = _result(step.fetch, conn.execute(text, step.params))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def _result_async(fetch: Fetch, cursor: Any) -> Any:
    if fetch == "one":
        return await cursor.fetchone()
    if fetch == "all":
        return await cursor.fetchall()
    if fetch == "rowcount":
        return cursor.rowcount
    return None


async def run_async(plan: Plan[T], conn: Any, dialect: Dialect) -> T:
    """Run ``plan`` on an async connection (psycopg's ``AsyncConnection``), step by step."""
    reply: Any = None
    try:
        while True:
            step = plan.send(reply)
            text = dialect.render(step.text)
            if step.rows is not None:
                async with conn.cursor() as cursor:
                    await cursor.executemany(text, step.rows)
                reply = None
            else:
                reply = await _result_async(step.fetch, await conn.execute(text, step.params))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
