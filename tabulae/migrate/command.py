"""The ``tabulae migrate azurite`` command line: where from, where to, and the report."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from azure.core.exceptions import HttpResponseError

from tabulae.config import DEFAULT_DATA_DIR, STORE_ENV
from tabulae.migrate.azurite import Migration, MigrationError, Progress, account_keys, progress_file
from tabulae.migrate.workspace import Workspace, WorkspaceError
from tabulae.testing.server import ServerError, TabulaeServer, start
from tabulae.tools.transfer import ResumeFile, ResumeMismatch
from tabulae.tools.wire import RefusedRequest


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sources = parser.add_subparsers(dest="source", required=True)
    azurite = sources.add_parser(
        "azurite",
        help="move an Azurite workspace's tables, queues and blobs into Tabulae",
        description="Read an Azurite workspace (azurite --location DIR: its LokiJS databases and extent "
        "files) and write its tables and entities, queues and messages, containers and blobs into a "
        "Tabulae data directory, a --store, or a running server. Resumable: run it again after an "
        "interruption. Accounts other than the development account come from AZURITE_ACCOUNTS, as "
        "for Azurite.",
    )
    azurite.add_argument(
        "--location", "-l", type=Path, required=True, metavar="DIR", help="the Azurite workspace"
    )
    target = azurite.add_mutually_exclusive_group()
    target.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        metavar="DIR",
        help="the Tabulae data directory to fill",
    )
    target.add_argument(
        "--store",
        default=os.environ.get(STORE_ENV),
        metavar="URL",
        help="postgresql://… store to fill instead",
    )
    target.add_argument(
        "--connection-string",
        metavar="TEXT",
        help="write to a running Tabulae server instead of starting one",
    )
    azurite.add_argument(
        "--progress",
        type=Path,
        metavar="FILE",
        help="where progress is recorded for resuming (default: tabulae-migrate.progress in the workspace)",
    )
    azurite.add_argument("--restart", action="store_true", help="forget recorded progress and start over")


def main(args: argparse.Namespace) -> int:
    try:
        workspace = Workspace(args.location)
        keys = account_keys()
        identity = {"source": str(args.location.resolve()), "target": _describe(args)}
        resume = ResumeFile(progress_file(args.location, args.progress), identity)
        progress = Progress(resume, args.restart)
        with _target(args) as target:
            migration = Migration(
                workspace, target, keys, progress, say=lambda line: print(line, file=sys.stderr)
            )
            report = migration.run()
    except (WorkspaceError, MigrationError, ServerError, ResumeMismatch) as exc:
        print(f"tabulae: migrate: {exc}", file=sys.stderr)
        return 1
    except (HttpResponseError, RefusedRequest) as exc:  # the target refused something: say what, stop
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"tabulae: migrate: the target refused a write: {first} (run again to resume)", file=sys.stderr)
        return 1
    for line in report.lines():
        print(line)
    print("done")
    return 0


def _describe(args: argparse.Namespace) -> str:
    if args.connection_string:
        return "server " + ";".join(p for p in args.connection_string.split(";") if "Endpoint=" in p)
    if args.store:
        return "store " + args.store.split("@")[-1]  # never the password
    return f"data-dir {args.data_dir.resolve()}"


@contextlib.contextmanager
def _target(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """A server writing into the target: the running one named, else one started for the migration."""
    if args.connection_string:
        yield TabulaeServer.from_url(args.connection_string)
        return
    extra = ["--store", args.store] if args.store else []
    args.data_dir.mkdir(parents=True, exist_ok=True)
    server = start(args.data_dir, args=[*extra, "--no-console"])
    try:
        yield server
    finally:
        from tabulae.testing.server import _stop

        if server.process is not None:
            _stop(server.process)
