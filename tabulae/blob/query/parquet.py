"""Parquet input, read with pyarrow when it is installed (it is not a runtime dependency:
without it a Parquet query gets Azure's answer for a format it does not take).

A Parquet file is read from its footer, so the blob is spooled to a temporary file (in memory
while small) and then read a row group's batch at a time, never whole into memory.
"""

from __future__ import annotations

import importlib.util
import tempfile
from collections.abc import AsyncIterator
from typing import Any

from tabulae.blob.query.evaluate import Columns, QueryError, Record

SPOOL_IN_MEMORY = 8 * 1024 * 1024


def available() -> bool:
    return importlib.util.find_spec("pyarrow") is not None


async def parquet_records(chunks: AsyncIterator[bytes]) -> AsyncIterator[Record]:
    import pyarrow.parquet as pq  # optional: checked by ``available`` before a query starts

    with tempfile.SpooledTemporaryFile(SPOOL_IN_MEMORY) as spool:
        async for chunk in chunks:
            spool.write(chunk)
        spool.seek(0)
        try:
            document = pq.ParquetFile(spool)
        except Exception as error:  # pyarrow raises its own errors for a file it cannot read
            raise QueryError("InvalidParquetFile", f"The blob is not a Parquet file: {error}", 0) from None
        columns = Columns(document.schema_arrow.names)
        offset = 0
        for batch in document.iter_batches():
            names = batch.schema.names
            data = [column.to_pylist() for column in batch.columns]
            for i in range(batch.num_rows):
                fields: list[Any] = [values[i] for values in data]
                yield Record(offset, fields, dict(zip(names, fields, strict=True)), columns)
                offset += 1
