"""Signed-out console sessions, as every worker process of the server sees them.

A session cookie is valid by its signature alone (:mod:`.session`), so signing out must leave
something behind that every worker reads: the nonce of each signed-out session, with the time
its cookie would have expired anyway, one line each in a file that only grows::

    <expires, unix seconds> <nonce>\\n

The file lives in a directory the server makes for its own run (``Settings.console_dir``,
removed when it stops), as sessions themselves last only as long as the server's secret. A
worker reads the lines added since it last looked whenever the file has grown (one ``stat``
per console request); a line is appended with one ``write`` under an exclusive ``flock``, and
once most lines are of expired sessions the writer rewrites the file with the live ones (to a
new file renamed over it, so a reader sees either whole version). Without a directory (a
console built in-process) the list is this process's own.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

FILE = "signed-out"
COMPACT_LINES = 1000  # rewrite no sooner than this many lines, and only when most have expired


class Revocations:
    """The nonces of signed-out sessions (see the module docstring)."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self._path = Path(directory) / FILE if directory else None
        self._expiry: dict[str, int] = {}  # nonce -> when its cookie expires anyway
        self._file: tuple[int, int] | None = None  # (device, inode) of the file read so far
        self._offset = 0  # bytes of it read
        self._lines = 0  # lines of it read

    def revoke(self, nonce: str, expires: int) -> None:
        """Record a signed-out session, for every worker, before the sign-out is answered."""
        if self._path is not None:
            with self._locked():
                self._refresh()
                with open(self._path, "a", encoding="ascii") as file:
                    file.write(f"{expires} {nonce}\n")
                if self._lines > COMPACT_LINES:
                    self._compact()
        self._expiry[nonce] = expires

    def revoked(self, nonce: str) -> bool:
        """Whether the session of ``nonce`` was signed out (in any worker)."""
        self._refresh()
        return nonce in self._expiry

    # ------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        assert self._path is not None
        descriptor = os.open(self._path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            yield
        finally:
            os.close(descriptor)  # releases the lock

    def _refresh(self) -> None:
        if self._path is None:
            return
        try:
            status = os.stat(self._path)
        except FileNotFoundError:
            return
        identity = (status.st_dev, status.st_ino)
        if identity != self._file:  # first look, or rewritten: read it whole
            self._file, self._offset, self._lines = identity, 0, 0
            self._expiry = {}
        if status.st_size <= self._offset:
            return
        with open(self._path, "rb") as file:
            file.seek(self._offset)
            added = file.read()
        complete = added[: added.rfind(b"\n") + 1]  # a line being written is read next time
        self._offset += len(complete)
        now = time.time()
        for line in complete.decode("ascii", "replace").splitlines():
            expires_text, _, nonce = line.partition(" ")
            self._lines += 1
            if expires_text.isdigit() and int(expires_text) > now and nonce:
                self._expiry[nonce] = int(expires_text)

    def _compact(self) -> None:
        """Rewrite the file with the sessions that have not expired, when most have (under the
        lock, so no line being appended is lost)."""
        assert self._path is not None
        now = time.time()
        live = {nonce: expires for nonce, expires in self._expiry.items() if expires > now}
        if len(live) * 2 > self._lines:
            return
        staged = self._path.with_suffix(".new")
        staged.write_text("".join(f"{expires} {nonce}\n" for nonce, expires in live.items()), "ascii")
        os.replace(staged, self._path)
        self._expiry, self._file = live, None
        self._refresh()
