"""``tabulae index add|list|drop``: property indexes of a Tabulae server (not an Azure feature).

The commands call the server's signed admin endpoint ``/-/indexes`` (see the README), signing
each request with the account key of the connection options exactly as the Table service's
Shared Key is signed, so they need the key (a SAS is refused). ``add`` declares the index, then
waits until the server reports it usable, showing the build's progress on standard error;
``--no-wait`` returns at once. Listings go to standard output, one index a line:
``TABLE PROPERTY TYPE STATE`` separated by tabs. Exit status 0 done, 1 refused or failed, 2 usage.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import sys
import time
import urllib.error
import urllib.request
from email.utils import formatdate
from typing import Any
from urllib.parse import quote, urlsplit

import orjson
from azure.core.credentials import AzureNamedKeyCredential

from tabulae.tools.endpoints import Endpoint, EndpointError, add_endpoint_arguments, endpoint_from
from tabulae.tools.failures import EXIT_FAILED, Failure, connection_code

ADMIN_PATH = "/-/indexes"
VERSION = "2019-02-02"
POLL_SECONDS = 0.5


class AdminError(Failure):
    """The server refused a request (its Azure error code), or could not be reached."""


def add_commands(commands: Any) -> None:
    """Add ``index add|list|drop`` to the ``tabulae`` parser."""
    index = commands.add_parser("index", help="add, list or drop property indexes (a Tabulae extension)")
    index_commands = index.add_subparsers(dest="index_command", required=True)
    add = index_commands.add_parser(
        "add",
        help="index a property of a table",
        description="Index PROPERTY of TABLE so that filters on it stop scanning the table. Builds "
        "while the table stays in use and returns once the index is used (or at once with --no-wait).",
    )
    add.add_argument("table")
    add.add_argument("property")
    add.add_argument(
        "--type",
        default="Edm.String",
        help="Edm type of the values (default Edm.String; Edm.Int32, Edm.Int64 and Edm.Double all index "
        "every number; also Edm.Boolean, Edm.DateTime, Edm.Guid)",
    )
    add.add_argument("--no-wait", action="store_true", help="return once declared; the build goes on")
    listing = index_commands.add_parser("list", help="list indexes (of one table, or all)")
    listing.add_argument("table", nargs="?")
    drop = index_commands.add_parser("drop", help="remove an index")
    drop.add_argument("table")
    drop.add_argument("property")
    for sub in (add, listing, drop):
        add_endpoint_arguments(sub)


class AdminClient:
    """Signed requests to one account's admin endpoint: ``/-/indexes`` unless ``path`` says
    another (``/-/accounts`` is signed the same way)."""

    def __init__(self, endpoint: Endpoint, path: str = ADMIN_PATH) -> None:
        self.path = path
        service = endpoint.service()
        credential = service.credential
        if not isinstance(credential, AzureNamedKeyCredential):
            raise EndpointError("admin commands need the account key (a connection string or --account-key)")
        self.account, key = credential.named_key
        self.key = base64.b64decode(key)
        parts = urlsplit(service.url)
        self.root = f"{parts.scheme}://{parts.netloc}"

    def call(self, method: str, *names: str, query: str = "", body: Any = None) -> tuple[int, Any]:
        """``method`` on the account's resource ``names``; ``body`` (if any) is sent as JSON."""
        path = "/".join([self.path, quote(self.account, safe=""), *(quote(n, safe="") for n in names)])
        date = formatdate(usegmt=True)
        content_type = "application/json" if body is not None else ""
        to_sign = f"{method}\n\n{content_type}\n{date}\n/{self.account}{path}"
        signature = base64.b64encode(hmac.digest(self.key, to_sign.encode("utf-8"), hashlib.sha256)).decode()
        headers = {
            "x-ms-date": date,
            "x-ms-version": VERSION,
            "Authorization": f"SharedKey {self.account}:{signature}",
        }
        if body is not None:
            headers["Content-Type"] = content_type
        request = urllib.request.Request(
            self.root + path + (f"?{query}" if query else ""),
            method=method,
            headers=headers,
            data=orjson.dumps(body) if body is not None else None,
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                answer = response.read()
                return response.status, orjson.loads(answer) if answer else None
        except urllib.error.HTTPError as exc:
            raise _refusal(exc) from None
        except urllib.error.URLError as exc:
            reason = getattr(exc.reason, "strerror", None) or exc.reason
            raise AdminError(connection_code(exc), f"cannot reach {self.root}: {reason}") from None


def _refusal(exc: urllib.error.HTTPError) -> AdminError:
    try:
        error = orjson.loads(exc.read())["odata.error"]
        return AdminError(error["code"], error["message"]["value"].splitlines()[0])
    except (ValueError, KeyError, TypeError, IndexError):
        return AdminError(f"Http{exc.code}", str(exc.reason))


def _line(index: dict[str, Any]) -> str:
    return "\t".join((index["table"], index["property"], index["type"], index["state"]))


def _progress(index: dict[str, Any]) -> str:
    done, total = index.get("done"), index.get("total")
    if done is not None and total:
        return f"building {index['table']}.{index['property']}: {done:,}/{total:,} ({100 * done // total}%)"
    return f"building {index['table']}.{index['property']}…"


def run_add(client: AdminClient, args: argparse.Namespace) -> int:
    _status, index = client.call(
        "PUT", args.table, args.property, query=f"type={quote(args.type)}&wait=false"
    )
    shown = ""
    while not args.no_wait and index["state"] == "building":
        if sys.stderr.isatty():
            shown = _progress(index)
            print(f"\r{shown}", end="", file=sys.stderr, flush=True)
        time.sleep(POLL_SECONDS)
        _status, listing = client.call("GET", args.table)
        found = [i for i in listing["value"] if i["property"] == args.property]
        if not found:
            raise AdminError("IndexNotFound", "the index was dropped while it was being built")
        index = found[0]
    if shown:
        print(file=sys.stderr)
    print(_line(index))
    if index["state"] == "failed":
        raise Failure("IndexBuildFailed", f"index build failed: {index.get('error')}", EXIT_FAILED)
    return 0


def run_list(client: AdminClient, args: argparse.Namespace) -> int:
    _status, listing = client.call("GET", *([args.table] if args.table else []))
    for index in listing["value"]:
        print(_line(index))
    return 0


def run_drop(client: AdminClient, args: argparse.Namespace) -> int:
    client.call("DELETE", args.table, args.property)
    return 0


def main(args: argparse.Namespace) -> int:
    """Run one ``index`` command; a failure propagates, for ``tabulae.cli`` to tell in one line."""
    client = AdminClient(endpoint_from(args))
    handler = {"add": run_add, "list": run_list, "drop": run_drop}[args.index_command]
    return handler(client, args)
