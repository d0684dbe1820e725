"""Per-table access policies and per-account service properties, and their stored JSON form.

Both are small documents a client replaces as a whole (Set Table ACL, Set Service Properties);
storage keeps them as opaque JSON bytes written and read only through this module.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import orjson

MAX_IDENTIFIERS = 5
MAX_CORS_RULES = 5
# The methods a CORS rule may allow, in Azure's order. CONNECT and TRACE too: Azure took them
# from the .NET SDK (ServiceClientTests/SetPropertiesAsync_StaticWebsite.json, x-ms-version
# 2024-08-04: Set Blob Service Properties with GET,...,TRACE,OPTIONS,CONNECT,MERGE,PATCH is 202 and
# reads back so), and the management API lists them among every service's AllowedMethods.
CORS_METHOD_ORDER = ("DELETE", "GET", "HEAD", "MERGE", "POST", "OPTIONS", "PUT", "PATCH", "CONNECT", "TRACE")
CORS_METHODS = frozenset(CORS_METHOD_ORDER)


@dataclass(frozen=True, slots=True)
class SignedIdentifier:
    """A stored access policy; ``has_policy`` False is an identifier with no AccessPolicy element."""

    id: str
    start: str | None = None
    expiry: str | None = None
    permission: str | None = None
    has_policy: bool = True

    @property
    def policy_given(self) -> bool:
        """Whether the identifier carries a policy: an ``<AccessPolicy>`` with at least one of
        start, expiry or permission. An empty one is no policy, and Get Table ACL leaves it out,
        as Azure does."""
        return self.has_policy and bool(self.start or self.expiry or self.permission)


def encode_acl(identifiers: list[SignedIdentifier]) -> bytes:
    return orjson.dumps([asdict(identifier) for identifier in identifiers])


def decode_acl(blob: bytes | None) -> list[SignedIdentifier]:
    if not blob:
        return []
    return [SignedIdentifier(**item) for item in orjson.loads(blob)]


@dataclass(slots=True)
class RetentionPolicy:
    enabled: bool = False
    days: int | None = None


@dataclass(slots=True)
class Logging:
    version: str = "1.0"
    delete: bool = False
    read: bool = False
    write: bool = False
    retention: RetentionPolicy = field(default_factory=RetentionPolicy)


@dataclass(slots=True)
class Metrics:
    version: str = "1.0"
    enabled: bool = False
    include_apis: bool | None = None
    retention: RetentionPolicy = field(default_factory=RetentionPolicy)


@dataclass(slots=True)
class CorsRule:
    allowed_origins: list[str]
    allowed_methods: list[str]
    allowed_headers: list[str]
    exposed_headers: list[str]
    max_age_seconds: int


@dataclass(slots=True)
class ServiceProperties:
    logging: Logging = field(default_factory=Logging)
    hour_metrics: Metrics = field(default_factory=Metrics)
    minute_metrics: Metrics = field(default_factory=Metrics)
    cors: list[CorsRule] = field(default_factory=list)


def encode_service_properties(properties: ServiceProperties) -> bytes:
    return orjson.dumps(asdict(properties))


def _retention(data: dict[str, Any]) -> RetentionPolicy:
    return RetentionPolicy(**data)


def decode_service_properties(blob: bytes | None) -> ServiceProperties:
    if not blob:
        return ServiceProperties()
    data = orjson.loads(blob)
    logging = data["logging"]
    return ServiceProperties(
        logging=Logging(**{**logging, "retention": _retention(logging["retention"])}),
        hour_metrics=Metrics(
            **{**data["hour_metrics"], "retention": _retention(data["hour_metrics"]["retention"])}
        ),
        minute_metrics=Metrics(
            **{**data["minute_metrics"], "retention": _retention(data["minute_metrics"]["retention"])}
        ),
        cors=[CorsRule(**rule) for rule in data["cors"]],
    )
