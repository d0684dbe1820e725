"""How a copy source URL is read: which ones are this server's, and x-ms-source-range."""

from __future__ import annotations

import pytest

from tabulae.blob.api.copy_source import _same_server, source_range, source_refused
from tabulae.model.errors import ServiceError


@pytest.mark.parametrize(
    ("netloc", "host", "same"),
    [
        ("127.0.0.1:10000", "127.0.0.1:10000", True),
        ("localhost:10000", "127.0.0.1:10000", True),
        ("[::1]:10000", "127.0.0.1:10000", True),
        (
            "devstoreaccount1.blob.core.windows.net:10000",
            "devstoreaccount1.blob.core.windows.net:10000",
            True,
        ),
        ("127.0.0.1:10001", "127.0.0.1:10000", False),  # another server on this machine
        ("example.com:10000", "127.0.0.1:10000", False),
        ("other.blob.core.windows.net", "127.0.0.1:10000", False),  # not an account of ours
        ("devstoreaccount1.blob.core.windows.net", "127.0.0.1:10000", True),  # Azure's name of ours
        ("devstoreaccount1-secondary.blob.core.windows.net", "127.0.0.1:10000", True),
        ("devstoreaccount1.queue.core.windows.net", "127.0.0.1:10000", False),
    ],
)
def test_same_server(netloc: str, host: str, same: bool) -> None:
    assert _same_server(netloc, host, {"devstoreaccount1": [b"key"]}) is same


def test_source_range() -> None:
    assert source_range({}) is None
    assert source_range({"x-ms-source-range": "bytes=0-511"}) == (0, 511)
    assert source_range({"x-ms-source-range": "bytes=5-"}) == (5, None)  # to the end, as .NET sends
    for bad in ("bytes=-5", "bytes=9-1", "0-1", "bytes=a-b"):
        with pytest.raises(ServiceError) as error:
            source_range({"x-ms-source-range": bad})
        assert error.value.code == "InvalidHeaderValue"


def test_source_refused_carries_the_source_status() -> None:
    error = source_refused(403, "AuthorizationFailure", "no")
    assert (error.status, error.code) == (403, "CannotVerifyCopySource")
    assert error.headers == [
        (b"x-ms-copy-source-status-code", b"403"),
        (b"x-ms-copy-source-error-code", b"AuthorizationFailure"),
    ]
    assert error.fields[-1] == ("CopySourceErrorMessage", "no")
