"""The ``tabulae`` command: parse the command line and hand over to the composition root.

``tabulae serve`` takes its options from the settings table (:class:`tabulae.config.Settings`);
the other commands are the client-side tools (``top``, ``stress``, the data tools ``table``,
``entity``, ``export``, ``import``, ``copy``, and the design guide's runnable patterns,
``examples``) and the store's maintenance (``db init``, ``backup``).

Every command fails the same way: one line ``tabulae: CODE: message`` on standard error and a
non-zero exit status (:mod:`tabulae.tools.failures`), told by :func:`main` alone.
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
from typing import Any, NoReturn

from tabulae import __version__, azurite_cli, config_file
from tabulae.config import (
    DEFAULT_DATA_DIR,
    SERVICES,
    STORE_ENV,
    ConfigError,
    Settings,
    accounts_from,
    is_loopback,
    url_host,
)
from tabulae.examples import command as examples
from tabulae.migrate import command as migrate
from tabulae.model.accounts import FeatureError, check_days
from tabulae.model.encryption import scope_pairs
from tabulae.model.roles import RoleError, assignments
from tabulae.tools import accounts, datacli, indexes, stress, top
from tabulae.tools.failures import EXIT_INTERRUPTED, EXIT_START, EXIT_USAGE, Failure, describe, line

DEBUG_ENV = "TABULAE_DEBUG"  # set: an unexpected error shows its traceback too


class Parser(argparse.ArgumentParser):
    """argparse's parser, telling a usage error in the one-line form of every other failure."""

    def error(self, message: str) -> NoReturn:
        raise Failure("InvalidArguments", f"{message} (see {self.prog} --help)", EXIT_USAGE)


def _usage(message: str) -> Failure:
    return Failure("InvalidArguments", message, EXIT_USAGE)


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
    "console_hosts": tuple,
    "hns_accounts": tuple,
    "premium_accounts": tuple,
    "encryption_scopes": tuple,
    "oauth_roles": tuple,
    "oauth": lambda value: value == "basic",
    "targets": lambda value: value == "azure",
    "copy_from_remote": lambda value: value != "off",
}
# Command-line defaults that are not the setting's default (a choice's name, the environment).
_FLAG_DEFAULTS: dict[str, Callable[[], Any]] = {
    "accounts": list,
    "console_hosts": list,
    "hns_accounts": list,
    "premium_accounts": list,
    "encryption_scopes": list,
    "oauth_roles": list,
    "oauth": lambda: "off",
    "targets": lambda: None,
    "copy_from_remote": lambda: "on",
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
    parser = Parser(
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
    serve.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="read settings from a TOML file (keys: these flags without dashes; [ports], [accounts], "
        "[targets], [[cors]]); flags given here override it",
    )
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
    accounts.add_commands(commands)
    migrate.add_arguments(
        commands.add_parser("migrate", help="move another emulator's workspace (Azurite's) into Tabulae")
    )
    for form in azurite_cli.FORMS:  # parsed by azurite_cli (see main); listed here for --help
        commands.add_parser(form, add_help=False, help=f"run with Azurite's {form} command line")
    database = commands.add_parser(
        "db", help="manage a store", description="Manage a PostgreSQL (or Citus) store, or a SQLite one."
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
    vacuum = db_commands.add_parser(
        "vacuum",
        help="rewrite a SQLite store so that deletes give space back to the volume",
        description="Rewrite the SQLite store of --data-dir with auto_vacuum = INCREMENTAL (stores "
        "made by older versions keep freed space for themselves), compacting it. Needs free space of "
        "about twice the store; run it with the server stopped (a running one's writes wait for it).",
    )
    vacuum.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="the store to rewrite")
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
        raise _usage(f"db init needs --store postgresql://… (or {STORE_ENV})")
    try:
        done = asyncio.run(init_database(args.store, citus=args.citus))
    except StoreSetupError as exc:
        raise Failure("StoreNotReady", str(exc)) from None
    for step in done:
        print(step)


def run_db_vacuum(args: argparse.Namespace) -> None:
    import sqlite3

    from tabulae.storage.factory import vacuum_sqlite

    if not (args.data_dir / "tabulae.db").exists():
        raise Failure("StoreNotFound", f"no store in {args.data_dir}")
    try:
        before, after, seconds = vacuum_sqlite(args.data_dir)
    except sqlite3.Error as exc:
        raise Failure("VacuumFailed", f"the store was left as it was: {exc}") from None
    mib = 1024 * 1024
    print(
        f"rewrote {args.data_dir / 'tabulae.db'} in {seconds:.1f} s: {before // mib} MiB, now "
        f"{after // mib} MiB; deletes give space back to the volume"
    )


def run_backup(args: argparse.Namespace) -> None:
    from tabulae.storage.factory import backup_sqlite

    if not (args.data_dir / "tabulae.db").exists():
        raise Failure("StoreNotFound", f"no store in {args.data_dir}")
    try:
        backup_sqlite(args.data_dir, args.dest)
    except (OSError, RuntimeError) as exc:
        raise Failure("BackupFailed", f"backup failed: {exc}") from None
    print(f"backed up {args.data_dir} to {args.dest}")


def _memory_dir() -> Path:
    """A RAM-backed directory (``/dev/shm`` where there is one) for ``--in-memory``."""
    shm = Path("/dev/shm")
    return Path(tempfile.mkdtemp(prefix="tabulae-mem-", dir=shm if shm.is_dir() else None))


def exposures(settings: Settings) -> list[str]:
    """What an operator opened beyond this machine that gives its doors away, said at start-up
    (allowed: each is asked for by a flag, and Azurite's users run so in containers)."""
    said: list[str] = []
    if settings.console_on() and not is_loopback(settings.host) and settings.cert_file is None:
        said.append(
            f"the console listens on {settings.host} over plain HTTP: the account key typed at "
            "sign-in and the session cookie cross the network in clear text (give --cert and --key)"
        )
    if settings.oauth and not settings.loopback():
        access = (
            "the roles given with --oauth-role" if settings.oauth_roles else "full access to every account"
        )
        said.append(
            "--oauth basic does not check bearer tokens' signatures and the server listens beyond "
            f"loopback: anyone who reaches it can make a token with {access}"
        )
    return said


def _check(settings: Settings) -> None:
    """Settings that cannot work together; checked before anything is created or bound."""
    if (settings.cert_file is None) != (settings.key_file is None):
        raise _usage("--cert and --key go together")
    if settings.workers < 1:
        raise _usage("--workers must be at least 1")
    if settings.oauth and settings.cert_file is None:
        raise _usage("--oauth basic needs --cert and --key: the SDKs send bearer tokens over HTTPS only")
    try:
        assignments(settings.oauth_roles)
    except RoleError as exc:
        raise _usage(f"--oauth-role {exc}") from None
    if settings.clock_skew < 0:
        raise _usage("--clock-skew must be 0 (off) or more seconds")
    if settings.max_connections_per_client < 0:
        raise _usage("--max-connections-per-client must be 0 (no limit) or more")
    if settings.shutdown_timeout < 0:
        raise _usage("--shutdown-timeout must be 0 or more seconds")
    if settings.rehydrate_delay < 0:
        raise _usage("--rehydrate-delay must be 0 or more seconds")
    if settings.blob_garbage_grace < 0:
        raise _usage("--blob-garbage-grace must be 0 or more seconds")
    try:
        check_days(settings.container_soft_delete, "--container-soft-delete")
        for account in settings.accounts:
            settings.features_of(account)
    except FeatureError as exc:
        raise _usage(str(exc)) from None
    unknown = [
        name
        for name in (*settings.hns_accounts, *settings.premium_accounts, *settings.account_features)
        if name not in settings.accounts
    ]
    if unknown:
        raise _usage(
            f"account features for {', '.join(sorted(set(unknown)))}, which the server does not serve"
        )
    try:
        scope_pairs(settings.encryption_scopes, settings.accounts)
    except ValueError as exc:
        raise _usage(f"--encryption-scope {exc}") from None
    if settings.store_url and settings.in_memory:
        raise _usage("--in-memory and --store exclude each other")
    if settings.otel:  # the packages and the exporter, checked before any worker needs them
        from tabulae.insight.tracing import TracingUnavailable, request_tracer

        try:
            request_tracer().shutdown()
        except TracingUnavailable as exc:
            raise Failure("TracingUnavailable", str(exc)) from None
    ports = list(settings.ports().values())
    if len(set(ports)) != len(ports):
        raise _usage("two services cannot share a port (--port, --queue-port, --blob-port)")


def _check_store(settings: Settings) -> None:
    """The store is checked once, before any port is bound or worker started, so a store that
    cannot be served stops the server with one line saying why rather than failing in every
    worker after the banner: a PostgreSQL database (an empty one is given its schema), or the
    SQLite data directory (a file, a read-only file system, no permission to write)."""
    from tabulae.storage.factory import (
        StoreSetupError,
        StoreUnusable,
        VolumeFull,
        check_data_dir,
        check_database,
        is_postgres_url,
    )

    if settings.in_memory:
        return
    if not settings.store_url:
        try:
            check_data_dir(settings.data_dir)
        except VolumeFull as exc:
            raise Failure("VolumeFull", str(exc), EXIT_START) from None
        except StoreUnusable as exc:  # what every worker would fail on: said once, before the banner
            raise Failure("StartupFailed", str(exc), EXIT_START) from None
        except StoreSetupError as exc:
            raise Failure("InvalidDataDir", f"{exc} (choose another with --data-dir)") from None
        return
    if not is_postgres_url(settings.store_url):
        return  # the workers refuse it, naming the scheme
    try:
        done = asyncio.run(check_database(settings.store_url, settings.accounts, settings.hns_set()))
    except StoreSetupError as exc:
        raise Failure("StoreNotReady", str(exc)) from None
    for said in done:  # before the banner, so an operator sees why the start took longer
        print(f"tabulae: {said}", file=sys.stderr, flush=True)


def serve(args: argparse.Namespace) -> None:
    from tabulae import compose

    try:
        settings = settings_from(args)
    except ConfigError as exc:
        raise _usage(str(exc)) from None
    settings.cors_defaults = getattr(args, "cors_defaults", [])
    settings.account_features = getattr(args, "account_features", {})
    _check(settings)
    _check_store(settings)
    try:
        worker_sockets = compose.bind(settings)
        compose.exit_on_stop_signals()
    except compose.BindError as exc:
        raise Failure(exc.code, str(exc)) from None
    where = f"in {settings.data_dir}"
    if settings.in_memory:
        settings.data_dir = _memory_dir()
        where = "in memory (data is lost when the server stops)"
    elif settings.store_url:
        where = "in PostgreSQL"
    scheme = "https" if settings.cert_file else "http"
    first = next(iter(settings.accounts))
    endpoints = ", ".join(
        f"{service.capitalize()} service on {scheme}://{url_host(settings.host_of(service))}:{port}/{first}"
        for service, port in settings.ports().items()
    )
    lines = [
        f"Tabulae {__version__}: {endpoints}; accounts {', '.join(settings.accounts)}, "
        f"{settings.workers} worker(s), data {where}"
    ]
    if settings.console_on():
        console_port = settings.ports().get("table") or next(iter(settings.ports().values()))
        lines.append(f"Console: {scheme}://{url_host(settings.host)}:{console_port}/-/console/")
    for account in settings.accounts:
        lines.append(f"Connection string ({account}): {settings.connection_string(account)}")
    print("\n".join(lines), flush=True)
    for warning in exposures(settings):
        print(f"tabulae: warning: {warning}", file=sys.stderr, flush=True)
    try:
        compose.serve(settings, worker_sockets)
    except compose.StartupFailed as exc:
        raise Failure("StartupFailed", str(exc), EXIT_START) from None
    finally:
        if settings.in_memory:
            shutil.rmtree(settings.data_dir, ignore_errors=True)


def _serve_args(argv: list[str]) -> argparse.Namespace:
    """``tabulae serve ARGV`` parsed, with a ``--config`` file's settings under the flags."""
    args = build_parser().parse_args(["serve", *argv])
    if args.config is not None:
        args = _with_config_file(args.config, ["serve", *argv])
    return args


def _with_config_file(path: Path, argv: list[str]) -> argparse.Namespace:
    """Parse ``serve`` again with the file's settings as defaults, so flags override the file."""
    try:
        defaults, cors, features = config_file.read(path)
    except ConfigError as exc:
        raise _usage(str(exc)) from None
    parser = build_parser()
    for action in parser._actions:  # the `serve` subcommand's parser takes the defaults
        if isinstance(action, argparse._SubParsersAction):
            action.choices["serve"].set_defaults(**defaults)
    args = parser.parse_args(argv)
    args.cors_defaults = cors
    args.account_features = features
    return args


def run(argv: list[str] | None = None) -> int:
    """Run one command; its exit status (a failure raises)."""
    given = sys.argv[1:] if argv is None else argv
    if given[:1] and given[0] in azurite_cli.FORMS:  # Azurite's flags, not ours: parsed there
        azurite_cli.main(given[0], given[1:], lambda serve_args: serve(_serve_args(serve_args)))
        return 0
    args = build_parser().parse_args(argv)
    if args.command == "serve" and args.config is not None:
        args = _with_config_file(args.config, given)
    if args.command == "serve":
        serve(args)
        return 0
    if args.command == "db":
        (run_db_vacuum if args.db_command == "vacuum" else run_db_init)(args)
        return 0
    if args.command == "backup":
        run_backup(args)
        return 0
    command = {
        "top": top.main,
        "stress": stress.main,
        "table": datacli.main,
        "entity": datacli.main,
        "export": datacli.main,
        "import": datacli.main,
        "copy": datacli.main,
        "examples": examples.main,
        "index": indexes.main,
        "account": accounts.main,
        "migrate": migrate.main,
    }[args.command]
    return command(args)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``tabulae`` console script: every failure of every command becomes one
    line ``tabulae: CODE: message`` and a non-zero exit status here; Ctrl-C exits 130 quietly."""
    try:
        status = run(argv)
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)
    except BrokenPipeError:  # the reader of our output went away (`… | head`): nothing to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    except Exception as exc:
        if os.environ.get(DEBUG_ENV) and not isinstance(exc, Failure):
            raise
        failure = describe(exc)
        if failure.code == "UnexpectedError":
            failure.message += f" (set {DEBUG_ENV}=1 to see where)"
        print(line(failure), file=sys.stderr, flush=True)
        sys.exit(failure.status)
    sys.exit(status)
