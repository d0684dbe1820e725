"""Query Blob Contents through the SDKs (``BlobClient.query_blob`` sync and aio, Data Lake's
``DataLakeFileClient.query_file``) on each store, and raw HTTP for what the SDK cannot send:
the dialect over CSV, JSON and Parquet, the output formats (delimited, JSON, Arrow: the Arrow
bytes are the ones Azure answered in Microsoft's recorded test), error messages in the answer
(non-fatal for a record, fatal for the blob), conditions, leases, snapshots, SAS permissions,
and the errors Azure gives before it answers (bad documents and expressions, blob types)."""

from __future__ import annotations

import asyncio
import base64
import io
import uuid
from datetime import UTC, datetime, timedelta

import fastavro
import pytest
from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError, ResourceModifiedError
from azure.storage.blob import (
    BlobClient,
    BlobQueryError,
    BlobSasPermissions,
    ContainerClient,
    DelimitedJsonDialect,
    DelimitedTextDialect,
    generate_blob_sas,
)
from azure.storage.blob._models import ArrowDialect, ArrowType, QuickQueryDialect
from azure.storage.blob.aio import BlobClient as AsyncBlobClient
from azure.storage.filedatalake import DataLakeServiceClient
from azure.storage.filedatalake import DelimitedTextDialect as LakeDialect

from tests.blobhttp import BlobHttp
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess

CSV = (
    b"name,city,age,joined\r\n"
    b"Ada,London,36,2019-03-01T10:00:00Z\r\n"
    b"Brian,Paris,41,2020-07-15T08:30:00Z\r\n"
    b'"Cho, Mei",Tokyo,29,2021-01-02T00:00:00Z\r\n'
    b"Dora,,52,2018-11-30T23:59:59Z\r\n"
)
HEADERS = DelimitedTextDialect(has_header=True)


def query(blob: BlobClient, expression: str, **kwargs: object) -> tuple[bytes, list[BlobQueryError]]:
    errors: list[BlobQueryError] = []
    reader = blob.query_blob(expression, on_error=errors.append, **kwargs)  # type: ignore[arg-type]
    return reader.readall(), errors


@pytest.fixture
def people(container: ContainerClient) -> BlobClient:
    blob = container.get_blob_client("people.csv")
    blob.upload_blob(CSV)
    return blob


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("SELECT * FROM BlobStorage", CSV.replace(b"\r\n", b"\n")[len("name,city,age,joined\n") :]),
        ("SELECT name FROM BlobStorage WHERE age > 40", b"Brian\nDora\n"),
        ('select NAME, "city" from blobstorage where CAST(age AS INT) < 30', b'"Cho, Mei",Tokyo\n'),
        ("SELECT _1 FROM BlobStorage WHERE city = 'Paris' OR city IS NULL OR city = ''", b"Brian\nDora\n"),
        ("SELECT name FROM BlobStorage WHERE name LIKE '_r%'", b"Brian\n"),
        ("SELECT name FROM BlobStorage WHERE city IN ('Tokyo', 'London')", b'Ada\n"Cho, Mei"\n'),
        ("SELECT name FROM BlobStorage WHERE age BETWEEN 36 AND 41", b"Ada\nBrian\n"),
        ("SELECT name FROM BlobStorage WHERE NOT age >= 36", b'"Cho, Mei"\n'),
        ("SELECT name FROM BlobStorage LIMIT 2", b"Ada\nBrian\n"),
        ("SELECT TOP 2 name FROM BlobStorage", b"Ada\nBrian\n"),
        ("select top 3 name from BlobStorage WHERE age > 30 LIMIT 2", b"Ada\nBrian\n"),  # the smaller
        ("SELECT TOP 1 * FROM BlobStorage", b"Ada,London,36,2019-03-01T10:00:00Z\n"),
        ("SELECT UPPER(name), CHAR_LENGTH(city) FROM BlobStorage WHERE age = 36", b"ADA,6\n"),
        ("SELECT SUBSTRING(name, 1, 2), LOWER(city) FROM BlobStorage WHERE age = 41", b"ri,paris\n"),
        ("SELECT TRIM(BOTH 'A' FROM name) FROM BlobStorage WHERE age = 36", b"da\n"),
        ("SELECT COUNT(*) FROM BlobStorage", b"4\n"),
        ("SELECT COUNT(*), SUM(age), MIN(age), MAX(age), AVG(age) FROM BlobStorage", b"4,158,29,52,39.5\n"),
        ("SELECT AVERAGE(age), count(city) FROM BlobStorage WHERE age < 50", b"35.333333333333336,3\n"),
        ("SELECT name FROM BlobStorage WHERE EXTRACT(YEAR FROM joined) = 2020", b"Brian\n"),
        (
            "SELECT name FROM BlobStorage WHERE CAST(joined AS TIMESTAMP) < CAST('2019-06-01' AS TIMESTAMP)",
            b"Ada\nDora\n",
        ),
        (
            "SELECT TO_STRING(CAST(joined AS TIMESTAMP), 'MMMM d, y') FROM BlobStorage WHERE age = 29",
            b'"January 2, 2021"\n',  # the comma: quoted
        ),
        ("SELECT DATE_DIFF(day, joined, '2021-01-12T00:00:00Z') FROM BlobStorage WHERE age = 29", b"10\n"),
        (  # every format letter the reference lists, lowercase ones included
            "SELECT TO_STRING(TO_TIMESTAMP(joined), 'yy yyyy y M MM MMM MMMM d dd a h hh H HH m mm s ss"
            " S SS SSS X XX XXX x xx xxx') FROM BlobStorage WHERE age = 41",
            b"20 2020 2020 7 07 JUL July 15 15 AM 8 08 8 08 30 30 0 00 0 00 000 Z Z Z 0 +0000 +00:00\n",
        ),
        (
            "SELECT TO_STRING(DATE_ADD('hour', -3, TO_TIMESTAMP('1969-07-20T20:18:07.5-07:30')),"
            " 'hh:mm:ss.SS a XXX') FROM BlobStorage LIMIT 1",
            b"05:18:07.50 PM -07:30\n",
        ),
        (
            "SELECT EXTRACT(timezone_minute FROM '2010-01-01T00:00-07:30'), UTCNOW() > joined"
            " FROM BlobStorage LIMIT 1",
            b"-30,true\n",
        ),
        ("SELECT COALESCE(NULLIF(city, ''), 'nowhere') FROM BlobStorage WHERE age = 52", b"nowhere\n"),
        ("SELECT age * 2 + 1, age % 5 FROM BlobStorage WHERE age = 41", b"83,1\n"),
    ],
)
def test_csv_with_header(people: BlobClient, expression: str, expected: bytes) -> None:
    data, errors = query(people, expression, blob_format=HEADERS, output_format=DelimitedTextDialect())
    assert errors == []
    assert data == expected


def test_defaults_output_headers_and_progress(people: BlobClient) -> None:
    reader = people.query_blob("SELECT * FROM BlobStorage")
    assert reader.readall() == CSV.replace(b"\r\n", b"\n")  # no header: every line is a record
    assert len(reader) == len(CSV)
    named = people.query_blob("SELECT name, age FROM BlobStorage WHERE age < 40", blob_format=HEADERS)
    assert named.readall() == b'name,age\nAda,36\n"Cho, Mei",29\n'  # output as input: with its header


@pytest.mark.parametrize("version", ["2019-12-12", "2020-02-10"])
def test_no_output_header_before_2020_10_02(people: BlobClient, version: str) -> None:
    """At 2019-12-12 and 2020-02-10 Azure wrote no header row out, whatever the output's
    HasHeaders said (recorded for azure-storage-blob 12.3's and azure-storage-file-datalake
    12.2.1's test_quick_query_iter_records_with_headers, the latter at 2020-02-10, which
    azure-storage-file-datalake 12.2.3's own test expects); at 2020-10-02 it writes it (recorded
    for test_quick_query_iter_output_records_including_headers)."""
    credential = {"account_name": DEV_ACCOUNT, "account_key": DEV_KEY}
    old = BlobClient.from_blob_url(people.url, credential=credential, api_version=version)
    both = {"blob_format": HEADERS, "output_format": HEADERS}
    data, _ = query(old, "SELECT name, age FROM BlobStorage WHERE age < 40", **both)
    assert data == b'Ada,36\n"Cho, Mei",29\n'
    later = BlobClient.from_blob_url(people.url, credential=credential, api_version="2020-10-02")
    data, _ = query(later, "SELECT name, age FROM BlobStorage WHERE age < 40", **both)
    assert data == b'name,age\nAda,36\n"Cho, Mei",29\n'


def test_no_output_header_at_2020_02_10_aio(server: ServerProcess, people: BlobClient) -> None:
    """The same through the aio client, as azure-storage-file-datalake 12.2.3's async quick query
    sends it: at 2020-02-10 the records start at the CSV's second line."""

    async def run() -> bytes:
        async with AsyncBlobClient.from_connection_string(
            server.connection_string, people.container_name, people.blob_name, api_version="2020-02-10"
        ) as blob:
            reader = await blob.query_blob(
                "SELECT * FROM BlobStorage", blob_format=HEADERS, output_format=HEADERS
            )
            return await reader.readall()

    data = asyncio.run(run())
    assert data.startswith(b"Ada,London,36,") and b"name,city" not in data


def test_output_formats(people: BlobClient) -> None:
    json_out, _ = query(
        people,
        "SELECT name, age FROM BlobStorage WHERE age > 40",
        blob_format=HEADERS,
        output_format=DelimitedJsonDialect(delimiter="|"),
    )
    assert json_out == b'{"name":"Brian","age":"41"}|{"name":"Dora","age":"52"}|'
    custom, _ = query(
        people,
        "SELECT name, city FROM BlobStorage WHERE age < 30",
        blob_format=HEADERS,
        output_format=DelimitedTextDialect(delimiter=";", quotechar="'", lineterminator=".", escapechar="\\"),
    )
    assert custom == b"Cho, Mei;Tokyo."


def test_non_fatal_errors_skip_the_record(container: ContainerClient) -> None:
    blob = container.get_blob_client("ragged.csv")
    blob.upload_blob(b"a,b,c\n1,2,3\nshort\n4,5,6\n")
    data, errors = query(
        blob, "SELECT c FROM BlobStorage", blob_format=HEADERS, output_format=DelimitedTextDialect()
    )
    assert data == b"3\n6\n"
    assert [(e.is_fatal, e.position) for e in errors] == [(False, 12)]  # the offset of "short"
    data, errors = query(blob, "SELECT _1 FROM BlobStorage WHERE _2 > 'x' OR CAST(_1 AS INT) > 3")
    assert data == b"4\n"
    assert [e.error for e in errors] == ["InvalidTypeConversion", "InvalidColumnOrdinal"]  # "a", "short"


def test_conversion_errors_are_named_as_azure_names_them(container: ContainerClient) -> None:
    # What real Azure answered the SDKs' own tests (azure-sdk-for-js "query should work with non
    # fatal error event", .NET QueryAsync_NonFatalError): one name and description for every value
    # that does not convert, at the offset of its record.
    blob = container.get_blob_client("pizza.csv")
    blob.upload_blob(b"100,hello,300,400\n150,250,350,450\n")
    data, errors = query(blob, "select _2 from BlobStorage where _2 > 100")
    assert data == b"250\n"
    assert [(e.error, e.description, e.is_fatal, e.position) for e in errors] == [
        ("InvalidTypeConversion", "Invalid type conversion.", False, 0)
    ]


def test_short_records_are_azures_invalid_column_ordinal(container: ContainerClient) -> None:
    # Azure's answer to Microsoft's Java test queryNonFatalError (recorded): each record too short
    # for _2 is an error at its offset, naming the ordinal from 0.
    blob = container.get_blob_client("dots.csv")
    blob.upload_blob(b"100.200.300.400\n300.400.500.600\n" * 4)
    data, errors = query(blob, "SELECT _1 from BlobStorage WHERE _2 > 250")
    assert data == b""
    assert [(e.error, e.description, e.is_fatal, e.position) for e in errors] == [
        ("InvalidColumnOrdinal", "Column ordinal 1 does not exist in row.", False, 16 * i) for i in range(8)
    ]


def test_json_input_over_other_text_is_azures_parse_error(container: ContainerClient) -> None:
    # Azure's answer to Microsoft's Java test queryFatalError (recorded): delimited text read as
    # JSON ends the query with this fatal error, and no rows.
    body = b"rn1.rn2.rn3.rn4\n" + b"100.200.300.400\n300.400.500.600\n" * 32
    blob = container.get_blob_client("dotted.csv")
    blob.upload_blob(body)
    data, errors = query(blob, "SELECT * from BlobStorage", blob_format=DelimitedJsonDialect(delimiter=""))
    assert data == b""
    assert [(e.error, e.description, e.is_fatal, e.position) for e in errors] == [
        (
            "ParseError",
            "Unexpected token 'rn1.rn2.rn3.rn4' at [byte: 0]. Expecting tokens '{', or '['. ",
            True,
            0,
        )
    ]
    # the same in the middle of the blob: the byte of the token, the offset of its record
    blob.upload_blob(b'{"a": 1}\n{"a" 2}\n', overwrite=True)
    data, errors = query(blob, "SELECT a from BlobStorage", blob_format=DelimitedJsonDialect())
    assert data == b'{"a":1}\n'
    assert [(e.error, e.description, e.position) for e in errors] == [
        ("ParseError", "Unexpected token '2' at [byte: 14]. ", 9)
    ]


def test_json_input(container: ContainerClient) -> None:
    blob = container.get_blob_client("items.json")
    blob.upload_blob(
        b'{"id": 1, "name": "mouse", "price": 12.5, "tags": ["wireless", "accessory"],'
        b' "dimensions": {"length": 3}, "warehouses": [{"lat": 41.8}, {"lat": 47.6}]}\n'
        b'{"id": 2, "name": "pad", "price": 3, "tags": [], "dimensions": {"length": 20}, "warehouses": []}'
        b'{"id": 3, "name": "cable"}\n'
    )
    lines = DelimitedJsonDialect(delimiter="\n")
    data, errors = query(blob, "SELECT name FROM BlobStorage WHERE price > 5", blob_format=lines)
    assert (data, errors) == (b'{"name":"mouse"}\n', [])
    data, _ = query(blob, "SELECT id, tags[0], dimensions.length FROM BlobStorage[*]", blob_format=lines)
    assert data == b'{"id":1,"_2":"wireless","length":3}\n{"id":2,"length":20}\n{"id":3}\n'
    data, _ = query(blob, "SELECT lat FROM BlobStorage[*].warehouses[*]", blob_format=lines)
    assert data == b'{"lat":41.8}\n{"lat":47.6}\n'
    data, _ = query(blob, "SELECT id FROM BlobStorage WHERE price IS MISSING", blob_format=lines)
    assert data == b'{"id":3}\n'
    data, _ = query(blob, "SELECT COUNT(price), SUM(price) FROM BlobStorage", blob_format=lines)
    assert data == b'{"_1":2,"_2":15.5}\n'
    data, _ = query(
        blob,
        "SELECT id, name FROM BlobStorage WHERE id < 3",
        blob_format=lines,
        output_format=DelimitedTextDialect(),
    )
    assert data == b"1,mouse\n2,pad\n"


def test_select_star_from_json_to_json_is_the_text_as_written(container: ContainerClient) -> None:
    # Azure's answers to Microsoft's Java tests queryInputJson and queryInputJsonOutputCsv
    # (recorded): a comma before the closing brace is read, and SELECT * from JSON to JSON gives
    # each document back as written, then the record separator.
    document = b'{\n\t"name0": "owner0",\n\t"name1": "owner1",\n}'
    blob = container.get_blob_client("loose.json")
    blob.upload_blob(document)
    lines = DelimitedJsonDialect(delimiter="\n")
    data, errors = query(blob, "SELECT * from BlobStorage", blob_format=lines, output_format=lines)
    assert (data, errors) == (document + b"\n", [])
    data, _ = query(
        blob, "SELECT * from BlobStorage", blob_format=lines, output_format=DelimitedTextDialect()
    )
    assert data == b"owner0,owner1\n"
    data, _ = query(blob, "SELECT name1 from BlobStorage", blob_format=lines, output_format=lines)
    assert data == b'{"name1":"owner1"}\n'


def test_a_fatal_errors_position_is_its_records(container: ContainerClient) -> None:
    # Azure's answer to the JS SDK's "query should work with fatal error event" (recorded): CSV
    # read as JSON fails at byte 3, and the position is that of its record (line), 0.
    blob = container.get_blob_client("numbers.csv")
    blob.upload_blob(b"100,200,300,400\n150,250,350,450\n")
    _, errors = query(blob, "select * from BlobStorage", blob_format=DelimitedJsonDialect())
    assert [(e.error, e.description, e.is_fatal, e.position) for e in errors] == [
        ("ParseError", "Unexpected token ',' at [byte: 3]. Expecting tokens '{', or '['. ", True, 0)
    ]
    blob.upload_blob(b'{"a": 1}\n{"a": 2} , {"a": 3}\n', overwrite=True)  # the second line's
    _, errors = query(blob, "select * from BlobStorage", blob_format=DelimitedJsonDialect())
    assert [(e.error, e.position) for e in errors] == [("ParseError", 9)]


def test_fatal_error_ends_the_query(container: ContainerClient) -> None:
    blob = container.get_blob_client("broken.json")
    blob.upload_blob(b'{"a": 1}\n{"a": 2}\n{a: 3}\n{"a": 4}\n')
    data, errors = query(blob, "SELECT a FROM BlobStorage", blob_format=DelimitedJsonDialect())
    assert data == b'{"a":1}\n{"a":2}\n'
    assert [(e.error, e.is_fatal, e.position) for e in errors] == [("ParseError", True, 18)]
    assert errors[0].description == "Unexpected token 'a' at [byte: 19]. "


def test_parquet_input_and_arrow_output(container: ContainerClient) -> None:
    pyarrow = pytest.importorskip("pyarrow")  # a test dependency: what the server uses when present
    import pyarrow.parquet as pq

    sink = io.BytesIO()
    table = pyarrow.table({"id": [0, 1, 2], "word": ["zero", "one", "two"], "score": [0.5, 1.5, None]})
    pq.write_table(table, sink)
    blob = container.get_blob_client("t.parquet")
    blob.upload_blob(sink.getvalue())
    data, errors = query(
        blob, "SELECT * FROM BlobStorage WHERE id < 2", blob_format=QuickQueryDialect.Parquet
    )
    assert (data, errors) == (b"0,zero,0.5\n1,one,1.5\n", [])
    data, _ = query(
        blob, "SELECT word FROM BlobStorage WHERE score IS NULL", blob_format=QuickQueryDialect.Parquet
    )
    assert data == b"two\n"

    numbers = container.get_blob_client("numbers.csv")
    numbers.upload_blob(b"100,200,300,400\n300,400,500,600\n")
    arrow = [ArrowDialect(ArrowType.DECIMAL, name="abc", precision=4, scale=2)]
    data, errors = query(numbers, "SELECT _2 from BlobStorage WHERE _1 > 250", output_format=arrow)
    assert errors == []
    assert base64.b64encode(
        data
    ) == (  # what Azure answered Microsoft's test_quick_query_output_in_arrow_format
        b"/////3gAAAAQAAAAAAAKAAwABgAFAAgACgAAAAABBAAMAAAACAAIAAAABAAIAAAABAAAAAEAAAAU"
        b"AAAAEAAUAAgABgAHAAwAAAAQABAAAAAAAAEHEAAAABwAAAAEAAAAAAAAAAMAAABhYmMACAAMAAQA"
        b"CAAIAAAABAAAAAIAAAD/////cAAAABAAAAAAAAoADgAGAAUACAAKAAAAAAMEABAAAAAAAAoADAAA"
        b"AAQACAAKAAAAMAAAAAQAAAACAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
        b"AQAAAAAAAAAAAAAAAAAAAAAAAAD/////iAAAABQAAAAAAAAADAAWAAYABQAIAAwADAAAAAADBAAY"
        b"AAAAEAAAAAAAAAAAAAoAGAAMAAQACAAKAAAAPAAAABAAAAABAAAAAAAAAAAAAAACAAAAAAAAAAAA"
        b"AAAAAAAAAAAAAAAAAAAAAAAAEAAAAAAAAAAAAAAAAQAAAAEAAAAAAAAAAAAAAAAAAACQAQAAAAAA"
        b"AAAAAAAAAAAA"
    )


def test_large_blob_streams_in_pieces(container: ContainerClient) -> None:
    rows = 120_000
    body = b"".join(b"%d,%s\n" % (i, b"x" * (i % 17)) for i in range(rows))
    blob = container.get_blob_client("big.csv")
    blob.upload_blob(body)
    reader = blob.query_blob("SELECT _1 FROM BlobStorage WHERE CAST(_1 AS INT) % 1000 = 7")
    pieces = list(reader._iter_stream())  # one per data message
    assert b"".join(pieces) == b"".join(b"%d\n" % i for i in range(7, rows, 1000))
    everything = blob.query_blob("SELECT * FROM BlobStorage")
    chunks = list(everything._iter_stream())
    assert len(chunks) > 1 and b"".join(chunks) == body
    assert len(everything) == len(body) == everything._bytes_processed
    counted = blob.query_blob("SELECT COUNT(*) FROM BlobStorage WHERE _2 LIKE 'xxxxxxxxxxxxxxxx'")
    assert counted.readall() == b"%d\n" % len([i for i in range(rows) if i % 17 == 16])


def _split_body() -> bytes:
    """Records of 100 bytes, 12,000,000 bytes in all: sys.split(10485760) cuts it after the
    record that reaches the 10 MiB mark (104,858 records), then the rest."""
    return b"".join(b"%07d,%s\n" % (i, b"x" * 91) for i in range(120_000))


def test_sys_split(container: ContainerClient) -> None:
    body = _split_body()
    blob = container.get_blob_client("split.csv")
    blob.upload_blob(body)
    data, errors = query(blob, "SELECT sys.split(10485760) FROM BlobStorage")
    assert (data, errors) == (b"10485800\n1514200\n", [])
    data, _ = query(blob, "select SYS.SPLIT(12000000) from BlobStorage;")
    assert data == b"12000000\n"  # one batch: the whole blob
    data, _ = query(blob, "SELECT sys.split(10485760) FROM BlobStorage", output_format=DelimitedJsonDialect())
    assert data == b'{"_1":10485800}\n{"_1":1514200}\n'
    with pytest.raises(HttpResponseError) as caught:
        blob.query_blob("SELECT sys.split(1048576) FROM BlobStorage")  # under the 10 MiB least
    assert (caught.value.status_code, caught.value.error_code) == (400, "InvalidXmlNodeValue")
    with pytest.raises(HttpResponseError) as caught:  # CSV only
        blob.query_blob("SELECT sys.split(10485760) FROM BlobStorage", blob_format=DelimitedJsonDialect())
    assert (caught.value.status_code, caught.value.error_code) == (400, "InvalidXmlNodeValue")


def test_sys_split_aio(server: ServerProcess, container: ContainerClient) -> None:
    body = _split_body()
    container.get_blob_client("split-aio.csv").upload_blob(body)

    async def run() -> tuple[bytes, bytes]:
        async with AsyncBlobClient.from_connection_string(
            server.connection_string, container.container_name, "split-aio.csv"
        ) as blob:
            split = await (await blob.query_blob("SELECT sys.split(10485760) FROM BlobStorage")).readall()
            top = await (await blob.query_blob("SELECT TOP 2 _1 FROM BlobStorage")).readall()
            return split, top

    assert asyncio.run(run()) == (b"10485800\n1514200\n", b"0000000\n0000001\n")


def test_conditions_lease_and_snapshot(people: BlobClient) -> None:
    props = people.get_blob_properties()
    with pytest.raises(ResourceModifiedError):
        people.query_blob(
            "SELECT * FROM BlobStorage", etag='"0x1"', match_condition=MatchConditions.IfNotModified
        )
    ok = people.query_blob(
        "SELECT COUNT(*) FROM BlobStorage", etag=props.etag, match_condition=MatchConditions.IfNotModified
    )
    assert ok.readall() == b"5\n"
    snapshot = people.create_snapshot()
    people.upload_blob(b"only,one\n", overwrite=True)
    old = people.from_blob_url(people.url, credential=people.credential, snapshot=snapshot["snapshot"])
    assert old.query_blob("SELECT COUNT(*) FROM BlobStorage").readall() == b"5\n"
    lease = people.acquire_lease()
    try:
        with pytest.raises(HttpResponseError) as caught:
            people.query_blob("SELECT * FROM BlobStorage", lease=str(uuid.uuid4()))
        assert caught.value.error_code == "LeaseIdMismatchWithBlobOperation"
        assert people.query_blob("SELECT * FROM BlobStorage", lease=lease).readall() == b"only,one\n"
        assert people.query_blob("SELECT * FROM BlobStorage").readall() == b"only,one\n"  # a read
    finally:
        lease.release()


def test_sas_needs_read(server: ServerProcess, people: BlobClient) -> None:
    def with_sas(**permissions: bool) -> BlobClient:
        token = generate_blob_sas(
            DEV_ACCOUNT,
            people.container_name,
            people.blob_name,
            account_key=DEV_KEY,
            permission=BlobSasPermissions(**permissions),
            expiry=datetime.now(UTC) + timedelta(hours=1),
        )
        return BlobClient.from_blob_url(people.url, credential=token)

    assert with_sas(read=True).query_blob("SELECT COUNT(*) FROM BlobStorage").readall() == b"5\n"
    with pytest.raises(HttpResponseError) as caught:
        with_sas(write=True, tag=True).query_blob("SELECT COUNT(*) FROM BlobStorage")
    assert caught.value.status_code == 403
    assert caught.value.error_code == "AuthorizationPermissionMismatch"


def test_aio(server: ServerProcess, people: BlobClient) -> None:
    async def run() -> tuple[bytes, list[bytes], list[BlobQueryError]]:
        errors: list[BlobQueryError] = []
        async with AsyncBlobClient.from_connection_string(
            server.connection_string, people.container_name, people.blob_name
        ) as blob:
            reader = await blob.query_blob(
                "SELECT name FROM BlobStorage WHERE age > 30", blob_format=HEADERS, on_error=errors.append
            )
            data = await reader.readall()
            records = [
                r
                async for r in (
                    await blob.query_blob("SELECT city FROM BlobStorage", blob_format=HEADERS)
                ).records()
            ]
            return data, records, errors

    data, records, errors = asyncio.run(run())
    assert data == b"name\nAda\nBrian\nDora\n"
    assert records == [b"city", b"London", b"Paris", b"Tokyo", b"", b""]
    assert errors == []


# ------------------------------------------------------------------------------ raw HTTP


def _document(expression: str, extra: str = "") -> bytes:
    return (
        f'<?xml version="1.0" encoding="utf-8"?><QueryRequest><QueryType>SQL</QueryType>'
        f"<Expression>{expression}</Expression>{extra}</QueryRequest>"
    ).encode()


def test_answer_is_avro_sent_chunked(http: BlobHttp, people: BlobClient) -> None:
    reply = http.request(
        "POST",
        f"/{people.container_name}/people.csv?comp=query",
        {},
        _document("SELECT COUNT(*) FROM BlobStorage"),
    )
    assert reply.status == 200
    assert reply.headers["content-type"] == "avro/binary"
    assert reply.headers["transfer-encoding"] == "chunked" and "content-length" not in reply.headers
    assert reply.headers["x-ms-blob-type"] == "BlockBlob" and reply.headers["etag"]
    assert reply.headers["accept-ranges"] == "bytes"  # as Azure's recorded answers have it
    messages = list(fastavro.reader(io.BytesIO(reply.body)))
    # Azure's order (recorded for the JS SDK's query tests): data, progress, end; no progress first
    assert messages == [
        {"data": b"5\n"},
        {"bytesScanned": len(CSV), "totalBytes": len(CSV)},
        {"totalBytes": len(CSV)},
    ]


def test_data_comes_before_a_fatal_error(http: BlobHttp, container: ContainerClient) -> None:
    """Azure sends a data message before a fatal error (recorded for the JS SDK's "query should
    work with fatal error event"), so the SDKs' readers open before they report it."""
    container.get_blob_client("pizza.csv").upload_blob(b"rn1.rn2\n100.200\n")
    extra = "<InputSerialization><Format><Type>json</Type></Format></InputSerialization>"
    reply = http.request(
        "POST",
        f"/{container.container_name}/pizza.csv?comp=query",
        {},
        _document("SELECT * FROM BlobStorage", extra),
    )
    messages = list(fastavro.reader(io.BytesIO(reply.body)))
    assert [sorted(m) for m in messages] == [
        ["data"],
        ["description", "fatal", "name", "position"],
        ["bytesScanned", "totalBytes"],
        ["totalBytes"],
    ]
    assert (messages[1]["name"], messages[1]["fatal"]) == ("ParseError", True)


# The blob of the C++ SDK's DataLakeFileClientTest.QueryWithError (x-ms-version 2021-04-10): five
# one-line JSON documents (two with a price that is no number) and then "xx".
_CPP_QUERY_BLOB = (
    b'\n{"id": 100, "name": "oranges", "price": 100}\n{"id": 101, "name": "limes", "price": "aa"}\n'
    b'{"id": 102, "name": "berries", "price": 199}\n{"id": 103, "name": "apples", "price": "bb"}\n'
    b'{"id": 104, "name": "clementines", "price": 399}\nxx\n'
)
_JSON_EMPTY_SEPARATOR = (
    "<Format><Type>json</Type><JsonTextConfiguration><RecordSeparator/></JsonTextConfiguration></Format>"
)


def test_text_that_opens_no_document_is_placed_at_the_last_document_read(
    http: BlobHttp, container: ContainerClient
) -> None:
    """Azure's answer to the C++ SDK's QueryWithError (JSON in and out, ``<RecordSeparator/>``):
    the three documents whose price is above 0, two non-fatal InvalidTypeConversion errors at
    their documents (46, 135), then the fatal ParseError for ``xx`` at byte 229 placed at 180,
    where the last document read began (not 229, where its line begins); progress and end of 232
    bytes."""
    container.get_blob_client("cpp.json").upload_blob(_CPP_QUERY_BLOB)
    extra = (
        f"<InputSerialization>{_JSON_EMPTY_SEPARATOR}</InputSerialization>"
        f"<OutputSerialization>{_JSON_EMPTY_SEPARATOR}</OutputSerialization>"
    )
    reply = http.request(
        "POST",
        f"/{container.container_name}/cpp.json?comp=query",
        {"Content-Type": "application/xml; charset=UTF-8", "x-ms-version": "2021-04-10"},
        _document("SELECT * FROM BlobStorage WHERE price &gt; 0;", extra),
    )
    assert reply.status == 200
    conversion = {"fatal": False, "name": "InvalidTypeConversion", "description": "Invalid type conversion."}
    assert list(fastavro.reader(io.BytesIO(reply.body))) == [
        {
            "data": b'{"id": 100, "name": "oranges", "price": 100}\n{"id": 102, "name": "berries", '
            b'"price": 199}\n{"id": 104, "name": "clementines", "price": 399}\n'
        },
        {**conversion, "position": 46},
        {**conversion, "position": 135},
        {
            "fatal": True,
            "name": "ParseError",
            "description": "Unexpected token 'xx' at [byte: 229]. Expecting tokens '{', or '['. ",
            "position": 180,
        },
        {"bytesScanned": 232, "totalBytes": 232},
        {"totalBytes": 232},
    ]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"not xml", 400, "InvalidXmlDocument"),
        (b"<Other/>", 400, "InvalidXmlDocument"),
        (b"<QueryRequest><QueryType>SQL</QueryType></QueryRequest>", 400, "MissingRequiredXmlNode"),
        (_document("SELECT * FROM BlobStorage").replace(b">SQL<", b">XQuery<"), 400, "InvalidXmlNodeValue"),
        (_document("SELEKT * FROM BlobStorage"), 400, "InvalidXmlNodeValue"),
        (_document("SELECT * FROM Elsewhere"), 400, "InvalidXmlNodeValue"),
        (_document("SELECT name, COUNT(*) FROM BlobStorage"), 400, "InvalidXmlNodeValue"),
        (_document("SELECT NOSUCH(name) FROM BlobStorage"), 400, "InvalidXmlNodeValue"),
        (_document("SELECT sys.split(10485759) FROM BlobStorage"), 400, "InvalidXmlNodeValue"),
        (_document("SELECT sys.split(10485760) FROM BlobStorage WHERE _1 = 1"), 400, "InvalidXmlNodeValue"),
        (_document("SELECT TOP x * FROM BlobStorage"), 400, "InvalidXmlNodeValue"),
        (
            _document(
                "SELECT * FROM BlobStorage",
                "<InputSerialization><Format><Type>xml</Type></Format></InputSerialization>",
            ),
            400,
            "InvalidXmlNodeValue",
        ),
        (
            _document(
                "SELECT * FROM BlobStorage",
                "<OutputSerialization><Format><Type>parquet</Type></Format></OutputSerialization>",
            ),
            400,
            "InvalidXmlNodeValue",
        ),
    ],
)
def test_bad_requests(http: BlobHttp, people: BlobClient, body: bytes, status: int, code: str) -> None:
    reply = http.request("POST", f"/{people.container_name}/people.csv?comp=query", {}, body)
    assert (reply.status, reply.code) == (status, code)


def test_what_cannot_be_queried(http: BlobHttp, container: ContainerClient) -> None:
    name = container.container_name
    body = _document("SELECT * FROM BlobStorage")
    container.get_blob_client("log").create_append_blob()
    assert http.request("POST", f"/{name}/log?comp=query", {}, body).code == "InvalidBlobType"
    assert http.request("POST", f"/{name}/missing?comp=query", {}, body).code == "BlobNotFound"
    assert http.request("POST", f"/nosuch{name}/missing?comp=query", {}, body).code == "ContainerNotFound"
    assert http.request("GET", f"/{name}/log?comp=query").status == 405


# ------------------------------------------------------------------------------ Data Lake


def test_data_lake_query_file(lake: ServerProcess) -> None:
    service = DataLakeServiceClient.from_connection_string(lake.connection_string)
    fs = service.create_file_system("qq" + uuid.uuid4().hex[:12])
    try:
        file = fs.get_directory_client("dir").create_file("people.csv")
        file.upload_data(CSV, overwrite=True)
        errors: list[object] = []
        reader = file.query_file(
            "SELECT name FROM DataLakeStorage WHERE age < 40",
            file_format=LakeDialect(has_header=True),
            on_error=errors.append,
        )
        assert reader.readall() == b'name\nAda\n"Cho, Mei"\n' and errors == []
        assert len(reader) == len(CSV)
        # (the aio Data Lake client has no query_file: its SDK queries through the blob client)
        counted = fs.get_file_client("dir/people.csv").query_file("SELECT COUNT(*) FROM DataLakeStorage")
        assert counted.readall() == b"5\n"
    finally:
        fs.delete_file_system()


def test_anonymous_query_follows_the_container_acl(
    http: BlobHttp, container: ContainerClient, people: BlobClient
) -> None:
    target = f"/{people.container_name}/people.csv?comp=query"
    body = _document("SELECT COUNT(*) FROM BlobStorage")
    assert http.request("POST", target, {}, body, signed=False).code == "ResourceNotFound"
    container.set_container_access_policy(signed_identifiers={}, public_access="blob")
    reply = http.request("POST", target, {}, body, signed=False)
    assert reply.status == 200 and {"data": b"5\n"} in list(fastavro.reader(io.BytesIO(reply.body)))


def test_expression_errors_say_why(http: BlobHttp, people: BlobClient) -> None:
    reply = http.request(
        "POST", f"/{people.container_name}/people.csv?comp=query", {}, _document("SELECT a FROM")
    )
    assert reply.status == 400 and reply.error_fields()["XmlNodeName"] == "Expression"
    assert b"Expected a name at position 13" in reply.body
