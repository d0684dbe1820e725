"""Where a blob's rows live on Citus: its distribution key (``dkey``), by one rule everywhere.

A flat account's blobs are spread one by one: ``dkey`` is a hash of account, container and blob
name, so a hot container's blobs spread over every shard. An account with a hierarchical
namespace keeps each file system together instead: ``dkey`` is a hash of account and container
only, so a file system's paths, their versions, blocks and content chunks all live on one shard.
A directory rename then changes names in place on that shard (one single-shard transaction that
never touches a content row), and a listing of the file system, a recursive delete or an
undelete is routed to that one shard by the key condition the plans add for such a blob
(:attr:`At.colocated <tabulae.storage.blobplan.reads.At>`).

Every place that needs a blob's ``dkey`` (reads, writes, staging content, listings, copies,
renames, page blobs, tags, versions, soft delete, leases: all through :meth:`BlobKeys.at` or
:meth:`BlobKeys.of`) asks one :class:`BlobKeys`, built from the server's settings. Which accounts
are kept together can change between restarts; :mod:`.rekeying` moves the rows at start-up.
"""

from __future__ import annotations

import hashlib
import struct

from tabulae.storage.blobplan.reads import At
from tabulae.storage.blobs import BlobKey

_DKEY = struct.Struct(">q")


def _hash(text: str) -> int:
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass"))
    return int(_DKEY.unpack(digest.digest()[:8])[0])


def blob_dkey(account: str, container: str, name: str) -> int:
    """A flat account's blob: 64 bits of SHA-256 over account, container and name."""
    return _hash(f"{account}\n{container}\n{name}")


def container_dkey(account: str, container: str) -> int:
    """Every blob of a container of an account with a hierarchical namespace: 64 bits of SHA-256
    over account and container (one line break fewer than any blob's text, so never equal to one)."""
    return _hash(f"{account}\n{container}")


# blob_dkey in SQL, for rows a statement re-keys by their new name ({name}) under ``:account``
# and ``:dcontainer``: the first 8 bytes of the hash as a signed big-endian integer.
BLOB_DKEY_SQL = (
    "('x' || left(encode(sha256(convert_to(:account || E'\\n' || :dcontainer || E'\\n' || {name},"
    " 'UTF8')), 'hex'), 16))::bit(64)::bigint"
)


def keyed_name(container: str) -> str:
    """The name a container's blobs are keyed by. Container soft delete renames a container
    aside as ``~name~version~days`` (``blob/softdeletion.py``; no container name has a ``~``)
    and restores it under ``name``, its rows untouched, so they keep the keys of ``name``."""
    if container[:1] != "~":
        return container
    parts = container.split("~")
    return parts[1] if len(parts) == 4 else container


class BlobKeys:
    """The distribution key rule of one server: which accounts keep each container together."""

    __slots__ = ("colocated",)

    def __init__(self, colocated: frozenset[str] = frozenset()) -> None:
        self.colocated = colocated

    def of(self, key: BlobKey) -> int:
        container = keyed_name(key.container)
        if key.account in self.colocated:
            return container_dkey(key.account, container)
        return blob_dkey(key.account, container, key.name)

    def at(self, key: BlobKey) -> At:
        container = keyed_name(key.container)
        if key.account in self.colocated:
            return At(key, container_dkey(key.account, container), True)
        return At(key, blob_dkey(key.account, container, key.name))

    def container(self, account: str, container: str) -> int | None:
        """The key every blob of the container shares, or None when they are spread."""
        return container_dkey(account, keyed_name(container)) if account in self.colocated else None
