"""Blob answers compared with the az CLI's own recordings of real Azure
(``src/azure-cli/azure/cli/command_modules/storage/tests/latest/recordings/`` in Azure/azure-cli),
sent over raw HTTP in the shape the CLI's storage SDK sent them, and read back through the
Python SDK (sync and aio), which asks at its own, newer x-ms-version."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from azure.storage.blob import BlobServiceClient, RetentionPolicy
from azure.storage.blob.aio import BlobServiceClient as AioBlobServiceClient

from tests.backends import backend_names
from tests.blobhttp import BlobHttp
from tests.conftest import fresh_store
from tests.serverproc import ServerProcess

# The headers the CLI's storage SDK (Azure-Storage 2.0) sent with `az storage logging` and
# `az storage metrics` in test_logging_operations.yaml and test_metrics_operations.yaml.
_CLI = {
    "x-ms-version": "2018-11-09",
    "User-Agent": "Azure-Storage/2.0.0-2.0.1 (Python CPython 3.9.6) AZURECLI/2.35.0",
}
_PROPERTIES = "/?restype=service&comp=properties"
# test_logging_operations.yaml: `az storage logging update --services b --log r --retention 1`.
_SET_LOGGING = (
    b"<?xml version='1.0' encoding='utf-8'?>\n<StorageServiceProperties><Logging><Version>1.0</Version>"
    b"<Delete>False</Delete><Read>True</Read><Write>False</Write><RetentionPolicy><Enabled>True</Enabled>"
    b"<Days>1</Days></RetentionPolicy></Logging></StorageServiceProperties>"
)


@pytest.fixture(scope="module", params=backend_names())
def cli_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server of this module's own: the tests change the account's service properties."""
    process = ServerProcess(
        tmp_path_factory.mktemp("azclirec"), extra_args=fresh_store(request.param), backend=request.param
    )
    process.start()
    yield process
    process.stop()


def test_old_versions_are_answered_no_allow_permanent_delete(cli_server: ServerProcess) -> None:
    """test_logging_operations.yaml (April 2022) and test_metrics_operations.yaml (May 2022):
    Get Blob Service Properties at x-ms-version 2018-11-09 answers
    ``<Cors /><DeleteRetentionPolicy><Enabled>false</Enabled></DeleteRetentionPolicy>``, with no
    AllowPermanentDelete, which Azure answered at 2020-02-10 since December 2020 (the JS SDK's
    nock recording); so is the CLI's logging update read back, booleans written True/False."""
    http = BlobHttp(cli_server.blob_port)
    first = http.request("GET", _PROPERTIES, dict(_CLI))
    assert first.status == 200, first
    assert b"<Cors /><DeleteRetentionPolicy><Enabled>false</Enabled></DeleteRetentionPolicy>" in first.body
    assert b"AllowPermanentDelete" not in first.body

    put = http.request("PUT", _PROPERTIES, dict(_CLI), _SET_LOGGING)
    assert (put.status, put.headers.get("content-length"), put.body) == (202, "0", b"")
    after = http.request("GET", _PROPERTIES, dict(_CLI))
    assert after.body.startswith(
        b'\xef\xbb\xbf<?xml version="1.0" encoding="utf-8"?><StorageServiceProperties><Logging>'
        b"<Version>1.0</Version><Read>true</Read><Write>false</Write><Delete>false</Delete>"
        b"<RetentionPolicy><Enabled>true</Enabled><Days>1</Days></RetentionPolicy></Logging>"
    ), after
    assert b"AllowPermanentDelete" not in after.body


def test_from_2020_02_10_allow_permanent_delete_is_answered(cli_server: ServerProcess) -> None:
    """The JS SDK's recording of December 2020 at 2020-02-10, and the CLI's
    test_adls_fs_soft_delete.yaml at 2020-10-02 in April 2022 (the month the CLI's 2018-11-09
    requests were answered without it):
    ``<DeleteRetentionPolicy><Enabled>true</Enabled><Days>8</Days><AllowPermanentDelete>false
    </AllowPermanentDelete></DeleteRetentionPolicy>``; at 2018-11-09 the same policy without it.
    The SDK (sync and aio) reads the policy either way."""
    with BlobServiceClient.from_connection_string(cli_server.connection_string) as service:
        service.set_service_properties(delete_retention_policy=RetentionPolicy(enabled=True, days=8))
        assert service.get_service_properties()["delete_retention_policy"].days == 8
    http = BlobHttp(cli_server.blob_port)
    policy = b"<DeleteRetentionPolicy><Enabled>true</Enabled><Days>8</Days>"
    for version, tail in (
        ("2020-02-10", b"<AllowPermanentDelete>false</AllowPermanentDelete></DeleteRetentionPolicy>"),
        ("2020-10-02", b"<AllowPermanentDelete>false</AllowPermanentDelete></DeleteRetentionPolicy>"),
        ("2026-04-06", b"<AllowPermanentDelete>false</AllowPermanentDelete></DeleteRetentionPolicy>"),
        ("2019-12-12", b"</DeleteRetentionPolicy>"),
        ("2018-11-09", b"</DeleteRetentionPolicy>"),
    ):
        answer = http.request("GET", _PROPERTIES, {**_CLI, "x-ms-version": version})
        assert answer.status == 200, answer
        assert policy + tail in answer.body, (version, answer.body)
    with BlobServiceClient.from_connection_string(cli_server.connection_string) as service:
        service.set_service_properties(delete_retention_policy=RetentionPolicy(enabled=False))


def test_aio_reads_the_policy(cli_server: ServerProcess) -> None:
    """The aio SDK reads what it set, AllowPermanentDelete and all, at its own version."""

    async def scenario() -> tuple[bool, int | None]:
        async with AioBlobServiceClient.from_connection_string(cli_server.connection_string) as service:
            await service.set_service_properties(
                delete_retention_policy=RetentionPolicy(enabled=True, days=3)
            )
            policy = (await service.get_service_properties())["delete_retention_policy"]
            await service.set_service_properties(delete_retention_policy=RetentionPolicy(enabled=False))
            return policy.enabled, policy.days

    assert asyncio.run(scenario()) == (True, 3)
