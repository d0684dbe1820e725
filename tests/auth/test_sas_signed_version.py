"""A request a SAS authorises and that names no ``x-ms-version`` runs, and is answered, at the
SAS's signed version (``sv``); one that names a version runs at that version.

"Versioning for Azure Storage": the optional version header says which version runs a SAS
request; without it, ``sv`` does. Azure's recording of @azure/storage-blob's
"generateBlobSASQueryParameters should work for blob with previous API version" (a token signed
``sv=2016-05-31``, the request sent with ``x-ms-version: 2026-06-06``) is answered at 2026-06-06.
Found with ``az storage blob generate-sas``: its token fetched with ``curl`` (no
``x-ms-version``) was served at the server's default version. Tokens from the real SDKs,
requests raw (``http.client``) since the SDKs always send their own version header.
"""

from __future__ import annotations

import http.client
import uuid
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs

from azure.data.tables import TableSasPermissions, TableServiceClient, generate_table_sas
from azure.storage.blob import BlobSasPermissions, BlobServiceClient, generate_blob_sas
from azure.storage.queue import QueueSasPermissions, QueueServiceClient, generate_queue_sas

from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess

OLD = "2015-04-05"  # a version header that wins over the SAS's sv


def _get(port: int, target: str, headers: dict[str, str]) -> tuple[int, dict[str, str]]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", target, headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status, {name.lower(): value for name, value in response.getheaders()}
    finally:
        connection.close()


def _signed_version(token: str) -> str:
    return parse_qs(token)["sv"][0]


def _expiry() -> datetime:
    return datetime.now(UTC) + timedelta(hours=1)


def test_a_blob_sas_runs_at_its_signed_version(server: ServerProcess) -> None:
    """Get Blob answers with the tier headers from 2026-10-06 on: a token signed at that version
    gets them when the request names no version (curl, a browser); a request naming an older
    version is served at that one, without them (as the recording's 2026-06-06 header over an
    sv of 2016-05-31 got the newer version's headers)."""
    service = BlobServiceClient.from_connection_string(server.connection_string)
    container = service.create_container(f"sv{uuid.uuid4().hex[:12]}")
    try:
        container.upload_blob("b.txt", b"hello")
        token = generate_blob_sas(
            DEV_ACCOUNT,
            container.container_name,
            "b.txt",
            account_key=DEV_KEY,
            permission=BlobSasPermissions(read=True),
            expiry=_expiry(),
        )
        signed = _signed_version(token)
        assert signed >= "2026-10-06"
        target = f"/{DEV_ACCOUNT}/{container.container_name}/b.txt?{token}"
        status, answer = _get(server.blob_port, target, {})
        assert status == 200, answer
        assert answer["x-ms-version"] == signed
        assert answer["x-ms-access-tier"] == "Hot"
        status, answer = _get(server.blob_port, target, {"x-ms-version": OLD})
        assert status == 200, answer
        assert answer["x-ms-version"] == OLD
        assert "x-ms-access-tier" not in answer
        # signed with the account key, the header still decides
        signed_request = container.get_blob_client("b.txt").get_blob_properties()
        assert signed_request.blob_tier == "Hot"
    finally:
        container.delete_container()


def test_a_queue_sas_is_answered_at_its_signed_version_or_the_named_one(server: ServerProcess) -> None:
    service = QueueServiceClient.from_connection_string(server.connection_string)
    queue = service.create_queue(f"sv{uuid.uuid4().hex[:12]}")
    try:
        queue.send_message("hello")
        token = generate_queue_sas(
            DEV_ACCOUNT,
            queue.queue_name,
            account_key=DEV_KEY,
            permission=QueueSasPermissions(read=True),
            expiry=_expiry(),
        )
        target = f"/{DEV_ACCOUNT}/{queue.queue_name}/messages?peekonly=true&{token}"
        for headers, expected in (({}, _signed_version(token)), ({"x-ms-version": OLD}, OLD)):
            status, answer = _get(server.queue_port, target, headers)
            assert status == 200, (headers, answer)
            assert answer["x-ms-version"] == expected
    finally:
        queue.delete_queue()


def test_a_table_sas_is_answered_at_its_signed_version_or_the_named_one(server: ServerProcess) -> None:
    service = TableServiceClient.from_connection_string(server.connection_string)
    table = service.create_table(f"sv{uuid.uuid4().hex[:12]}")
    try:
        token = generate_table_sas(
            service.credential,
            table.table_name,
            permission=TableSasPermissions(read=True),
            expiry=_expiry(),
        )
        target = f"/{DEV_ACCOUNT}/{table.table_name}()?{token}"
        accept = {"accept": "application/json;odata=nometadata"}
        for headers, expected in (
            (accept, _signed_version(token)),
            (accept | {"x-ms-version": "2020-12-06"}, "2020-12-06"),
        ):
            status, answer = _get(server.port, target, headers)
            assert status == 200, (headers, answer)
            assert answer["x-ms-version"] == expected
    finally:
        service.delete_table(table.table_name)
