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
  PostgreSQL, nothing on SQLite, whose one writer already excludes every other; ``{skip locked}``
  does the same for a queue's take, skipping rows another transaction is taking;
- ``{now}`` is the database's clock as a stored time (``now()`` on PostgreSQL, epoch seconds on
  SQLite), and ``{::uuid}`` follows a parameter that PostgreSQL must read as a ``uuid``.

A store may add markers of its own (``Dialect(markers)``) for a condition only one engine needs.

Anything an engine does differently beyond that (SQLite's blob content files, PostgreSQL's
chunk rows, advisory locks, Citus routing) is a step kind, a sub-plan or a statement the engine passes
in, not a branch in the plan. A plan raises :class:`Restart` when it met a concurrent change it
cannot resolve in place; an engine that runs transactions side by side runs it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Callable, Generator, Mapping, Sequence
from operator import itemgetter
from typing import Any, Literal, NamedTuple, TypeVar, cast

T = TypeVar("T")

Fetch = Literal["none", "one", "all", "rowcount", "batch", "aside", "collect"]


_NO_PARAMS: Mapping[str, Any] = {}  # shared by every statement without parameters: never changed


class Sql(NamedTuple):
    """One statement of a plan. ``fetch`` says what the plan receives back: nothing, the first
    row (or None), every row, or the number of rows changed. ``rows`` makes it an
    ``executemany`` over those parameter mappings (``params`` is then ignored), or with the
    ``batch`` fetch the statements of a :func:`batch`.

    A named tuple: a plan makes one per statement on the request path, and a tuple is the
    cheapest thing Python makes (and unpacks)."""

    text: str
    params: Mapping[str, Any] = _NO_PARAMS
    fetch: Fetch = "none"
    rows: Sequence[Mapping[str, Any]] | None = None


Plan = Generator[Sql, Any, T]
"""A store operation: yields statements, is sent their results, returns the answer."""


def batch(*statements: Sql) -> Sql:
    """One step of several statements, which an engine may send together and read back
    together (one round trip in PostgreSQL's pipeline mode): the plan receives the list of
    their replies. They still run one after another, so a read after a locking read sees what
    the lock guards. Each fetches ``none``, ``one`` or ``all``."""
    return Sql("", fetch="batch", rows=cast("Sequence[Mapping[str, Any]]", statements))  # typed as rows


def aside(*statements: Sql) -> Sql:
    """Statements (fetching as in a :func:`batch`) that may run on a connection of their own
    while the plan goes on: the plan receives a ticket, and their replies when it yields
    :func:`collect` with it. Without a connection to spare, an engine runs them there and then. For a read
    whose parts do not depend on each other (a Citus probe beside the reads it checks); a plan
    that ends without collecting has the statements cancelled."""
    return Sql("", fetch="aside", rows=cast("Sequence[Mapping[str, Any]]", statements))


def collect(ticket: Any) -> Sql:
    """The replies of the :func:`aside` statements that ``ticket`` stands for."""
    return Sql("", {"ticket": ticket}, "collect")


def batched(steps: Sequence[Sql]) -> Plan[list[Any]]:
    """A plan of one :func:`batch` of ``steps``: aside statements as one connection runs them."""
    return (yield batch(*steps))  # type: ignore[no-any-return]


def _alone(statement: Sql) -> Plan[Any]:
    """A plan of one statement: a batch's statements, run one by one where nothing batches."""
    return (yield statement)


RENDERED_LIMIT = 4096  # rendered texts a dialect keeps
_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


class Restart(Exception):
    """The transaction met a concurrent change it cannot resolve in place; run it again."""


class Dialect:
    """How one engine spells the plan notation: ``markers`` maps each marker to its text (in the
    plan's notation: parameters stay ``:name``), and a subclass may rewrite the result. The
    default is SQLite's, where the markers are (nearly) empty and parameters are native."""

    MARKERS: Mapping[str, str] = {
        "{key=}": "",  # the distribution key's condition
        "{key,}": "",  # its column in an INSERT
        "{:key,}": "",  # and its value
        "{lock}": "",
        "{skip locked}": "",
        "{::uuid}": "",
        "{now}": "((julianday('now') - 2440587.5) * 86400.0)",
        # a blob record's stored form names a retention date or a legal hold
        "{immutability marked}": "(instr(doc, CAST('\"immutable_until\"' AS BLOB)) > 0"
        " OR instr(doc, CAST('\"legal_hold\"' AS BLOB)) > 0)",
    }

    def __init__(self, markers: Mapping[str, str] | None = None) -> None:
        self._markers = {**(markers or {}), **self.MARKERS}  # a store's own may use the common ones
        self._rendered: dict[str, str] = {}
        # plan text -> (the driver's text, what turns a plan's parameters into the driver's, or
        # None when it takes them as they are): read by the runners directly
        self.prepared: dict[str, tuple[str, Callable[[Mapping[str, Any]], Any] | None]] = {}

    def render(self, text: str) -> str:
        """The statement with this engine's markers, parameters still named; renders once."""
        done = self._rendered.get(text)
        if done is None:
            if len(self._rendered) >= RENDERED_LIMIT:  # texts built per query (filters) come and go
                self._rendered.clear()
            done = self._rendered[text] = self._render(text)
        return done

    def prepare(self, text: str) -> tuple[str, Callable[[Mapping[str, Any]], Any] | None]:
        """The statement as the driver takes it, and how its parameters are passed; once a text."""
        done = self.prepared.get(text)
        if done is None:
            if len(self.prepared) >= RENDERED_LIMIT:  # as for renderings: per-query texts come and go
                self.prepared.clear()
            done = self.prepared[text] = self._prepare(self.render(text))
        return done

    def _prepare(self, rendered: str) -> tuple[str, Callable[[Mapping[str, Any]], Any] | None]:
        return rendered, None

    def _render(self, text: str) -> str:
        for marker, spelling in self._markers.items():
            text = text.replace(marker, spelling)
        return text


class SqliteDialect(Dialect):
    """SQLite has no distribution column or row locks. It takes ``:name`` parameters itself, but
    binds a mapping's by looking each name up from C, several times the cost of a position; so
    statements are run with ``?`` and a tuple that :func:`operator.itemgetter` takes from the
    mapping."""

    def _prepare(self, rendered: str) -> tuple[str, Callable[[Mapping[str, Any]], Any] | None]:
        names = _PARAM.findall(rendered)
        text = _PARAM.sub("?", rendered)
        if not names:
            return text, _no_parameters
        if len(names) == 1:
            (name,) = names
            return text, lambda params: (params[name],)
        return text, itemgetter(*names)


class PostgresDialect(Dialect):
    """psycopg takes ``%(name)s``; rows carry the distribution column ``dkey``, and a read whose
    rows the transaction changes next locks them."""

    MARKERS: Mapping[str, str] = {
        "{key=}": "dkey = :dkey AND",
        "{key,}": "dkey,",
        "{:key,}": ":dkey,",
        "{lock}": "FOR UPDATE",
        "{skip locked}": "FOR UPDATE SKIP LOCKED",
        "{::uuid}": "::uuid",
        "{now}": "now()",
        "{immutability marked}": "(position(convert_to('\"immutable_until\"', 'UTF8') in doc) > 0"
        " OR position(convert_to('\"legal_hold\"', 'UTF8') in doc) > 0)",
    }

    def _render(self, text: str) -> str:
        return _PARAM.sub(r"%(\1)s", super()._render(text).replace("%", "%%"))


def _no_parameters(params: Mapping[str, Any]) -> tuple[()]:
    return ()


def run_sync(plan: Plan[T], conn: Any, dialect: Dialect) -> T:
    """Run ``plan`` on a DB-API connection whose calls block (``sqlite3``), step by step. It
    runs for every statement of every request, so it is written flat: no call it can avoid."""
    send, execute, prepared = plan.send, conn.execute, dialect.prepared
    reply: Any = None
    try:
        while True:
            text, params, fetch, rows = send(reply)
            if rows is not None:
                if fetch == "batch" or fetch == "aside":  # aside: the replies are the ticket
                    reply = [run_sync(_alone(step), conn, dialect) for step in cast("Sequence[Sql]", rows)]
                    continue
                text, convert = prepared.get(text) or dialect.prepare(text)
                conn.executemany(text, rows if convert is None else map(convert, rows))
                reply = None
                continue
            if fetch == "collect":
                reply = params["ticket"]
                continue
            text, convert = prepared.get(text) or dialect.prepare(text)
            if convert is not None:
                params = convert(params)
            if fetch == "one":
                reply = execute(text, params).fetchone()
            elif fetch == "all":
                reply = execute(text, params).fetchall()
            elif fetch == "rowcount":
                reply = execute(text, params).rowcount
            else:
                execute(text, params)
                reply = None
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def _settle(asides: list[asyncio.Future[Any]]) -> None:
    """Cancel the aside statements a plan left uncollected, and wait for them to end: their
    connection goes back to the pool only then, and a failure of theirs is no one's to see."""
    for future in asides:
        future.cancel()
    for future in asides:
        with contextlib.suppress(BaseException):
            await future


async def run_async(plan: Plan[T], conn: Any, dialect: Dialect, pipe: Any = None) -> T:
    """Run ``plan`` on an async connection (psycopg's ``AsyncConnection``), step by step; in
    the connection's pipeline ``pipe`` when one is given (``postgres/pipelined.py``), where a
    statement whose answer the plan does not read is only queued, and a row count waits for a
    sync. A batch's statements are all sent before any answer is read: one round trip there."""
    send, execute, prepared = plan.send, conn.execute, dialect.prepared
    reply: Any = None
    asides: list[asyncio.Future[Any]] | None = None
    try:
        while True:
            text, params, fetch, rows = send(reply)
            if fetch == "aside":
                steps = cast("Sequence[Sql]", rows)
                runner = getattr(conn, "aside", None)
                started = None if runner is None else await runner(steps)
                if started is None:  # no other connection: run them now, as a batch
                    reply = await run_async(batched(steps), conn, dialect, pipe)
                else:
                    reply = started
                    asides = [*(asides or ()), started]
                continue
            if fetch == "collect":
                ticket = params["ticket"]
                reply = await ticket if isinstance(ticket, asyncio.Future) else ticket
                continue
            if fetch == "batch":
                steps = cast("Sequence[Sql]", rows)
                sent = [
                    await execute((prepared.get(s.text) or dialect.prepare(s.text))[0], s.params)
                    for s in steps
                ]
                reply = [
                    await cursor.fetchone() if step.fetch == "one"
                    else await cursor.fetchall() if step.fetch == "all"
                    else None
                    for step, cursor in zip(steps, sent, strict=True)
                ]  # fmt: skip
                continue
            text, _convert = prepared.get(text) or dialect.prepare(text)  # psycopg takes mappings
            if rows is not None:
                async with conn.cursor() as cursor:
                    await cursor.executemany(text, rows)
                reply = None
            elif fetch == "one":
                reply = await (await execute(text, params)).fetchone()
            elif fetch == "all":
                reply = await (await execute(text, params)).fetchall()
            elif fetch == "rowcount":
                cursor = await execute(text, params)
                if pipe is not None:
                    await pipe.sync()  # a count is known only once the statement completed
                reply = cursor.rowcount
            else:
                await execute(text, params)
                reply = None
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    finally:
        if asides:
            await _settle(asides)
