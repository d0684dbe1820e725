"""``CoalescingTransport``: a response's writes leave together, in order, and none is lost.

The transport under it is a recorder on a real event loop; every server test drives the class
end to end, and these pin down the ordering and closing rules on their own.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tabulae.http.protocol import CoalescingTransport


class RecordingTransport:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.closing = False

    def writelines(self, data: list[bytes]) -> None:
        self.calls.append(("writelines", list(data)))

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True
        self.calls.append(("close", None))

    def abort(self) -> None:
        self.closing = True
        self.calls.append(("abort", None))

    def get_extra_info(self, name: str) -> str:
        return f"info:{name}"


def run(body: Any) -> RecordingTransport:
    async def main() -> RecordingTransport:
        inner = RecordingTransport()
        transport = CoalescingTransport(inner, asyncio.get_running_loop())  # type: ignore[arg-type]
        await body(transport, inner)
        return inner

    return asyncio.run(main())


def test_writes_of_one_turn_leave_as_one_vectored_write_in_order() -> None:
    async def body(transport: CoalescingTransport, inner: RecordingTransport) -> None:
        transport.write(b"HTTP/1.1 200 OK\r\n\r\n")
        transport.write(b"{}")
        assert inner.calls == []  # held until the loop turns
        await asyncio.sleep(0)
        transport.write(b"next")
        await asyncio.sleep(0)

    inner = run(body)
    assert inner.calls == [("writelines", [b"HTTP/1.1 200 OK\r\n\r\n", b"{}"]), ("writelines", [b"next"])]


def test_close_sends_what_is_held_first() -> None:
    async def body(transport: CoalescingTransport, inner: RecordingTransport) -> None:
        transport.write(b"error response")
        transport.close()
        transport.write(b"too late")
        await asyncio.sleep(0)

    assert run(body).calls == [("writelines", [b"error response"]), ("close", None)]


def test_abort_drops_what_is_held() -> None:
    async def body(transport: CoalescingTransport, inner: RecordingTransport) -> None:
        transport.write(b"never sent")
        transport.abort()
        await asyncio.sleep(0)

    assert run(body).calls == [("abort", None)]


def test_everything_else_is_the_transports_own() -> None:
    async def body(transport: CoalescingTransport, inner: RecordingTransport) -> None:
        assert transport.get_extra_info("peername") == "info:peername"
        assert transport.is_closing() is False

    run(body)
