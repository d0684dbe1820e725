"""Loaded with ``-p harness_plugin``: every account of the tests is the development account,
host-style names (``*.core.windows.net``) resolve to 127.0.0.1 so no request leaves the
machine, the management-plane client a few tests import is a stub (the immutability tests'
container create and delete, on the data plane), and the test-proxy fixture the SDK's conftest
asks for is a no-op."""

import contextlib
import inspect
import os
import socket
import sys
import types

import pytest

for var in (
    "STORAGE",
    "SECONDARY_STORAGE",
    "BLOB_STORAGE",
    "VERSIONED_STORAGE",
    "PREMIUM_STORAGE",
    "SOFT_DELETE_STORAGE",
    "DATALAKE_STORAGE",  # azure-storage-file-datalake's tests
    "STORAGE_DATA_LAKE_SOFT_DELETE",
):
    os.environ.setdefault(f"{var}_ACCOUNT_NAME", "devstoreaccount1")
    os.environ.setdefault(
        f"{var}_ACCOUNT_KEY",
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==",
    )
os.environ.setdefault("AZURE_TEST_RUN_LIVE", "true")
os.environ.setdefault("STORAGE_RESOURCE_GROUP_NAME", "rg")

_real = socket.getaddrinfo


def _getaddrinfo(host, port=None, *args, **kwargs):
    """A host-style name is this machine; on HTTPS one without a port (a few older tests build
    ``https://{account}.blob.core.windows.net`` themselves) is the server's port."""
    if isinstance(host, str) and host.endswith(".core.windows.net"):
        host = "127.0.0.1"
        if port in (443, "443", "https") and os.environ.get("SDK_TESTS_SCHEME") == "https":
            port = int(os.environ.get("SDK_TESTS_PORT", 443))
    return _real(host, port, *args, **kwargs)


socket.getaddrinfo = _getaddrinfo

mgmt = types.ModuleType("azure.mgmt")
storage = types.ModuleType("azure.mgmt.storage")


def _data_plane(account):
    """The account's Blob endpoint with its key (from the tests' account variables)."""
    from azure.storage.blob import BlobServiceClient

    for name, value in os.environ.items():
        if name.endswith("_ACCOUNT_NAME") and value == account:
            key = os.environ[name[: -len("NAME")] + "KEY"]
            break
    else:
        raise RuntimeError(f"no management plane here, and no key for {account}")
    scheme = os.environ.get("SDK_TESTS_SCHEME", "http")
    url = f"{scheme}://127.0.0.1:{os.environ.get('SDK_TESTS_PORT', 10000)}/{account}"
    return BlobServiceClient(url, credential={"account_name": account, "account_key": key})


class _Models:
    """The two models the immutability tests build (a container with version-level
    immutability); their arguments go nowhere: the server's account config decides."""

    class BlobContainer:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    class ImmutableStorageWithVersioning:
        def __init__(self, **kwargs):
            self.kwargs = kwargs


class _BlobContainers:
    """``blob_containers.create``/``delete`` of the immutability tests, done on the data plane.
    A delete the data plane refuses (409: a container with version-level immutability that
    still holds versions) is let pass: what ARM does there is the management plane's."""

    def create(self, resource_group, account, container, blob_container=None):
        _data_plane(account).create_container(container)

    def delete(self, resource_group, account, container):
        from azure.core.exceptions import ResourceExistsError

        with contextlib.suppress(ResourceExistsError):
            _data_plane(account).delete_container(container)


class _AsyncBlobContainers:
    async def create(self, *args, **kwargs):
        _BlobContainers().create(*args, **kwargs)

    async def delete(self, *args, **kwargs):
        _BlobContainers().delete(*args, **kwargs)


class StorageManagementClient:
    """No management plane: the immutability tests' container create and delete only."""

    _containers = _BlobContainers

    def __init__(self, *args, **kwargs):
        self.blob_containers = self._containers()

    def models(self):
        return _Models


class AsyncStorageManagementClient(StorageManagementClient):
    _containers = _AsyncBlobContainers


storage.StorageManagementClient = StorageManagementClient
models = types.ModuleType("azure.mgmt.storage.models")  # the oldest suites' account models


class StorageAccount:
    def __init__(self, location=None, **kwargs):
        self.location = location


class Endpoints:
    pass


models.StorageAccount, models.Endpoints = StorageAccount, Endpoints
storage.models = models
sys.modules.setdefault("azure.mgmt.storage.models", models)
storage_aio = types.ModuleType("azure.mgmt.storage.aio")  # the async test files import this one
storage_aio.StorageManagementClient = AsyncStorageManagementClient
storage.aio = storage_aio
storage.__path__ = []  # a package, so that its aio submodule can be imported
sys.modules.setdefault("azure.mgmt", mgmt)
sys.modules.setdefault("azure.mgmt.storage", storage)
sys.modules.setdefault("azure.mgmt.storage.aio", storage_aio)


@pytest.fixture(scope="session")
def test_proxy():
    return None


def pytest_configure(config):
    for marker in ("live_test_only", "playback_test_only"):
        config.addinivalue_line("markers", marker)
    own_base = config.invocation_params.dir / "testcase.py"  # azure-storage-file-datalake 12.2's
    if own_base.exists() and "settings_real" in own_base.read_text(errors="replace"):
        # Its generate_oauth_token signs in with a client secret at login.microsoftonline.com:
        # the harness's tokens instead, as mgmt_era gives the suites of that time.
        from devtools_testutils.mgmt_era import _live_client_secret_credentials

        _live_client_secret_credentials()


@pytest.fixture(scope="session")
def anyio_backend():
    return "asyncio"


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector, name, obj):
    """Mark a coroutine test for anyio while it is collected, taking the ``anyio_backend``
    fixture beside its own parameters. Marked only after collection, anyio re-makes the test
    with a backend parameter alone and its ``pytest.mark.parametrize`` values are lost (every
    run fails with "'SubRequest' object has no attribute 'param'")."""
    if collector.istestfunction(obj, name) and inspect.iscoroutinefunction(obj):
        pytest.mark.usefixtures("anyio_backend")(pytest.mark.anyio(obj))


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="playback only")
    for item in items:
        if item.get_closest_marker("playback_test_only"):
            item.add_marker(skip)
        elif inspect.iscoroutinefunction(getattr(item, "function", None)):
            item.add_marker(pytest.mark.anyio)  # the *_async.py files: anyio's plugin runs them
