"""The premium page blob tier rules alone (tabulae.blob.rules.premium): the inferred tier by size,
a tier that must hold the blob, no step below an explicit tier, resizes within it; and the
account setting that cannot be combined with a hierarchical namespace."""

from __future__ import annotations

import pytest

from tabulae.blob.rules import premium
from tabulae.model.accounts import AccountFeatures, FeatureError, check_combination
from tabulae.model.errors import ServiceError

GIB = 1024**3


@pytest.mark.parametrize(
    ("size", "tier"),
    [(0, "P10"), (1024, "P10"), (128 * GIB, "P10"), (128 * GIB + 512, "P15"), (8192 * GIB, "P60")],
)
def test_an_untiered_blob_takes_the_smallest_tier_from_p10_that_holds_it(size: int, tier: str) -> None:
    assert premium.inferred(size) == tier
    assert premium.view(None, size).access_tier == tier and premium.view(None, size).inferred


def test_tiers_are_read_in_any_case_and_standard_ones_are_invalid() -> None:
    assert premium.parse_tier("p80") == "P80"
    with pytest.raises(ServiceError) as raised:
        premium.parse_tier("Hot")
    assert raised.value.code == "InvalidBlobTier"


def test_set_tier_resize_and_fit() -> None:
    assert premium.set_tier(None, "P4", 32 * GIB) == "P4"  # from an inferred P10, down is fine
    with pytest.raises(ServiceError) as raised:
        premium.set_tier(None, "P4", 32 * GIB + 512)
    assert raised.value.code == "BlobTierInadequateForContentLength"
    assert premium.set_tier("P6", "P6", 0) == "P6"
    with pytest.raises(ServiceError) as raised:
        premium.set_tier("P6", "P4", 0)
    assert raised.value.code == "CannotChangeToLowerTier"
    premium.check_resize("P4", 32 * GIB)
    premium.check_resize(None, 8192 * GIB)
    with pytest.raises(ServiceError) as raised:
        premium.check_resize("P4", 32 * GIB + 512)
    assert raised.value.code == "ContentLengthLargerThanTierLimit"
    view = premium.view("P30", 0)
    assert (view.access_tier, view.inferred, view.changed_at) == ("P30", False, None)


def test_a_premium_page_blob_account_has_no_hierarchical_namespace() -> None:
    with pytest.raises(FeatureError, match="premium-page-blobs"):
        check_combination(AccountFeatures(premium_page_blobs=True, hns=True))
