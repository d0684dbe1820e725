"""A server the DFS access tests share: HTTPS, bearer tokens (``--oauth basic``) and an HNS
development account, one per backend for the session (each test works in file systems of its own);
and a fresh file system on the module's plain HNS server (``lake``, in tests/conftest.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from azure.storage.filedatalake import DataLakeServiceClient, FileSystemClient

from tests.backends import backend_names
from tests.conftest import fresh_store
from tests.serverproc import DEV_ACCOUNT, ServerProcess
from tests.tls import SelfSignedCert

# Data roles of the shared server (--oauth-role), for identities no other test uses.
DATA_OWNER = "00000000-0000-0000-0000-0000000d0001"
DATA_CONTRIBUTOR = "00000000-0000-0000-0000-0000000d0002"
DATA_READER = "00000000-0000-0000-0000-0000000d0003"
READERS_GROUP = "00000000-0000-0000-0000-0000000d00ff"
ROLES = {DATA_OWNER: "owner", DATA_CONTRIBUTOR: "contributor", DATA_READER: "reader", READERS_GROUP: "reader"}


@pytest.fixture(scope="session", params=backend_names())
def oauth_hns_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, cert: SelfSignedCert
) -> Iterator[ServerProcess]:
    args = [*fresh_store(request.param), "--cert", str(cert.cert), "--key", str(cert.key)]
    args += ["--oauth", "basic", "--hns", DEV_ACCOUNT]
    for oid, role in ROLES.items():
        args += ["--oauth-role", f"{oid}={role}"]
    process = ServerProcess(tmp_path_factory.mktemp("oauth"), extra_args=args, backend=request.param).start()
    yield process
    process.stop()


@pytest.fixture
def service(lake: ServerProcess) -> DataLakeServiceClient:
    """A Data Lake client of the module's HNS server (``lake``)."""
    return DataLakeServiceClient.from_connection_string(lake.connection_string)


@pytest.fixture
def fs(service: DataLakeServiceClient) -> Iterator[FileSystemClient]:
    """A new file system on the module's HNS server, deleted afterwards."""
    client = service.create_file_system("fs" + uuid.uuid4().hex[:12])
    yield client
    client.delete_file_system()
