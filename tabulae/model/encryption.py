"""Encryption scopes and customer-provided keys: the vocabulary the settings, the Blob front-end,
its rules and the stores share.

Azure creates an account's encryption scopes in its management plane; Tabulae takes them from
its settings (``--encryption-scope [ACCOUNT:]NAME``). ``$account-encryption-key`` is the scope
every account has: the account's own key, which a write uses when it names no scope.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

ACCOUNT_KEY_SCOPE = "$account-encryption-key"
_NAME = re.compile(r"[A-Za-z0-9]{3,63}")


def scope_pairs(specs: Iterable[str], accounts: Iterable[str]) -> frozenset[tuple[str, str]]:
    """``(account, scope)`` for each spec: ``NAME`` gives every account that scope, ``ACCOUNT:NAME``
    one account. Raises ValueError, saying which, for a malformed name or an account not served."""
    served = list(accounts)
    pairs: set[tuple[str, str]] = set()
    for spec in specs:
        account, _, name = spec.rpartition(":")
        if not _NAME.fullmatch(name):
            raise ValueError(f"{spec!r}: a scope name is 3 to 63 letters and digits")
        if account and account not in served:
            raise ValueError(f"{spec!r}: the server does not serve account {account!r}")
        pairs.update((owner, name) for owner in ([account] if account else served))
    return frozenset(pairs)
