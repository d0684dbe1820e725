"""How insight leaves the process: the JSON snapshot and the Prometheus text format 0.0.4.

Every exporter of ``insight`` (partitions and tables here; queues and containers in their own
modules) writes the same text format, so its rules live once, here: escaping a label value,
spelling a sample value, the ``# HELP``/``# TYPE`` lines of a family, and replacing lone
surrogates, which are legal in a PartitionKey or table name but not in UTF-8 JSON or text.
The Table service's two documents, :func:`table_snapshot` (``GET /metrics?format=json``,
``tabulae top``, the console) and :func:`table_prometheus` (``GET /metrics``), are rendered
here too, from the recorder's series; the recorder only counts.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Protocol

from tabulae.insight.series import QUERY_CLASSES, Series, TableSeries
from tabulae.model.edm import utf16_sort_key


class TableFigures(Protocol):
    """What the Table service's rendering reads of an :class:`~tabulae.insight.partitions.Insight`
    (named here, so that rendering and recording do not import each other)."""

    window_seconds: int
    partition_target: float
    account_target: float

    def accounts(self) -> list[tuple[str, Series]]: ...

    def tables(self) -> list[TableSeries]: ...

    def warnings(self) -> list[dict[str, Any]]: ...


__all__ = ["escape_label_value", "family", "json_safe", "number", "table_prometheus", "table_snapshot"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def escape_label_value(value: str) -> str:
    r"""Escape a label value for the text format 0.0.4: ``\`` → ``\\``, ``"`` → ``\"``, newline → ``\n``.

    Lone surrogates (legal in a PartitionKey, not in UTF-8) become U+FFFD so the exposition
    always encodes; every other character is passed through, as the format allows.
    """
    return json_safe(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def json_safe(value: str) -> str:
    """``value`` with lone surrogates (legal in a PartitionKey, not in UTF-8 JSON) as U+FFFD."""
    return _SURROGATE.sub("\ufffd", value)


def number(value: float) -> str:
    """A sample value as the text format spells it (integers exactly, ``NaN``, ``+Inf``, ``-Inf``)."""
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def family(lines: list[str], name: str, kind: str, help_text: str) -> str:
    """Append the ``# HELP`` and ``# TYPE`` lines of family ``name`` to ``lines``; return ``name``."""
    lines.append(f"# HELP {name} {help_text}")
    lines.append(f"# TYPE {name} {kind}")
    return name


@dataclass(frozen=True, slots=True)
class _Family:
    name: str
    kind: str
    help: str


_FAMILIES = {
    "requests": _Family("tabulae_requests_total", "counter", "Requests, by the partition they addressed."),
    "written": _Family(
        "tabulae_entities_written_total", "counter", "Entities inserted, updated, merged or deleted."
    ),
    "read": _Family(
        "tabulae_entities_read_total", "counter", "Entities delivered to clients (by key or by query)."
    ),
    "scanned": _Family(
        "tabulae_entities_scanned_total",
        "counter",
        "Entities examined to answer reads; with writes, what counts against the targets.",
    ),
    "queries": _Family(
        "tabulae_queries_total", "counter", "Reads by query class (a read by key is a point query)."
    ),
    "throttled": _Family(
        "tabulae_throttled_total", "counter", "Requests refused for being over a scalability target."
    ),
    "density": _Family(
        "tabulae_query_density", "gauge", "Entities delivered divided by entities scanned, since start."
    ),
    "load": _Family(
        "tabulae_load_entities_per_second",
        "gauge",
        "Entities written or scanned per second over the recent window.",
    ),
    "target": _Family("tabulae_target_entities_per_second", "gauge", "The scalability target, by scope."),
    "warnings": _Family("tabulae_warnings", "gauge", "Active anti-pattern warnings, by kind."),
}


def _figures(stats: Series, second: int, seconds: int) -> dict[str, Any]:
    written, read, scanned, throttled = stats.window.sums(second)
    return {
        "requests": stats.requests,
        "written": stats.written,
        "read": stats.read,
        "scanned": stats.scanned,
        "load": stats.written + stats.scanned,
        "throttled": stats.throttled,
        "queries": {name: stats.queries.get(name, 0) for name in QUERY_CLASSES},
        "density": stats.read / stats.scanned if stats.scanned else None,
        "rates": {
            "written": written / seconds,
            "read": read / seconds,
            "scanned": scanned / seconds,
            "load": (written + scanned) / seconds,
            "throttled": throttled / seconds,
        },
    }


def table_snapshot(insight: TableFigures, second: int) -> dict[str, Any]:
    """Everything, JSON-ready: accounts, tables, partitions hottest first, warnings.

    ``partitions`` lists only real partitions, sorted by recent load (then total load);
    each table carries its folded ``other`` and not-one-partition ``table_wide`` figures.
    """
    seconds = insight.window_seconds
    accounts = []
    for name, stats in insight.accounts():
        figures = _figures(stats, second, seconds)
        figures["target_ratio"] = figures["rates"]["load"] / insight.account_target
        accounts.append({"account": name, **figures})
    tables = []
    partitions = []
    for tbl in insight.tables():
        entry: dict[str, Any] = {
            "account": tbl.account,
            "table": tbl.name,
            **_figures(tbl.stats, second, seconds),
            "partitions": len(tbl.partitions),
            "other": _figures(tbl.other, second, seconds) if tbl.other is not None else None,
            "table_wide": _figures(tbl.wide, second, seconds) if tbl.wide is not None else None,
        }
        tables.append(entry)
        for pk, stats in tbl.partitions.items():
            figures = _figures(stats, second, seconds)
            figures["target_ratio"] = figures["rates"]["load"] / insight.partition_target
            partitions.append(
                {"account": tbl.account, "table": tbl.name, "partition": json_safe(pk), **figures}
            )
    partitions.sort(
        key=lambda p: (-p["rates"]["load"], -p["load"], p["account"], p["table"].lower(),
                       utf16_sort_key(p["partition"]))
    )  # fmt: skip
    return {
        "window_seconds": seconds,
        "targets": {"partition": insight.partition_target, "account": insight.account_target},
        "accounts": accounts,
        "tables": tables,
        "partitions": partitions,
        "warnings": insight.warnings(),
    }


def table_prometheus(insight: TableFigures, second: int) -> str:
    """The Table service's families in the text exposition format 0.0.4."""
    rows: list[tuple[str, Series]] = []
    for tbl in insight.tables():
        prefix = f'account="{escape_label_value(tbl.account)}",table="{escape_label_value(tbl.name)}"'
        for pk, stats in tbl.series():
            rows.append((f'{prefix},partition="{escape_label_value(pk)}"', stats))
    lines: list[str] = []

    def header(key: str) -> str:
        fam = _FAMILIES[key]
        return family(lines, fam.name, fam.kind, fam.help)

    for key in ("requests", "written", "read", "scanned", "throttled"):
        name = header(key)
        for labels, stats in rows:
            lines.append(f"{name}{{{labels}}} {getattr(stats, key)}")
    name = header("queries")
    for labels, stats in rows:
        for query_class in QUERY_CLASSES:
            count = stats.queries.get(query_class, 0)
            if count:
                lines.append(f'{name}{{{labels},class="{query_class}"}} {count}')
    name = header("density")
    for labels, stats in rows:
        if stats.scanned:
            lines.append(f"{name}{{{labels}}} {number(stats.read / stats.scanned)}")
    name = header("load")
    for labels, stats in rows:
        lines.append(f"{name}{{{labels}}} {number(stats.recent_load(second) / insight.window_seconds)}")
    name = header("target")
    lines.append(f'{name}{{scope="partition"}} {number(insight.partition_target)}')
    lines.append(f'{name}{{scope="account"}} {number(insight.account_target)}')
    name = header("warnings")
    kinds: dict[str, int] = {}
    for warning in insight.warnings():
        kinds[warning["kind"]] = kinds.get(warning["kind"], 0) + 1
    for kind in ("hot-partition", "busy-account", "append-only", "prepend-only", "low-density-scan"):
        lines.append(f'{name}{{kind="{kind}"}} {kinds.get(kind, 0)}')
    return "\n".join(lines) + "\n"
