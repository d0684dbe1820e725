"""Tiers of page blobs in a premium page blob account (Premium_LRS), as a pure rule set.

A premium page blob account holds page blobs only, and each page blob has a tier, P4 to P80,
that fixes how large it may be ("Set Blob Tier": a premium page blob's tier "determines the
allowed size, IOPS, and bandwidth of the blob"; the REST API's PremiumPageBlobAccessTier lists
P4 to P80). The sizes are those of the premium disks of the same names: 32 GiB for P4, doubling
to 16 TiB for P70, and 32,767 GiB for P80 (a page blob itself ends at 8 TiB, so P60 and up hold
any page blob).

A blob whose tier was never set follows its content length, and says so
(``x-ms-access-tier-inferred: true``; List Blobs ``AccessTierInferred``): the smallest tier
from P10 up that holds it. Recorded: 0, 512 and 1024 bytes are P10 (azure-storage-node's
blob-archive-pageblob-tests, azure-storage-python's test_blob_tier_set_tier_api, the Java
SDK's ContainerApiTests.listPageBlobsFlat of 2023); that a larger blob takes the next tier up
is the docs' "inferred based on its content length" read with the disk sizes (assumed). P4 and
P6 are never inferred.

What Azure answers (recorded against premium accounts unless marked):

- Put Blob or Copy Blob naming a tier smaller than the content length, and Set Blob Tier to
  one: 409 BlobTierInadequateForContentLength (azure-storage-node's recording for Put Blob; the
  .NET library's premium tests for Set Blob Tier and Copy Blob).
- Set Blob Tier below a tier set explicitly before: 409 CannotChangeToLowerTier (recorded,
  P6 then P4); from an inferred tier any tier that holds the blob may be set (recorded, P10
  inferred then P4).
- A standard tier (Hot, Cool...) where a premium one is expected: 400 InvalidBlobTier
  (recorded for Put Blob with ``x-ms-access-tier: HOT``, 2017; for Set Blob Tier and Copy Blob
  with Cool, the .NET SDK's SetTierAsync_AccessTierFail and StartCopyIncrementalAsync_AccessTierFail,
  2024-08-04).
- Resizing a blob whose tier was set beyond that tier's size: 409
  ContentLengthLargerThanTierLimit ("Blob Storage error codes": the blob's content length
  cannot exceed its tier limit; which operation answers it is not recorded). A blob whose
  tier is inferred follows its new size.

A premium blob's tier has no change time: Get Blob Properties after Put Blob with a tier shows
none (recorded, 2025-05-05), nor after Set Blob Tier (the .NET SDK's SetTierAsync_AccessTier,
2024-08-04).
"""

from __future__ import annotations

from tabulae.blob.rules.tiers import TierView
from tabulae.model.errors import ServiceError

GIB = 1024**3
#: Each tier's size in bytes, smallest first.
SIZES: dict[str, int] = {
    "P4": 32 * GIB,
    "P6": 64 * GIB,
    "P10": 128 * GIB,
    "P15": 256 * GIB,
    "P20": 512 * GIB,
    "P30": 1024 * GIB,
    "P40": 2048 * GIB,
    "P50": 4096 * GIB,
    "P60": 8192 * GIB,
    "P70": 16384 * GIB,
    "P80": 32767 * GIB,
}
TIERS = tuple(SIZES)
#: The tiers an untiered blob may be inferred to (P4 and P6 never are).
INFERRED = TIERS[TIERS.index("P10") :]


def is_premium(tier: str | None) -> bool:
    """Whether a stored tier is a premium page blob tier."""
    return tier in SIZES


def parse_tier(value: str) -> str:
    """``x-ms-access-tier`` in a premium page blob account: P4 to P80 (any case), else 400
    InvalidBlobTier, as Azure answers a standard tier there."""
    for tier in TIERS:
        if value.strip().lower() == tier.lower():
            return tier
    raise ServiceError("InvalidBlobTier")


def inferred(size: int) -> str:
    """The tier of a blob of ``size`` bytes whose tier was never set."""
    for tier in INFERRED:
        if size <= SIZES[tier]:
            return tier
    return INFERRED[-1]


def check_fits(tier: str, size: int) -> None:
    """A tier named for a blob of ``size`` bytes: 409 when it is smaller than the blob."""
    if size > SIZES[tier]:
        raise ServiceError("BlobTierInadequateForContentLength")


def set_tier(current: str | None, target: str, size: int) -> str:
    """Set Blob Tier from ``current`` (None: inferred) to ``target``: the tier to keep."""
    check_fits(target, size)
    if current is not None and SIZES[target] < SIZES[current]:
        raise ServiceError("CannotChangeToLowerTier")
    return target


def check_resize(tier: str | None, size: int) -> None:
    """A new size for a blob whose tier was set (``tier``; None: inferred, which follows)."""
    if tier is not None and is_premium(tier) and size > SIZES[tier]:
        raise ServiceError("ContentLengthLargerThanTierLimit")


def view(tier: str | None, size: int) -> TierView:
    """What Get Blob Properties and List Blobs show of a premium page blob's tier."""
    if tier is None or not is_premium(tier):
        return TierView(inferred(size), True, None, None, None)
    return TierView(tier, False, None, None, None)
