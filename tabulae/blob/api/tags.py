"""Handlers of blob index tags: Set Blob Tags, Get Blob Tags, and Find Blobs by Tags on the
account and in a container; and ``x-ms-tags``, read for the writes that set tags with the blob.

The documents are :mod:`.tag_formats`; the rules (what a tag may be, the filter language) are
:mod:`tabulae.blob.rules.tags`; the service keeps the engine's tag index in step.
"""

from __future__ import annotations

from dataclasses import replace

from tabulae.blob.api.call import Call
from tabulae.blob.api.containers import max_results, xml
from tabulae.blob.api.headers import conditions, version_or_snapshot
from tabulae.blob.api.tag_formats import parse_tags_document, render_found_blobs, render_tags_document
from tabulae.blob.rules.checksums import Checksums, decode_digest
from tabulae.blob.rules.conditions import Conditions
from tabulae.blob.rules.tags import parse_tags_header
from tabulae.http.messages import Response
from tabulae.model.errors import ServiceError


def tag_conditions(headers: dict[str, str]) -> Conditions:
    """Set and Get Blob Tags take the blob's conditions as ``x-ms-blob-if-match``,
    ``x-ms-blob-if-none-match``, ``x-ms-blob-if-modified-since`` and
    ``x-ms-blob-if-unmodified-since`` (the plain ``If-*`` headers would be the tags
    subresource's own), beside ``x-ms-if-tags``."""
    return replace(conditions(headers, "x-ms-blob-"), if_tags=conditions(headers).if_tags)


def header_tags(headers: dict[str, str]) -> dict[str, str] | None:
    """The tags of ``x-ms-tags`` (None without the header)."""
    value = headers.get("x-ms-tags")
    return None if value is None else parse_tags_header(value)


async def set_blob_tags(call: Call) -> Response:
    headers = call.request.headers
    body = await call.document()
    md5 = decode_digest(headers.get("content-md5"), 16, "Content-MD5")
    crc64 = decode_digest(headers.get("x-ms-content-crc64"), 8, "x-ms-content-crc64")
    if md5 is not None or crc64 is not None:
        sums = Checksums(md5=md5 is not None, crc64=crc64 is not None)
        sums.update(body)
        sums.verify(md5, crc64)
    tags = parse_tags_document(body)
    snapshot = version_or_snapshot(call.request.query)
    await call.service.set_blob_tags(call.key, snapshot, tags, tag_conditions(headers), call.lease_id)
    # Azure's 204 carries no Content-Length (the Java SDK's AccessPolicyAsyncTests.
    # uploadFromUrlCopySourceTags[1], x-ms-version 2024-02-04; the Rust SDK's blob_client/
    # test_blob_tags, 2026-04-06), where its 201s and 202s say 0
    return Response(204, unsized=True)


async def get_blob_tags(call: Call) -> Response:
    snapshot = version_or_snapshot(call.request.query)
    tags = await call.service.get_blob_tags(
        call.key, snapshot, tag_conditions(call.request.headers), call.lease_id
    )
    return xml(render_tags_document(tags))


async def find_blobs_by_tags(call: Call) -> Response:
    """Find Blobs by Tags: on the account (``?comp=blobs``) or in the URL's container."""
    query = call.request.query
    where = query.get("where")
    if where is None:
        raise ServiceError("MissingRequiredQueryParameter", fields=(("QueryParameterName", "where"),))
    container = call.route.container or None
    found, next_marker = await call.service.find_blobs_by_tags(
        call.route.account, container, where, query.get("marker") or None, max_results(query)
    )
    blobs = [(blob.container, blob.name, blob.tags) for blob in found]
    return xml(render_found_blobs(call.route.base + "/", where, blobs, next_marker))
