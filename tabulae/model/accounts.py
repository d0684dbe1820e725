"""An account's features that Azure keeps in its management plane, not in the data-plane REST API:
blob versioning, the change feed, container soft delete, last access time tracking, permanent
delete of soft-deleted snapshots and versions, version-level immutability with the account's
default policy, the hierarchical namespace (Data Lake Storage Gen2), and premium page blobs
(an account of Azure's Premium_LRS SKU whose page blobs have tiers P4 to P80).

In Azure they are properties of the storage account resource, set with the resource manager
(``az storage account blob-service-properties update``, the portal, ARM templates). Tabulae has no
resource manager, so they are server settings: ``tabulae serve`` flags that apply to every account,
a ``--config`` file section per account, and for a running server the signed ``/-/accounts``
endpoint (``tabulae account show|set``). The hierarchical namespace is chosen when an account is
made (Azure can upgrade an account to it once, never back), and so is an account's SKU (a
premium account is made premium and stays so), so here they are start-up settings only.

Each feature has one name, the same in the config file, the endpoint's JSON and the CLI
(``blob-versioning``); the dataclass fields are those names in Python's spelling.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from tabulae.model.errors import ServiceError

MAX_CONTAINER_SOFT_DELETE_DAYS = 365  # Azure's container delete retention: 1 to 365 days
MAX_IMMUTABILITY_DAYS = 146_000  # a time-based retention policy: 1 to 146,000 days


@dataclass(frozen=True, slots=True)
class AccountFeatures:
    blob_versioning: bool = False
    blob_change_feed: bool = False
    container_soft_delete: int = 0  # days deleted containers are kept; 0: off
    last_access_tracking: bool = False
    # ``deleteRetentionPolicy.allowPermanentDelete``: Delete Blob with ``deletetype=permanent``
    # may remove a soft-deleted snapshot or version for good.
    blob_permanent_delete: bool = False
    # Version-level immutability support ("Configure immutability policies for blob versions"):
    # once on it cannot be turned off, it needs versioning, and every container holding a blob
    # refuses Delete Container; the account's default time-based policy (days; 0: none),
    # unlocked or locked, protects each new blob version that sets no policy of its own.
    version_level_immutability: bool = False
    default_immutability_days: int = 0
    default_immutability_locked: bool = False
    hns: bool = False  # a hierarchical namespace: containers are Data Lake file systems
    # A premium page blob account (SKU Premium_LRS): page blobs only, each with a tier P4..P80.
    premium_page_blobs: bool = False


OFF = AccountFeatures()
#: Feature names as the config file, the endpoint and the CLI spell them -> dataclass fields.
NAMES = {field.name.replace("_", "-"): field.name for field in fields(AccountFeatures)}
#: What is fixed when the server starts: the namespace and the account's SKU.
AT_START = ("hns", "premium-page-blobs")
#: What a running server may change.
CHANGEABLE = tuple(name for name in NAMES if name not in AT_START)


class FeatureError(ValueError):
    """A feature document that cannot be applied; the message names the feature."""


def check_days(days: Any, where: str = "container-soft-delete") -> int:
    """Container delete retention in days: 0 (off) or 1 to 365."""
    if not isinstance(days, int) or isinstance(days, bool) or not 0 <= days <= MAX_CONTAINER_SOFT_DELETE_DAYS:
        raise FeatureError(f"{where}: expected 0 (off) or a number of days from 1 to 365, not {days!r}")
    return days


def parse(document: Any, *, allowed: tuple[str, ...] = tuple(NAMES)) -> dict[str, Any]:
    """A feature document (``{"blob-versioning": true, "container-soft-delete": 7}``) checked
    against the features ``allowed``: the changes by dataclass field, or :class:`FeatureError`."""
    if not isinstance(document, dict):
        raise FeatureError('expected an object of features, e.g. {"blob-versioning": true}')
    changes: dict[str, Any] = {}
    for name, value in document.items():
        if name not in NAMES:
            raise FeatureError(f"{name}: not a feature (the features are {', '.join(NAMES)})")
        if name not in allowed:
            raise FeatureError(
                f"{name}: set when the server starts (tabulae serve --{name} ACCOUNT), not at run time"
            )
        if name == "container-soft-delete":
            changes[NAMES[name]] = check_days(value)
        elif name == "default-immutability-days":
            if (
                not isinstance(value, int)
                or isinstance(value, bool)
                or not 0 <= value <= MAX_IMMUTABILITY_DAYS
            ):
                raise FeatureError(
                    f"{name}: expected 0 (no default policy) or a number of days from 1 to "
                    f"{MAX_IMMUTABILITY_DAYS}, not {value!r}"
                )
            changes[NAMES[name]] = value
        elif isinstance(value, bool):
            changes[NAMES[name]] = value
        else:
            raise FeatureError(f"{name}: expected true or false, not {value!r}")
    return changes


def check_combination(features: AccountFeatures) -> AccountFeatures:
    """Refuse what Azure cannot combine: an account with a hierarchical namespace has no change
    feed ("Change feed support in Azure Blob Storage": such accounts are not supported), so DFS
    renames and recursive deletes, which Azure's change feed has no events for, never need any."""
    if features.hns and features.blob_change_feed:
        raise FeatureError(
            "blob-change-feed: Azure has no change feed on an account with a hierarchical namespace"
        )
    if features.version_level_immutability:
        if not features.blob_versioning:
            raise FeatureError("version-level-immutability: needs blob-versioning on")
        if features.hns:
            raise FeatureError(
                "version-level-immutability: Azure has none on an account with a hierarchical namespace"
            )
    if features.premium_page_blobs and features.hns:
        raise FeatureError(
            "premium-page-blobs: a premium page blob account holds page blobs only, and a "
            "hierarchical namespace keeps its files as block blobs"
        )
    if features.default_immutability_days and not features.version_level_immutability:
        raise FeatureError("default-immutability-days: needs version-level-immutability on")
    if features.default_immutability_locked and not features.default_immutability_days:
        raise FeatureError("default-immutability-locked: there is no default policy to lock")
    return features


def check_change(before: AccountFeatures, after: AccountFeatures) -> None:
    """Refuse a run-time change Azure never makes: turning version-level immutability off, and
    unlocking, shortening or removing a locked default policy (which may only be extended)."""
    if before.version_level_immutability and not after.version_level_immutability:
        raise FeatureError("version-level-immutability: cannot be turned off once on")
    if before.default_immutability_locked:
        if not after.default_immutability_locked:
            raise FeatureError("default-immutability-locked: a locked default policy cannot be unlocked")
        if after.default_immutability_days < before.default_immutability_days:
            raise FeatureError("default-immutability-days: a locked default policy can only be extended")


def refused(error: FeatureError) -> ServiceError:
    """A feature document the endpoint refuses: 400 InvalidInput, saying which feature and why."""
    return ServiceError("InvalidInput", f"One of the request inputs is not valid: {error}")


def apply(features: AccountFeatures, changes: dict[str, Any]) -> AccountFeatures:
    return replace(features, **changes)


def document(features: AccountFeatures) -> dict[str, Any]:
    """The features as the endpoint and ``tabulae account show`` give them."""
    return {name: getattr(features, field) for name, field in NAMES.items()}
