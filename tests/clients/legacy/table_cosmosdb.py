"""Table operations through the legacy azure-cosmosdb-table 1.0.6 (TableService; x-ms-version
2018-03-28, Azure-Storage/1.4.2), run by tests/clients/test_legacy_python_sdks.py. argv: the Table
endpoint, a table name."""

import datetime
import sys

from azure.cosmosdb.table.common.models import AccessPolicy
from azure.cosmosdb.table.models import (
    AzureBatchOperationError,
    EdmType,
    EntityProperty,
    TablePayloadFormat,
    TablePermissions,
)
from azure.cosmosdb.table.tablebatch import TableBatch
from azure.cosmosdb.table.tableservice import TableService

ENDPOINT, NAME = sys.argv[1], sys.argv[2]
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
SOON = datetime.datetime.utcnow() + datetime.timedelta(hours=1)
tables = TableService(
    connection_string=f"AccountName=devstoreaccount1;AccountKey={KEY};TableEndpoint={ENDPOINT};"
)
tables.retry = lambda context: None
t = NAME
assert tables.create_table(t, fail_on_exist=True)
assert not tables.create_table(t)
assert t in [x.name for x in tables.list_tables()]
when = datetime.datetime(2020, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
entity = {
    "PartitionKey": "p",
    "RowKey": "o'brien",
    "s": "str",
    "n": 5,
    "f": 1.5,
    "b": True,
    "d": when,
    "big": EntityProperty(EdmType.INT64, 2**40),
    "g": EntityProperty(EdmType.GUID, "12345678-1234-1234-1234-123456789012"),
    "bin": EntityProperty(EdmType.BINARY, b"\x00\x01"),
}
tables.insert_entity(t, entity)
got = tables.get_entity(t, "p", "o'brien")
assert (got.s, got.n, got.big, got.d, got.bin.value) == ("str", 5, 2**40, when, b"\x00\x01"), dict(got)
assert (
    dict(tables.get_entity(t, "p", "o'brien", select="s", accept=TablePayloadFormat.JSON_NO_METADATA)).get(
        "s"
    )
    == "str"
)
for value in (
    "d eq datetime'2020-01-02T03:04:05Z'",
    "g eq guid'12345678-1234-1234-1234-123456789012'",
    "big eq 1099511627776L",
    "bin eq X'0001'",
):
    assert [x.RowKey for x in tables.query_entities(t, filter=value)] == ["o'brien"], value
tables.merge_entity(t, {"PartitionKey": "p", "RowKey": "o'brien", "x": 9})
tables.update_entity(t, {"PartitionKey": "p", "RowKey": "o'brien", "s": "replaced"})
assert "x" not in tables.get_entity(t, "p", "o'brien")
for i in range(10):
    tables.insert_or_replace_entity(t, {"PartitionKey": "q", "RowKey": f"{i:03}", "n": i})
page = tables.query_entities(t, filter="PartitionKey eq 'q' and n ge 2", select="n", num_results=3)
assert [x.n for x in page] == [2, 3, 4] and page.next_marker
assert [
    x.n for x in tables.query_entities(t, filter="PartitionKey eq 'q' and n ge 2", marker=page.next_marker)
] == [5, 6, 7, 8, 9]
batch = TableBatch()
batch.insert_entity({"PartitionKey": "b", "RowKey": "1"})
batch.insert_or_merge_entity({"PartitionKey": "b", "RowKey": "2", "v": 2})
assert len(tables.commit_batch(t, batch)) == 2
failing = TableBatch()
failing.insert_entity({"PartitionKey": "b", "RowKey": "3"})
failing.insert_entity({"PartitionKey": "b", "RowKey": "1"})
try:
    tables.commit_batch(t, failing)
    raise AssertionError("the batch should fail")
except AzureBatchOperationError as error:
    assert str(error).startswith("1:"), str(error)
assert [x.RowKey for x in tables.query_entities(t, filter="PartitionKey eq 'b'")] == ["1", "2"]
tables.set_table_acl(t, {"pol": AccessPolicy(TablePermissions.QUERY, expiry=SOON)})
token = tables.generate_table_shared_access_signature(t, id="pol")
by_sas = TableService(connection_string=f"TableEndpoint={ENDPOINT};SharedAccessSignature={token}")
assert len(list(by_sas.query_entities(t, filter="PartitionKey eq 'q'"))) == 10
tables.delete_entity(t, "b", "2")
assert tables.delete_table(t, fail_not_exist=True)
print("ok")
