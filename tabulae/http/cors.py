"""CORS as the storage services do it: preflights and actual requests answered from the account's rules."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from tabulae.http.messages import Headers, Response
from tabulae.model.errors import ServiceError
from tabulae.model.policies import CorsRule


def _header_allowed(header: str, allowed: list[str]) -> bool:
    header = header.lower()
    for pattern in allowed:
        pattern = pattern.lower()
        if pattern == "*" or pattern == header or (pattern.endswith("*") and header.startswith(pattern[:-1])):
            return True
    return False


def _origin_allowed(origin: str, rule: CorsRule) -> bool:
    return any(_origin_matches(origin, allowed) for allowed in rule.allowed_origins)


def _origin_matches(origin: str, allowed: str) -> bool:
    """Whether ``origin`` is one a rule's ``allowed`` entry names: every origin (``*``), that
    origin, or every subdomain of a domain (``http://*.contoso.com``, the form "CORS support for
    Azure Storage" shows in its sample rule; a wildcard stands only for the leftmost labels, as
    Microsoft's storage team describes it in MicrosoftDocs/azure-docs#117277). Compared without
    regard to case, as host names are."""
    if allowed == "*":
        return True
    origin, allowed = origin.lower(), allowed.lower()
    if "*" not in allowed:
        return origin == allowed
    before, _, after = allowed.partition("*")
    if "*" in after or not after.startswith(".") or (before and not before.endswith("//")):
        return False  # a wildcard that is not a whole leftmost label names nothing
    middle = origin[len(before) : len(origin) - len(after)]
    fits = origin.startswith(before) and origin.endswith(after) and len(origin) > len(before) + len(after)
    return fits and "/" not in middle and ":" not in middle


def match_rule(rules: list[CorsRule], origin: str, method: str, headers: list[str]) -> CorsRule | None:
    """The first rule allowing this origin, method and every requested header."""
    for rule in rules:
        if (
            _origin_allowed(origin, rule)
            and method.upper() in rule.allowed_methods
            and all(_header_allowed(h, rule.allowed_headers) for h in headers)
        ):
            return rule
    return None


def _allow_origin(rule: CorsRule, origin: str) -> Headers:
    if "*" in rule.allowed_origins:
        return [(b"access-control-allow-origin", b"*")]
    return [
        (b"access-control-allow-origin", origin.encode("latin-1")),
        (b"access-control-allow-credentials", b"true"),
    ]


def preflight(rules: list[CorsRule], request_headers: dict[str, str]) -> Response:
    """Answer ``OPTIONS``: 200 with the allowances of the first matching rule, else 403."""
    origin = request_headers.get("origin")
    method = request_headers.get("access-control-request-method")
    if not origin or not method:
        raise ServiceError("InvalidHeaderValue", "A required CORS header is not present.")
    requested = [
        h.strip() for h in request_headers.get("access-control-request-headers", "").split(",") if h.strip()
    ]
    rule = match_rule(rules, origin, method, requested)
    if rule is None:
        raise ServiceError("CorsPreflightFailure")
    headers = _allow_origin(rule, origin)
    headers.append((b"access-control-allow-methods", method.upper().encode("latin-1")))
    if requested:
        headers.append((b"access-control-allow-headers", ",".join(requested).encode("latin-1")))
    headers.append((b"access-control-max-age", str(rule.max_age_seconds).encode()))
    return Response(200, headers)


VARYING_METHODS = frozenset({"GET", "HEAD"})  # the only methods whose responses carry Vary: Origin
_VARY = (b"vary", b"Origin")


def actual_headers(
    rules: list[CorsRule],
    origin: str | None,
    method: str,
    exposed_by_service: str,
    response_headers: Headers,
) -> Headers:
    """CORS headers for the response to an actual (non-preflight) request, by Azure's table
    ("CORS support for the Azure Storage services", "Understanding how the Vary header is set").

    No rules, no headers. A matching rule adds ``Access-Control-Allow-Origin`` (``*`` for a rule
    allowing every origin, else the origin, with credentials) and ``Access-Control-Expose-Headers``
    (``exposed_by_service``, the service's own response headers, and the rule's list with each
    wildcard entry replaced by the names of this response's headers it matches: see
    :func:`exposed_names`). For GET and
    HEAD, ``Vary: Origin`` is added whenever the answer depends on the origin: a rule for exact
    origins matched, or none matched; never with a ``*`` rule's answer. A request without
    ``Origin`` only gets a ``*`` rule's headers (exposing that rule's own list alone, when it has
    one), or ``Vary``. Other methods never get ``Vary``.
    """
    if not rules:
        return []
    method = method.upper()
    varies = method in VARYING_METHODS
    if origin is None:
        rule = next((r for r in rules if "*" in r.allowed_origins and method in r.allowed_methods), None)
    else:
        rule = match_rule(rules, origin, method, [])
    if rule is None:
        return [_VARY] if varies else []
    # Without Origin a rule that names headers exposes those alone: Azure answered the Java SDK's
    # GETs (a '*' rule exposing x-ms-client-request-id, x-ms-version 2023-08-03: Get Blob Service
    # Properties, Get Blob, and 400s such as Get Blob Service Stats at the primary) with
    # 'Access-Control-Expose-Headers: x-ms-client-request-id'. A browser's request always has
    # an Origin; its answer, and a rule naming none, keep the service's own headers (unrecorded).
    own = exposed_by_service if origin is not None or not rule.exposed_headers else ""
    exposed = exposed_names(rule.exposed_headers, own, response_headers)
    headers = _allow_origin(rule, origin or "*")
    headers.append((b"access-control-expose-headers", exposed.encode("latin-1")))
    if varies and "*" not in rule.allowed_origins:
        headers.append(_VARY)
    return headers


def exposed_names(entries: list[str], exposed_by_service: str, response_headers: Headers) -> str:
    """``Access-Control-Expose-Headers`` for a rule's ``ExposedHeaders`` entries: the service's
    own headers, each literal entry, and for a wildcard entry (``*``, or a prefix such as
    ``x-ms-meta-*``) the names of the response's headers it matches, never the pattern itself.
    Azure's answers to browsers name headers only (its recordings list ``x-ms-meta-a``,
    ``x-ms-version-id``, ``Content-Disposition``... as each response has them), and a browser
    reads a pattern other than a lone ``*`` as a literal name, so that metadata, checksums
    (``x-ms-content-crc64``) and version ids would stay hidden from the page's script."""
    if not entries:
        return exposed_by_service
    names = [exposed_by_service] if exposed_by_service else []
    seen = {name.lower() for name in exposed_by_service.split(",")}
    for entry in entries:
        if not entry.endswith("*"):
            if entry.lower() not in seen:
                seen.add(entry.lower())
                names.append(entry)
            continue
        prefix = entry[:-1].lower().encode("latin-1")
        for raw, _ in response_headers:
            lowered = raw.lower()
            if lowered.startswith(prefix) and not lowered.startswith(b"access-control-"):
                name = raw.decode("latin-1")
                if name.lower() not in seen:
                    seen.add(name.lower())
                    names.append(name)
    return ",".join(names)


class RulesCache:
    """An account's CORS rules, kept for ``ttl`` seconds, for the requests that need them on
    every call (a GET without ``Origin`` may still get ``Vary``). Azure itself takes up to 30 s to
    apply new service properties; here a worker forgets an account's rules when it sets them,
    and other workers see the change within ``ttl``."""

    def __init__(self, load: Callable[[str], Awaitable[list[CorsRule]]], ttl: float = 1.0) -> None:
        self._load = load
        self._ttl = ttl
        self._entries: dict[str, tuple[float, list[CorsRule]]] = {}

    def peek(self, account: str) -> list[CorsRule] | None:
        """The account's rules if they were read less than ``ttl`` ago (no await: the hot path)."""
        entry = self._entries.get(account)
        if entry is not None and entry[0] > time.monotonic():
            return entry[1]
        return None

    async def get(self, account: str) -> list[CorsRule]:
        rules = self.peek(account)
        if rules is None:
            rules = await self._load(account)
            if len(self._entries) < 4096 or account in self._entries:
                self._entries[account] = (time.monotonic() + self._ttl, rules)
        return rules

    def forget(self, account: str) -> None:
        self._entries.pop(account, None)
