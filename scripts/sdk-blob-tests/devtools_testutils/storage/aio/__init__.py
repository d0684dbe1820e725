import asyncio

from .. import GenericTestProxyParametrize1, GenericTestProxyParametrize2, StorageRecordedTestCase  # noqa: F401


class AsyncStorageRecordedTestCase(StorageRecordedTestCase):
    async def sleep_async(self, seconds):
        await asyncio.sleep(seconds)

    def generate_oauth_token(self):
        from ...fake_credentials_async import AsyncLiveTokenCredential

        return AsyncLiveTokenCredential()

    def generate_fake_token(self):
        """A token no service takes, async (older suites' ``test_token_credential``)."""
        from ...fake_credentials_async import AsyncFakeCredential

        return AsyncFakeCredential()


def __getattr__(name):
    if name == "AsyncStorageTestCase":
        from ...legacy import AsyncStorageTestCase

        return AsyncStorageTestCase
    raise AttributeError(name)
