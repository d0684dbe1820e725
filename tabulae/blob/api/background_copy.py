"""Pending copies: the bytes of a Copy Blob from outside this server, streamed in after the
answer (``x-ms-copy-status: pending``), with its progress recorded as they come.

Each worker runs its own copies as tasks of its event loop. Everything about a copy's state
lives in the store, not here: an abort (answered by any worker) ends it there, and the task
finds out at its next progress write or at its commit, and stops; a worker that dies leaves a
copy whose heartbeat stops, which :mod:`tabulae.blob.rules.copies` then fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator

from tabulae.blob.rules import copies
from tabulae.blob.service import BlobService, Upload
from tabulae.http.fetch import Fetched, FetchError
from tabulae.model.blobs import BlobKey
from tabulae.model.errors import ServiceError

log = logging.getLogger(__name__)
PROGRESS_SECONDS = 1.0  # how often a running copy records its progress (its heartbeat)

_running: dict[tuple[BlobKey, str], asyncio.Task[None]] = {}


def start(
    service: BlobService,
    key: BlobKey,
    copy_id: str,
    fetched: Fetched,
    chunks: AsyncIterator[bytes],
    length: int,
) -> None:
    """Stream ``chunks`` (``length`` bytes of ``fetched``) into the pending copy ``copy_id``."""
    task = asyncio.get_running_loop().create_task(_run(service, key, copy_id, fetched, chunks, length))
    _running[(key, copy_id)] = task
    task.add_done_callback(lambda _task: _running.pop((key, copy_id), None))


def stop(key: BlobKey, copy_id: str) -> None:
    """Stop this worker's task of an aborted copy at once (another worker's finds out itself)."""
    task = _running.get((key, copy_id))
    if task is not None:
        task.cancel()


async def interrupt_all(service: BlobService) -> None:
    """At a worker's orderly shutdown: stop its copies and record them failed at once (a worker
    that dies instead leaves them to their heartbeat)."""
    running = list(_running.items())
    for _key, task in running:
        task.cancel()
    for (key, copy_id), task in running:
        with contextlib.suppress(asyncio.CancelledError):
            await task
        with contextlib.suppress(ServiceError):
            await service.end_pending_copy(key, copy_id, copies.FAILED, copies.INTERRUPTED)


async def _reporting(
    service: BlobService, key: BlobKey, copy_id: str, chunks: AsyncIterator[bytes], length: int
) -> AsyncIterator[bytes]:
    copied = 0
    last = time.monotonic()
    async for chunk in chunks:
        copied += len(chunk)
        yield chunk
        if time.monotonic() - last >= PROGRESS_SECONDS:
            await service.pending_copy_progress(key, copy_id, copied)  # NoPendingCopyOperation: ended
            last = time.monotonic()
    if copied != length:
        raise FetchError(f"the copy source sent {copied} of the {length} bytes it announced")


async def _run(
    service: BlobService,
    key: BlobKey,
    copy_id: str,
    fetched: Fetched,
    chunks: AsyncIterator[bytes],
    length: int,
) -> None:
    description: str | None = None
    try:
        await service.finish_pending_copy(
            key, copy_id, Upload(_reporting(service, key, copy_id, chunks, length), length)
        )
    except asyncio.CancelledError:
        raise
    except ServiceError as exc:
        if exc.code != "NoPendingCopyOperation":  # else aborted, or the blob was replaced
            description = f'{exc.status} {exc.code} "{exc.message}"'
    except FetchError as exc:
        description = f'500 CannotVerifyCopySource "{exc}"'
    except Exception:
        log.exception("a pending copy failed")
        description = '500 InternalError "The copy failed."'
    finally:
        await fetched.close()
    if description is not None:
        with contextlib.suppress(ServiceError):
            await service.end_pending_copy(key, copy_id, copies.FAILED, description)
