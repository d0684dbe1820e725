import asyncio

from .. import StorageRecordedTestCase


class AsyncStorageRecordedTestCase(StorageRecordedTestCase):
    async def sleep_async(self, seconds):
        await asyncio.sleep(seconds)
