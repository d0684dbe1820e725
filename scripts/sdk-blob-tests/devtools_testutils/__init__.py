"""A minimal stand-in for azure-sdk-tools' devtools_testutils, for running the blob tests live
against a local endpoint (no test proxy, no recordings). Written for Tabulae's harness."""

import functools
import os

import pytest

from .fake_credentials import STORAGE_ACCOUNT_FAKE_KEY, FakeTokenCredential  # noqa


def is_live():
    return True


def _noop(*args, **kwargs):
    return None


add_body_regex_sanitizer = add_general_regex_sanitizer = add_header_regex_sanitizer = _noop
add_oauth_response_sanitizer = add_uri_regex_sanitizer = set_custom_default_matcher = _noop
# What the table and queue tests' conftest files ask of the proxy besides (scripts/sdk-tests).
add_body_key_sanitizer = add_remove_header_sanitizer = add_uri_string_sanitizer = _noop
remove_batch_sanitizers = set_bodiless_matcher = _noop


@pytest.fixture(scope="session")
def test_proxy():
    """The proxy the conftest files start: none in live mode."""
    return None


def get_credential(is_async=False, **kwargs):
    """The test principal's credential: a token ``tabulae serve --oauth basic`` takes."""
    if is_async:
        from .fake_credentials_async import AsyncLiveTokenCredential

        return AsyncLiveTokenCredential()
    from .fake_credentials import LiveTokenCredential

    return LiveTokenCredential()


def _accepted(func, kwargs):
    """What of ``kwargs`` the test takes, as the real decorator trims them: a preparer passes
    every value it has (the table tests' AAD ones take no key)."""
    import inspect

    kwargs.pop("variables", None)
    parameters = inspect.signature(func).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return kwargs
    return {name: value for name, value in kwargs.items() if name in parameters}


def _hide_parameters(wrapper):
    """As the real decorator, whose wrapper is not ``functools.wraps``' copy of the test: pytest
    reads the test's parameters through ``__wrapped__``, and a test that names its account
    (``def test_x(self, storage_account_name, storage_account_key)``, as some older ones do)
    would want fixtures of those names."""
    del wrapper.__wrapped__
    return wrapper


def recorded_by_proxy(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **_accepted(func, kwargs))

    return _hide_parameters(wrapper)


class Secret(str):
    """A key that is also itself (tests use both ``key`` and ``key.secret``)."""

    @property
    def secret(self):
        return str(self)


class EnvironmentVariableOptions:
    def __init__(self, hide_secrets=None):
        self.hide_secrets = hide_secrets or []


class EnvironmentVariableLoader:
    """``@BlobPreparer()``: passes the account names and keys from the environment."""

    def __init__(self, directory, options=None, **defaults):
        self.defaults = defaults

    def __call__(self, func):
        import inspect

        names = list(self.defaults)

        # Like the real loader, pass only what the test takes: a few take no **kwargs.
        parameters = inspect.signature(func).parameters
        takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())

        def values():
            found = {}
            for name in names:
                if not takes_all and name not in parameters:
                    continue
                value = os.environ.get(name.upper(), self.defaults[name])
                if name.endswith("_key"):
                    value = Secret(value)
                found[name] = value
            return found

        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def awrapper(*args, **kwargs):
                return await func(*args, **{**values(), **kwargs})

            return awrapper

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            return func(*args, **{**values(), **kwargs})

        return wrapper


class ResponseCallback:
    def __init__(self, status=None, new_status=None):
        self.status = status
        self.new_status = new_status
        self.first = True
        self.count = 0

    def override_first_status(self, response):
        if self.first and response.http_response.status_code == self.status:
            response.http_response.status_code = self.new_status
            self.first = False
        self.count += 1

    def override_status(self, response):
        if response.http_response.status_code == self.status:
            response.http_response.status_code = self.new_status
        self.count += 1


class RetryCounter:
    def __init__(self):
        self.count = 0

    def simple_count(self, retry_context):
        self.count += 1


#: The table tests' name for the loader (azure-sdk-tools keeps both).
PowerShellPreparer = EnvironmentVariableLoader


class AzureTestError(Exception):
    pass


def _unused_preparer(*args, **kwargs):
    """The management-plane preparers, imported by test files but used by none that run live
    here: applying one fails the test, as it would without a subscription."""

    def decorate(func):
        @functools.wraps(func)
        def refuse(*a, **k):
            raise AzureTestError("needs an Azure subscription")

        return refuse

    return decorate


#: The test proxy era's suites import the management-plane preparers without applying them.
CachedResourceGroupPreparer = _unused_preparer
#: What the oldest suites (azure-storage-blob 12.8) build on: see mgmt_era.py.
_MGMT_ERA = (
    "AzureMgmtTestCase", "AzureMgmtPreparer", "ResourceGroupPreparer", "StorageAccountPreparer",
    "BlobAccountPreparer", "FakeResource", "FakeStorageAccount", "mgmt_settings_fake",
)  # fmt: skip


from .storage import StorageRecordedTestCase as AzureRecordedTestCase  # noqa: E402,F401


def __getattr__(name):
    """``AzureTestCase``, the older suites' base, from :mod:`.legacy` once asked for (it builds on
    :mod:`.storage`, which this module's last import loads)."""
    if name == "AzureTestCase":
        from .legacy import AzureTestCase

        return AzureTestCase
    if name in _MGMT_ERA:
        from . import mgmt_era

        return getattr(mgmt_era, name)
    raise AttributeError(name)
