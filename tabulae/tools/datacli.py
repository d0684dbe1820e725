"""The data commands of ``tabulae``: tables, entities, export, import and copy, against any endpoint.

They run on the client side with Microsoft's SDK underneath (:mod:`.endpoints`, :mod:`.wire`),
so they work against real Azure as against a local Tabulae. What a script can rely on:

* standard output carries data only (entities as JSON Lines, table names one a line); messages
  and the progress display go to standard error, and the display only on a terminal;
* exit status 0 when the work is done; 1 when the service refused it or a file is not valid (the
  message says ``tabulae: CODE: message`` with Azure's error code, see :mod:`.failures`); 2 for a
  usage error; 3 when a copy's final count check fails; 130 when interrupted (an import or copy
  then resumes where it stopped when run again).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path
from typing import IO, Any

import orjson
from azure.core.exceptions import ResourceExistsError

from tabulae.tools import transfer
from tabulae.tools.endpoints import Endpoint, add_endpoint_arguments, endpoint_from, table_client
from tabulae.tools.failures import Failure
from tabulae.tools.formats import CsvWriter, FormatError, clean, read_csv, read_jsonl, writable, write_jsonl
from tabulae.tools.loader import Loader
from tabulae.tools.progress import meter
from tabulae.tools.transfer import FileSource, TableSource
from tabulae.tools.wire import TableWire

EXIT_COUNT = 3


def add_commands(commands: Any) -> None:
    """Add ``table``, ``entity``, ``export``, ``import`` and ``copy`` to the ``tabulae`` parser."""
    table = commands.add_parser("table", help="list, create or delete tables")
    table_commands = table.add_subparsers(dest="table_command", required=True)
    listing = table_commands.add_parser("list", help="list tables, one name a line")
    listing.add_argument("--prefix", default="", help="only names starting with this")
    add_endpoint_arguments(listing)
    for name, text in (("create", "create a table"), ("delete", "delete a table and all its entities")):
        sub = table_commands.add_parser(name, help=text)
        sub.add_argument("name")
        add_endpoint_arguments(sub)

    entity = commands.add_parser("entity", help="get, put, delete or query entities (JSON)")
    entity_commands = entity.add_subparsers(dest="entity_command", required=True)
    get = entity_commands.add_parser("get", help="print one entity as JSON")
    get.add_argument("table")
    get.add_argument("pk", metavar="PARTITIONKEY")
    get.add_argument("rk", metavar="ROWKEY")
    put = entity_commands.add_parser(
        "put", help="write one entity given as JSON (the export format), or '-' to read it from stdin"
    )
    put.add_argument("table")
    put.add_argument("json", metavar="JSON")
    put.add_argument(
        "--mode",
        choices=["insert", "replace", "merge"],
        default="replace",
        help="insert (fails if it exists), replace (insert or replace: the default) or merge",
    )
    put.add_argument("--etag", help="write only if the stored entity still has this ETag")
    delete = entity_commands.add_parser("delete", help="delete one entity")
    delete.add_argument("table")
    delete.add_argument("pk", metavar="PARTITIONKEY")
    delete.add_argument("rk", metavar="ROWKEY")
    delete.add_argument("--etag", default="*", help="delete only if the stored entity still has this ETag")
    query = entity_commands.add_parser("query", help="print the matching entities as JSON Lines")
    query.add_argument("table")
    query.add_argument("--filter", help="an OData $filter, e.g. \"PartitionKey eq 'p1'\"")
    query.add_argument("--select", help="comma-separated property names")
    query.add_argument("--top", type=int, help="at most this many entities")
    for sub in (get, put, delete, query):
        add_endpoint_arguments(sub)

    export = commands.add_parser(
        "export",
        help="write a table's entities to a file",
        description="Write a table's entities to FILE ('-': standard output) as JSON Lines or CSV, "
        "exact for every Edm type (see `tabulae.tools.formats`).",
    )
    export.add_argument("table")
    export.add_argument("file", metavar="FILE")
    export.add_argument(
        "--format", choices=["jsonl", "csv"], default=None, help="default: from FILE's suffix, else jsonl"
    )
    export.add_argument("--filter", help="export only the entities matching this $filter")
    export.add_argument("--select", help="export only these properties (comma-separated)")
    add_endpoint_arguments(export)

    load = commands.add_parser(
        "import",
        help="load a file's entities into a table (resumable)",
        description="Upsert the entities of FILE (JSON Lines or CSV, as export writes them) into TABLE, "
        "created if missing, in entity group transactions of up to 100. Interrupted, it resumes where "
        "it stopped when run again, without losing or duplicating an entity.",
    )
    load.add_argument("file", metavar="FILE")
    load.add_argument("table")
    load.add_argument(
        "--format", choices=["jsonl", "csv"], default=None, help="default: from FILE's suffix, else jsonl"
    )
    _add_load_options(load, "FILE.TABLE.resume beside FILE")
    add_endpoint_arguments(load)

    copy = commands.add_parser(
        "copy",
        help="copy a table to another table, on any endpoint (resumable)",
        description="Copy the entities of SOURCE into DEST: each a table name on its side's account "
        "(--source-… and --dest-… options, default: the --connection-string account) or a table URL with "
        "a SAS. Resumable like import; ends by counting DEST (exit status 3 when the count differs).",
    )
    copy.add_argument("source", metavar="SOURCE")
    copy.add_argument("dest", metavar="DEST")
    copy.add_argument("--filter", help="copy only the entities matching this $filter")
    copy.add_argument("--no-check", action="store_true", help="skip the final count of DEST")
    _add_load_options(copy, ".tabulae-copy-SOURCE-DEST.resume in the current directory")
    add_endpoint_arguments(copy)
    add_endpoint_arguments(copy, "source-", "source")
    add_endpoint_arguments(copy, "dest-", "destination")


def _add_load_options(parser: argparse.ArgumentParser, default_resume: str) -> None:
    parser.add_argument(
        "--resume-file", type=Path, help=f"where progress is recorded (default: {default_resume})"
    )
    parser.add_argument(
        "--restart", action="store_true", help="ignore a resume file and start from the beginning"
    )
    parser.add_argument("--concurrency", type=int, default=4, help="batches in flight at once (default 4)")


# ----------------------------------------------------------------------------------- running


def main(args: argparse.Namespace) -> int:
    """Run one data command; a failure propagates, for ``tabulae.cli`` to tell in one line."""
    handler = {
        "table": run_table,
        "entity": run_entity,
        "export": run_export,
        "import": run_import,
        "copy": run_copy,
    }[args.command]
    return handler(args)


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_table(args: argparse.Namespace) -> int:
    service = endpoint_from(args).service()
    if args.table_command == "list":
        query = None
        if args.prefix:
            upper = args.prefix[:-1] + chr(ord(args.prefix[-1]) + 1)
            query = f"TableName ge '{args.prefix}' and TableName lt '{upper}'"
        tables = service.query_tables(query) if query else service.list_tables()
        for table in tables:
            print(table.name)
    elif args.table_command == "create":
        service.create_table(args.name)
        _say(f"created table {args.name}")
    else:
        service.delete_table(args.name)
        _say(f"deleted table {args.name}")
    return 0


def run_entity(args: argparse.Namespace) -> int:
    wire = TableWire(endpoint_from(args).table(args.table))
    out = sys.stdout.buffer
    if args.entity_command == "get":
        out.write(orjson.dumps(clean(wire.get(args.pk, args.rk)), option=orjson.OPT_APPEND_NEWLINE))
    elif args.entity_command == "put":
        text = sys.stdin.buffer.read() if args.json == "-" else args.json.encode()
        try:
            entity = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise FormatError(f"the entity is not JSON ({exc})") from None
        if not isinstance(entity, dict):
            raise FormatError("the entity must be a JSON object")
        if not isinstance(entity.get("PartitionKey"), str) or not isinstance(entity.get("RowKey"), str):
            raise FormatError("the entity needs string PartitionKey and RowKey")
        etag = wire.write(writable(entity), args.mode, args.etag)
        _say(f"written, ETag {etag}")
    elif args.entity_command == "delete":
        wire.delete(args.pk, args.rk, args.etag)
        _say("deleted")
    else:
        for page in wire.pages(args.filter, args.select, args.top):
            write_jsonl(out, page.entities)
    out.flush()
    return 0


def _format(choice: str | None, file: str) -> str:
    if choice:
        return str(choice)
    return "csv" if file.lower().endswith(".csv") else "jsonl"


def run_export(args: argparse.Namespace) -> int:
    wire = TableWire(endpoint_from(args).table(args.table))
    kind = _format(args.format, args.file)
    started = time.monotonic()
    target: IO[bytes] = sys.stdout.buffer if args.file == "-" else open(args.file, "wb")  # noqa: SIM115
    try:
        writer = CsvWriter(target) if kind == "csv" else None
        write = writer.write if writer is not None else (lambda entities: write_jsonl(target, entities))
        with meter(f"export {args.table}") as progress:
            wire.on_retry = progress.retried
            total = transfer.export(wire.pages(args.filter, args.select), write, progress)
        if writer is not None:
            writer.close()
    finally:
        if target is not sys.stdout.buffer:
            target.close()
    seconds = time.monotonic() - started
    rate = total / max(seconds, 1e-9)
    _say(f"exported {total:,} entities from {args.table} in {seconds:.1f} s ({rate:,.0f}/s)")
    return 0


def _ensure_table(wire: TableWire) -> None:
    def create() -> None:
        with contextlib.suppress(ResourceExistsError):
            wire.client.create_table()
        wire.reached = True

    wire.retrying(create)


def run_import(args: argparse.Namespace) -> int:
    endpoint = endpoint_from(args)
    wire = TableWire(endpoint.table(args.table))
    path = Path(args.file)
    size = path.stat().st_size
    kind = _format(args.format, args.file)
    resume = transfer.ResumeFile(
        args.resume_file or path.with_name(f"{path.name}.{args.table}.resume"),
        {
            "kind": "import",
            "file": str(path.resolve()),
            "size": size,
            "table": args.table,
            "to": endpoint.describe(),
        },
    )
    position = None if args.restart else resume.load()
    offset, records = 0, 0
    if position is not None:
        offset, records = position["offset"], position["records"]
        _say(f"resuming {path.name} after {records:,} records")
    _ensure_table(wire)
    started = time.monotonic()
    with open(path, "rb") as stream, meter(f"import {path.name}", size, offset) as progress:
        if kind == "csv":
            source = FileSource(read_csv(stream, skip=records), "row", 0, records)
        else:
            source = FileSource(read_jsonl(stream, offset, records), "line", offset, records)
        loader = Loader(wire, progress, resume.save, concurrency=args.concurrency)
        loader.run(source.items(), source.end)
        retries, done = progress.retries, progress.entities
    resume.clear()
    seconds = time.monotonic() - started
    _say(
        f"imported {source.seq:,} records into {args.table} ({done:,} in {seconds:.1f} s, "
        f"{done / max(seconds, 1e-9):,.0f}/s; {retries} batch(es) retried)"
    )
    return 0


def run_copy(args: argparse.Namespace) -> int:
    common = endpoint_from(args)
    source_endpoint: Endpoint = endpoint_from(args, "source-", common)
    dest_endpoint: Endpoint = endpoint_from(args, "dest-", common)
    source = TableWire(table_client(args.source, source_endpoint))
    dest = TableWire(table_client(args.dest, dest_endpoint))
    identity = {
        "kind": "copy",
        "from": f"{source.account_url}/{source.table}",
        "to": f"{dest.account_url}/{dest.table}",
        "filter": args.filter,
    }
    default = Path(f".tabulae-copy-{source.table}-{dest.table}.resume")
    resume = transfer.ResumeFile(args.resume_file or default, identity)
    position = None if args.restart else resume.load()
    start, records = None, 0
    if position is not None:
        records = position["records"]
        start = position.get("next")
        if position.get("done"):
            _say(f"the copy had already finished ({records:,} entities); checking")
        else:
            _say(f"resuming the copy after {records:,} entities")
    _ensure_table(dest)
    started = time.monotonic()
    with meter(f"copy {source.table} → {dest.table}") as progress:
        source.on_retry = progress.retried
        if position is None or not position.get("done"):
            first = tuple(start) if start else None
            pages = transfer.prefetched(source.pages(args.filter, start=first))  # type: ignore[arg-type]
            items = TableSource(pages, start, records)
            Loader(dest, progress, resume.save, concurrency=args.concurrency).run(items.items(), items.end)
            records = items.seq
        done, retries = progress.entities, progress.retries
    seconds = time.monotonic() - started
    loaded = records
    _say(
        f"copied {loaded:,} entities from {source.table} to {dest.table} ({done:,} in {seconds:.1f} s, "
        f"{done / max(seconds, 1e-9):,.0f}/s; {retries} batch(es) retried)"
    )
    if not args.no_check:
        found = transfer.count(dest)
        if found != loaded:
            raise Failure(
                "CountMismatch",
                f"count check failed: {dest.table} holds {found:,} entities, {loaded:,} were copied "
                f"(was it empty before? resume file kept: {resume.path})",
                EXIT_COUNT,
            )
        _say(f"count check: {dest.table} holds {found:,} entities, as copied")
    resume.clear()
    return 0
