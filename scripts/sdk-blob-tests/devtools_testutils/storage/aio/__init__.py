import asyncio

from .. import GenericTestProxyParametrize1, GenericTestProxyParametrize2, StorageRecordedTestCase  # noqa: F401


class AsyncStorageRecordedTestCase(StorageRecordedTestCase):
    async def sleep_async(self, seconds):
        await asyncio.sleep(seconds)
