"""The insight page: a partition heat map of each table and the anti-pattern warnings.

It draws the counters of :class:`tabulae.insight.partitions.Insight` (what ``/metrics?format=json``
returns), restricted to the signed-in account: a cell per tracked partition, in key order so
that append-only or prepend-only key schemes show as a hot edge, shaded by the entities it cost
(written plus scanned), and outlined when its recent rate is near or over the partition target;
then the warnings (hot partitions, append-only and prepend-only inserts, low-density scans, a busy
account) and the query classes each table was read with; and the data volume's free space, with a
warning when it is low or full. Counters are the whole front-end's
(every worker's, summed: ``insight.server``), and start at zero on start-up.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from tabulae.console.render import account_of, render
from tabulae.insight.series import QUERY_CLASSES
from tabulae.model.edm import utf16_sort_key

HEAT_LEVELS = 10  # shades of the heat map (CSS classes heat-0 .. heat-9)
NEAR_TARGET = 0.8


def heat_level(load: float, hottest: float) -> int:
    """0 for no load, else 1..9 on a square-root scale of the table's hottest partition."""
    if load <= 0 or hottest <= 0:
        return 0
    return max(1, min(HEAT_LEVELS - 1, math.ceil((HEAT_LEVELS - 1) * math.sqrt(load / hottest))))


def heat_maps(snapshot: dict[str, Any], account: str) -> list[dict[str, Any]]:
    """Per table of ``account``: its figures and its partitions in key order, with heat levels."""
    by_table: dict[str, list[dict[str, Any]]] = {}
    for partition in snapshot["partitions"]:
        if partition["account"] == account:
            by_table.setdefault(partition["table"], []).append(partition)
    maps = []
    for table in snapshot["tables"]:
        if table["account"] != account:
            continue
        partitions = sorted(by_table.get(table["table"], []), key=lambda p: utf16_sort_key(p["partition"]))
        hottest = max((p["load"] for p in partitions), default=0)
        cells = []
        for p in partitions:
            ratio = p["target_ratio"]
            cells.append(
                {
                    "partition": p["partition"],
                    "level": heat_level(p["load"], hottest),
                    "edge": "over" if ratio >= 1 else "near" if ratio >= NEAR_TARGET else "",
                    "load": p["load"],
                    "written": p["written"],
                    "scanned": p["scanned"],
                    "rate": p["rates"]["load"],
                    "ratio": ratio,
                }
            )
        maps.append({**table, "cells": cells, "query_classes": QUERY_CLASSES})
    return maps


class InsightPage:
    """Heat maps and warnings of the signed-in account's tables."""

    slug = "insight"
    title = "Insight"

    def __init__(
        self,
        snapshot: Callable[[], Awaitable[dict[str, Any]]],
        volume: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self.snapshot = snapshot  # the server's summed Insight.snapshot()
        self.volume = volume  # the data volume's figures (storage.volume.Volume.snapshot)

    def routes(self) -> list[BaseRoute]:
        return [Route("/insight", self.show, methods=["GET"])]

    async def show(self, request: Request) -> Response:
        account = account_of(request)
        snapshot = await self.snapshot()
        warnings = [w for w in snapshot["warnings"] if w["account"] == account]
        return render(
            request,
            "insight.html",
            maps=heat_maps(snapshot, account),
            warnings=warnings,
            window=snapshot["window_seconds"],
            targets=snapshot["targets"],
            volume=self.volume() if self.volume is not None else None,
        )
