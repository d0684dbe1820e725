"""XML payloads: ACLs (signed identifiers), service properties and service stats.

Parsing validates as the service does: malformed documents and too many elements are
``InvalidXmlDocument``; well-formed documents with a bad value are ``InvalidXmlNodeValue``.
Every body is read by ``http.xmlparse``, which refuses document type declarations in any
encoding and nesting deeper than any of these documents.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from xml.sax.saxutils import escape

from tabulae.http.xmlparse import parse_xml
from tabulae.http.xmlplace import document_error
from tabulae.model import edm
from tabulae.model.errors import ServiceError
from tabulae.model.policies import (
    CORS_METHODS,
    MAX_CORS_RULES,
    MAX_IDENTIFIERS,
    CorsRule,
    Logging,
    Metrics,
    RetentionPolicy,
    ServiceProperties,
    SignedIdentifier,
)

_DECLARATION = '<?xml version="1.0" encoding="utf-8"?>'
TABLE_PERMISSIONS = "raud"  # the letters a stored access policy may grant, per service
QUEUE_PERMISSIONS = "raup"
BLOB_PERMISSIONS = "racwdxyltfmei"  # a container's policies


def parse_document(body: bytes, root: str) -> ET.Element | None:
    """The root element, which must be ``root``, or None for an empty body; raises
    ``InvalidXmlDocument`` on anything malformed (document type declarations included)."""
    if not body.strip():
        return None
    element = parse_xml(body)
    if element.tag != root:
        raise ServiceError("InvalidXmlDocument")
    return element


def text_of(parent: ET.Element, tag: str) -> str | None:
    child = parent.find(tag)
    return None if child is None else (child.text or "").strip()


def xml_bool(value: str | None) -> bool:
    if value is None or value.lower() not in ("true", "false"):
        raise ServiceError("InvalidXmlNodeValue")
    return value.lower() == "true"


def bool_text(value: bool) -> str:
    return "true" if value else "false"


# ------------------------------------------------------------------------------------- ACL


def _acl_time(value: str | None) -> str | None:
    """Validate an ISO 8601 time and keep it in the service's 7-digit fraction form."""
    if value is None or value == "":
        return None
    ticks = edm.parse_datetime(value)
    if ticks is None or not 0 <= ticks <= edm.MAX_DATETIME_TICKS:
        raise ServiceError("InvalidXmlNodeValue")
    seconds, fraction = divmod(ticks, edm.TICKS_PER_SECOND)
    whole = edm.format_datetime(seconds * edm.TICKS_PER_SECOND)[:-1]
    return f"{whole}.{fraction:07d}Z"


# The place Blob's Set Container ACL names when it refuses more than five identifiers: none
# (recorded: the Go SDK's TestContainerSetPermissionsACLMoreThanFive, x-ms-version 2023-11-03,
# ``<LineNumber>0</LineNumber><LinePosition>0</LinePosition><Reason />``, 294 bytes).
NO_PLACE = (("LineNumber", "0"), ("LinePosition", "0"), ("Reason", ""))


def parse_acl(
    body: bytes, permissions: str = TABLE_PERMISSIONS, too_many: tuple[tuple[str, str], ...] = ()
) -> list[SignedIdentifier]:
    """The signed identifiers of a Set ACL body; ``permissions`` are the letters the service's
    policies may grant, ``too_many`` the detail of the InvalidXmlDocument that more than five
    identifiers are (the Blob and Queue services' is ``NO_PLACE``, recorded; the Table service's
    is not recorded)."""
    root = parse_document(body, "SignedIdentifiers")
    if root is None:
        return []
    elements = list(root)
    if len(elements) > MAX_IDENTIFIERS and all(e.tag == "SignedIdentifier" for e in elements):
        raise ServiceError("InvalidXmlDocument", fields=too_many)
    if len(elements) > MAX_IDENTIFIERS or any(e.tag != "SignedIdentifier" for e in elements):
        raise ServiceError("InvalidXmlDocument")
    identifiers: list[SignedIdentifier] = []
    for element in elements:
        identifier = text_of(element, "Id")
        if not identifier or len(identifier) > 64 or any(i.id == identifier for i in identifiers):
            raise ServiceError("InvalidXmlNodeValue")
        policy = element.find("AccessPolicy")
        if policy is None:
            identifiers.append(SignedIdentifier(identifier, has_policy=False))
            continue
        permission = text_of(policy, "Permission")
        if permission and (
            any(c not in permissions for c in permission) or len(set(permission)) != len(permission)
        ):
            raise ServiceError("InvalidXmlNodeValue")
        identifiers.append(
            SignedIdentifier(
                identifier,
                _acl_time(text_of(policy, "Start")),
                _acl_time(text_of(policy, "Expiry")),
                permission or None,
            )
        )
    return identifiers


def render_acl(identifiers: list[SignedIdentifier]) -> bytes:
    if not identifiers:
        return (_DECLARATION + "<SignedIdentifiers />").encode()
    parts = [_DECLARATION, "<SignedIdentifiers>"]
    for identifier in identifiers:
        parts.append(f"<SignedIdentifier><Id>{escape(identifier.id)}</Id>")
        if identifier.policy_given:
            parts.append("<AccessPolicy>")
            if identifier.start:
                parts.append(f"<Start>{identifier.start}</Start>")
            if identifier.expiry:
                parts.append(f"<Expiry>{identifier.expiry}</Expiry>")
            if identifier.permission:
                parts.append(f"<Permission>{identifier.permission}</Permission>")
            parts.append("</AccessPolicy>")
        parts.append("</SignedIdentifier>")
    parts.append("</SignedIdentifiers>")
    return "".join(parts).encode()


# ------------------------------------------------------------------------ service properties


RETENTION_RANGE = "Retention days must be greater than 0 and less than or equal to 365 days."


def _retention(parent: ET.Element, body: bytes) -> RetentionPolicy:
    """A Logging or Metrics retention policy. Days out of 1..365, or missing while enabled, are
    a document error: 400 InvalidXmlDocument (the Table service's answer to a MinuteMetrics policy
    of 366 days, Go SDK recording go/sdk/data/aztables/testdata/recordings/TestRetentionTooLong.json,
    x-ms-version 2019-02-02, in its m:error form with no place), with the place and reason the Blob
    service names for its DeleteRetentionPolicy (``blob/api/formats.py``); the Queue service names
    the same for its Logging policy (the Rust SDK's queue_service_client/test_set_retention_too_long,
    x-ms-version 2026-04-06: line 1, position 542, the node after ``</Days>``); that Blob does too,
    and for the metrics' policies, is assumed (not recorded). Days that are no number stay
    InvalidXmlNodeValue (not recorded)."""
    element = parent.find("RetentionPolicy")
    if element is None:
        return RetentionPolicy()
    enabled = xml_bool(text_of(element, "Enabled"))
    days_text = text_of(element, "Days")
    if not enabled:
        return RetentionPolicy(False, None)
    path = ("StorageServiceProperties", parent.tag, "RetentionPolicy")
    if days_text is None:
        raise document_error(body, path, "Element is missing: Days.", after=False)
    if not days_text.isascii() or not days_text.isdigit():
        raise ServiceError("InvalidXmlNodeValue")
    if not 1 <= int(days_text[:4]) <= 365:
        raise document_error(body, (*path, "Days"), RETENTION_RANGE, after=True)
    return RetentionPolicy(True, int(days_text))


def _logging(element: ET.Element, body: bytes) -> Logging:
    return Logging(
        version=text_of(element, "Version") or "1.0",
        delete=xml_bool(text_of(element, "Delete")),
        read=xml_bool(text_of(element, "Read")),
        write=xml_bool(text_of(element, "Write")),
        retention=_retention(element, body),
    )


def _metrics(element: ET.Element, body: bytes) -> Metrics:
    enabled = xml_bool(text_of(element, "Enabled"))
    include = text_of(element, "IncludeAPIs")
    if enabled and include is None:
        raise ServiceError("InvalidXmlNodeValue")
    return Metrics(
        version=text_of(element, "Version") or "1.0",
        enabled=enabled,
        include_apis=xml_bool(include) if enabled and include is not None else None,
        retention=_retention(element, body),
    )


def _comma_list(value: str | None) -> list[str]:
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def _header_list(value: str | None) -> list[str]:
    """A CORS rule's allowed or exposed headers as Azure keeps them: the exact names first, then
    the prefixes (``x-ms-meta-data*``), each in the order given (Go SDK recording go/sdk/storage/
    azqueue/testdata/recordings/Test/TestSetPropertiesSetCors.json, x-ms-version 2018-03-28, and
    the Blob service's in go/sdk/storage/azdatalake/.../TestAccountDeleteRetentionPolicyEmpty.json:
    ``x-ms-meta-data*,x-ms-meta-target*,x-ms-meta-xyz,x-ms-meta-foo`` reads back as
    ``x-ms-meta-xyz,x-ms-meta-foo,x-ms-meta-data*,x-ms-meta-target*``; the Table service alike in
    python/sdk/tables/azure-data-tables/tests/recordings/test_table_service_properties.py
    TestTableServicePropertiestest_set_cors.json, x-ms-version 2025-07-05)."""
    names = _comma_list(value)
    return [n for n in names if not n.endswith("*")] + [n for n in names if n.endswith("*")]


def _list_element(tag: str, items: list[str]) -> str:
    """``<Tag>a,b</Tag>``, or ``<Tag />`` when empty, as Azure writes a rule's empty header lists
    (the same recordings)."""
    if not items:
        return f"<{tag} />"
    return f"<{tag}>{escape(','.join(items))}</{tag}>"


def _cors_rule(element: ET.Element) -> CorsRule:
    methods = [m.upper() for m in _comma_list(text_of(element, "AllowedMethods"))]
    origins = _comma_list(text_of(element, "AllowedOrigins"))
    max_age = text_of(element, "MaxAgeInSeconds") or "0"
    if (
        not methods
        or any(m not in CORS_METHODS for m in methods)
        or not origins
        or not (max_age.isascii() and max_age.isdigit() and len(max_age) <= 10 and int(max_age) <= 2**31 - 1)
    ):
        raise ServiceError("InvalidXmlNodeValue")
    return CorsRule(
        allowed_origins=origins,
        allowed_methods=methods,
        allowed_headers=_header_list(text_of(element, "AllowedHeaders")),
        exposed_headers=_header_list(text_of(element, "ExposedHeaders")),
        max_age_seconds=int(max_age),
    )


def parse_service_properties(
    body: bytes, current: ServiceProperties, too_many: tuple[tuple[str, str], ...] = ()
) -> ServiceProperties:
    """Elements left out keep their current values; an empty ``<Cors/>`` removes every rule.
    ``too_many`` is the detail of the InvalidXmlDocument that more than five CORS rules are (the
    Queue service's is ``NO_PLACE``: the Rust SDK's queue_service_client/test_set_cors_too_many_rules,
    x-ms-version 2026-04-06; the others' are not recorded)."""
    return service_properties_of(properties_root(body), current, body, too_many)


def properties_root(body: bytes) -> ET.Element:
    """The ``StorageServiceProperties`` element of a Set Service Properties body (required)."""
    root = parse_document(body, "StorageServiceProperties")
    if root is None:
        raise ServiceError("InvalidXmlDocument")
    return root


def service_properties_of(
    root: ET.Element, current: ServiceProperties, body: bytes, too_many: tuple[tuple[str, str], ...] = ()
) -> ServiceProperties:
    """The properties every service shares, read from a parsed document (see above); ``body``,
    the document's bytes, is where a refusal finds its place; ``too_many`` as in
    :func:`parse_service_properties`."""
    result = ServiceProperties(
        current.logging, current.hour_metrics, current.minute_metrics, list(current.cors)
    )
    element = root.find("Logging")
    if element is not None:
        result.logging = _logging(element, body)
    element = root.find("HourMetrics")
    if element is not None:
        result.hour_metrics = _metrics(element, body)
    element = root.find("MinuteMetrics")
    if element is not None:
        result.minute_metrics = _metrics(element, body)
    element = root.find("Cors")
    if element is not None:
        rules = list(element)
        if any(rule.tag != "CorsRule" for rule in rules):
            raise ServiceError("InvalidXmlDocument")
        if len(rules) > MAX_CORS_RULES:
            raise ServiceError("InvalidXmlDocument", fields=too_many)
        result.cors = [_cors_rule(rule) for rule in rules]
    return result


def _render_retention(policy: RetentionPolicy) -> str:
    days = f"<Days>{policy.days}</Days>" if policy.enabled and policy.days is not None else ""
    return f"<RetentionPolicy><Enabled>{bool_text(policy.enabled)}</Enabled>{days}</RetentionPolicy>"


def _render_metrics(tag: str, metrics: Metrics) -> str:
    include = ""
    if metrics.enabled:
        include = f"<IncludeAPIs>{bool_text(bool(metrics.include_apis))}</IncludeAPIs>"
    return (
        f"<{tag}><Version>{escape(metrics.version)}</Version><Enabled>{bool_text(metrics.enabled)}</Enabled>"
        f"{include}{_render_retention(metrics.retention)}</{tag}>"
    )


def render_service_properties(properties: ServiceProperties, extra: str = "") -> bytes:
    """The document of Get Service Properties; ``extra`` holds a service's own elements.

    The order is the one Azure writes, which is not the order of the request document (nor of
    the REST reference's example): Logging's ``Read``, ``Write``, ``Delete`` and a CORS rule's
    ``AllowedMethods`` before ``AllowedOrigins``, as the .NET SDK's recordings of Get Service
    Properties show on the Blob, Queue and Table services (ServiceClientTests/GetPropertiesAsync,
    SetPropertiesAsync; TableServiceClientLiveTests ValidateAccountSasCredentialsWithResourceTypes).
    """
    log = properties.logging
    parts = [
        _DECLARATION,
        "<StorageServiceProperties>",
        f"<Logging><Version>{escape(log.version)}</Version><Read>{bool_text(log.read)}</Read>"
        f"<Write>{bool_text(log.write)}</Write><Delete>{bool_text(log.delete)}</Delete>"
        f"{_render_retention(log.retention)}</Logging>",
        _render_metrics("HourMetrics", properties.hour_metrics),
        _render_metrics("MinuteMetrics", properties.minute_metrics),
    ]
    if properties.cors:
        parts.append("<Cors>")
        for rule in properties.cors:
            parts.append(
                f"<CorsRule><AllowedMethods>{','.join(rule.allowed_methods)}</AllowedMethods>"
                f"<AllowedOrigins>{escape(','.join(rule.allowed_origins))}</AllowedOrigins>"
                f"{_list_element('AllowedHeaders', rule.allowed_headers)}"
                f"{_list_element('ExposedHeaders', rule.exposed_headers)}"
                f"<MaxAgeInSeconds>{rule.max_age_seconds}</MaxAgeInSeconds></CorsRule>"
            )
        parts.append("</Cors>")
    else:
        parts.append("<Cors />")
    parts.append(extra)
    parts.append("</StorageServiceProperties>")
    return "".join(parts).encode()


def render_stats(last_sync: str) -> bytes:
    return (
        f"{_DECLARATION}<StorageServiceStats><GeoReplication><Status>live</Status>"
        f"<LastSyncTime>{last_sync}</LastSyncTime></GeoReplication></StorageServiceStats>"
    ).encode()


def stats_on_primary() -> ServiceError:
    """Get Service Stats sent to the primary endpoint: the statistics are the secondary's, and
    Azure refuses the primary's ``comp=stats`` as a query parameter it does not take there, 400
    InvalidQueryParameterValue naming ``comp`` and ``stats`` with an empty ``<Reason />``
    (recorded for the Blob service: the Java SDK's ServiceApiTests.getStatsError, x-ms-version
    2023-08-03, 376 bytes). The Queue and Blob services answer it so; the Table service in its
    ``m:error`` form."""
    return ServiceError(
        "InvalidQueryParameterValue",
        fields=(("QueryParameterName", "comp"), ("QueryParameterValue", "stats"), ("Reason", "")),
    )
