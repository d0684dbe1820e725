"""One server, one view: the worker processes of a server publish their counters for each other.

Every worker counts the requests it serves in its own memory (the per-request cost stays a few
dictionary lookups and additions). The worker that answers ``/metrics`` (or draws the console's
Insight page) asks the others for their counts and sums them with its own, so the answer covers
the whole server whichever worker the kernel handed the connection to.

The exchange goes through a directory the server creates for its workers (on ``/dev/shm`` where
there is one, so it never touches a disk): each worker keeps the plain-data state of its counters
in ``<pid>.state`` (written whole, then renamed over the old one). A reader sends each live worker
``SIGUSR1``, which makes it publish at once, and waits (briefly, bounded) until each file has been
replaced; a worker that does not answer in time is read as last published. Workers also publish
every few seconds and when they stop (``<pid>.final``), so the counts of a worker that has gone
stay in the sums: counters never go back.

The files hold :mod:`marshal` data: plain builtin types only, written and read by the same server
in a directory only its user can write (``mkdtemp`` makes it 0700).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import marshal
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["Peers"]

log = logging.getLogger("tabulae.insight")

_POLL_SECONDS = 0.005


class Peers:
    """This worker's side of the exchange: publish on request, gather the others' states."""

    def __init__(
        self,
        directory: Path,
        state: Callable[[], Any],
        *,
        wait_seconds: float = 1.0,
        publish_every: float = 5.0,
    ) -> None:
        self.directory = directory
        self._state = state
        self.wait_seconds = wait_seconds
        self.publish_every = publish_every
        self.pid = os.getpid()
        self._path = directory / f"{self.pid}.state"
        self._task: asyncio.Task[None] | None = None
        self._last: bytes | None = None

    def start(self) -> None:
        """Answer ``SIGUSR1`` from now on, and publish a first time (readers signal only workers
        whose file exists, so none signals this one before it can answer)."""
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGUSR1, self.publish)
        self.publish()
        self._task = loop.create_task(self._keep_publishing())

    def publish(self, path: Path | None = None, *, if_changed: bool = False) -> None:
        """Write this worker's state, replacing the previous one in one rename (a new file, so a
        waiting reader sees it was answered)."""
        data = marshal.dumps(self._state())
        if if_changed and data == self._last:
            return
        target = path or self._path
        temporary = target.with_name(f"{self.pid}.tmp")
        try:
            temporary.write_bytes(data)
            os.replace(temporary, target)
        except OSError as exc:  # the directory went away (the server is stopping)
            log.debug("could not publish counters: %s", exc)
            return
        self._last = data

    async def _keep_publishing(self) -> None:
        while True:
            await asyncio.sleep(self.publish_every)
            self.publish(if_changed=True)

    async def gather(self) -> list[Any]:
        """The states of every other worker of this server, live ones asked to publish first."""
        waiting: list[tuple[Path, int]] = []
        try:
            names = os.listdir(self.directory)
        except OSError:
            return []
        paths = []
        for name in names:
            stem, _, suffix = name.partition(".")
            if suffix not in ("state", "final") or not stem.isdigit() or int(stem) == self.pid:
                continue
            path = self.directory / name
            paths.append(path)
            if suffix == "state":
                stamp = _stamp(path)
                try:
                    os.kill(int(stem), signal.SIGUSR1)
                except ProcessLookupError:  # died without saying goodbye: its last state stands
                    continue
                except PermissionError:
                    continue
                waiting.append((path, stamp))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait_seconds
        while waiting and loop.time() < deadline:
            await asyncio.sleep(_POLL_SECONDS)
            waiting = [(path, stamp) for path, stamp in waiting if _stamp(path) == stamp]
        states = []
        for path in paths:
            with contextlib.suppress(OSError, ValueError, EOFError, TypeError):
                states.append(marshal.loads(path.read_bytes()))
        return states

    def close(self) -> None:
        """Leave the final counts for the others and stop answering."""
        if self._task is not None:
            self._task.cancel()
        with contextlib.suppress(RuntimeError, ValueError):
            asyncio.get_running_loop().remove_signal_handler(signal.SIGUSR1)
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)  # a late reader's signal must not kill us
        self.publish(self.directory / f"{self.pid}.final")
        with contextlib.suppress(OSError):
            self._path.unlink()


def _stamp(path: Path) -> int:
    """What changes when a worker publishes: the file's identity (each write is a new file)."""
    try:
        stat = path.stat()
    except OSError:
        return -1
    return stat.st_ino
