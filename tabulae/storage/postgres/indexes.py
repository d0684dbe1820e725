"""Property indexes on PostgreSQL: one partial expression index per (table, property).

All tables share ``entities``, so a table's index is *partial*: ``WHERE dist >= <id prefix> AND
dist < <next id prefix>`` over ``(key, dist, rk)``, where *key* is one of the
immutable functions below applied to the stored JSON: the property's typed value when its type
is in the index's family, else NULL (see :mod:`tabulae.storage.indexes`). PostgreSQL keeps the
index in every write's own transaction. Queries repeat the partial condition with the same
literal prefixes (a partial index is only used when the query implies its predicate), so one
key's entries come out in (dist, rk) order: an ``eq`` page is a bounded index scan, no sort.

Keys: strings, DateTimes (fraction padded to 7 digits) and Guids as UTF-8 ``bytea`` (byte order
is code-point order whatever the database's collation); numbers as ``numeric`` (exact for Int64;
a Double's key is its shortest decimal text, so lookups widen by an ulp and look up both the
integer and its double's text); Booleans as ``boolean``. PostgreSQL's JSON parser refuses the
escape of U+0000, so the functions read the stored JSON with every ``\\u0000`` turned into
``\\u0001``; a String whose stored form then shows ``\\u0001`` (it held U+0000 or U+0001, or
text that looks like their escape) gets the key ``\\xff``, which no UTF-8 text has, and every
String lookup includes that key. Values of the other families never contain a backslash.

The build is ``CREATE INDEX CONCURRENTLY``: writes and reads go on, progress is PostgreSQL's own
``pg_stat_progress_create_index``, and the index is marked ready only once the build committed.
On Citus the coordinator passes the key functions and the index build on to every shard of
``entities``, and a lookup reads each shard's own copy of the index (``tests/storage/test_citus.py``
reads the shards' plans).
"""

from __future__ import annotations

import asyncio
import math
import struct
import time
from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg

from tabulae.model import edm
from tabulae.model.indexes import FAILED, READY, family_of
from tabulae.storage.index_plans import IndexSql, PlannedIndexes
from tabulae.storage.plan import Plan
from tabulae.storage.postgres import planned
from tabulae.storage.postgres.engine import PostgresDatabase, Schema
from tabulae.storage.table_plans import EntityLayout, index_name

if TYPE_CHECKING:
    from tabulae.storage.postgres.engine import Connection

T = TypeVar("T")

_FUNCTIONS = {
    "string": """
    CREATE OR REPLACE FUNCTION tabulae_ix_string(props bytea, name text) RETURNS bytea
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $f$
    DECLARE j json := replace(convert_from(props, 'UTF8'), '\\u0000', '\\u0001')::json; v json := j -> name;
    BEGIN
        IF v IS NULL OR json_typeof(v) <> 'string' OR (j -> (name || '@odata.type')) IS NOT NULL THEN
            RETURN NULL;
        END IF;
        IF strpos(v::text, '\\u0001') > 0 THEN
            RETURN '\\xff'::bytea;
        END IF;
        RETURN convert_to(v #>> '{}', 'UTF8');
    END $f$
    """,
    "number": """
    CREATE OR REPLACE FUNCTION tabulae_ix_number(props bytea, name text) RETURNS numeric
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $f$
    DECLARE j json := replace(convert_from(props, 'UTF8'), '\\u0000', '\\u0001')::json;
            v json := j -> name; t text := json_typeof(v); a text; s text;
    BEGIN
        IF t = 'number' THEN
            RETURN v::text::numeric;
        END IF;
        IF t <> 'string' THEN
            RETURN NULL;
        END IF;
        a := j ->> (name || '@odata.type');
        IF a = 'Edm.Int64' THEN
            RETURN (v #>> '{}')::numeric;
        END IF;
        IF a = 'Edm.Double' THEN
            s := v #>> '{}';
            IF s = 'Infinity' OR s = '-Infinity' THEN
                RETURN s::numeric;
            END IF;
        END IF;
        RETURN NULL;
    END $f$
    """,
    "boolean": """
    CREATE OR REPLACE FUNCTION tabulae_ix_boolean(props bytea, name text) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $f$
    DECLARE v json := replace(convert_from(props, 'UTF8'), '\\u0000', '\\u0001')::json -> name;
    BEGIN
        IF v IS NULL OR json_typeof(v) <> 'boolean' THEN
            RETURN NULL;
        END IF;
        RETURN v::text = 'true';
    END $f$
    """,
    "datetime": """
    CREATE OR REPLACE FUNCTION tabulae_ix_datetime(props bytea, name text) RETURNS bytea
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $f$
    DECLARE j json := replace(convert_from(props, 'UTF8'), '\\u0000', '\\u0001')::json; s text;
    BEGIN
        IF (j ->> (name || '@odata.type')) IS DISTINCT FROM 'Edm.DateTime' THEN
            RETURN NULL;
        END IF;
        s := j ->> name;
        RETURN convert_to(substr(s, 1, 19) || substr(
            CASE WHEN length(s) > 20 THEN substr(s, 21, length(s) - 21) ELSE '' END || '0000000', 1, 7),
            'UTF8');
    END $f$
    """,
    "guid": """
    CREATE OR REPLACE FUNCTION tabulae_ix_guid(props bytea, name text) RETURNS bytea
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $f$
    DECLARE j json := replace(convert_from(props, 'UTF8'), '\\u0000', '\\u0001')::json;
    BEGIN
        IF (j ->> (name || '@odata.type')) IS DISTINCT FROM 'Edm.Guid' THEN
            RETURN NULL;
        END IF;
        RETURN convert_to(j ->> name, 'UTF8');
    END $f$
    """,
}


def _create_once(family: str, statement: str) -> str:
    """The function's creation, skipped when it exists: front-ends starting together would
    collide in ``CREATE OR REPLACE`` ("tuple concurrently updated"); a plain ``CREATE`` that
    loses the race fails with a unique violation, which schema creation retries."""
    body = statement.replace("CREATE OR REPLACE FUNCTION", "CREATE FUNCTION")
    return (
        f"DO $do$ BEGIN IF to_regprocedure('tabulae_ix_{family}(bytea,text)') IS NULL THEN {body};"
        " END IF; END $do$"
    )


SCHEMA = Schema(
    (
        """
        CREATE TABLE IF NOT EXISTS property_indexes (
            table_id bigint NOT NULL,
            property text COLLATE "C" NOT NULL,
            edm_type text NOT NULL,
            index_name text NOT NULL,
            state text NOT NULL,
            error text,
            CONSTRAINT property_indexes_pkey PRIMARY KEY (table_id, property)
        )
        """,
        *(_create_once(family, statement) for family, statement in _FUNCTIONS.items()),
    ),
    reference=("property_indexes",),
)

UNKEYABLE = b"\xff"  # the key of a String holding U+0000 (see the module docstring)
READY_CACHE_SECONDS = 1.0  # how long a front-end trusts its list of a table's ready indexes
_ID = struct.Struct(">q")
_TRY_TURN = "SELECT pg_try_advisory_lock(%s)"
_BUILD_TURN = 0x7461625F69647831  # "tab_idx1": the advisory lock key of the one build at a time
BUILD_TURN_PAUSE = 0.1  # seconds between tries for the build's turn
_SET_STATE = "UPDATE property_indexes SET state = %s, error = %s WHERE table_id = %s AND property = %s"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _bytea(data: bytes) -> str:
    return f"'\\x{data.hex()}'::bytea"


def _datetime_key(ticks: int) -> bytes:
    seconds, fraction = divmod(ticks, edm.TICKS_PER_SECOND)
    return (edm.format_datetime(seconds * edm.TICKS_PER_SECOND)[:19] + f"{fraction:07d}").encode("ascii")


def _decimal(value: float) -> Decimal:
    return Decimal(repr(value)) if math.isfinite(value) else Decimal(value)


class PostgresIndexSql(IndexSql):
    """Keys are the ``tabulae_ix_*`` functions' values; a declaration names its index, whose
    build progress PostgreSQL reports."""

    declared = (", index_name", ", :name")
    progress = (
        "p.tuples_done, p.tuples_total",
        " LEFT JOIN pg_stat_progress_create_index p"
        " ON i.state = 'building' AND p.index_relid = to_regclass(i.index_name)",
    )
    not_null = False

    def key_sql(self, family: str, prop: str) -> str:
        return f"tabulae_ix_{family}(props, {_quote(prop)})"

    def partial(self, table: int) -> str:
        """Its table's keys, which queries repeat verbatim so the planner can prove them. (Not
        also ``key IS NOT NULL``: every write would run the key function twice.)"""
        return f"dist >= {_bytea(_ID.pack(table))} AND dist < {_bytea(_ID.pack(table + 1))}"

    def create(self, table: int, prop: str, edm_type: str) -> str:
        key = self.key_sql(family_of(edm_type), prop)
        return (
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {index_name(table, prop)}"
            f" ON entities (({key}), dist, rk) WHERE {self.partial(table)}"
        )

    def point_keys(self, family: str, edm_type: str, value: Any) -> list[Any]:
        if family == "string":
            return [value.encode("utf-8", "surrogatepass"), UNKEYABLE]
        if family == "datetime":
            return [_datetime_key(value)]
        if family == "guid":
            return [value.encode("ascii", "replace")]
        if family == "boolean":
            return [bool(value)]
        if isinstance(value, float):
            return [_decimal(value)]
        keys = [Decimal(value)]
        as_float = float(value)
        if as_float == value:
            keys.append(_decimal(as_float))  # a Double equal to the integer, under its shortest text
        return keys

    def bound_key(self, family: str, bound: tuple[str, Any], down: bool) -> Any:
        """Numbers one ulp wider (a Double's key is its shortest decimal text)."""
        if family != "number":
            return self.point_keys(family, *bound)[0]
        as_float = float(bound[1])
        if math.isinf(as_float):
            return Decimal(as_float)
        return _decimal(math.nextafter(as_float, -math.inf if down else math.inf))

    def widened(self, family: str, condition: str, key: str, params: dict[str, Any]) -> str:
        """A String range takes in the key of Strings no key expresses (see the module docstring)."""
        if family != "string":
            return condition
        params["ix_unkeyable"] = UNKEYABLE
        return f"(({condition}) OR {key} = :ix_unkeyable)"


SPELLED = PostgresIndexSql()


async def _take_build_turn(conn: Connection) -> bool:
    """Whether this session now holds the one index build's turn (never waits for it)."""
    row = await (await conn.execute(_TRY_TURN, (_BUILD_TURN,))).fetchone()
    return bool(row and row[0])


class PostgresIndexes(PlannedIndexes):
    """Index declarations, builds and lookups for the PostgreSQL table store."""

    def __init__(self, database: PostgresDatabase, layout: EntityLayout) -> None:
        super().__init__(layout, SPELLED)
        self._db = database
        self._ready: dict[tuple[str, str], tuple[float, dict[str, str]]] = {}

    async def _read(self, make: Callable[[], Plan[T]]) -> T:
        return await planned.read(self._db, make)

    async def _write(self, make: Callable[[], Plan[T]], transaction: bool = True) -> T:
        try:
            return await planned.write(self._db, make, transaction=transaction)
        finally:
            self._ready.clear()

    async def _build(self, table_id: int, prop: str, edm_type: str) -> None:
        """``CREATE INDEX CONCURRENTLY`` on a connection of the pool (autocommit, as it must be),
        then ready; an invalid leftover of a failed build is dropped.

        Builds run one at a time in the database, whichever front-end starts them: two concurrent
        builds of expression indexes on ``entities`` wait for each other's snapshots (PostgreSQL
        exempts only plain indexes), as a build's ``ANALYZE`` and another's build do, and
        PostgreSQL then fails one as a deadlock. They would queue on the table's lock anyway,
        so taking turns costs nothing. The turn is a session advisory lock, tried and retried
        after a pause rather than waited for: a session waiting for it would hold a snapshot
        and deadlock the running build in the same way."""
        name = index_name(table_id, prop)

        async def run(conn: Connection) -> None:
            while not await _take_build_turn(conn):
                await asyncio.sleep(BUILD_TURN_PAUSE)
            try:
                await conn.execute(SPELLED.create(table_id, prop, edm_type))
                cursor = await conn.execute(
                    "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", (name,)
                )
                row = await cursor.fetchone()
                if row is None or not row[0]:  # an invalid index of an earlier, failed build
                    await conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
                    await conn.execute(SPELLED.create(table_id, prop, edm_type))
                await conn.execute("ANALYZE entities")  # statistics for the new expression
                await conn.execute(_SET_STATE, (READY, None, table_id, prop))
            except psycopg.Error as exc:
                await conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
                await conn.execute(_SET_STATE, (FAILED, type(exc).__name__, table_id, prop))
            finally:
                await conn.execute("SELECT pg_advisory_unlock(%s)", (_BUILD_TURN,))

        await self._db.run(run)
        self._ready.clear()

    async def ready(self, account: str, table: str) -> dict[str, str]:
        """Remembered for a moment: a query asks before every plan."""
        key = (account, table.lower())
        cached = self._ready.get(key)
        now = time.monotonic()
        if cached is not None and now - cached[0] < READY_CACHE_SECONDS:
            return cached[1]
        found = await super().ready(account, table)
        if len(self._ready) > 10_000:
            self._ready.clear()
        self._ready[key] = (now, found)
        return found
