"""The ``tabulae`` command: ``tabulae serve`` starts the Table service."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from tabulae import __version__
from tabulae.config import (
    DEFAULT_DATA_DIR,
    DEFAULT_HOST,
    DEFAULT_PORT,
    SETTINGS_ENV,
    STORE_ENV,
    ConfigError,
    Settings,
    accounts_from,
)
from tabulae.tools import stress, top


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tabulae", description="A self-hosted Azure Table Storage server.")
    parser.add_argument("--version", action="version", version=f"tabulae {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the Table service", description="Run the Table service.")
    serve.add_argument("--host", default=DEFAULT_HOST, help=f"address to bind (default {DEFAULT_HOST})")
    serve.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port to listen on (default {DEFAULT_PORT})"
    )
    serve.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        help=f"directory of the SQLite database (default ./{DEFAULT_DATA_DIR})",
    )
    serve.add_argument(
        "--account",
        action="append",
        default=[],
        metavar="NAME:BASE64KEY[:BASE64KEY2]",
        help="an account and its keys; repeatable; also read from TABULAE_ACCOUNTS or AZURITE_ACCOUNTS "
        "('name1:key1:key2;name2:key1'). Default: the development account devstoreaccount1",
    )
    serve.add_argument(
        "--store",
        default=os.environ.get(STORE_ENV),
        metavar="URL",
        help=f"postgresql://user@host/db to keep data in PostgreSQL (or Citus) instead of SQLite; "
        f"also read from {STORE_ENV}. The schema is created on an empty database",
    )
    serve.add_argument(
        "--in-memory",
        action="store_true",
        help="keep data in memory only (for tests and demos): everything is lost when the server stops",
    )
    serve.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="worker processes sharing the store (default: the number of cores)",
    )
    serve.add_argument("--cert", type=Path, help="TLS certificate (PEM): serve HTTPS instead of HTTP")
    serve.add_argument("--key", type=Path, help="TLS private key (PEM) for --cert")
    serve.add_argument(
        "--oauth",
        choices=["off", "basic"],
        default="off",
        help="accept bearer tokens: 'basic' checks audience, issuer and expiry but NOT the signature "
        "(local development only; needs --cert, as clients send tokens over HTTPS only)",
    )
    serve.add_argument(
        "--targets",
        choices=["azure"],
        help="enforce Azure's scalability targets: entities/s per partition and per account "
        "(every entity written or scanned counts); over them requests get 503 ServerBusy",
    )
    serve.add_argument(
        "--partition-target", type=float, default=2000.0, help="entities/s per partition (default 2000)"
    )
    serve.add_argument(
        "--account-target", type=float, default=20000.0, help="entities/s per account (default 20000)"
    )
    serve.add_argument(
        "--faults",
        type=float,
        default=0.0,
        metavar="P",
        help="inject transient 503/500 answers with probability P, and brief partition outages, "
        "to test client retry code (never affects data)",
    )
    serve.add_argument("--faults-seed", type=int, help="seed for --faults, for repeatable runs")
    serve.add_argument(
        "--request-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="cut off a client that takes longer than this to send its headers, or pauses this long "
        "in its body (500 OperationTimedOut; default 30)",
    )
    serve.add_argument(
        "--access-log",
        action="store_true",
        help="log one JSON line per request to stderr (method, path without query, status, ms, request id)",
    )
    serve.add_argument(
        "--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"]
    )
    top.add_arguments(commands.add_parser("top", help="show the hottest partitions of a server, live"))
    stress.add_arguments(
        commands.add_parser("stress", help="run the partition stress test of the design guide")
    )
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
        description="Copy the SQLite store of --data-dir into DEST while the server keeps running. "
        "`tabulae serve --data-dir DEST` then serves the same data.",
    )
    backup.add_argument("dest", type=Path, help="an empty or new directory for the copy")
    backup.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="the store to back up")
    return parser


def run_db_init(args: argparse.Namespace) -> None:
    import asyncio

    from tabulae.storage.factory import is_postgres_url
    from tabulae.storage.postgres.tables import init_schema

    if not is_postgres_url(args.store):
        raise SystemExit(f"tabulae: db init needs --store postgresql://… (or {STORE_ENV})")
    asyncio.run(init_schema(args.store, citus=args.citus))
    print("schema ready" + (" and distributed with Citus" if args.citus else ""))


def run_backup(args: argparse.Namespace) -> None:
    from tabulae.storage.sqlite.tables import backup

    if not (args.data_dir / "tabulae.db").exists():
        raise SystemExit(f"tabulae: no store in {args.data_dir}")
    try:
        backup(args.data_dir, args.dest)
    except (OSError, RuntimeError) as exc:
        raise SystemExit(f"tabulae: backup failed: {exc}") from None
    print(f"backed up {args.data_dir} to {args.dest}")


def _exit_cleanly(signum: int, frame: object) -> None:
    raise SystemExit(0)


def _memory_dir() -> Path:
    """A RAM-backed directory (``/dev/shm`` where there is one) for ``--in-memory``."""
    shm = Path("/dev/shm")
    return Path(tempfile.mkdtemp(prefix="tabulae-mem-", dir=shm if shm.is_dir() else None))


def serve(args: argparse.Namespace) -> None:
    import uvicorn

    from tabulae.http.protocol import AzureHttpProtocol
    from tabulae.table.api.app import TabulaeApp

    try:
        accounts = accounts_from(args.account)
    except ConfigError as exc:
        raise SystemExit(f"tabulae: {exc}") from None
    if (args.cert is None) != (args.key is None):
        raise SystemExit("tabulae: --cert and --key go together")
    if args.workers < 1:
        raise SystemExit("tabulae: --workers must be at least 1")
    data_dir = _memory_dir() if args.in_memory else args.data_dir
    settings = Settings(
        host=args.host,
        port=args.port,
        data_dir=data_dir,
        in_memory=args.in_memory,
        store_url=args.store,
        accounts=accounts,
        oauth=args.oauth == "basic",
        cert_file=args.cert,
        key_file=args.key,
        access_log=args.access_log,
        body_timeout=args.request_timeout,
        targets=args.targets == "azure",
        partition_target=args.partition_target,
        account_target=args.account_target,
        faults=args.faults,
        faults_seed=args.faults_seed,
        workers=args.workers,
    )
    scheme = "https" if args.cert else "http"
    if args.store and args.in_memory:
        raise SystemExit("tabulae: --in-memory and --store exclude each other")
    where = "in memory (data is lost when the server stops)" if args.in_memory else f"in {args.data_dir}"
    if args.store:
        where = "in PostgreSQL"
    first = next(iter(accounts))
    print(
        f"Tabulae {__version__}: Table service on {scheme}://{args.host}:{args.port}/{first}, "
        f"accounts {', '.join(accounts)}, {args.workers} worker(s), data {where}",
        flush=True,
    )
    AzureHttpProtocol.header_timeout = args.request_timeout
    options = {
        "host": args.host,
        "port": args.port,
        "loop": "uvloop",
        "http": AzureHttpProtocol,
        "lifespan": "on",
        "access_log": False,
        "log_level": args.log_level,
        "server_header": False,
        "date_header": False,
        # No X-Forwarded-For rewriting: the client address feeds SAS IP checks (sip), so a local
        # client must not be able to choose it; and it is one middleware less per request.
        "proxy_headers": False,
        "timeout_graceful_shutdown": 10,
        "ssl_certfile": str(args.cert) if args.cert else None,
        "ssl_keyfile": str(args.key) if args.key else None,
    }
    # uvicorn drains in-flight requests on SIGTERM/SIGINT, restores the previous handlers and
    # raises the signal again; these handlers turn that into a clean exit with status 0.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _exit_cleanly)
    try:
        if args.workers == 1:
            uvicorn.run(TabulaeApp(settings), **options)  # type: ignore[arg-type]
        else:
            os.environ[SETTINGS_ENV] = settings.to_json()
            uvicorn.run("tabulae.table.api.app:create_app", factory=True, workers=args.workers, **options)  # type: ignore[arg-type]
    finally:
        if args.in_memory:
            shutil.rmtree(data_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``tabulae`` console script."""
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        serve(args)
    elif args.command == "top":
        sys.exit(top.main(args))
    elif args.command == "stress":
        sys.exit(stress.main(args))
    elif args.command == "db":
        run_db_init(args)
    elif args.command == "backup":
        run_backup(args)
    else:  # pragma: no cover - argparse rejects unknown commands
        sys.exit(2)
