"""polars reading and writing Parquet in a container of Tabulae's, on each store: a frame written
to an ``az://`` URL and read back, a glob of several files scanned lazily, and a Delta table
(written by deltalake) read with ``read_delta``.

polars reaches Azure through the Rust ``object_store`` crate: a write is a Put Blob (or blocks),
a read asks for the Parquet footer and then the column chunks in ranges, and a glob lists the
container with a prefix.
"""

from __future__ import annotations

import deltalake
import polars as pl
from azure.storage.blob import ContainerClient
from polars.testing import assert_frame_equal

from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess


def _options(server: ServerProcess) -> dict[str, str]:
    return {
        "account_name": DEV_ACCOUNT,
        "account_key": DEV_KEY,
        "azure_storage_endpoint": f"http://127.0.0.1:{server.blob_port}/{DEV_ACCOUNT}",
        "allow_http": "true",
    }


def _frame(start: int, rows: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "id": range(start, start + rows),
            "region": [("north", "south", "east")[i % 3] for i in range(rows)],
            "amount": [i * 0.25 for i in range(rows)],
        }
    )


def test_polars_writes_and_reads_parquet(server: ServerProcess, container: ContainerClient) -> None:
    options = _options(server)
    frame = _frame(0, 50_000)
    uri = f"az://{container.container_name}/sales/all.parquet"
    frame.write_parquet(uri, storage_options=options)
    assert container.get_blob_client("sales/all.parquet").get_blob_properties().size > 0
    assert_frame_equal(pl.read_parquet(uri, storage_options=options), frame)


def test_polars_scans_a_glob_of_parquet_files(server: ServerProcess, container: ContainerClient) -> None:
    options = _options(server)
    parts = [_frame(i * 1000, 1000) for i in range(4)]
    for i, part in enumerate(parts):
        part.write_parquet(f"az://{container.container_name}/parts/p{i}.parquet", storage_options=options)
    container.upload_blob("parts/readme.txt", b"not parquet: the glob leaves it out")
    container.upload_blob("other/p9.parquet", b"outside the glob's prefix")

    lazy = pl.scan_parquet(f"az://{container.container_name}/parts/*.parquet", storage_options=options)
    assert_frame_equal(lazy.collect().sort("id"), pl.concat(parts))
    totals = lazy.group_by("region").agg(pl.len().alias("rows")).sort("region").collect()
    assert totals.to_dict(as_series=False) == {
        "region": ["east", "north", "south"],
        "rows": [1332, 1336, 1332],
    }
    big = lazy.filter(pl.col("id") >= 3500).select("id").collect()
    assert big["id"].to_list() == list(range(3500, 4000))


def test_polars_reads_a_delta_table(server: ServerProcess, container: ContainerClient) -> None:
    options = _options(server)
    uri = f"az://{container.container_name}/lake/sales"
    first, second = _frame(0, 300), _frame(300, 200)
    deltalake.write_deltalake(uri, first.to_arrow(), storage_options=options)
    deltalake.write_deltalake(uri, second.to_arrow(), storage_options=options, mode="append")

    table = pl.read_delta(uri, storage_options=options)
    assert_frame_equal(table.sort("id"), pl.concat([first, second]))
    assert_frame_equal(pl.read_delta(uri, version=0, storage_options=options).sort("id"), first)
