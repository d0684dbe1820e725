"""The ``tabulae examples`` command line: its options, and a clear word when the SDKs are missing.

It imports no SDK itself, so ``tabulae --help`` works on an install without the examples' extra;
the runner (and Microsoft's SDKs) are loaded only when the command runs.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from tabulae.tools.failures import EXIT_USAGE, Failure

__all__ = ["add_arguments", "main"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "patterns",
        nargs="*",
        metavar="PATTERN",
        help="the examples to run (default: all; `--list` names them)",
    )
    parser.add_argument(
        "--connection-string",
        default=os.environ.get("AZURE_STORAGE_CONNECTION_STRING", "UseDevelopmentStorage=true"),
        help="the account to run against, with its TableEndpoint, QueueEndpoint and BlobEndpoint "
        "(default: $AZURE_STORAGE_CONNECTION_STRING, else the development account)",
    )
    parser.add_argument("--list", action="store_true", help="list the examples and exit")
    parser.add_argument(
        "--markdown",
        type=Path,
        metavar="FILE",
        help="also write the results as a Markdown page (examples skipped in this run keep the "
        "section an earlier run wrote to FILE)",
    )


def main(args: argparse.Namespace) -> int:
    try:
        from tabulae.examples import runner
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("azure"):
            raise
        raise Failure(
            "MissingDependency",
            f"the examples need Microsoft's SDKs ({exc.name}): pip install 'tabulae[examples]'",
            EXIT_USAGE,
        ) from None
    return runner.main(args)
