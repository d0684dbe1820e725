"""Choosing the engine from settings: SQLite unless a PostgreSQL URL is given.

The PostgreSQL engine is imported only when asked for, so SQLite users need neither psycopg nor
its pool installed.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

from tabulae.storage.stores import Stores
from tabulae.storage.volume import Volume


class VolumeSettings(NamedTuple):
    """How the SQLite store watches its volume: the reserve it keeps (bytes), the free space
    below which it warns (bytes), and the directory the workers share (one log line per server)."""

    reserve_bytes: int = 0
    warn_bytes: int = 0
    shared_dir: Path | None = None


POSTGRES_SCHEMES = frozenset({"postgresql", "postgres"})


class StoreSetupError(Exception):
    """The database cannot be served or initialised as it is; the message says what to run."""


class VolumeFull(StoreSetupError):
    """The data volume has no room to create the store in."""


class StoreUnusable(StoreSetupError):
    """The store in the data directory cannot be opened (not a database, damaged)."""


def is_postgres_url(store_url: str | None) -> bool:
    """True for ``postgresql://…`` and ``postgres://…``, libpq's two spellings."""
    return bool(store_url) and urlsplit(str(store_url)).scheme.lower() in POSTGRES_SCHEMES


async def open_stores(
    store_url: str | None,
    data_dir: Path,
    in_memory: bool,
    volume: VolumeSettings | None = None,
    *,
    hns: frozenset[str] = frozenset(),
) -> Stores:
    """Open the engine the settings name; call it in the serving process, on its event loop.

    No URL means the embedded SQLite engine in ``data_dir`` (without fsync when ``in_memory``),
    watching its volume as ``volume`` says (the reserve it keeps, when to warn).
    A PostgreSQL URL opens a connection pool and creates the schema on an empty database;
    ``data_dir`` and ``in_memory`` do not apply to it; ``hns`` names the accounts with a
    hierarchical namespace, whose file systems it keeps each on one distribution key (their rows
    re-keyed before, by :func:`check_database`). Any other URL is a configuration error.
    """
    if not store_url:
        from tabulae.storage.sqlite import SqliteStores

        reserve, warn, shared = volume or VolumeSettings()
        reserve = 0 if in_memory else reserve
        watched = Volume(data_dir, reserve_bytes=reserve, warn_bytes=warn, shared_dir=shared)
        watched.start()
        return SqliteStores(data_dir, durable=not in_memory, volume=watched)
    if is_postgres_url(store_url):
        try:
            from tabulae.storage.postgres import PostgresStores
        except ImportError as exc:
            raise RuntimeError(
                "the PostgreSQL store needs psycopg 3 and its pool:"
                " pip install 'psycopg[binary]>=3.2' psycopg-pool"
            ) from exc
        from tabulae.storage.postgres.engine import SchemaError

        try:
            stores = await PostgresStores.open(store_url, colocated=hns)
        except SchemaError as exc:
            raise StoreSetupError(str(exc)) from None
        if volume is not None and volume.shared_dir is not None:  # the database's disk, said once
            stores.volume = stores.database.volume = Volume(None, shared_dir=volume.shared_dir)
        return stores
    scheme = urlsplit(store_url).scheme or store_url
    raise ValueError(f"unsupported store URL scheme {scheme!r}: use postgresql://… or no URL for SQLite")


def check_data_dir(data_dir: Path) -> None:
    """Before ``serve`` binds its ports: that the SQLite store can live in ``data_dir`` (created
    if missing), or :class:`StoreSetupError` saying which path and why (a file, a read-only file
    system, no permission), so no worker has to find out after the server has announced itself."""
    import sqlite3

    from tabulae.storage.sqlite import check_store
    from tabulae.storage.sqlite.directory import UnusableDirectory, check_directory

    try:
        check_directory(data_dir)
    except UnusableDirectory as exc:
        raise StoreSetupError(str(exc)) from None
    try:
        check_store(data_dir)
    except (OSError, sqlite3.Error) as exc:
        if Volume(data_dir).is_full_error(exc):
            raise VolumeFull(
                f"cannot create the store in {data_dir}: {exc}; free space on its volume"
            ) from None
        raise StoreUnusable(f"cannot open the store in {data_dir}: {exc}") from None


async def check_database(
    store_url: str, accounts: Iterable[str] = (), hns: frozenset[str] = frozenset()
) -> list[str]:
    """Before ``serve`` binds its ports: make a PostgreSQL store ready to serve (the plain schema
    on an empty database, and the blob rows of ``accounts`` keyed as their namespace setting
    wants: ``hns`` names those with one) or raise :class:`StoreSetupError` saying what to run
    (Citus installed but ``db init --citus`` never run). Returns what it changed, for the operator."""
    import psycopg

    from tabulae.storage.postgres import check_serving, settle_blob_keys
    from tabulae.storage.postgres.engine import SchemaError

    try:
        await check_serving(store_url)
        return await settle_blob_keys(store_url, accounts, hns)
    except SchemaError as exc:
        raise StoreSetupError(str(exc)) from None
    except psycopg.Error as exc:
        raise StoreSetupError(f"cannot use the database: {type(exc).__name__}: {exc}") from None


async def init_database(store_url: str, citus: bool) -> list[str]:
    """``tabulae db init``: create (and distribute) the schema of a PostgreSQL store; returns what
    it did. Raises :class:`StoreSetupError`, having changed nothing, when the database does not fit."""
    from tabulae.storage.postgres import init_schema
    from tabulae.storage.postgres.engine import SchemaError

    try:
        return await init_schema(store_url, citus=citus)
    except SchemaError as exc:
        raise StoreSetupError(str(exc)) from None


def vacuum_sqlite(data_dir: Path) -> tuple[int, int, float]:
    """``tabulae db vacuum``: rewrite the SQLite store in ``data_dir`` so that it hands freed
    space back to its volume (and is compacted); its size before and after, and the seconds."""
    from tabulae.storage.sqlite.vacuum import vacuum

    done = vacuum(data_dir / "tabulae.db")
    return done.before, done.after, done.seconds


def backup_sqlite(data_dir: Path, destination: Path) -> None:
    """``tabulae backup``: a consistent online copy of the SQLite store in ``data_dir``: the
    database first, then every blob content file that copy references."""
    from tabulae.storage.sqlite.blobs import CONTENT_DIR, collector_paused, copy_content
    from tabulae.storage.sqlite.engine import backup

    with collector_paused(data_dir / CONTENT_DIR):
        backup(data_dir, destination)
        copy_content(data_dir / CONTENT_DIR, destination, destination / "tabulae.db")
