"""Outbound HTTP(S) for copies from a URL: one GET, streamed, with bounds on everything.

A copy source outside this server is fetched by the server itself, so a client can make it
send requests: the fetch is bounded (a connect timeout, a pause timeout between pieces of the
body, a cap on the bytes read) and it never reaches link-local addresses (``169.254.0.0/16``,
where clouds serve instance metadata and credentials, and ``fe80::/10``), multicast or the
unspecified address, whichever name or redirect leads there. Every address a name resolves
to is checked when the connection is made (a resolver of our own), so a name cannot resolve
to a harmless address for a check and to the metadata service for the connection.

Redirects: Azure follows none for a copy source, and neither does this client by default;
``max_redirects`` lets a caller follow a few (301, 302, 303, 307, 308), each hop checked as
the first, and never from a public address to a loopback or private one (a public site
cannot point the server at its own network).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any
from urllib.parse import urljoin, urlsplit

CHUNK_BYTES = 256 * 1024
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class FetchError(Exception):
    """The source could not be reached or read: no HTTP status to report (a timeout, a refused
    connection, a forbidden address, a body larger than allowed)."""


@dataclass(frozen=True, slots=True)
class FetchLimits:
    connect_timeout: float = 10.0  # seconds to connect and receive the response's headers
    read_timeout: float = 30.0  # seconds the body may pause between pieces
    max_redirects: int = 0


def forbidden(address: Address) -> bool:
    """Addresses a fetch never connects to: link-local (cloud metadata), multicast, unspecified."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_loopback:
        return False  # (::1 is inside the reserved ::/8)
    return address.is_link_local or address.is_multicast or address.is_unspecified or address.is_reserved


def _internal(address: Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or address.is_private


def _literal(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _aiohttp() -> Any:
    """aiohttp, imported on the first fetch: only copies from a URL use it, and its import is a
    large part of every worker's start-up."""
    import aiohttp

    return aiohttp


@cache
def _resolver_class() -> Any:
    from aiohttp.abc import AbstractResolver

    class CheckingResolver(AbstractResolver):  # type: ignore[misc]
        """The system's resolver, refusing names that lead to a forbidden address; with
        ``public_only`` also to a loopback or private one (the hop after a public one)."""

        def __init__(self) -> None:
            self._inner = _aiohttp().ThreadedResolver()
            self.public_only = False

        async def resolve(
            self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
        ) -> list[Any]:
            found = await self._inner.resolve(host, port, family)
            for entry in found:
                address = ipaddress.ip_address(entry["host"])
                if forbidden(address) or (self.public_only and _internal(address)):
                    raise FetchError(f"the copy source's host resolves to a forbidden address ({address})")
            return list(found)

        async def close(self) -> None:
            await self._inner.close()

    return CheckingResolver


@dataclass(slots=True)
class Fetched:
    """A response to a fetch: its status and headers (lower-case names), and its body to stream."""

    status: int
    headers: dict[str, str]
    url: str  # where it came from, after any redirects
    _response: Any = field(default=None, repr=False)
    _session: Any = field(default=None, repr=False)
    _read_timeout: float = 30.0

    async def chunks(self, limit: int) -> AsyncIterator[bytes]:
        """The body in pieces; FetchError when it pauses longer than the read timeout or runs
        past ``limit`` bytes. Closes the response when done."""
        received = 0
        try:
            while True:
                try:
                    chunk = await asyncio.wait_for(
                        self._response.content.read(CHUNK_BYTES), timeout=self._read_timeout
                    )
                except TimeoutError:
                    raise FetchError("the copy source stopped sending") from None
                except _aiohttp().ClientError as exc:
                    raise FetchError(f"reading the copy source failed: {type(exc).__name__}") from None
                if not chunk:
                    return
                received += len(chunk)
                if received > limit:
                    raise FetchError("the copy source sent more bytes than expected")
                yield chunk
        finally:
            await self.close()

    async def text(self, limit: int = 64 * 1024) -> str:
        """A small body (an error document) as text; what is past ``limit`` is not read."""
        try:
            data = await asyncio.wait_for(self._response.content.read(limit), timeout=self._read_timeout)
        except (TimeoutError, _aiohttp().ClientError):
            data = b""
        await self.close()
        return data.decode("utf-8", "replace")

    async def close(self) -> None:
        if self._response is not None:
            self._response.release()
            self._response = None
        if self._session is not None:
            with contextlib.suppress(Exception):
                await self._session.close()
            self._session = None


def check_url(url: str) -> None:
    """Refuse a URL that is not http(s) or names a forbidden address literally."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise FetchError("the copy source is not an http or https URL")
    literal = _literal(parts.hostname)
    if literal is not None and forbidden(literal):
        raise FetchError(f"the copy source names a forbidden address ({literal})")


async def fetch(url: str, headers: dict[str, str], limits: FetchLimits = FetchLimits()) -> Fetched:
    """GET ``url`` with ``headers``; the response once its headers have come (any status).
    Raises FetchError when no response comes (see the module's rules on addresses and redirects)."""
    check_url(url)
    aiohttp = _aiohttp()
    resolver = _resolver_class()()
    connector = aiohttp.TCPConnector(resolver=resolver, use_dns_cache=False, limit=1)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=limits.connect_timeout)
    session = aiohttp.ClientSession(connector=connector, timeout=timeout, auto_decompress=False)
    try:
        current = url
        for _hop in range(limits.max_redirects + 1):
            try:
                response = await asyncio.wait_for(
                    session.get(current, headers=headers, allow_redirects=False),
                    timeout=limits.connect_timeout,
                )
            except TimeoutError:
                raise FetchError("the copy source did not answer in time") from None
            except aiohttp.ClientError as exc:
                raise FetchError(f"the copy source could not be reached: {type(exc).__name__}") from None
            location = response.headers.get("location")
            if response.status not in _REDIRECTS or location is None or _hop == limits.max_redirects:
                return Fetched(
                    response.status,
                    {name.lower(): value for name, value in response.headers.items()},
                    current,
                    response,
                    session,
                    limits.read_timeout,
                )
            response.release()
            target = urljoin(current, location)
            check_url(target)
            host = urlsplit(current).hostname or ""
            literal = _literal(host)
            if not (literal is not None and _internal(literal)) and host != "localhost":
                resolver.public_only = True  # a public hop may not lead inwards
                literal_target = _literal(urlsplit(target).hostname or "")
                if literal_target is not None and _internal(literal_target):
                    raise FetchError("the copy source redirects from a public address to an internal one")
            current = target
        raise FetchError("too many redirects")  # not reached: the last hop returns
    except BaseException:
        await session.close()
        raise
