"""The official Queue SDK, sync and aio, behind one calling convention for the tests.

``Synced`` wraps an ``azure.storage.queue.aio`` client so that a test written against the sync
API runs unchanged against the async one: coroutines are run to completion on the wrapper's
event loop, async pages are collected into lists, and clients a method returns are wrapped in
turn. Errors are the same ``azure.core.exceptions`` either way.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from azure.storage.queue import QueueServiceClient
from azure.storage.queue.aio import QueueClient as AioQueueClient
from azure.storage.queue.aio import QueueServiceClient as AioQueueServiceClient


async def _collect(pages: Any) -> list[Any]:
    return [item async for item in pages]


class Synced:
    """A sync face on an aio client (see the module docstring)."""

    def __init__(self, target: Any, loop: asyncio.AbstractEventLoop, *, owns_loop: bool = False) -> None:
        self._target = target
        self._loop = loop
        self._owns_loop = owns_loop

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._target, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            args = tuple(a._target if isinstance(a, Synced) else a for a in args)
            result = attribute(*args, **kwargs)
            if inspect.isawaitable(result):
                result = self._loop.run_until_complete(result)
            if hasattr(result, "__aiter__"):
                result = self._loop.run_until_complete(_collect(result))
            if isinstance(result, AioQueueClient | AioQueueServiceClient):
                result = Synced(result, self._loop)
            return result

        return call

    def close(self) -> None:
        self._loop.run_until_complete(self._target.close())
        if self._owns_loop:
            self._loop.close()


@contextmanager
def queue_service_client(kind: str, connection_string: str, **options: Any) -> Iterator[Any]:
    """A ``QueueServiceClient`` of the sync SDK, or of the aio SDK behind :class:`Synced`."""
    if kind == "sync":
        with QueueServiceClient.from_connection_string(connection_string, **options) as client:
            yield client
        return
    loop = asyncio.new_event_loop()
    client = Synced(
        AioQueueServiceClient.from_connection_string(connection_string, **options), loop, owns_loop=True
    )
    try:
        yield client
    finally:
        client.close()
