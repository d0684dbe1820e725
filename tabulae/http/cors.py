"""CORS as the storage services do it: preflights and actual requests answered from the account's rules."""

from __future__ import annotations

from tabulae.http.messages import Headers, Response
from tabulae.model.errors import TableError
from tabulae.model.policies import CorsRule


def _header_allowed(header: str, allowed: list[str]) -> bool:
    header = header.lower()
    for pattern in allowed:
        pattern = pattern.lower()
        if pattern == "*" or pattern == header or (pattern.endswith("*") and header.startswith(pattern[:-1])):
            return True
    return False


def _origin_allowed(origin: str, rule: CorsRule) -> bool:
    return any(o == "*" or o.lower() == origin.lower() for o in rule.allowed_origins)


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
        raise TableError("InvalidHeaderValue", "A required CORS header is not present.")
    requested = [
        h.strip() for h in request_headers.get("access-control-request-headers", "").split(",") if h.strip()
    ]
    rule = match_rule(rules, origin, method, requested)
    if rule is None:
        raise TableError("CorsPreflightFailure")
    headers = _allow_origin(rule, origin)
    headers.append((b"access-control-allow-methods", method.upper().encode("latin-1")))
    if requested:
        headers.append((b"access-control-allow-headers", ",".join(requested).encode("latin-1")))
    headers.append((b"access-control-max-age", str(rule.max_age_seconds).encode()))
    return Response(200, headers)


def actual_headers(rules: list[CorsRule], origin: str, method: str, exposed_by_service: str) -> Headers:
    """CORS headers for a normal response to a request that carried ``Origin``; none without a
    match. ``exposed_by_service`` lists the service's own response headers, which are exposed
    besides those the rule names."""
    rule = match_rule(rules, origin, method, [])
    if rule is None:
        return []
    exposed = (
        ",".join([*rule.exposed_headers, exposed_by_service]) if rule.exposed_headers else exposed_by_service
    )
    headers = _allow_origin(rule, origin)
    headers.append((b"access-control-expose-headers", exposed.encode("latin-1")))
    headers.append((b"vary", b"Origin"))
    return headers
