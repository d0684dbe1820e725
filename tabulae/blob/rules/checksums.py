"""Transactional checksums: the MD5 a blob keeps, and the ``Content-MD5`` / ``x-ms-content-crc64``
an upload is checked against (400 Md5Mismatch / Crc64Mismatch).

CRC64 is Azure Storage's own (reflected polynomial 0x9A6C9329AC4BC9B5, initial and final XOR
~0), sent as the Base64 of its 8 little-endian bytes. That is CRC-64/NVME, which the AWS Common
Runtime (``awscrt``) computes with the CPU's carry-less multiply instructions: an order of
magnitude faster than the table-driven C extension Microsoft ships for its SDKs, and an upload's
CRC64 is on the path of every byte (benchmarks/README.md has the figures; the test of this module
checks both give the same values).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable

from awscrt.checksums import crc64nvme

from tabulae.model.errors import ServiceError

CRC64_VERSION = "2019-02-02"
"""The first version whose answers carry a CRC64: ``x-ms-content-crc64`` on writes and
``<Content-CRC64 />`` in List Blobs, as Azure answered the JS SDK (its nock recordings: Put Blob
and List Blobs without either at x-ms-version 2018-03-28 and 2018-11-09, with both from
2019-02-02)."""


def decode_digest(value: str | None, size: int, header: str) -> bytes | None:
    """A Base64 digest header; the wrong form is InvalidMd5 for MD5, InvalidHeaderValue otherwise."""
    if value is None:
        return None
    try:
        digest = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        digest = b""
    if len(digest) != size:
        if header == "Content-MD5":
            raise ServiceError("InvalidMd5")
        raise ServiceError("InvalidHeaderValue", fields=(("HeaderName", header), ("HeaderValue", value)))
    return digest


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class Checksums:
    """MD5 and CRC64 of the bytes fed to :meth:`update` (each only when asked for)."""

    __slots__ = ("_crc", "_md5")

    def __init__(self, *, md5: bool, crc64: bool) -> None:
        self._md5 = hashlib.md5() if md5 else None
        self._crc: int | None = 0 if crc64 else None

    def update(self, data: bytes) -> None:
        if self._md5 is not None:
            self._md5.update(data)
        if self._crc is not None:
            self._update_crc(data)

    def updaters(self) -> list[Callable[[bytes], None]]:
        """MD5, which leaves the GIL while it hashes: on a thread of its own it runs beside the
        engine's writes."""
        return [self._md5.update] if self._md5 is not None else []

    def light(self) -> Callable[[bytes], None] | None:
        """CRC64: with carry-less multiplies it costs less than a hand-over to a thread would,
        so it runs on the thread that already has the bytes."""
        return self._update_crc if self._crc is not None else None

    def _update_crc(self, data: bytes) -> None:
        assert self._crc is not None
        self._crc = crc64nvme(data, self._crc)

    @property
    def md5(self) -> bytes | None:
        return self._md5.digest() if self._md5 is not None else None

    @property
    def crc64(self) -> bytes | None:
        return self._crc.to_bytes(8, "little") if self._crc is not None else None

    def verify(self, expected_md5: bytes | None, expected_crc64: bytes | None) -> None:
        """Raise Md5Mismatch or Crc64Mismatch, naming both values, when the bytes differ."""
        md5 = self.md5
        if expected_md5 is not None and md5 is not None and md5 != expected_md5:
            raise ServiceError(
                "Md5Mismatch",
                fields=(("UserSpecifiedMd5", b64(expected_md5)), ("ServerCalculatedMd5", b64(md5))),
            )
        crc = self.crc64
        if expected_crc64 is not None and crc is not None and crc != expected_crc64:
            raise ServiceError(
                "Crc64Mismatch",
                fields=(("UserSpecifiedCrc", b64(expected_crc64)), ("ServerCalculatedCrc", b64(crc))),
            )


def crc64_of(data: bytes) -> bytes:
    return crc64nvme(data, 0).to_bytes(8, "little")
