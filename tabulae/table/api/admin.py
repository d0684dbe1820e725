"""Handlers for the XML operations: table ACLs, service properties and service stats."""

from __future__ import annotations

from email.utils import formatdate

from tabulae.http.documents import (
    parse_acl,
    parse_service_properties,
    render_acl,
    render_service_properties,
    render_stats,
)
from tabulae.http.errors import UTF8_BOM, XML_CONTENT_TYPE
from tabulae.http.messages import Response
from tabulae.table.api.handlers import TableCall


def _xml(body: bytes) -> Response:
    return Response(200, [(b"content-type", XML_CONTENT_TYPE)], body)


async def get_acl(call: TableCall) -> Response:
    """After a byte order mark, as Azure's Table service writes it (the Go SDK's recording
    go/sdk/data/aztables/testdata/recordings/TestSetMultipleAccessPolicies.json, 2019-02-02)."""
    service, route = call.service, call.route
    assert route.table is not None
    return _xml(UTF8_BOM + render_acl(await service.get_acl(route.account, route.table)))


async def set_acl(call: TableCall) -> Response:
    service, request, route = call.service, call.request, call.route
    assert route.table is not None
    identifiers = parse_acl(request.body)
    await service.set_acl(route.account, route.table, identifiers)
    return Response(204)


async def get_service_properties(call: TableCall) -> Response:
    """The document after a byte order mark, as Azure's Table service writes it (the .NET SDK's
    recording TableServiceClientLiveTests(Storage)/ValidateAccountSasCredentialsWithResourceTypes,
    x-ms-version 2020-12-06), like the Blob and Queue services'."""
    service, route = call.service, call.route
    return _xml(UTF8_BOM + render_service_properties(await service.get_service_properties(route.account)))


async def set_service_properties(call: TableCall) -> Response:
    """202 with no Content-Length, its empty body chunked, as Azure's Table service answers it
    (azure-data-tables' recording test_table_service_properties.pyTestTableServicePropertiestest_
    table_service_properties.json, x-ms-version 2025-07-05, and the az CLI's `storage logging
    update` in Azure/azure-cli's storage recording test_logging_operations.yaml, 2017-04-17:
    Date, Transfer-Encoding: chunked and x-ms-version), where the Blob and Queue services say
    Content-Length: 0 (the same CLI recording)."""
    service, request, route = call.service, call.request, call.route
    current = await service.get_service_properties(route.account)
    await service.set_service_properties(route.account, parse_service_properties(request.body, current))
    return Response(202, unsized=True)


async def get_service_stats(call: TableCall) -> Response:
    """After a byte order mark too (go/sdk/data/aztables/testdata/recordings/TestGetStatistics.json)."""
    return _xml(UTF8_BOM + render_stats(formatdate(usegmt=True)))
