"""deltalake (delta-rs, over the Rust ``object_store`` crate, as polars uses it too) keeping a Delta
table in a container, on each store: writes, appends, a commit race, compaction, vacuum and a
checkpoint, then the table read back.

Each step leans on something of Azure's a simpler client does not use: a commit is a Put Blob
with ``If-None-Match: *`` (the race's loser gets 409 and deltalake reports the conflict), the log
is listed from a version on with ``startFrom``, vacuum deletes with a blob batch, and Parquet
files are read in ranges.
"""

from __future__ import annotations

import deltalake
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from azure.storage.blob import ContainerClient

from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess


def test_a_delta_table_lives_through_its_maintenance(
    server: ServerProcess, container: ContainerClient
) -> None:
    options = {
        "account_name": DEV_ACCOUNT,
        "account_key": DEV_KEY,
        "azure_storage_endpoint": f"http://127.0.0.1:{server.blob_port}/{DEV_ACCOUNT}",
        "allow_http": "true",
    }
    uri = f"az://{container.container_name}/sales"
    frame = pa.table({"id": list(range(10)), "region": ["north", "south"] * 5})
    deltalake.write_deltalake(uri, frame, storage_options=options)
    later = frame.set_column(0, "id", pc.add(frame["id"], 10))
    deltalake.write_deltalake(uri, later, storage_options=options, mode="append")

    first, second, third = (deltalake.DeltaTable(uri, storage_options=options) for _ in range(3))
    first.delete("id < 3")  # version 2: rewrites the first file
    second.delete("id > 18")  # its version 2 is taken (409); it touched the other file, so it is 3
    with pytest.raises(deltalake.exceptions.CommitFailedError):
        third.delete("id = 5")  # read the first file, which version 2 removed

    table = deltalake.DeltaTable(uri, storage_options=options)
    assert table.version() == 3
    assert _ids(table) == list(range(3, 19))
    table.optimize.compact()
    removed = table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    assert len(removed) == 4  # the two written files, the two the deletes wrote; compaction made one
    table.create_checkpoint()

    reread = deltalake.DeltaTable(uri, storage_options=options)
    assert reread.version() == table.version()
    assert _ids(reread) == list(range(3, 19))
    names = set(container.list_blob_names(name_starts_with="sales/"))
    assert "sales/_delta_log/_last_checkpoint" in names
    assert {"sales/" + uri.rpartition("/")[2] for uri in reread.file_uris()} <= names
    assert not names & {"sales/" + name for name in removed}


def _ids(table: deltalake.DeltaTable) -> list[int]:
    return sorted(table.to_pyarrow_table()["id"].to_pylist())
