"""The test bases of the releases before the test proxy (azure-storage-queue 12.4,
azure-storage-file-datalake 12.6, azure-data-tables 12.2, about 2021): ``unittest.TestCase``
classes whose async tests are run by the preparer (the real one awaits a coroutine test in an
event loop of its own), not by a pytest plugin. Live only, as the rest of this package."""

import asyncio
import functools
import inspect
import unittest
from datetime import UTC

from .storage import StorageRecordedTestCase


def _run(coroutine):
    """Run to its end in the thread's current loop, as the real preparer did: the async tests'
    ``setUp`` builds their clients in ``asyncio.get_event_loop()`` and the test must use the same
    loop (``asyncio.run`` would close it and leave none current for the next test's)."""
    policy = asyncio.get_event_loop_policy()
    try:
        loop = policy.get_event_loop()
    except RuntimeError:
        loop = None
    if loop is None or loop.is_closed():
        loop = policy.new_event_loop()
        policy.set_event_loop(loop)
    return loop.run_until_complete(coroutine)


def _synchronous(test):
    """An ``async def`` test as unittest can call it: pytest runs a ``unittest.TestCase``'s
    methods itself, and a coroutine it is handed is never awaited (the test "passes")."""

    @functools.wraps(test)
    def run(self, *args, **kwargs):
        return _run(test(self, *args, **kwargs))

    return run


class StorageTestCase(StorageRecordedTestCase, unittest.TestCase):
    """``devtools_testutils.storage.StorageTestCase`` of those releases."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name, value in list(vars(cls).items()):
            if name.startswith("test") and inspect.iscoroutinefunction(value):
                setattr(cls, name, _synchronous(value))

    def setup_method(self, method):
        """unittest calls ``setUp`` itself here (the recorded base calls it for plain classes)."""

    def generate_sas_token(self):
        """A well-formed account SAS of a made-up key: the tests only build URLs with it."""
        from datetime import datetime, timedelta
        from urllib.parse import urlencode

        now = datetime.now(UTC)
        stamp = "%Y-%m-%dT%H:%M:%SZ"
        fields = {
            "sv": "2019-12-12",
            "ss": "bqtf",
            "srt": "o",
            "sp": "rl",
            "st": (now - timedelta(hours=24)).strftime(stamp),
            "se": (now + timedelta(days=8)).strftime(stamp),
            "spr": "https",
            "sig": "ZmFrZXNpZ25hdHVyZQ==",
        }
        return "?" + urlencode(fields)

    def create_storage_client(self, client_class, *args, **kwargs):
        return client_class(*args, **kwargs)

    @staticmethod
    def await_prepared_test(test):
        """``@AsyncStorageTestCase.await_prepared_test``: the coroutine test, run to its end."""
        if not inspect.iscoroutinefunction(test):
            return test

        @functools.wraps(test)
        def run(self, *args, **kwargs):
            return _run(test(self, *args, **kwargs))

        return run


class AsyncStorageTestCase(StorageTestCase):
    """Its async twin: the same, with async token credentials."""

    def generate_oauth_token(self):
        from .fake_credentials_async import AsyncLiveTokenCredential

        return AsyncLiveTokenCredential()

    def generate_fake_token(self):
        from .fake_credentials_async import AsyncFakeCredential

        return AsyncFakeCredential()


#: ``devtools_testutils.AzureTestCase``, the tables tests' base (they add their own helpers).
AzureTestCase = StorageTestCase
