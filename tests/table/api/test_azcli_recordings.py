"""Table answers compared with the az CLI's own recordings of real Azure
(``src/azure-cli/azure/cli/command_modules/storage/tests/latest/recordings/`` in Azure/azure-cli)
and azure-data-tables' (Azure/azure-sdk-assets), sent over raw HTTP in the shape each client sent
them and read back through azure-data-tables (sync and aio)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from azure.data.tables import TableAnalyticsLogging, TableServiceClient
from azure.data.tables.aio import TableServiceClient as AsyncTableServiceClient

from tests.backends import backend_names
from tests.conftest import fresh_store
from tests.rawhttp import RawClient
from tests.serverproc import ServerProcess

_PROPERTIES = "/?restype=service&comp=properties"
# `az storage logging update --services t --log "" ...` (test_logging_operations.yaml, April 2022).
_CLI_BODY = (
    b"<?xml version='1.0' encoding='utf-8'?>\n<StorageServiceProperties><Logging><Version>1.0</Version>"
    b"<Delete>False</Delete><Read>False</Read><Write>False</Write><RetentionPolicy><Enabled>False"
    b"</Enabled></RetentionPolicy></Logging></StorageServiceProperties>"
)
_CLI = {"x-ms-version": "2017-04-17", "DataServiceVersion": "3.0;NetFx", "MaxDataServiceVersion": "3.0"}
# azure-data-tables 12.8.0b1 (test_table_service_properties, April 2026).
_SDK_BODY = (
    b"<?xml version='1.0' encoding='utf-8'?>\n<StorageServiceProperties><Logging><Version>1.0</Version>"
    b"<Delete>true</Delete><Read>false</Read><Write>false</Write><RetentionPolicy><Enabled>false"
    b"</Enabled></RetentionPolicy></Logging></StorageServiceProperties>"
)
_SDK = {"x-ms-version": "2025-07-05", "Accept": "application/xml", "Content-Type": "application/xml"}


@pytest.fixture(scope="module", params=backend_names())
def cli_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server of this module's own: the tests change the account's service properties."""
    process = ServerProcess(
        tmp_path_factory.mktemp("tazcli"), extra_args=fresh_store(request.param), backend=request.param
    )
    process.start()
    yield process
    process.stop()


@pytest.mark.parametrize(("body", "headers"), [(_CLI_BODY, _CLI), (_SDK_BODY, _SDK)], ids=["cli", "sdk"])
def test_set_service_properties_is_answered_unsized(
    cli_server: ServerProcess, body: bytes, headers: dict[str, str]
) -> None:
    """test_logging_operations.yaml (x-ms-version 2017-04-17) and test_table_service_properties
    .json (2025-07-05): Set Table Service Properties is 202 with Date, ``Transfer-Encoding:
    chunked`` and x-ms-version, no Content-Length and an empty body; what it set reads back."""
    raw = RawClient(cli_server.port)
    answer = raw.request("PUT", _PROPERTIES, body, {**headers, "Accept": headers.get("Accept")})
    assert answer.status == 202, answer
    assert answer.header("content-length") is None, answer
    assert answer.header("transfer-encoding") == "chunked" and answer.body == b"", answer
    read = raw.request("GET", _PROPERTIES, None, {**headers, "Content-Type": None})
    delete = b"<Delete>true</Delete>" if body is _SDK_BODY else b"<Delete>false</Delete>"
    assert read.status == 200 and delete in read.body, read


def test_sdk_sets_and_reads_properties(cli_server: ServerProcess) -> None:
    """azure-data-tables (sync and aio) reads the unsized 202 and what it set."""
    with TableServiceClient.from_connection_string(cli_server.connection_string) as service:
        service.set_service_properties(analytics_logging=TableAnalyticsLogging(write=True))
        assert service.get_service_properties()["analytics_logging"].write is True

    async def scenario() -> bool:
        async with AsyncTableServiceClient.from_connection_string(cli_server.connection_string) as service:
            await service.set_service_properties(analytics_logging=TableAnalyticsLogging(read=True))
            logging = (await service.get_service_properties())["analytics_logging"]
            await service.set_service_properties(analytics_logging=TableAnalyticsLogging())
            return bool(logging.read)

    assert asyncio.run(scenario()) is True
