"""The outbound fetch of a copy source: which addresses it never reaches, and its bounds."""

from __future__ import annotations

import asyncio
import ipaddress

import pytest

from tabulae.http.fetch import FetchError, FetchLimits, check_url, fetch, forbidden
from tests.blob.remote_source import content, remote_source


@pytest.mark.parametrize(
    ("address", "refused"),
    [
        ("169.254.169.254", True),  # cloud instance metadata
        ("169.254.0.1", True),
        ("fe80::1", True),
        ("::ffff:169.254.169.254", True),
        ("0.0.0.0", True),
        ("224.0.0.1", True),
        ("127.0.0.1", False),  # a self-hosted server's own machine and network are its users'
        ("10.1.2.3", False),
        ("192.168.0.10", False),
        ("8.8.8.8", False),
        ("::1", False),
    ],
)
def test_forbidden_addresses(address: str, refused: bool) -> None:
    assert forbidden(ipaddress.ip_address(address)) is refused


@pytest.mark.parametrize(
    "url",
    ["ftp://example.com/x", "file:///etc/passwd", "http://169.254.169.254/", "http://[fe80::1]/", "nonsense"],
)
def test_urls_refused_before_any_connection(url: str) -> None:
    with pytest.raises(FetchError):
        check_url(url)


def test_redirects_are_checked_hop_by_hop() -> None:
    async def run(source_base: str) -> None:
        limits = FetchLimits(connect_timeout=5, read_timeout=5, max_redirects=3)
        fetched = await fetch(f"{source_base}/redirect?to=/data/100", {}, limits)
        assert fetched.status == 200
        assert b"".join([chunk async for chunk in fetched.chunks(100)]) == content(100)
        with pytest.raises(FetchError, match="forbidden address"):
            await fetch(f"{source_base}/redirect?to=http://169.254.169.254/latest/", {}, limits)
        none = FetchLimits(connect_timeout=5, read_timeout=5, max_redirects=0)
        unfollowed = await fetch(f"{source_base}/redirect?to=/data/1", {}, none)
        assert unfollowed.status == 302
        await unfollowed.close()
        fetched = await fetch(f"{source_base}/data/1000", {}, limits)
        with pytest.raises(FetchError, match="more bytes"):
            async for _chunk in fetched.chunks(10):
                pass

    with remote_source() as source:
        asyncio.run(run(source.base))
