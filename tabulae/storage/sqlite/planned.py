"""SQLite runs a plan (:mod:`tabulae.storage.plan`): reads on the reader connection, writes as
jobs of the next group commit (each in its own savepoint unless it is one statement)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TypeVar

from tabulae.storage.plan import Plan, SqliteDialect, run_sync
from tabulae.storage.sqlite.engine import SqliteDatabase

T = TypeVar("T")

DIALECT = SqliteDialect()


def read(database: SqliteDatabase, make: Callable[[], Plan[T]]) -> T:
    return run_sync(make(), database.reader, DIALECT)


def _job(conn: sqlite3.Connection, make: Callable[[], Plan[T]]) -> T:
    return run_sync(make(), conn, DIALECT)


async def write(database: SqliteDatabase, make: Callable[[], Plan[T]], *, savepoint: bool = True) -> T:
    result: T = await database.write(_job, make, savepoint=savepoint)
    return result
