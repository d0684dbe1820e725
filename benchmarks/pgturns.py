"""Count the round trips a client makes to PostgreSQL: a TCP proxy in a thread of its own.

A round trip is a *turn*: the client sends after the server has answered since its last send.
Statements sent together in pipeline mode are one turn, and so are the messages of one
statement; a statement whose answer the client waits for ends one. The PostgreSQL server
flushes its answers only at a Sync or Flush, so the count is exact for psycopg's traffic.

    with TurnCounter("postgresql://user@host:5432/db") as counter:
        url = counter.url          # the same database, through the proxy
        ...
        before = counter.turns
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any
from urllib.parse import urlsplit, urlunsplit


class TurnCounter:
    """A proxy to the server of ``url`` on a free local port, counting every connection's turns."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self._parts = parts
        self.turns = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._port = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        """``url`` with the proxy's address instead of the server's."""
        auth = self._parts.netloc.rpartition("@")[0]
        netloc = f"{auth}@127.0.0.1:{self._port}" if auth else f"127.0.0.1:{self._port}"
        return urlunsplit(self._parts._replace(netloc=netloc))

    def __enter__(self) -> TurnCounter:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._connection, "127.0.0.1", 0))
        self._port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _connection(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        server_r, server_w = await asyncio.open_connection(*self._target)
        answered = [True]  # the server spoke since the client's last send

        async def upstream() -> None:
            while data := await client_r.read(65536):
                if answered[0]:
                    self.turns += 1
                    answered[0] = False
                server_w.write(data)
                await server_w.drain()
            server_w.close()

        async def downstream() -> None:
            while data := await server_r.read(65536):
                answered[0] = True
                client_w.write(data)
                await client_w.drain()
            client_w.close()

        await asyncio.gather(upstream(), downstream(), return_exceptions=True)
