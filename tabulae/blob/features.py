"""Each account's features (versioning, change feed, container soft delete, last access tracking,
hierarchical namespace, premium page blobs) as the Blob service's operations consult them.

What an account has is the server's settings for it (flags for every account, a config file
section per account) with what was changed at run time through ``/-/accounts`` laid over them;
those changes are kept in the store, so every worker and every restart sees them. A worker reads
them again at most once per ``ttl`` seconds: a change made through another worker takes effect
here within that time, and the operations that consult features on every request pay nothing
but a dictionary lookup.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import orjson

from tabulae.model.accounts import (
    CHANGEABLE,
    AccountFeatures,
    FeatureError,
    apply,
    check_change,
    check_combination,
    parse,
)
from tabulae.storage.blobs import BlobStore

FRESH_SECONDS = 1.0


class AccountFeatureBook:
    """The features of every account, read through a short cache."""

    def __init__(
        self,
        store: BlobStore,
        configured: Callable[[str], AccountFeatures],
        *,
        ttl: float = FRESH_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._configured = configured
        self._ttl = ttl
        self._clock = clock
        self._cache: dict[str, tuple[float, AccountFeatures]] = {}

    async def get(self, account: str) -> AccountFeatures:
        now = self._clock()
        cached = self._cache.get(account)
        if cached is not None and now - cached[0] < self._ttl:
            return cached[1]
        features = apply(self._configured(account), await self._changes(account))
        self._cache[account] = (now, features)
        return features

    async def change(self, account: str, document: object) -> AccountFeatures:
        """Lay ``document``'s changes over what was changed before and keep them; raises
        :class:`FeatureError` for a feature that does not exist or cannot change at run time."""
        changes = parse(document, allowed=CHANGEABLE)
        before = await self._changes(account)
        kept = {**before, **changes}
        check_change(
            apply(self._configured(account), before),
            check_combination(apply(self._configured(account), kept)),
        )
        await self._store.set_account_features(account, orjson.dumps(kept))
        self._cache.pop(account, None)
        return await self.get(account)

    async def _changes(self, account: str) -> dict[str, object]:
        stored = await self._store.get_account_features(account)
        if stored is None:
            return {}
        try:
            return parse(_names(orjson.loads(stored)), allowed=CHANGEABLE)
        except (orjson.JSONDecodeError, FeatureError):
            return {}  # written by a later version with features this one lacks: the settings stand


def _names(kept: object) -> object:
    """Changes are kept by field name; :func:`parse` reads the features' spelled names."""
    if isinstance(kept, dict):
        return {str(name).replace("_", "-"): value for name, value in kept.items()}
    return kept
