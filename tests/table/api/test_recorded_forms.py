"""The exact text real Azure writes, where its recorded responses show it.

The recordings are the Python SDK's, in ``Azure/azure-sdk-assets``
(``python/sdk/tables/azure-data-tables/tests/recordings/``):

* ``test_encoder.pyTestTableEncodertest_encoder_create_entity_type_conversion.json``: a
  Timestamp of ``2024-05-04T00:30:05.148508Z`` (six digits: the seventh, a zero, is dropped)
  with the ETag ``W/"datetime'2024-05-04T00%3A30%3A05.148508Z'"``, and the DateTime sent as
  ``2022-04-01T09:30:45.000000Z`` read back as ``2022-04-01T09:30:45Z``;
* ``test_table_entity.pyTestTableEntitytest_datetime_milliseconds.json``: ``…23.283000Z`` read
  back as ``…23.283Z`` and ``…00:00:00.000000Z`` as ``…00:00:00Z``;
* ``test_encoder.pyTestTableEncodertest_encoder_batch.json``: the same forms in ``$batch``
  responses, and a ``null`` property dropped.

Blob and container ETags are the Last-Modified time in .NET ticks as upper-case hex
(``"0x8DCBC0685968144"`` with a Last-Modified of 2024-08-14 02:12:17, from ``az`` output), quoted
in headers and in a container listing, bare in a blob listing (List Blobs / List Containers
recordings).

So Timestamp, ETag and DateTime values all drop the fraction's trailing zeros (and the point
with them); nothing pads them to seven digits. The error messages' ``Time:`` line, by contrast,
always has seven (``…06.0684720Z``), which ``test_protocol`` holds.

``$filter`` keywords are lower case and case-sensitive ("All parts of the filter string are
case-sensitive", Querying tables and entities): ``True`` is a property name, so ``X eq True``
compares two properties, which the service does not implement (501). The typed-literal
prefixes and suffixes are read in any case, as OData's lexer reads them.

A JSON ``null`` is never stored (the service keeps no null properties), with or without an
``@odata.type``; the annotation must still name one of the eight types.

Every test runs against each store (the session server is parametrised over them).
"""

from __future__ import annotations

import asyncio
import json
import re
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any

import pytest
from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError, ResourceModifiedError
from azure.data.tables import TableClient, UpdateMode
from azure.data.tables.aio import TableClient as AsyncTableClient
from azure.storage.blob import ContainerClient

from tests.blobhttp import BlobHttp
from tests.rawhttp import (
    JSON_FULL,
    JSON_MINIMAL,
    JSON_NOMETADATA,
    RawClient,
    assert_error,
    etag_from_timestamp,
    py_keys,
    sdk_error_code,
)
from tests.serverproc import ServerProcess
from tests.table.api.test_batch_raw import (
    assert_failure,
    email_parts,
    insert,
    js_batch,
    js_parts,
    merge,
    python_batch,
    send,
)

# Azure's Timestamp: no trailing zero in the fraction, and no empty fraction.
TIMESTAMP_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{0,6}[1-9])?Z$")

# (sent with "@odata.type": "Edm.DateTime", what Azure writes back)
DATETIME_FORMS = [
    ("2022-04-01T09:30:45.000000Z", "2022-04-01T09:30:45Z"),  # recorded
    ("2011-11-04T00:05:23.283000Z", "2011-11-04T00:05:23.283Z"),  # recorded
    ("1973-10-04T00:00:00.000000Z", "1973-10-04T00:00:00Z"),  # recorded
    ("2024-01-01T00:00:00Z", "2024-01-01T00:00:00Z"),
    ("2024-01-01T00:00:00.1Z", "2024-01-01T00:00:00.1Z"),
    ("2024-01-01T00:00:00.1000000Z", "2024-01-01T00:00:00.1Z"),
    ("2024-01-01T00:00:00.0000010Z", "2024-01-01T00:00:00.000001Z"),
    ("2020-01-02T03:04:05.1234567Z", "2020-01-02T03:04:05.1234567Z"),
]

LEVELS = [JSON_NOMETADATA, JSON_MINIMAL, JSON_FULL]


def _entity(rk: str, **props: Any) -> dict[str, Any]:
    return {"PartitionKey": "p", "RowKey": rk, **props}


def _dates() -> dict[str, Any]:
    body: dict[str, Any] = {}
    for index, (sent, _) in enumerate(DATETIME_FORMS):
        body[f"d{index}"] = sent
        body[f"d{index}@odata.type"] = "Edm.DateTime"
    return body


def _assert_dates(body: dict[str, Any]) -> None:
    got = {name: body[name] for name in body if re.fullmatch(r"d\d+", name)}
    assert got == {f"d{index}": written for index, (_, written) in enumerate(DATETIME_FORMS)}


def _assert_stamp(body: dict[str, Any], etag: str | None) -> None:
    """The Timestamp is in Azure's form and the ETag is built from that very text."""
    assert TIMESTAMP_RE.match(body["Timestamp"]), body["Timestamp"]
    assert etag == etag_from_timestamp(body["Timestamp"])
    if "odata.etag" in body:
        assert body["odata.etag"] == etag


# ------------------------------------------------------------------------------- DateTime values


@pytest.mark.parametrize("accept", LEVELS)
def test_datetime_values_are_written_as_azure_writes_them(
    raw: RawClient, table: TableClient, accept: str
) -> None:
    name = table.table_name
    created = raw.insert(name, _entity("r", **_dates()), {"Accept": accept})
    assert created.status == 201, created
    _assert_dates(created.json())
    _assert_stamp(created.json(), created.header("ETag"))

    got = raw.get_entity(name, "p", "r", {"Accept": accept})
    assert got.status == 200, got
    _assert_dates(got.json())
    _assert_stamp(got.json(), got.header("ETag"))

    listed = raw.request("GET", f"{name}()", headers={"Accept": accept})
    assert listed.status == 200, listed
    (row,) = listed.json()["value"]
    _assert_dates(row)
    assert row["Timestamp"] == got.json()["Timestamp"]


def test_datetime_values_in_a_batch_response(raw: RawClient, table: TableClient) -> None:
    """A batch insert echoes the entity (no ``Prefer``): its DateTimes and Timestamp are Azure's."""
    name = table.table_name
    response = send(raw, python_batch(raw.endpoint, [insert(name, "b", **_dates())]))
    assert response.status == 202, response
    parts, _ = email_parts(response)
    (part,) = parts
    assert part.status == 201, part
    body = json.loads(part.body)
    _assert_dates(body)
    _assert_stamp(body, part.headers["ETag"])


def test_sdk_reads_the_service_text(server: ServerProcess, table: TableClient) -> None:
    """The SDK keeps the service's text of a DateTime (``tables_service_value``) and its ETag."""
    table.create_entity(_entity("s", when=datetime(2022, 4, 1, 9, 30, 45, tzinfo=UTC)))
    entity = table.get_entity("p", "s")
    assert entity["when"].tables_service_value == "2022-04-01T09:30:45Z"
    stamp = entity.metadata["timestamp"].tables_service_value
    assert TIMESTAMP_RE.match(stamp), stamp
    assert entity.metadata["etag"] == etag_from_timestamp(stamp)

    async def run() -> None:
        async with AsyncTableClient.from_connection_string(
            server.connection_string, table.table_name
        ) as client:
            await client.create_entity(_entity("a", when=datetime(2011, 11, 4, 0, 5, 23, 283000, tzinfo=UTC)))
            got = await client.get_entity("p", "a")
            assert got["when"].tables_service_value == "2011-11-04T00:05:23.283Z"
            stamp = got.metadata["timestamp"].tables_service_value
            assert TIMESTAMP_RE.match(stamp), stamp
            assert got.metadata["etag"] == etag_from_timestamp(stamp)

    asyncio.run(run())


# ------------------------------------------------------------------------------ Timestamp, ETag

_TRIMMED_TRIES = 400  # a write's Timestamp ends in a zero tick one time in ten (or always)


def _fraction(etag: str) -> str:
    match = re.search(r"%3A\d\d(?:\.(\d+))?Z'", etag)
    assert match is not None, etag
    return match.group(1) or ""


def test_timestamps_drop_trailing_zeros_and_their_etags_match(raw: RawClient, table: TableClient) -> None:
    """Write until a version's Timestamp has a trailing zero tick: it comes out shorter, as on
    Azure, everywhere it is written, and its ETag is a working If-Match."""
    name = table.table_name
    path = name + py_keys("p", "t")
    trimmed = None
    for attempt in range(_TRIMMED_TRIES):
        response = raw.request("PUT", path, _entity("t", n=attempt))
        assert response.status == 204, response
        etag = response.header("ETag")
        assert etag is not None and not _fraction(etag).endswith("0"), etag
        if len(_fraction(etag)) < 7:
            trimmed = etag
            break
    assert trimmed is not None, f"no Timestamp with a trailing zero tick in {_TRIMMED_TRIES} writes"

    for accept in LEVELS:
        got = raw.get_entity(name, "p", "t", {"Accept": accept})
        assert got.header("ETag") == trimmed
        _assert_stamp(got.json(), trimmed)
    listed = raw.request("GET", f"{name}()?$filter=RowKey%20eq%20't'")
    (row,) = listed.json()["value"]
    _assert_stamp(row, trimmed)

    # The trimmed ETag is the one If-Match must carry; the old version's no longer matches.
    updated = raw.request("MERGE", path, {"m": 1}, {"If-Match": trimmed})
    assert updated.status == 204, updated
    stale = raw.request("MERGE", path, {"m": 2}, {"If-Match": trimmed})
    assert_error(stale, 412, "UpdateConditionNotSatisfied")


def test_sdk_if_match_with_the_etag_it_was_given(server: ServerProcess, table: TableClient) -> None:
    """The ETag the SDK holds (from a read, a write, or a batch) is accepted back, sync and aio."""
    table.create_entity(_entity("e", v=1))
    read = table.get_entity("p", "e")
    written = table.update_entity(
        _entity("e", v=2),
        mode=UpdateMode.MERGE,
        etag=read.metadata["etag"],
        match_condition=MatchConditions.IfNotModified,
    )
    with pytest.raises(ResourceModifiedError):
        table.update_entity(
            _entity("e", v=3), etag=read.metadata["etag"], match_condition=MatchConditions.IfNotModified
        )
    (result,) = table.submit_transaction(
        [
            (
                "update",
                _entity("e", v=4),
                {"etag": written["etag"], "match_condition": MatchConditions.IfNotModified},
            )
        ]
    )
    assert table.get_entity("p", "e").metadata["etag"] == result["etag"]

    async def run() -> None:
        async with AsyncTableClient.from_connection_string(
            server.connection_string, table.table_name
        ) as client:
            got = await client.get_entity("p", "e")
            assert got.metadata["etag"] == result["etag"]
            await client.delete_entity(
                "p", "e", etag=got.metadata["etag"], match_condition=MatchConditions.IfNotModified
            )

    asyncio.run(run())
    assert list(table.list_entities()) == []


# ---------------------------------------------------------------------------- $filter literals


@pytest.fixture
def flags(table: TableClient) -> TableClient:
    table.create_entity(_entity("1", b=True))
    table.create_entity(_entity("2", b=False))
    table.create_entity({**_entity("3", b=True), "True": True})
    return table


@pytest.mark.parametrize("literal", ["True", "TRUE", "tRUE", "False", "FALSE", "Null", "NULL"])
def test_capitalised_keywords_are_property_names(raw: RawClient, flags: TableClient, literal: str) -> None:
    """``b eq True`` compares two properties: 501 NotImplemented, as for ``b eq c``."""
    response = raw.request("GET", f"{flags.table_name}()?$filter=b%20eq%20{literal}")
    assert_error(response, 501, "NotImplemented")
    with pytest.raises(HttpResponseError) as info:
        list(flags.query_entities(f"b eq {literal}"))
    assert info.value.status_code == 501
    assert sdk_error_code(info.value) == "NotImplemented"


def test_lower_case_keywords_and_a_property_named_true(
    raw: RawClient, server: ServerProcess, flags: TableClient
) -> None:
    def keys(query: str) -> list[str]:
        return [e["RowKey"] for e in flags.query_entities(query)]

    assert keys("b eq true") == ["1", "3"]
    assert keys("b eq false") == ["2"]
    assert keys("True") == ["3"]  # a bare property name: the Boolean property "True"
    assert keys("True eq true and b") == ["3"]
    response = raw.request("GET", f"{flags.table_name}()?$filter=b%20EQ%20true")
    assert_error(response, 400, "InvalidInput")

    async def run() -> None:
        async with AsyncTableClient.from_connection_string(
            server.connection_string, flags.table_name
        ) as client:
            assert [e["RowKey"] async for e in client.query_entities("b eq true")] == ["1", "3"]
            with pytest.raises(HttpResponseError) as info:
                [e async for e in client.query_entities("b eq True")]
            assert info.value.status_code == 501

    asyncio.run(run())


@pytest.mark.parametrize(
    "query",
    [
        "d eq datetime'2024-01-01T00:00:00Z'",
        "d eq DateTime'2024-01-01T00:00:00Z'",
        "d eq DATETIME'2024-01-01T00:00:00.0000000Z'",
        "g eq guid'0f8fad5b-d9cb-469f-a165-70867728950e'",
        "g eq GUID'0F8FAD5B-D9CB-469F-A165-70867728950E'",
        "x eq X'0aff'",
        "x eq x'0AFF'",
        "x eq binary'0aff'",
        "x eq Binary'0aff'",
        "l eq 5L",
        "l eq 5l",
        "f eq 1.5",
        "f eq 1.5d",
        "f eq 1.5D",
    ],
)
def test_typed_literal_prefixes_and_suffixes_in_any_case(
    raw: RawClient, table: TableClient, query: str
) -> None:
    body = _entity(
        "1",
        d="2024-01-01T00:00:00Z",
        g="0f8fad5b-d9cb-469f-a165-70867728950e",
        x="Cv8=",
        l="5",
        f=1.5,
        **{
            "d@odata.type": "Edm.DateTime",
            "g@odata.type": "Edm.Guid",
            "x@odata.type": "Edm.Binary",
            "l@odata.type": "Edm.Int64",
        },
    )
    assert raw.insert(table.table_name, body).status == 201
    assert [e["RowKey"] for e in table.query_entities(query)] == ["1"]


# --------------------------------------------------------------------------------- typed nulls

TYPES = [
    "Edm.String",
    "Edm.Boolean",
    "Edm.Int32",
    "Edm.Int64",
    "Edm.Double",
    "Edm.DateTime",
    "Edm.Guid",
    "Edm.Binary",
]


def _typed_nulls() -> dict[str, Any]:
    body: dict[str, Any] = {}
    for index, kind in enumerate(TYPES):
        body[f"n{index}@odata.type"] = kind
        body[f"n{index}"] = None
    return body


def _user(raw: RawClient, table: str, rk: str) -> dict[str, Any]:
    got = raw.get_entity(table, "p", rk, {"Accept": JSON_NOMETADATA})
    assert got.status == 200, got
    return {k: v for k, v in got.json().items() if k not in ("PartitionKey", "RowKey", "Timestamp")}


def test_typed_nulls_are_not_stored(raw: RawClient, table: TableClient) -> None:
    """Insert, replace, upsert: a typed null is dropped like an untyped one."""
    name = table.table_name
    created = raw.insert(name, _entity("i", keep=1, **_typed_nulls()))
    assert created.status == 201, created
    assert _user(raw, name, "i") == {"keep": 1}

    for method, if_match in (("PUT", "*"), ("PUT", None), ("MERGE", None)):
        rk = f"{method}{if_match}"
        headers = {"If-Match": if_match} if if_match else {}
        if if_match:
            assert raw.insert(name, _entity(rk, old=1)).status == 201
        response = raw.request(method, name + py_keys("p", rk), {"keep": 2, **_typed_nulls()}, headers)
        assert response.status == 204, (method, if_match, response)
        assert _user(raw, name, rk) == {"keep": 2}


def test_typed_null_in_a_merge_leaves_the_property(raw: RawClient, table: TableClient) -> None:
    name = table.table_name
    stored = {f"n{index}": value for index, value in enumerate(["s", True, 1, "2", 1.5, None, None, None])}
    stored = {k: v for k, v in stored.items() if v is not None}
    assert raw.insert(name, _entity("m", **stored, **{"n3@odata.type": "Edm.Int64"})).status == 201
    response = raw.request("MERGE", name + py_keys("p", "m"), {"x": 1, **_typed_nulls()}, {"If-Match": "*"})
    assert response.status == 204, response
    assert _user(raw, name, "m") == {**stored, "x": 1}


def test_typed_nulls_in_a_batch(raw: RawClient, table: TableClient) -> None:
    name = table.table_name
    assert raw.insert(name, _entity("m", n0="kept")).status == 201
    ops = [insert(name, "i", keep=1, **_typed_nulls()), merge(name, "m", keep=2, **_typed_nulls())]
    # The JavaScript SDK's bytes: it writes {value: null, type: "String"} as a typed null.
    response = send(raw, js_batch(raw.endpoint, ops))
    assert response.status == 202, response
    assert [part.status for part in js_parts(response)] == [204, 204]
    assert _user(raw, name, "i") == {"keep": 1}
    assert _user(raw, name, "m") == {"n0": "kept", "keep": 2}


def test_a_null_with_an_unknown_type_is_refused(raw: RawClient, table: TableClient) -> None:
    """The annotation is read whatever the value: an unknown type is 400, as with a value."""
    name = table.table_name
    for body in (
        _entity("u", x=None, **{"x@odata.type": "Edm.Foo"}),
        _entity("u", y=1, x=None, **{"x@odata.type": "Edm.Int16"}),
    ):
        assert_error(raw.insert(name, body), 400, "InvalidInput")
        assert_error(raw.insert(name, {**body, "x": "v"}), 400, "InvalidInput")
    merged = raw.request("MERGE", name + py_keys("p", "u"), {"x": None, "x@odata.type": "edm.string"})
    assert_error(merged, 400, "InvalidInput")
    op = insert(name, "b", x=None, **{"x@odata.type": "Edm.Foo"})
    assert_failure(send(raw, js_batch(raw.endpoint, [op])), 0, 400, "InvalidInput")
    assert list(table.list_entities()) == []


# ------------------------------------------------------------------------------------ blob ETags

BLOB_ETAG_RE = re.compile(r"0x8D[0-9A-F]{13}")
_DOTNET_EPOCH = datetime(1, 1, 1, tzinfo=UTC)


def _etag_second(etag: str) -> datetime:
    """The whole second of the .NET ticks an Azure blob or container ETag holds."""
    assert BLOB_ETAG_RE.fullmatch(etag), etag
    return _DOTNET_EPOCH + timedelta(seconds=int(etag, 16) // 10_000_000)


def test_blob_and_container_etags_are_ticks_of_last_modified(
    server: ServerProcess, container: ContainerClient
) -> None:
    http = BlobHttp(server.blob_port)
    name = container.container_name
    put = http.request("PUT", f"/{name}/b", {"x-ms-blob-type": "BlockBlob"}, b"data")
    assert put.status == 201, put
    for path in (f"/{name}?restype=container", f"/{name}/b"):
        reply = http.request("HEAD", path)
        assert reply.status == 200, reply
        etag = reply.headers["etag"]
        assert etag.startswith('"') and etag.endswith('"'), etag
        assert _etag_second(etag[1:-1]) == parsedate_to_datetime(reply.headers["last-modified"])

    blobs = http.request("GET", f"/{name}?restype=container&comp=list")
    (blob_etag,) = re.findall(rb"<Etag>([^<]*)</Etag>", blobs.body)
    assert BLOB_ETAG_RE.fullmatch(blob_etag.decode()), blob_etag  # bare in a blob listing
    containers = http.request("GET", f"/?comp=list&prefix={name}")
    (container_etag,) = re.findall(rb"<Etag>([^<]*)</Etag>", containers.body)
    assert re.fullmatch(rb'"0x8D[0-9A-F]{13}"', container_etag), (
        container_etag
    )  # quoted in a container listing
