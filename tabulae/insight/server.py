"""The counters of a whole front-end: this worker's, summed with its sibling workers'.

A worker records into its own :class:`Insight`, :class:`QueueInsight` and
:class:`ContainerCounters` (nothing shared on the request path). :meth:`ServerInsight.view`
gathers the other workers' states (:mod:`tabulae.insight.peers`) and sums them with this worker's
into fresh instances, which then report as one process would: ``/metrics``, the console's
Insight page and ``tabulae top`` see the same numbers whichever worker answers.

What is summed is one front-end (one ``tabulae serve``): several front-ends over one PostgreSQL
database each count their own requests, and say whose counts they are (:attr:`frontend`,
``host:pid``), so a scraper sums them itself.

With ``hashed`` the view shows PartitionKeys and table, queue and container names as
``#`` and 12 hex digits of an HMAC-SHA256 under a secret of this server (stable while it runs,
the same in every worker, unrelated to any key), so ``/metrics`` can be scraped by whoever runs
the monitoring without handing them customers' keys and names. Account names are shown as they
are: they are the server's configuration, not data.
"""

from __future__ import annotations

import hmac
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tabulae.insight.containers import ContainerCounters
from tabulae.insight.partitions import Insight
from tabulae.insight.peers import Peers
from tabulae.insight.queues import QueueInsight
from tabulae.storage.queues import QueueStats

__all__ = ["ServerInsight", "View"]

HASH_DIGITS = 12


@dataclass(slots=True)
class View:
    """The summed counters of the front-end's workers that answered."""

    tables: Insight
    queues: QueueInsight
    containers: ContainerCounters
    workers: int  # how many workers' counts are in the sums (those gone included)
    hashed: bool
    processes: list[dict[str, int]]  # per worker: its pid and the requests it counted


class ServerInsight:
    """This worker's counters, and the way to the sum over the front-end's workers."""

    def __init__(
        self,
        tables: Insight,
        queues: QueueInsight,
        containers: ContainerCounters,
        *,
        peers_dir: Path | None = None,
        frontend: str = "",
        secret: bytes = b"",
    ) -> None:
        self.tables = tables
        self.queues = queues
        self.containers = containers
        self.frontend = frontend
        self._secret = secret
        self.peers = Peers(peers_dir, self.state) if peers_dir is not None else None

    def start(self) -> None:
        if self.peers is not None:
            self.peers.start()

    def close(self) -> None:
        if self.peers is not None:
            self.peers.close()

    def state(self) -> dict[str, Any]:
        """This worker's counters as plain data."""
        return {
            "pid": os.getpid(),
            "tables": self.tables.state(),
            "queues": self.queues.state(),
            "containers": self.containers.state(),
        }

    def hash_name(self, name: str) -> str:
        """The stable keyed hash shown for a key or name under ``--metrics-keys hashed``."""
        digest = hmac.digest(self._secret, name.encode("utf-8", "surrogatepass"), "sha256")
        return "#" + digest.hex()[:HASH_DIGITS]

    def queue_stats(self, stats: list[QueueStats], view: View) -> list[QueueStats]:
        """The store's queue figures, with names hashed when ``view`` is."""
        if not view.hashed:
            return stats
        return [replace(entry, queue=self.hash_name(entry.queue)) for entry in stats]

    def _hash_table(self, name: str) -> str:
        return self.hash_name(name.lower())  # table names are case-insensitive

    async def view(self, *, hashed: bool = False) -> View:
        """The sum of every worker's counters (this one's as of now, the others' as they answer)."""
        states = [self.state()]
        if self.peers is not None:
            # This worker's own file is refreshed too, as its siblings' are: whichever worker
            # dies next, the counts a reader has seen stay in the sums.
            self.peers.publish()
            states.extend(await self.peers.gather())
        tables, queues, containers = self.tables.view(), self.queues.view(), ContainerCounters()
        keep: Any = str
        for state in states:
            if hashed:
                tables.absorb(state["tables"], self.hash_name, self._hash_table)
                queues.absorb(state["queues"], self.hash_name)
                containers.absorb(state["containers"], self.hash_name)
            else:
                tables.absorb(state["tables"], keep)
                queues.absorb(state["queues"], keep)
                containers.absorb(state["containers"], keep)
        processes = sorted(({"pid": state["pid"], "requests": _requests(state)} for state in states),
                           key=lambda p: p["pid"])  # fmt: skip
        return View(tables, queues, containers, len(states), hashed, processes)


def _requests(state: dict[str, Any]) -> int:
    """The requests one worker counted, all services."""
    tables = sum(stats[0] for stats in state["tables"]["accounts"].values())
    queues = sum(series[2][0] for series in state["queues"]["series"])
    return tables + queues + sum(values[0] for _a, _c, values in state["containers"])
