"""``tabulae top``: the hottest partitions of a running server, redrawn in the terminal.

It polls the server's ``GET /metrics?format=json`` (the :meth:`Insight.snapshot
<tabulae.insight.partitions.Insight.snapshot>` document, summed over the server's workers), signed
with an account key (the connection options, by default the development account) or sent with
``--metrics-token``, as a server that does not listen on loopback only requires, and draws a table:
the partitions taking the most load, how close each is to its target, and the warnings the server
has raised. Drawing is a pure function of the snapshot (:func:`render_top`), so it is tested
without a terminal; the loop only fetches, clears the screen with ANSI codes (no curses) and writes.

Partition keys are user data and may hold control characters: they are shown escaped, so a key
can never move the cursor or recolour the terminal.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import os
import shutil
import sys
import textwrap
import time
import unicodedata
import urllib.error
import urllib.request
from collections.abc import Mapping
from email.utils import formatdate
from typing import Any, TextIO
from urllib.parse import urlsplit

from azure.core.credentials import AzureNamedKeyCredential
from azure.data.tables import TableServiceClient

from tabulae.config import DEFAULT_HOST, DEFAULT_PORT
from tabulae.tools.failures import Failure, connection_code

__all__ = [
    "CLEAR",
    "add_arguments",
    "fetch_snapshot",
    "main",
    "metrics_headers",
    "metrics_url",
    "render_top",
    "run_top",
]

CONNECTION_ENV = "AZURE_STORAGE_CONNECTION_STRING"
VERSION = "2019-02-02"

CLEAR = "\x1b[H\x1b[2J"
"""Cursor home, then erase the screen."""

_NUMBERS = (  # (heading, width) of the numeric columns after the name
    ("LOAD/s", 8),
    ("%TGT", 6),
    ("WRITE/s", 8),
    ("READ/s", 8),
    ("SCAN/s", 8),
    ("DENS", 6),
    ("THROT", 6),
)
_MIN_NAME = 12


def metrics_url(endpoint: str) -> str:
    """The JSON metrics URL of a server, given its root, host:port, or an account endpoint.

    ``/metrics`` lives at the server root, so any path (``/devstoreaccount1``) is dropped.
    """
    if "://" not in endpoint:
        endpoint = "http://" + endpoint
    parts = urlsplit(endpoint)
    return f"{parts.scheme}://{parts.netloc}/metrics?format=json"


def metrics_headers(
    url: str, *, connection_string: str | None = None, token: str | None = None
) -> dict[str, str]:
    """The headers that let a request read ``url`` (the server's ``/metrics``): the bearer
    ``token`` when given, else a Shared Key signature with the key of ``connection_string``
    (signed as a Table request for ``/{account}/metrics``; a SAS connection string signs nothing:
    only a key or the token opens ``/metrics`` off loopback)."""
    if token:
        return {"Authorization": f"Bearer {token}"}
    client = TableServiceClient.from_connection_string(connection_string or "UseDevelopmentStorage=true")
    credential = client.credential
    if not isinstance(credential, AzureNamedKeyCredential):
        return {}
    account, key = credential.named_key
    date = formatdate(usegmt=True)
    to_sign = f"GET\n\n\n{date}\n/{account}{urlsplit(url).path}"
    signature = base64.b64encode(hmac.digest(base64.b64decode(key), to_sign.encode(), hashlib.sha256))
    return {
        "x-ms-date": date,
        "x-ms-version": VERSION,
        "Authorization": f"SharedKey {account}:{signature.decode()}",
    }


def fetch_snapshot(
    url: str, timeout: float = 15.0, headers: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """One GET of the JSON metrics, with ``headers`` (:func:`metrics_headers`) when given. The
    timeout is generous: a server busy enough to be worth watching may answer slowly, and a
    missing one is refused at once anyway."""
    request = urllib.request.Request(url, headers={"Accept": "application/json", **(headers or {})})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        document = json.loads(response.read())
    if not isinstance(document, dict):
        raise ValueError("the metrics document is not a JSON object")
    return document


# ------------------------------------------------------------------------------------ drawing


def _printable(text: str) -> str:
    """Escape what a terminal would interpret (controls, lone surrogates); keep the rest."""
    if text.isprintable():
        return text
    out = []
    for char in text:
        if char.isprintable():
            out.append(char)
        else:
            out.append(char.encode("unicode_escape", "backslashreplace").decode("ascii"))
    return "".join(out)


def _width(char: str) -> int:
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def _fit(text: str, width: int) -> str:
    """``text`` cut to at most ``width`` terminal columns (wide characters count two), padded."""
    used = 0
    out: list[str] = []
    for char in text:
        w = _width(char)
        if used + w > width:
            if out and width > 0:  # mark the cut with an ellipsis in the last column
                while out and used + 1 > width:
                    used -= _width(out.pop())
                out.append("…")
                used += 1
            break
        out.append(char)
        used += w
    return "".join(out) + " " * max(0, width - used)


def _rate(value: Any) -> str:
    if not isinstance(value, int | float):
        return "-"
    if value >= 10_000:
        return f"{value / 1000:.0f}k"
    if value >= 100 or value == 0:
        return f"{value:.0f}"
    return f"{value:.1f}"


def _percent(value: Any) -> str:
    return f"{value:.0%}" if isinstance(value, int | float) else "-"


def _density(value: Any) -> str:
    if not isinstance(value, int | float):
        return "-"
    return f"{value:.2f}" if value >= 0.01 else f"{value:.0e}"


def _row(name: str, cells: list[str], name_width: int) -> str:
    numbers = "".join(f"{cell:>{width}}" for cell, (_h, width) in zip(cells, _NUMBERS, strict=True))
    return f"{_fit(name, name_width)}{numbers}"


def render_top(snapshot: dict[str, Any], width: int, *, limit: int = 20) -> str:
    """Draw the hottest partitions of ``snapshot`` in at most ``width`` columns.

    One line per account (load against the account target), then up to ``limit`` partitions
    hottest first (load/s, % of the partition target, written/read/scanned per second, query
    density, requests throttled in the window), the table-wide load of queries across
    partitions when there is any, and the warnings.
    """
    width = max(width, _MIN_NAME + sum(w for _h, w in _NUMBERS))
    name_width = width - sum(w for _h, w in _NUMBERS)
    window = snapshot.get("window_seconds", 0)
    targets = snapshot.get("targets", {})
    partition_target = targets.get("partition") or 0
    lines = [
        _fit(
            f"tabulae top: rates over the last {window} s; targets {_rate(partition_target)}/s per "
            f"partition, {_rate(targets.get('account'))}/s per account",
            width,
        ).rstrip()
    ]
    for account in snapshot.get("accounts", []):
        rates = account.get("rates", {})
        lines.append(
            _fit(
                f"account {_printable(str(account.get('account')))}: load {_rate(rates.get('load'))}/s "
                f"({_percent(account.get('target_ratio'))} of target), "
                f"{account.get('requests', 0)} requests, {account.get('throttled', 0)} throttled",
                width,
            ).rstrip()
        )
    lines.append("")
    lines.append(_row("TABLE / PARTITION", [h for h, _w in _NUMBERS], name_width).rstrip())

    rows: list[tuple[float, str, dict[str, Any], Any]] = []
    for part in snapshot.get("partitions", []):
        name = f"{part.get('table')} / {_printable(repr(part.get('partition', '')))}"
        rows.append((part.get("rates", {}).get("load", 0.0), name, part, part.get("target_ratio")))
    for table in snapshot.get("tables", []):
        wide = table.get("table_wide")
        if wide and wide.get("rates", {}).get("load", 0.0) > 0:
            rows.append((wide["rates"]["load"], f"{table.get('table')} / (across partitions)", wide, None))
    rows.sort(key=lambda row: -row[0])
    if not rows:
        lines.append("  (no partition traffic yet)")
    for _load, name, figures, ratio in rows[:limit]:
        rates = figures.get("rates", {})
        window_throttled = rates.get("throttled", 0) * window if window else 0
        lines.append(
            _row(
                name,
                [
                    _rate(rates.get("load")),
                    _percent(ratio),
                    _rate(rates.get("written")),
                    _rate(rates.get("read")),
                    _rate(rates.get("scanned")),
                    _density(figures.get("density")),
                    str(round(window_throttled)),
                ],
                name_width,
            ).rstrip()
        )
    if len(rows) > limit:
        lines.append(f"  … {len(rows) - limit} more")
    warnings = snapshot.get("warnings", [])
    if warnings:
        lines.append("")
        lines.append(f"warnings ({len(warnings)}):")
        for warning in warnings:
            severity = warning.get("severity", "warning")
            text = _printable(f"! [{severity}] {warning.get('message', warning.get('kind', ''))}")
            for part in textwrap.wrap(text, width, subsequent_indent="    ") or [text]:
                lines.append(_fit(part, width).rstrip())
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------ the loop


def run_top(
    endpoint: str,
    interval: float = 2.0,
    iterations: int | None = None,
    *,
    out: TextIO | None = None,
    clear: bool | None = None,
    limit: int | None = None,
    connection_string: str | None = None,
    token: str | None = None,
) -> int:
    """Poll ``{endpoint}/metrics?format=json`` every ``interval`` s and redraw; Ctrl-C ends it.

    ``iterations`` bounds the number of draws (``None``: until interrupted). The screen is
    cleared before each draw when ``clear`` is true (default: when ``out`` is a terminal). A
    server that cannot be read at the first poll ends the run at once with a :class:`Failure` (a
    wrong address, or no server); one that stops answering later is reported in place of the table and
    polled again, and the status is 1 if the last poll failed, else 0.
    """
    stream = out if out is not None else sys.stdout
    if clear is None:
        clear = stream.isatty()
    url = metrics_url(endpoint)
    drawn = 0
    failed = False
    try:
        while iterations is None or drawn < iterations:
            if drawn:
                time.sleep(interval)
            size = shutil.get_terminal_size((100, 24))
            rows = limit if limit is not None else max(5, size.lines - 12)
            try:
                headers = metrics_headers(url, connection_string=connection_string, token=token)
                text = render_top(fetch_snapshot(url, headers=headers), size.columns, limit=rows)
                failed = False
            except (OSError, ValueError) as exc:  # URLError is an OSError; bad JSON a ValueError
                reason = getattr(exc, "reason", exc)
                failed = True
                if not drawn:
                    raise Failure(_code(exc), f"cannot read {url}: {reason}") from None
                text = f"tabulae top: cannot read {url}: {reason}\n"
            stream.write((CLEAR if clear else "") + text)
            stream.flush()
            drawn += 1
    except KeyboardInterrupt:
        stream.write("\n")
    return 1 if failed else 0


def _code(exc: Exception) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"Http{exc.code}"
    return connection_code(exc) if isinstance(exc, OSError) else "InvalidResponse"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``tabulae top`` (for the CLI to attach to its sub-parser)."""
    parser.add_argument(
        "endpoint",
        nargs="?",
        default=f"http://{DEFAULT_HOST}:{DEFAULT_PORT}",
        help=f"the server (root URL, host:port or account URL; default http://{DEFAULT_HOST}:{DEFAULT_PORT})",
    )
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between redraws (default 2)")
    parser.add_argument("--iterations", type=int, default=None, help="stop after this many redraws")
    parser.add_argument(
        "--limit", type=int, default=None, help="partitions to show (default: fit the terminal)"
    )
    parser.add_argument(
        "--connection-string",
        metavar="CS",
        help=f"sign with this connection string's account key (default: ${CONNECTION_ENV}, else the "
        "development account); needed when the server does not listen on loopback only",
    )
    parser.add_argument(
        "--metrics-token", metavar="TOKEN", help="the server's --metrics-token, instead of a key"
    )


def main(args: argparse.Namespace) -> int:
    """Run ``tabulae top`` from parsed arguments."""
    return run_top(
        args.endpoint,
        args.interval,
        args.iterations,
        limit=args.limit,
        connection_string=args.connection_string or os.environ.get(CONNECTION_ENV),
        token=args.metrics_token,
    )
