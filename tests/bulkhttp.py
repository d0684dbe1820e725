"""Many requests to a test server at once, for tests that need thousands of items made through
the server (not written into its store behind its back) and would otherwise spend most of their
time in the SDK's per-request work: one event loop, a pool of keep-alive connections, and an
account SAS (signed once) instead of a Shared Key signature per request."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

import aiohttp
from azure.storage.blob import AccountSasPermissions, ResourceTypes, generate_account_sas

from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess

CONCURRENCY = 16


def account_sas() -> str:
    """An account SAS for every service, resource type and permission, valid for a day: one
    signature the server checks like any other on every request."""
    return generate_account_sas(
        DEV_ACCOUNT,
        DEV_KEY,
        ResourceTypes(service=True, container=True, object=True),
        AccountSasPermissions(
            read=True, write=True, delete=True, list=True, add=True, create=True, update=True
        ),
        datetime.now(UTC) + timedelta(days=1),
        services="bqt",
    )


def send_all(
    requests: Iterable[tuple[str, str, dict[str, str], bytes | None]],
    expect: int,
    concurrency: int = CONCURRENCY,
) -> None:
    """Send every (method, url, headers, body), ``concurrency`` at a time; each must be answered
    ``expect`` (a request that is not fails the caller, naming the answer)."""

    async def main() -> None:
        gate = asyncio.Semaphore(concurrency)
        timeout = aiohttp.ClientTimeout(total=120)
        connector = aiohttp.TCPConnector(limit=concurrency)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

            async def one(method: str, url: str, headers: dict[str, str], body: bytes | None) -> None:
                async with gate, session.request(method, url, headers=headers, data=body) as response:
                    text = await response.text()
                    assert response.status == expect, (method, url, response.status, text)

            await asyncio.gather(*(one(*request) for request in requests))

    asyncio.run(main())


def create_tables(server: ServerProcess, names: Iterable[str]) -> None:
    """Create Table on the server for each of ``names``."""
    sas = account_sas()
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json;odata=nometadata",
        "Prefer": "return-no-content",
        "x-ms-version": "2019-02-02",
    }
    url = f"{server.endpoint}/Tables?{sas}"
    body = '{{"TableName": "{}"}}'
    send_all((("POST", url, headers, body.format(name).encode()) for name in names), 204)


def create_containers(server: ServerProcess, names: Iterable[str]) -> None:
    """Create Container on the server for each of ``names``."""
    sas = account_sas()
    headers = {"x-ms-version": "2021-08-06"}
    send_all(
        (("PUT", f"{server.blob_endpoint}/{name}?restype=container&{sas}", headers, None) for name in names),
        201,
    )
