"""How a request's encryption meets a blob's: customer-provided keys and encryption scopes.

A blob remembers the SHA-256 of the customer-provided key it was written with (never the key)
and the encryption scope its write named. Azure then refuses, with 409, a request that reads it
or changes it in place without that key (``BlobUsesCustomerSpecifiedEncryption``), with another
key (``BlobCustomerSpecifiedEncryptionMismatch``), or with a key for a blob written without one
(``BlobDoesNotUseCustomerSpecifiedEncryption``); a change in place under another scope is
refused like a key that does not match. A write that replaces the content (Put Blob, Put Block
List, Copy Blob) makes a new blob, which takes the request's key and scope.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass, replace

from tabulae.model.blobs import BlobRecord
from tabulae.model.errors import ServiceError


@dataclass(frozen=True, slots=True)
class Encryption:
    """A request's encryption: the scope its writes use (None: the account's key), the Base64
    SHA-256 of its customer-provided key, whether the operation must name the blob's key
    (reads of content, properties or metadata, and the writes that change a blob in place), and
    whether it commits staged blocks (Put Block List), which must name the key and scope they
    were staged with."""

    scope: str | None = None
    key_sha256: str | None = None
    checks: bool = False
    commits: bool = False


def check_key(record: BlobRecord, encryption: Encryption) -> None:
    """Refuse a request whose customer-provided key is not the one ``record`` was written with."""
    stored, given = record.encryption_key_sha256, encryption.key_sha256
    if stored is None:
        if given is not None:
            raise ServiceError("BlobDoesNotUseCustomerSpecifiedEncryption")
        return
    if given is None:
        raise ServiceError("BlobUsesCustomerSpecifiedEncryption")
    if not hmac.compare_digest(stored.encode(), given.encode()):
        raise ServiceError("BlobCustomerSpecifiedEncryptionMismatch")


def check_in_place(record: BlobRecord, encryption: Encryption) -> None:
    """A change in place (append, pages, metadata, snapshot): the blob's key and its scope."""
    check_key(record, encryption)
    if record.encryption_scope != encryption.scope:
        raise ServiceError("BlobCustomerSpecifiedEncryptionMismatch")


def check_copy_source(source: BlobRecord) -> None:
    """A copy read inside the store (Copy Blob, Incremental Copy, a version restored) has no way
    to name its source's customer-provided key (Azure's Copy Blob takes none), so a source
    written with one is refused as a read without the key is: Azure could not decrypt it."""
    if source.encryption_key_sha256 is not None:
        raise ServiceError("BlobUsesCustomerSpecifiedEncryption")


def staged_with(record: BlobRecord) -> list[str | None]:
    """[scope, key SHA-256] the blocks staged on ``record`` were written with."""
    if record.staged_encryption is not None:
        return record.staged_encryption
    return [record.encryption_scope, record.encryption_key_sha256]


def check_staged(staged: list[str | None], encryption: Encryption) -> None:
    """Put Block List: the commit names the key and the scope its blocks were staged with."""
    scope, key = staged
    if key is None and encryption.key_sha256 is not None:
        raise ServiceError("BlobDoesNotUseCustomerSpecifiedEncryption")
    if key is not None:
        if encryption.key_sha256 is None:
            raise ServiceError("BlobUsesCustomerSpecifiedEncryption")
        if not hmac.compare_digest(key.encode(), encryption.key_sha256.encode()):
            raise ServiceError("BlobCustomerSpecifiedEncryptionMismatch")
    if scope != encryption.scope:
        raise ServiceError("BlobCustomerSpecifiedEncryptionMismatch")


def stamped(record: BlobRecord, encryption: Encryption) -> BlobRecord:
    """``record`` as a new blob written with ``encryption`` (no blocks staged on it yet)."""
    if (
        record.encryption_scope == encryption.scope
        and record.encryption_key_sha256 == encryption.key_sha256
        and record.staged_encryption is None
    ):
        return record
    return replace(
        record,
        encryption_scope=encryption.scope,
        encryption_key_sha256=encryption.key_sha256,
        staged_encryption=None,
    )
