"""Size and count limits of blobs and blocks, by REST version ("Scalability and performance
targets for Blob storage", "Put Blob", "Put Block", "Append Block")."""

from __future__ import annotations

MIB = 1024 * 1024
MAX_COMMITTED_BLOCKS = 50_000
MAX_BLOCK_LIST = 50_000
MAX_BLOCK_ID_BYTES = 64
MAX_BLOCK_BLOB = MAX_COMMITTED_BLOCKS * 4000 * MIB


def max_put_blob(version: str) -> int:
    """The largest single-shot Put Blob body: 5,000 MiB from 2019-12-12, 256 MiB from 2016-05-31."""
    if version >= "2019-12-12":
        return 5000 * MIB
    if version >= "2016-05-31":
        return 256 * MIB
    return 64 * MIB


def max_block(version: str) -> int:
    """The largest Put Block body: 4,000 MiB from 2019-12-12, 100 MiB from 2016-05-31."""
    if version >= "2019-12-12":
        return 4000 * MIB
    if version >= "2016-05-31":
        return 100 * MIB
    return 4 * MIB


def max_append(version: str) -> int:
    """The largest Append Block body: 100 MiB from 2022-11-02, 4 MiB before."""
    return 100 * MIB if version >= "2022-11-02" else 4 * MIB
