"""Query Blob Contents ("query acceleration"): a SELECT over a block blob's CSV, JSON or Parquet
records, answered as Avro messages. Pure: the SQL (sql.py), its evaluation (evaluate.py), the
record readers and writers (records.py, parquet.py, arrow.py) and the Avro framing (avro.py),
run over the blob's chunks by run.py. The front-end (blob/api/query.py) reads the request."""
