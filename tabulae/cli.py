"""The ``tabulae`` command: parse the command line and hand over to the composition root.

``tabulae serve`` takes its options from the settings table (:class:`tabulae.config.Settings`);
the other commands are the client-side tools (``top``, ``stress``, the data tools ``table``,
``entity``, ``export``, ``import``, ``copy``, and the design guide's runnable patterns,
``examples``) and the store's maintenance (``db init``, ``backup``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tabulae import __version__
from tabulae.config import (
    DEFAULT_DATA_DIR,
    SERVICES,
    STORE_ENV,
    ConfigError,
    Settings,
    accounts_from,
)
from tabulae.examples import command as examples
from tabulae.tools import datacli, indexes, stress, top


def services_from(text: str) -> tuple[str, ...]:
    """``table,queue`` → the services in the server's own order; unknown names are refused."""
    names = [name.strip().lower() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in SERVICES]
    if unknown or not names:
        raise ConfigError(f"--services: expected a comma-separated list of {', '.join(SERVICES)}")
    return tuple(service for service in SERVICES if service in names)


# How a flag's command-line value becomes the setting's value, where the two differ.
_FROM_FLAG: dict[str, Callable[[Any], Any]] = {
    "accounts": accounts_from,
    "services": services_from,
    "oauth": lambda value: value == "basic",
    "targets": lambda value: value == "azure",
}
# Command-line defaults that are not the setting's default (a choice's name, the environment).
_FLAG_DEFAULTS: dict[str, Callable[[], Any]] = {
    "accounts": list,
    "oauth": lambda: "off",
    "targets": lambda: None,
    "store_url": lambda: os.environ.get(STORE_ENV),
    "services": lambda: ",".join(SERVICES),
}


def add_setting_flags(parser: argparse.ArgumentParser) -> None:
    """One option per setting that has a flag, with the setting's default and help."""
    defaults = Settings()
    for item in Settings.flags():
        options = dict(item.metadata["argparse"])
        if item.name in _FLAG_DEFAULTS:
            default = _FLAG_DEFAULTS[item.name]()
            shown = default
        else:
            default = getattr(defaults, item.name)
            shown = default
        help_text = item.metadata["help"]
        shows_default = options.get("action") not in ("store_true", "append") and "default" not in help_text
        if shows_default and shown not in (None, False):
            help_text += f" (default {shown})"
        parser.add_argument(item.metadata["flag"], dest=item.name, default=default, help=help_text, **options)


def settings_from(args: argparse.Namespace) -> Settings:
    values = {}
    for item in Settings.flags():
        value = getattr(args, item.name)
        convert = _FROM_FLAG.get(item.name)
        values[item.name] = convert(value) if convert else value
    return Settings(**values)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tabulae",
        description="A self-hosted Azure Table, Queue and Blob Storage server, and tools to move data.",
    )
    parser.add_argument("--version", action="version", version=f"tabulae {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        "serve",
        help="run the Table, Queue and Blob services",
        description="Run the storage account's services: Table (port 10002), Queue (port 10001) "
        "and Blob (port 10000).",
    )
    add_setting_flags(serve)
    top.add_arguments(commands.add_parser("top", help="show the hottest partitions of a server, live"))
    stress.add_arguments(
        commands.add_parser("stress", help="run the partition stress test of the design guide")
    )
    datacli.add_commands(commands)
    examples.add_arguments(
        commands.add_parser(
            "examples",
            help="run the design guide's patterns against a server and show what each costs",
            description="Run the table design guide's patterns and anti-patterns (tabulae/examples) "
            "against the endpoints of a connection string, print each one's cost table and claims, "
            "and end with 'N passed, M failed'. Starts nothing: point it at a running server.",
        )
    )
    indexes.add_commands(commands)
    database = commands.add_parser(
        "db", help="manage a PostgreSQL store", description="Manage a PostgreSQL (or Citus) store."
    )
    db_commands = database.add_subparsers(dest="db_command", required=True)
    init = db_commands.add_parser(
        "init",
        help="create the schema (idempotent)",
        description="Create Tabulae's schema in a PostgreSQL database; with --citus also distribute it "
        "(entities by table and PartitionKey, metadata as reference tables). Safe to run again.",
    )
    init.add_argument("--store", default=os.environ.get(STORE_ENV), metavar="URL", help="postgresql://… URL")
    init.add_argument("--citus", action="store_true", help="distribute the schema with Citus")
    backup = commands.add_parser(
        "backup",
        help="take a consistent online backup of a data directory",
        description="Copy the SQLite store of --data-dir, blob content included, into DEST while the "
        "server keeps running. `tabulae serve --data-dir DEST` then serves the same data.",
    )
    backup.add_argument("dest", type=Path, help="an empty or new directory for the copy")
    backup.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="the store to back up")
    return parser


def run_db_init(args: argparse.Namespace) -> None:
    from tabulae.storage.factory import StoreSetupError, init_database, is_postgres_url

    if not is_postgres_url(args.store):
        raise SystemExit(f"tabulae: db init needs --store postgresql://… (or {STORE_ENV})")
    try:
        done = asyncio.run(init_database(args.store, citus=args.citus))
    except StoreSetupError as exc:
        raise SystemExit(f"tabulae: {exc}") from None
    for line in done:
        print(line)


def run_backup(args: argparse.Namespace) -> None:
    from tabulae.storage.factory import backup_sqlite

    if not (args.data_dir / "tabulae.db").exists():
        raise SystemExit(f"tabulae: no store in {args.data_dir}")
    try:
        backup_sqlite(args.data_dir, args.dest)
    except (OSError, RuntimeError) as exc:
        raise SystemExit(f"tabulae: backup failed: {exc}") from None
    print(f"backed up {args.data_dir} to {args.dest}")


def _memory_dir() -> Path:
    """A RAM-backed directory (``/dev/shm`` where there is one) for ``--in-memory``."""
    shm = Path("/dev/shm")
    return Path(tempfile.mkdtemp(prefix="tabulae-mem-", dir=shm if shm.is_dir() else None))


def _check(settings: Settings) -> None:
    """Settings that cannot work together; checked before anything is created or bound."""
    if (settings.cert_file is None) != (settings.key_file is None):
        raise SystemExit("tabulae: --cert and --key go together")
    if settings.workers < 1:
        raise SystemExit("tabulae: --workers must be at least 1")
    if settings.oauth and settings.cert_file is None:
        raise SystemExit(
            "tabulae: --oauth basic needs --cert and --key: the SDKs send bearer tokens over HTTPS only"
        )
    if settings.clock_skew < 0:
        raise SystemExit("tabulae: --clock-skew must be 0 (off) or more seconds")
    if settings.store_url and settings.in_memory:
        raise SystemExit("tabulae: --in-memory and --store exclude each other")
    ports = list(settings.ports().values())
    if len(set(ports)) != len(ports):
        raise SystemExit("tabulae: two services cannot share a port (--port, --queue-port, --blob-port)")


def _check_store(settings: Settings) -> None:
    """A PostgreSQL store is checked (and an empty one given its schema) once, before any port
    is bound or worker started, so a database that cannot be served stops the server with a
    message saying what to run rather than failing in every worker."""
    from tabulae.storage.factory import StoreSetupError, check_database, is_postgres_url

    if not is_postgres_url(settings.store_url):
        return
    assert settings.store_url is not None
    try:
        asyncio.run(check_database(settings.store_url))
    except StoreSetupError as exc:
        raise SystemExit(f"tabulae: {exc}") from None


def serve(args: argparse.Namespace) -> None:
    from tabulae import compose

    try:
        settings = settings_from(args)
    except ConfigError as exc:
        raise SystemExit(f"tabulae: {exc}") from None
    _check(settings)
    _check_store(settings)
    try:
        worker_sockets = compose.bind(settings)
        compose.exit_on_stop_signals()
    except compose.BindError as exc:
        raise SystemExit(f"tabulae: {exc}") from None
    where = f"in {settings.data_dir}"
    if settings.in_memory:
        settings.data_dir = _memory_dir()
        where = "in memory (data is lost when the server stops)"
    elif settings.store_url:
        where = "in PostgreSQL"
    scheme = "https" if settings.cert_file else "http"
    first = next(iter(settings.accounts))
    endpoints = ", ".join(
        f"{service.capitalize()} service on {scheme}://{settings.host}:{port}/{first}"
        for service, port in settings.ports().items()
    )
    print(
        f"Tabulae {__version__}: {endpoints}; accounts {', '.join(settings.accounts)}, "
        f"{settings.workers} worker(s), data {where}",
        flush=True,
    )
    try:
        compose.serve(settings, worker_sockets)
    finally:
        if settings.in_memory:
            shutil.rmtree(settings.data_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``tabulae`` console script."""
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        serve(args)
    elif args.command == "top":
        sys.exit(top.main(args))
    elif args.command == "stress":
        sys.exit(stress.main(args))
    elif args.command in ("table", "entity", "export", "import", "copy"):
        sys.exit(datacli.main(args))
    elif args.command == "examples":
        sys.exit(examples.main(args))
    elif args.command == "index":
        sys.exit(indexes.main(args))
    elif args.command == "db":
        run_db_init(args)
    elif args.command == "backup":
        run_backup(args)
    else:  # pragma: no cover - argparse rejects unknown commands
        sys.exit(2)
