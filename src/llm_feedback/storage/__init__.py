"""Tables on disk: the datasets' column schemas, Parquet parts and sources, the answer spool,
JSONL reading, key order and remote roots (fsspec)."""
