"""The Table store's hot statements sent through libpq directly, on a pooled connection.

psycopg's ``execute`` makes a cursor, an adapters map and a transformer per call, dumps every
parameter through its adapters, keeps its own prepared-statement bookkeeping and waits through a
generic generator protocol: several times the CPU the database spends on a point read. The few
statements every point read and insert sends have fixed parameter types, so they skip all of
that here: each is prepared once per connection under a name of ours, its parameters are
already bytes (binary ``bytea`` and ``int8``, text for ``text``), and one exchange sends any
number of them in libpq's pipeline mode and waits once for the whole round trip.

Anything else (and every statement of a plan) still goes through psycopg; a connection used
here is left as psycopg expects it: every result read, out of pipeline mode.
"""

from __future__ import annotations

import asyncio
import re
import struct
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg import pq
from psycopg.adapt import Transformer
from psycopg.errors import InvalidSqlStatementName, error_from_result

from tabulae.storage.plan import Plan

if TYPE_CHECKING:
    from tabulae.storage.postgres.engine import Connection

T = TypeVar("T")

BYTEA, INT8, TEXT = 17, 20, 25

_INT8 = struct.Struct(">q")
_SYNC = pq.ExecStatus.PIPELINE_SYNC
_FAILED = (pq.ExecStatus.FATAL_ERROR, pq.ExecStatus.PIPELINE_ABORTED)
_COUNTER = iter(range(1, 2**62))


@dataclass(frozen=True, slots=True)
class Statement:
    """One statement with ``$n`` parameters of the given types, prepared under ``name``."""

    text: bytes
    types: tuple[int, ...]
    name: bytes = field(default=b"")
    formats: tuple[int, ...] = ()

    @classmethod
    def of(cls, text: str, *types: int) -> Statement:
        formats = tuple(0 if oid == TEXT else 1 for oid in types)
        return cls(text.encode(), types, b"tabulae_%d" % next(_COUNTER), formats)


def int8(value: int) -> bytes:
    """An ``int8`` parameter in binary format."""
    return _INT8.pack(value)


def read_int8(value: bytes) -> int:
    """An ``int8`` column read in binary format."""
    return int(_INT8.unpack(value)[0])


Call = tuple[Statement, Sequence[bytes | None]]

# the statements each server session (libpq connection) has prepared; a closed one takes its set along
_prepared: weakref.WeakKeyDictionary[Any, set[bytes]] = weakref.WeakKeyDictionary()


async def exchange(conn: Connection, calls: Sequence[Call]) -> list[pq.abc.PGresult]:
    """Send ``calls`` in one round trip (between them nothing waits for the server) and return
    each one's result, in order. The first statement that fails raises its error as psycopg
    would, after every result was read; statements after it were not run (and an open
    transaction is left failed, for the caller to roll back).

    psycopg deallocates every prepared statement of a session when it sees a ``ROLLBACK`` or a
    ``DROP`` there (its own cache may have gone stale), ours too: a statement found missing is
    prepared again and the calls are sent once more (nothing was committed: a ``COMMIT`` after
    a missing statement is not run, and a transaction it leaves open is rolled back first).
    Which of ours the session still has is asked of the server, not assumed: a statement this
    same exchange prepared before the missing one was found is there, and preparing it again
    would fail."""
    try:
        return await _exchange(conn, calls)
    except InvalidSqlStatementName:
        if conn.pgconn.transaction_status != pq.TransactionStatus.IDLE:
            await conn.execute("ROLLBACK")  # not prepared: ours may be gone too
        _prepared[conn.pgconn] = await _names_prepared(conn)
        return await _exchange(conn, calls)


async def _names_prepared(conn: Connection) -> set[bytes]:
    """The names of the statements the session has prepared, as the server knows them."""
    cursor = await conn.execute("SELECT name FROM pg_prepared_statements")
    return {str(row[0]).encode() for row in await cursor.fetchall()}


async def _exchange(conn: Connection, calls: Sequence[Call]) -> list[pq.abc.PGresult]:
    pg = conn.pgconn
    done = _prepared.get(pg)
    if done is None:
        done = _prepared[pg] = set()
    pg.enter_pipeline_mode()
    try:
        preparing: dict[int, bytes] = {}  # result index -> the name a prepare made
        sent = 0
        for statement, params in calls:
            if statement.name not in done:
                pg.send_prepare(statement.name, statement.text, statement.types)
                preparing[sent] = statement.name
                sent += 1
            pg.send_query_prepared(statement.name, params, statement.formats, 1)
            sent += 1
        pg.pipeline_sync()
        results = await _read(pg)
        pg.exit_pipeline_mode()
    except BaseException:
        # cancelled or broken half-way: results may still be on their way, so the connection
        # is closed (the pool then replaces it) rather than handed back in an unknown state
        pg.finish()
        raise
    failure = None
    answers = []
    for index, result in enumerate(results):
        failed = result.status in _FAILED
        if failed and failure is None and result.status == pq.ExecStatus.FATAL_ERROR:
            failure = result
        name = preparing.get(index)
        if name is not None:
            if not failed:
                done.add(name)
        elif not failed:
            answers.append(result)
    if failure is not None:
        raise error_from_result(failure, "utf-8")
    return answers


async def _read(pg: Any) -> list[pq.abc.PGresult]:
    """Every result up to the pipeline's sync, flushing what libpq could not send at once.

    A large answer (a page of rows) arrives in several pieces. The first is waited for as a
    point read's whole answer is, registering the socket with the loop for that one wait; if
    more is to come, the socket then stays registered until the sync rather than once per
    piece (each registration is two system calls and a callback). The loop's polling is
    level-triggered, so data that arrives while nothing waits wakes the next wait."""
    loop = asyncio.get_running_loop()
    fd = pg.socket
    while pg.flush():
        await _ready(loop, fd, write=True)
    results: list[pq.abc.PGresult] = []
    await _ready(loop, fd)  # the answer cannot be there yet: reading now would find nothing
    if _collect(pg, results):
        return results
    arrived = _Arrivals(loop)
    loop.add_reader(fd, arrived.wake)
    try:
        while True:
            await arrived.next()
            if _collect(pg, results):
                return results
    finally:
        loop.remove_reader(fd)


def _collect(pg: Any, results: list[pq.abc.PGresult]) -> bool:
    """Read what has arrived, adding each complete result to ``results``; True at the sync."""
    pg.consume_input()
    while not pg.is_busy():
        result = pg.get_result()
        if result is None:
            continue  # the end of one statement's results
        if result.status == _SYNC:
            return True
        results.append(result)
    if pg.status != pq.ConnStatus.OK:
        raise psycopg.OperationalError("the database connection was lost")
    return False


class _Arrivals:
    """Wakes a reader each time its socket has data, for as long as it stays registered."""

    __slots__ = ("_loop", "_waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._waiter: asyncio.Future[None] | None = None

    def wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def next(self) -> asyncio.Future[None]:
        self._waiter = waiter = self._loop.create_future()
        return waiter


async def _ready(loop: asyncio.AbstractEventLoop, fd: int, write: bool = False) -> None:
    """Wait once for ``fd`` to be readable (or writable), registered with the loop for that wait."""
    waiter = loop.create_future()

    def wake() -> None:
        if not waiter.done():
            waiter.set_result(None)

    if write:
        loop.add_writer(fd, wake)
        try:
            await waiter
        finally:
            loop.remove_writer(fd)
    else:
        loop.add_reader(fd, wake)
        try:
            await waiter
        finally:
            loop.remove_reader(fd)


# ------------------------------------------------------------------------- plans that read

_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
_TYPES: dict[type, int] = {bytes: BYTEA, int: INT8, str: TEXT}
_PLANNED: dict[tuple[str, tuple[int, ...]], tuple[Statement, tuple[str, ...]]] = {}
PLANNED_LIMIT = 4096  # statements of plans kept (texts built per query come and go)


def _planned(text: str, params: Mapping[str, Any]) -> tuple[Statement, tuple[str, ...]] | None:
    """The plan statement ``text`` as a prepared statement for these parameters' types, and
    the parameter names in ``$n`` order; None when a parameter has a type not sent here."""
    names = tuple(dict.fromkeys(_PARAM.findall(text)))
    try:
        types = tuple(_TYPES[type(params[name])] for name in names)
    except KeyError:
        return None
    key = (text, types)
    done = _PLANNED.get(key)
    if done is None:
        if len(_PLANNED) >= PLANNED_LIMIT:
            _PLANNED.clear()
        position = {name: index for index, name in enumerate(names, 1)}
        numbered = _PARAM.sub(lambda match: f"${position[match.group(1)]}", text)
        done = _PLANNED[key] = (Statement.of(numbered, *types), names)
    return done


def _encode(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, int):
        return _INT8.pack(value)
    return str(value).encode()


# The column types read here, each as psycopg's binary loader gives it: ``bytea`` as bytes,
# ``int8``/``int4`` as int, ``text`` as str (UTF-8), ``bool`` as bool, NULL as None.
_LOADED = frozenset({BYTEA, INT8, 23, TEXT, 16})
# One loader per process, pointed at a result and read at once, never across an await: psycopg's
# C loop reads a page of rows for a fraction of a call per value from Python.
_LOADER = Transformer()


def load_rows(result: pq.abc.PGresult, types: Sequence[int]) -> list[tuple[Any, ...]]:
    """The rows of a binary-format result whose columns have the ``types`` (of ``_LOADED``)."""
    _LOADER.set_pgresult(result, set_loaders=False)
    _LOADER.set_loader_types(types, pq.Format.BINARY)
    return _LOADER.load_rows(0, result.ntuples, tuple)


def _rows(result: pq.abc.PGresult) -> list[tuple[Any, ...]] | None:
    """The rows of a result read in binary format, or None for a column type not read here."""
    types = [result.ftype(column) for column in range(result.nfields)]
    if not _LOADED.issuperset(types):
        return None
    return load_rows(result, types)


class Unsupported(Exception):
    """A plan statement this module does not send (a parameter or column type of another kind)."""


async def run_read(conn: Connection, plan: Plan[T]) -> T:
    """Run a read-only plan (:mod:`tabulae.storage.plan`) whose statements fetch rows (``one``
    or ``all``) with ``bytes``, ``int`` and ``str`` parameters, each statement prepared once per
    connection. Raises :class:`Unsupported` at a statement that does not fit (the plan only
    reads, so the caller may run it again another way)."""
    send = plan.send
    reply: Any = None
    try:
        while True:
            text, params, fetch, rows = send(reply)
            planned = _planned(text, params) if rows is None and fetch in ("one", "all") else None
            if planned is None:
                raise Unsupported(text)
            statement, names = planned
            [result] = await exchange(conn, ((statement, [_encode(params[name]) for name in names]),))
            found = _rows(result)
            if found is None:
                raise Unsupported(text)
            reply = found if fetch == "all" else (found[0] if found else None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
