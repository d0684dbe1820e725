"""azure-storage-blob 12.8.1 (x-ms-version 2020-06-12), the last releases whose Blob Batch writes
sub-request paths without the account, run by tests/clients/test_legacy_python_sdks.py.
argv: the Blob endpoint, a container name."""

import sys

from azure.storage.blob import BlobServiceClient

ENDPOINT, NAME = sys.argv[1], sys.argv[2]
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
service = BlobServiceClient.from_connection_string(
    f"AccountName=devstoreaccount1;AccountKey={KEY};BlobEndpoint={ENDPOINT};",
    retry_total=0,
    max_single_put_size=1024,
    max_block_size=1024,
)
container = service.create_container(NAME)
data = bytes(range(256)) * 20
for name in ("a b", "dir/c", "keep", "cool"):
    container.upload_blob(name, data)
assert container.download_blob("a b", offset=100, length=1000).readall() == data[100:1100]
assert [p.status_code for p in container.set_standard_blob_tier_blobs("Cool", "cool")] == [200]
assert container.get_blob_client("cool").get_blob_properties().blob_tier == "Cool"
assert [p.status_code for p in container.delete_blobs("a b", "dir/c")] == [202, 202]
assert sorted(b.name for b in container.list_blobs()) == ["cool", "keep"]
container.delete_container()
print("ok")
