"""Progress of long work on the terminal: entities done, entities/s and, when the end is known, ETA.

Drawn with ``rich`` on standard error, and only when standard error is a terminal: in a script
or a CI log the tools stay quiet but for their one-line summary.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from rich.console import Console
from rich.progress import BarColumn, Progress, ProgressColumn, Task, TaskID, TextColumn, TimeRemainingColumn
from rich.text import Text


class _Rate(ProgressColumn):
    """``12,345 entities, 31,000/s``: counted in entities whatever the bar measures (bytes)."""

    def render(self, task: Task) -> Text:
        entities = task.fields.get("entities", 0)
        elapsed = task.elapsed or 0.0
        rate = entities / elapsed if elapsed > 0 else 0.0
        return Text(f"{entities:,} entities, {rate:,.0f}/s", style="progress.data.speed")


@dataclass
class Meter:
    """What a tool reports as it goes; the display (if any) follows it."""

    entities: int = 0
    retries: int = 0
    started: float = field(default_factory=time.monotonic)
    _progress: Progress | None = None
    _task: TaskID | None = None

    def advance(self, entities: int, position: int | None = None) -> None:
        """``entities`` more done; ``position``: how far through the input (for the bar and ETA)."""
        self.entities += entities
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, entities=self.entities, completed=position)

    def retried(self) -> None:
        self.retries += 1

    @property
    def rate(self) -> float:
        elapsed = time.monotonic() - self.started
        return self.entities / elapsed if elapsed > 0 else 0.0


@contextmanager
def meter(description: str, total: int | None = None, start: int = 0) -> Iterator[Meter]:
    """A :class:`Meter`, drawn on a terminal; ``total`` is the input's size when it is known."""
    console = Console(stderr=True)
    state = Meter()
    if not (sys.stderr.isatty() and console.is_terminal):
        yield state
        return
    columns: list[ProgressColumn] = [TextColumn("{task.description}")]
    if total:
        columns += [BarColumn(), TextColumn("{task.percentage:>3.0f}%"), TimeRemainingColumn()]
    columns.append(_Rate())
    with Progress(*columns, console=console, transient=False) as progress:
        state._progress = progress
        state._task = progress.add_task(description, total=total, completed=start, entities=0)
        yield state
