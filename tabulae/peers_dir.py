"""The directory a multi-worker server's processes share counters through, and the clearing of
those that servers killed without a chance to clean up (``kill -9``, a crash, a power cut of a
container whose ``/dev/shm`` outlives it) left behind.

Each server holds an exclusive ``flock`` on ``owner.lock`` inside its directory for as long as
its parent process lives; the kernel drops the lock however the process ends. A new server
removes every such directory of its user whose lock it can take: nobody owns it any more.
Directories younger than :data:`SETTLING_SECONDS` are left alone, so that a server that has
made its directory but not yet locked it is never swept; directories without the lock file
(made by older versions) are left alone too, since nothing says whether their server lives.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
import time

__all__ = ["make_peers_dir"]

PREFIX = "tabulae-"
LOCK_NAME = "owner.lock"
SETTLING_SECONDS = 60.0

_held: list[int] = []  # the locks of this process's directories, open until it exits


def make_peers_dir() -> str:
    """A new private directory, in memory (``/dev/shm``) where the system has it, locked by this
    process; abandoned ones beside it are removed first."""
    memory = "/dev/shm"
    parent = memory if os.path.isdir(memory) and os.access(memory, os.W_OK) else tempfile.gettempdir()
    sweep_abandoned(parent)
    path = tempfile.mkdtemp(prefix=PREFIX, dir=parent)
    fd = os.open(os.path.join(path, LOCK_NAME), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    _held.append(fd)
    return path


def sweep_abandoned(parent: str) -> int:
    """Remove the directories under ``parent`` whose server is gone; how many were removed."""
    removed = 0
    now = time.time()
    uid = os.getuid()
    with contextlib.suppress(OSError), os.scandir(parent) as entries:
        for entry in entries:
            if not entry.name.startswith(PREFIX):
                continue
            with contextlib.suppress(OSError):  # it may vanish, or not be ours, meanwhile
                status = entry.stat(follow_symlinks=False)
                if not entry.is_dir(follow_symlinks=False) or status.st_uid != uid:
                    continue
                if now - status.st_mtime < SETTLING_SECONDS:
                    continue
                if _abandoned(entry.path):
                    shutil.rmtree(entry.path, ignore_errors=True)
                    removed += 1
    return removed


def _abandoned(path: str) -> bool:
    try:
        fd = os.open(os.path.join(path, LOCK_NAME), os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False  # its server is alive
    finally:
        os.close(fd)
    return True
