"""The state of a copy into a blob (``x-ms-copy-*``): pending, success, aborted or failed.

A copy from this server's own store completes before it is answered. One from outside it is
*pending* while a worker streams the bytes in: the destination exists meanwhile, empty, with
its copy id, source and progress (``copied/total``). While pending, :attr:`CopyState.completed`
holds the time the copy last made progress, its heartbeat: a copy whose worker is gone (a
restart, a crash) stops beating, and once it has been silent for :data:`STALE_SECONDS` it is
failed the next time anyone looks at it, rather than left pending for ever. The worker's pause
limit on the source (a fetch's read timeout) is well inside that, so a live copy is never
mistaken for a dead one.

A pending copy also names its owner, the server process that runs it (``host:pid``, the host
qualified by its process-id namespace, so two containers that share a host name never judge
each other's processes). When that is a process of this machine that no longer exists (the
server was killed and started again, as it always is on SQLite), the copy is known to be dead
at once and need not wait out its heartbeat. A copy owned on another machine (front-ends
sharing PostgreSQL), or by a process still running, is left to the heartbeat: only that can
tell a live copy from a dead one there.
"""

from __future__ import annotations

import os
import socket
from dataclasses import replace
from urllib.parse import unquote_plus, urlsplit, urlunsplit

from tabulae.model.blobs import CopyState
from tabulae.model.edm import TICKS_PER_SECOND
from tabulae.model.errors import ServiceError

PENDING, SUCCESS, ABORTED, FAILED = "pending", "success", "aborted", "failed"
STALE_SECONDS = 45.0  # a pending copy silent this long has lost its worker
MAX_SYNC_COPY = 256 * 1024 * 1024  # Copy Blob From URL copies at most 256 MiB
# The x-ms-version from which a refused copy source is described: x-ms-copy-source-status-code,
# x-ms-copy-source-error-code and the CopySource* elements of the error document. Recorded with
# them from 2024-08-04 (the Java SDK's AppendBlobApiTests.appendBlockFromURLSourceErrorAndStatusCode,
# the .NET SDK's SyncCopyFromUriAsync_Error); without them at 2023-08-03 (Java's
# BlobApiTests.syncCopyError, AppendBlobApiTests.appendBlockFromURLSourceACFail[1]) and 2023-11-03
# (the Go SDK's TestAppendBlockFromURLCopySourceAuthNegative). 2024-02-04 and 2024-05-04 are not
# recorded and are taken as before.
SOURCE_DETAIL_VERSION = "2024-08-04"
INTERRUPTED = '500 InternalError "The copy was interrupted (the server stopped); start it again."'


def _process_space() -> str:
    """This host's name, with its process-id namespace where the system names one: a process
    id means something only within that namespace."""
    try:
        return f"{socket.gethostname()}/{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return socket.gethostname()


HOST = _process_space()


def this_process() -> str:
    """The owner a copy run by this process names."""
    return f"{HOST}:{os.getpid()}"


def pending(copy_id: str, source: str, total: int, now: int, owner: str | None = None) -> CopyState:
    return CopyState(copy_id, source, f"0/{total}", now, PENDING, owner=owner)


def is_stale(copy: CopyState | None, now: int) -> bool:
    """A pending copy whose heartbeat stopped more than STALE_SECONDS ago, or whose owner is a
    process of this machine that has ended."""
    return (
        copy is not None
        and copy.status == PENDING
        and (now - copy.completed > int(STALE_SECONDS * TICKS_PER_SECOND) or owner_gone(copy.owner))
    )


def owner_gone(owner: str | None) -> bool:
    """Whether ``owner`` ("host:pid") is certainly no running process: it names this host and no
    process has that id. Anything less certain (another host, an unknown owner, a process id
    since reused) is not gone: the heartbeat decides for those."""
    if owner is None:
        return False
    host, _, pid = owner.rpartition(":")
    if host != HOST or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return True
    except OSError:  # it exists, but belongs to someone else
        return False
    return _ended(int(pid))


def _ended(pid: int) -> bool:
    """Whether ``pid`` is a zombie: ended, only waiting for its parent to collect its status (a
    killed server's workers, until the system's init reaps them). Linux's /proc says; elsewhere
    nothing is known, and the heartbeat decides."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def check_no_pending(copy: CopyState | None, now: int) -> None:
    """A copy onto a blob whose own copy is still pending is 409 PendingCopyOperation (abort
    that one first); one whose worker is gone (stale) no longer counts."""
    if copy is not None and copy.status == PENDING and not is_stale(copy, now):
        raise ServiceError("PendingCopyOperation")


def progressed(copy: CopyState, copied: int, now: int) -> CopyState:
    total = copy.progress.partition("/")[2]
    return replace(copy, progress=f"{copied}/{total}", completed=now)


def finished(copy: CopyState, size: int, now: int) -> CopyState:
    return replace(copy, progress=f"{size}/{size}", completed=now, status=SUCCESS, owner=None)


def ended(copy: CopyState, status: str, now: int, description: str | None = None) -> CopyState:
    """An aborted or failed copy: its progress as it stood, the time it ended."""
    return replace(copy, completed=now, status=status, status_description=description, owner=None)


def without_signature(url: str) -> str:
    """A copy's source URL as recorded and shown (``x-ms-copy-source``, ``<CopySource>``): its SAS
    signature left out, so that whoever may read the destination's properties (anyone, in a
    public container) cannot read the source with it. Left out however its name is spelt: a SAS
    reads ``SIG=`` and ``%73ig=`` as ``sig=``. Applied again when shown, so a source recorded
    before this rule (an Incremental Copy kept the whole URL) is shown without it too."""
    parts = urlsplit(url)
    pairs = parts.query.split("&")
    kept = [pair for pair in pairs if not _is_signature(pair)]
    if len(kept) == len(pairs):
        return url
    return urlunsplit(parts._replace(query="&".join(kept)))


def _is_signature(pair: str) -> bool:
    """Whether a ``name=value`` pair of a query string is a SAS's ``sig`` (any case, any
    percent-encoding of the name)."""
    return unquote_plus(pair.partition("=")[0]).strip().lower() == "sig"
