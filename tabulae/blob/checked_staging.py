"""Stage an upload's bytes and check them against the digests the request sent.

Put Blob, Put Page and Data Lake's Append all stream a body into a staged extent while its MD5
and CRC64 are computed, and only then know whether the body matches the ``Content-MD5`` or
``x-ms-content-crc64`` the client sent: a mismatch must leave nothing behind (Azure stores no
part of a refused body), so the staged bytes are discarded before the error goes on.
"""

from __future__ import annotations

from collections.abc import AsyncIterable

from tabulae.blob.rules.checksums import Checksums
from tabulae.model.blobs import BlobKey
from tabulae.model.errors import ServiceError
from tabulae.storage.blobs import BlobStore, Staged


async def stage_checked(
    store: BlobStore,
    key: BlobKey,
    chunks: AsyncIterable[bytes],
    checksums: Checksums,
    md5: bytes | None,
    crc64: bytes | None,
) -> Staged:
    """``chunks`` staged for ``key`` with ``checksums`` computed, or the mismatch's error (400
    Md5Mismatch or Crc64Mismatch) with nothing staged."""
    staged = await store.stage(key, chunks, checksums)
    try:
        checksums.verify(md5, crc64)
    except ServiceError:
        await store.discard(staged)
        raise
    return staged
