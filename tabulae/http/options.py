"""What every service's front-end needs of the settings, handed down by the composition root."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tabulae.model.policies import CorsRule
from tabulae.model.roles import Assignments

Accounts = dict[str, list[bytes]]  # account name -> its keys (one or two), never printed


@dataclass(frozen=True, slots=True)
class FrontendOptions:
    accounts: Accounts
    max_body_bytes: int  # larger bodies get 413 RequestBodyTooLarge
    body_timeout: float  # a body may pause this long, and is held to a minimum rate after it (500)
    oauth: bool = False  # accept bearer tokens (basic checks, no signature validation)
    clock_skew: float | None = None  # Shared Key requests dated further off than this are refused
    access_log: bool = False  # one JSON line per request on stderr
    skip_version_check: bool = False  # serve any x-ms-version (Azurite's --skipApiVersionCheck)
    default_cors: tuple[CorsRule, ...] = ()  # for accounts without CORS rules of their own
    tracer: Any = None  # an insight.tracing.RequestTracer with --otel: a span per request
    volume: Any = None  # a storage.volume.Volume: while ``full``, writes that free nothing get 503
    copy_from_remote: bool = True  # Blob copies may read sources outside this server
    encryption_scopes: frozenset[tuple[str, str]] = frozenset()  # (account, scope) Blob writes may name
    roles: Assignments | None = None  # with any assignment, bearer tokens are held to their roles
