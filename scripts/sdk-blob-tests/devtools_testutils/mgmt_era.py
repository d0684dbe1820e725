"""The test base of the oldest releases run here (azure-storage-blob 12.8, 2021): an
``AzureMgmtTestCase`` whose accounts come from management-plane preparers. Live, with no
subscription: the session's account is the development one, named to the suite by the
connection string it reads (``AZURE_STORAGE_CONNECTION_STRING``, set here from the harness's
port), and a ``StorageAccountPreparer`` gives an account of ``server.toml`` rather than making
one: the development account, or the secondary one for a test that wants a second account
(``parameter_name='rmt'``), or the premium page blob one for a premium account
(``sku='premium_LRS'``; without ``run.py --accounts`` that is the development account too, a
standard one, so the premium tests fail)."""

import functools
import inspect
import logging
import os
import types

from .legacy import StorageTestCase, _run
from .storage import StorageRecordedTestCase


def _connection_string(account, key):
    scheme = os.environ.get("SDK_TESTS_SCHEME", "http")
    endpoint = f"{scheme}://{account}.blob.core.windows.net:{os.environ['SDK_TESTS_PORT']}"
    return (
        f"DefaultEndpointsProtocol={scheme};AccountName={account};AccountKey={key};"
        f"BlobEndpoint={endpoint};EndpointSuffix=core.windows.net"
    )


def _live_client_secret_credentials():
    """``generate_oauth_token`` of these releases signs in with a client secret: its tokens are
    the harness's, as ``get_credential``'s are for the later ones."""
    import azure.identity
    import azure.identity.aio

    from .fake_credentials import LiveTokenCredential
    from .fake_credentials_async import AsyncLiveTokenCredential

    class ClientSecretCredential(LiveTokenCredential):
        def __init__(self, *args, **kwargs):
            pass

    class AsyncClientSecretCredential(AsyncLiveTokenCredential):
        def __init__(self, *args, **kwargs):
            pass

    azure.identity.ClientSecretCredential = ClientSecretCredential
    azure.identity.aio.ClientSecretCredential = AsyncClientSecretCredential


class _Scrubber:
    def register_name_pair(self, *args):
        pass


class AzureMgmtTestCase(StorageTestCase):
    """What the oldest suites' ``StorageTestCase`` builds on. Subclassing it (their
    ``_shared/testcase.py`` does, before its session fixture reads the environment) names the
    development account's connection string and makes client-secret credentials the harness's."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        account, key = os.environ["STORAGE_ACCOUNT_NAME"], os.environ["STORAGE_ACCOUNT_KEY"]
        os.environ.setdefault("AZURE_STORAGE_CONNECTION_STRING", _connection_string(account, key))
        _live_client_secret_credentials()

    def __init__(self, method_name="runTest", *args, **kwargs):
        super().__init__(method_name)
        # What LogCaptured turns on and off: the base gave it to the tests of 2020 (azure-storage-
        # blob 12.6), whose own _shared/testcase.py no longer names it.
        self.logger = logging.getLogger("azure.storage")
        self.replay_processors = []
        self.recording_processors = []
        self.replay_patches = []
        self.recording_patches = []
        self.scrubber = _Scrubber()

    @property
    def qualified_test_name(self):
        return self.id()

    @property
    def in_recording(self):
        return False


class FakeResource:
    def __init__(self, name=None, id=None):
        self.name, self.id = name, id


class AzureMgmtPreparer:
    """Runs the test with what :meth:`create_resource` gives, merged with what the preparers
    outside it gave, as the real one (``trim_kwargs_from_test_function`` keeps what the test
    takes)."""

    def __init__(self, name_prefix="", random_name_length=24, parameter_name=None, **kwargs):
        self.name_prefix = name_prefix
        self.random_name_length = random_name_length
        self.parameter_name = parameter_name
        self.options = kwargs
        self.test_class_instance = None

    @property
    def is_live(self):
        return True

    def create_resource(self, name, **kwargs):
        return {}

    def remove_resource(self, name, **kwargs):
        pass

    def __call__(self, test):
        preparer = self

        def _preparer_wrapper(test_class_instance, **kwargs):
            preparer.test_class_instance = test_class_instance
            name = test_class_instance.get_resource_name(preparer.name_prefix or "resource")
            kwargs.update(preparer.create_resource(name, **kwargs))
            if not getattr(test, "_is_preparer", False):
                from azure_devtools.scenario_tests.utilities import trim_kwargs_from_test_function

                trim_kwargs_from_test_function(test, kwargs)
            result = test(test_class_instance, **kwargs)
            return _run(result) if inspect.iscoroutine(result) else result

        functools.update_wrapper(_preparer_wrapper, test)
        del _preparer_wrapper.__wrapped__
        _preparer_wrapper._is_preparer = True
        return _preparer_wrapper


class ResourceGroupPreparer(AzureMgmtPreparer):
    def create_resource(self, name, **kwargs):
        group = FakeResource(
            name="rg", id="/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg"
        )
        return {self.parameter_name or "resource_group": group, "location": "westus"}


def storage_account(name):
    """The management model of an account of this server (``azure.mgmt.storage.models``)."""
    from azure.mgmt.storage.models import Endpoints, StorageAccount

    account = StorageAccount(location="westus")
    account.name = account.id = name
    account.primary_endpoints = Endpoints()
    probe = StorageRecordedTestCase()
    for service in ("blob", "queue", "table", "file", "dfs"):
        setattr(
            account.primary_endpoints,
            service,
            probe.account_url(name, "blob").replace(".blob.", f".{service}."),
        )
    return account


class StorageAccountPreparer(AzureMgmtPreparer):
    def create_resource(self, name, **kwargs):
        if str(self.options.get("sku", "")).lower().startswith("premium"):
            role = "PREMIUM_STORAGE"
        else:
            role = "SECONDARY_STORAGE" if self.parameter_name else "STORAGE"
        account = os.environ[f"{role}_ACCOUNT_NAME"]
        key = os.environ[f"{role}_ACCOUNT_KEY"]
        parameter = self.parameter_name or "storage_account"
        return {
            parameter: storage_account(account),
            f"{parameter}_key": key,
            f"{parameter}_cs": _connection_string(account, key),
        }


BlobAccountPreparer = StorageAccountPreparer
#: azure-storage-queue 12.1's async files import it under this name.
FakeStorageAccount = FakeResource

mgmt_settings_fake = types.SimpleNamespace(
    SUBSCRIPTION_ID="00000000-0000-0000-0000-000000000000", AD_DOMAIN="microsoft.com", LOCATION="westus"
)
