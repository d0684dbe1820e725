"""``tabulae account show|set``: an account's features on a running server (versioning, change
feed, container soft delete, last access tracking, version-level immutability and the default
policy; the hierarchical namespace is shown only).

Azure sets these in its management plane; a Tabulae server keeps them per account and takes
changes through its signed ``/-/accounts`` endpoint, which these commands call with the account
key of the connection options (a SAS is refused), signed as ``tabulae index`` signs. ``show``
prints one feature a line, ``NAME<TAB>VALUE``; ``set NAME=VALUE…`` changes those named and prints
the result the same way. Exit status 0 done, 1 refused, 2 usage.
"""

from __future__ import annotations

import argparse
from typing import Any

from tabulae.model.accounts import CHANGEABLE
from tabulae.tools.endpoints import add_endpoint_arguments, endpoint_from
from tabulae.tools.failures import Failure
from tabulae.tools.indexes import AdminClient

ACCOUNT_ADMIN_PATH = "/-/accounts"
_TRUE, _FALSE = ("true", "on", "yes", "1"), ("false", "off", "no", "0")
_DAYS = ("container-soft-delete", "default-immutability-days")  # features counted in days


def add_commands(commands: Any) -> None:
    """Add ``account show|set`` to the ``tabulae`` parser."""
    account = commands.add_parser(
        "account", help="show or change an account's features (versioning, change feed, soft delete…)"
    )
    account_commands = account.add_subparsers(dest="account_command", required=True)
    show = account_commands.add_parser("show", help="the account's features")
    change = account_commands.add_parser(
        "set",
        help="change features",
        description="Change the named features of the account on a running server: "
        + ", ".join(f"{name}=…" for name in CHANGEABLE)
        + " (true/false; container-soft-delete and default-immutability-days take days, 0 for off).",
    )
    change.add_argument("changes", nargs="+", metavar="NAME=VALUE")
    for sub in (show, change):
        add_endpoint_arguments(sub)


def parse_changes(items: list[str]) -> dict[str, Any]:
    """``NAME=VALUE`` arguments as the endpoint's JSON document; the server checks the names."""
    changes: dict[str, Any] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise Failure("InvalidArguments", f"expected NAME=VALUE, not {item!r}")
        value: Any
        if name in _DAYS and text.isdigit():
            value = int(text)
        elif text.lower() in _TRUE:
            value = True
        elif text.lower() in _FALSE:
            value = 0 if name in _DAYS else False  # days: off is 0
        elif text.isdigit():
            value = int(text)
        else:
            raise Failure(
                "InvalidArguments", f"{name}: expected true, false or a number of days, not {text!r}"
            )
        changes[name] = value
    return changes


def main(args: argparse.Namespace) -> int:
    """Run one ``account`` command; a failure propagates, for ``tabulae.cli`` to tell in one line."""
    client = AdminClient(endpoint_from(args), ACCOUNT_ADMIN_PATH)
    if args.account_command == "set":
        _status, features = client.call("PUT", body=parse_changes(args.changes))
    else:
        _status, features = client.call("GET")
    for name, value in features.items():
        print(f"{name}\t{str(value).lower() if isinstance(value, bool) else value}")
    return 0
