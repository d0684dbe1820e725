"""Whether a directory can hold the SQLite store, asked once before a server starts.

Each worker opens the store at its own start-up; a directory it cannot write in would fail every
worker after the server has announced itself. So ``serve`` asks here first, in the parent
process, and refuses with one line. The check creates nothing a store consists of: the
directory itself (as the store would), and a probe file that is removed at once, since only a
write tells a read-only file system, an immutable directory or missing permissions apart from a
writable directory (as root, permission bits say nothing).
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path

from tabulae.storage.sqlite.blob_files import CONTENT_DIR

# The files the store opens for writing where they exist (engine.py: the database, its WAL and
# shared memory, the lock that orders writers).
STORE_FILES = ("tabulae.db", "tabulae.db-wal", "tabulae.db-shm", "tabulae.lock")


class UnusableDirectory(Exception):
    """The directory cannot hold the store; the message says which path and why."""


def check_directory(directory: Path) -> None:
    """Create ``directory`` if missing and make sure the store can write in it and in the files
    of a store already there; raise :class:`UnusableDirectory` otherwise."""
    for ancestor in (directory, *directory.parents):
        if ancestor.exists() or ancestor.is_symlink():
            if not ancestor.is_dir():
                raise UnusableDirectory(f"{ancestor} is a file, not a directory")
            break
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UnusableDirectory(f"cannot create {directory}: {_reason(exc)}") from None
    _probe(directory)
    content = directory / CONTENT_DIR
    if content.exists():
        if not content.is_dir():
            raise UnusableDirectory(f"{content} is a file, not a directory")
        _probe(content)
    for name in STORE_FILES:
        path = directory / name
        if not path.exists():
            continue
        try:
            os.close(os.open(path, os.O_RDWR))  # opens for writing, writes nothing
        except OSError as exc:
            raise UnusableDirectory(f"cannot write {path}: {_reason(exc)}") from None


def _probe(directory: Path) -> None:
    try:
        handle, name = tempfile.mkstemp(prefix=".tabulae-probe-", dir=directory)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return  # writable, but full: a store already there starts refusing writes (volume.py)
        raise UnusableDirectory(f"cannot write in {directory}: {_reason(exc)}") from None
    os.close(handle)
    with contextlib.suppress(OSError):
        os.unlink(name)


def _reason(exc: OSError) -> str:
    """The system's words for the error, with a hint where they are terse."""
    reason = exc.strerror or str(exc)
    if exc.errno == errno.EPERM:
        reason += " (is it immutable?)"
    return reason
