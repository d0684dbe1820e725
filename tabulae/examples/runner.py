"""``tabulae examples``: run the pattern examples against a server and print what each cost.

The runner starts nothing: it takes a connection string, runs every example (or the ones named)
one after the other, prints each one's cost table, claims and the warnings the server raised,
and ends with ``N passed, M failed`` (and ``, K skipped`` when an example found the server
lacking a flag it needs). The exit status is 1 when an example failed.
"""

from __future__ import annotations

import argparse
import socket
import time
import traceback
from collections.abc import Callable
from urllib.parse import urlsplit

from azure.core.exceptions import HttpResponseError

from tabulae.examples import catalogue, report
from tabulae.examples.harness import ClaimFailed, Example, SkipExample
from tabulae.examples.report import Result
from tabulae.tools.endpoints import check_connection_string
from tabulae.tools.failures import EXIT_USAGE, Failure, connection_code

__all__ = ["Result", "main", "run_one"]


def run_one(name: str, connection_string: str, log: Callable[[str], None] = print) -> Result:
    """Run one example, always cleaning up; a failure becomes the result's reason."""
    entry = catalogue.EXAMPLES[name]
    ex = Example(connection_string, name, log=log)
    started = time.monotonic()
    status, reason = "passed", ""
    try:
        entry.run(ex)
    except SkipExample as exc:
        status, reason = "skipped", str(exc)
    except ClaimFailed as exc:
        status, reason = "failed", f"claim did not hold: {exc}"
    except HttpResponseError as exc:
        status, reason = "failed", f"{type(exc).__name__}: {exc.message}"
    except Exception as exc:  # an example is a test: any error fails it, the others still run
        status, reason = "failed", "".join(traceback.format_exception_only(exc)).strip()
    finally:
        counters = ex.counters()
        ex.cleanup()
    return Result(
        name=name,
        title=entry.title,
        status=status,
        reason=reason,
        seconds=round(time.monotonic() - started, 2),
        operations=[op.as_dict() for op in ex.meter.operations],
        claims=list(ex.claims),
        warnings=list(ex.warnings_seen),
        notes=list(ex.notes),
        counters=counters,
    )


def _check_reachable(connection_string: str) -> None:
    """A :class:`Failure` when the Table endpoint cannot be reached (nothing listening, a bad
    connection string): said once, instead of every example failing after the SDK's retries."""
    url = check_connection_string(connection_string).url
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "", port), timeout=5):
            return
    except OSError as exc:
        raise Failure(
            connection_code(exc),
            f"cannot reach the Table endpoint {url}: {exc.strerror or exc} (is the server running?)",
            EXIT_USAGE,
        ) from None


def main(args: argparse.Namespace) -> int:
    if args.list:
        for name, entry in catalogue.EXAMPLES.items():
            print(f"{name:28} {entry.title}")
        return 0
    unknown = [name for name in args.patterns if name not in catalogue.EXAMPLES]
    if unknown:
        raise Failure(
            "InvalidArguments",
            f"unknown example(s): {', '.join(unknown)}; `tabulae examples --list` names them",
            EXIT_USAGE,
        )
    names = args.patterns or list(catalogue.EXAMPLES)

    def log(line: str) -> None:
        print(line, flush=True)

    _check_reachable(args.connection_string)
    results = []
    for name in names:
        result = run_one(name, args.connection_string, log=log)
        results.append(result)
        log(report.text(result))
    if args.markdown is not None:
        report.write_markdown(args.markdown, results)
    passed = sum(r.status == "passed" for r in results)
    failed = sum(r.status == "failed" for r in results)
    skipped = sum(r.status == "skipped" for r in results)
    summary = f"{passed} passed, {failed} failed"
    if skipped:
        summary += f", {skipped} skipped"
    print(summary, flush=True)
    return 1 if failed else 0
