"""Tables too large to hold: rows spooled to disk as they come, read back in key order.

At UltraFeedback scale (64k prompts x 4 completions) a stage's output is about a gigabyte
of text: a million aspect rows with their rationales, a quarter of a million judge
replies. `TableBuilder` takes rows in any order (judge calls finish out of order; re-asks
come last), converts them to Arrow every `CHUNK_ROWS` and appends them to an Arrow IPC
file in a temporary folder, the rows' keys beside them. `SpooledTable` writes Parquet from
it one row group at a time in key order (`key_order`: the spooled batches' keys merged), or
builds a DataFrame for callers that want one, so peak memory follows a row group, not the
table.

Column dtypes are pandas': "string", "int64", "Float64" (nullable), "float64", "bool",
"object" (lists of strings, Parquet list<string>) and "category" (each distinct text stored
once: a judge reply shared by the rows of its call).
"""

from __future__ import annotations

import hashlib
import tempfile
from array import array
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from llm_feedback.storage.key_order import positions_in_key_order
from llm_feedback.storage.parquet_parts import PartedTarget
from llm_feedback.storage.parquet_source import ROW_GROUP_ROWS
from llm_feedback.storage.schema import pandas_metadata

# How each dtype is spooled; a "category" column is spooled as codes into its texts.
_SPOOLED_TYPES: Mapping[str, pa.DataType] = {
    "string": pa.large_string(),
    "int64": pa.int64(),
    "Float64": pa.float64(),
    "float64": pa.float64(),
    "bool": pa.bool_(),
    "object": pa.list_(pa.string()),
    "category": pa.int32(),
}
# A category column as written: per row group, the texts its rows use.
_DICTIONARY = pa.dictionary(pa.int32(), pa.large_string())
_TEXT_SCHEMA = pa.schema([("text", pa.large_string())])
_KEY_SCHEMA = pa.schema([("key", pa.int64())])


class ChunkedParquet:
    """A table built a chunk at a time as it is written: `to_parquet` writes the chunks as
    one file, as a frame of them would be written, holding one chunk; so a Kedro
    `ParquetDataset` saves it as it saves a DataFrame.

    A subclass gives `arrow_chunks()` and either `arrow_schema` (the file then carries the
    pandas metadata of the schema's dtypes) or a `parquet_schema()` of its own.
    """

    arrow_schema: pa.Schema

    def arrow_chunks(self) -> Iterator[pa.Table]:
        raise NotImplementedError

    def parquet_schema(self) -> pa.Schema:
        """The file's schema: `arrow_schema` with the pandas metadata of its dtypes."""
        return self.arrow_schema.with_metadata(pandas_metadata(self.arrow_schema))

    def to_parquet(
        self,
        path: Any,
        *,
        index: bool | None = None,
        row_group_size: int | None = None,
        **kwargs: Any,
    ) -> None:
        """Write as `frame().to_parquet(path)` would (pyarrow, no index): a row group per
        chunk (or per `row_group_size` rows, if fewer).

        Args:
            path: The file, or a `PartedTarget` to write it as parts.
            index: pandas' argument; only None or False (no index) is taken.
            row_group_size: The most rows of a row group.
            **kwargs: Passed to `pyarrow.parquet.ParquetWriter` (compression, ...).
        """
        write_parquet(
            path, self.parquet_schema(), self.arrow_chunks(), index, row_group_size, **kwargs
        )


class TableBuilder:
    """Rows added in any order with an integer key each; `finish()` gives a `SpooledTable`
    in key order (`frame()` its DataFrame).

    Rows are spooled every `CHUNK_ROWS`, their keys beside them: memory holds one chunk of
    Python values, each spooled chunk's least key, and for a category column a 16-byte
    digest per recent distinct text. The spool folder is
    created under `spool_dir` (default: the system's temporary folder, `TMPDIR`) and
    removed when the table is no longer referenced.
    """

    CHUNK_ROWS = 8192
    # A text is looked up among the last this many distinct texts of its column: the rows
    # sharing a judge reply come together, and memory stays flat at millions of replies. A
    # text seen again later is spooled again; each row group's dictionary is still distinct.
    RECENT_TEXTS = 65_536

    def __init__(self, dtypes: Mapping[str, str], spool_dir: str | Path | None = None) -> None:
        """Start an empty spool.

        Args:
            dtypes: column -> pandas dtype (those a table can spool).
            spool_dir: where the spool folder goes (None: the system's temporary folder).
        """
        unknown = {name: dtype for name, dtype in dtypes.items() if dtype not in _SPOOLED_TYPES}
        if unknown:
            raise ValueError(f"columns of dtypes a table cannot spool: {unknown}")
        self._dtypes = dict(dtypes)
        self._folder = tempfile.TemporaryDirectory(prefix="llmfb-spool-", dir=spool_dir)
        self._pending: dict[str, list[Any]] = {name: [] for name in dtypes}
        self._keys: list[int] = []  # of the rows not spooled yet
        self._n_rows = 0
        self._least_keys = array("q")  # per spooled chunk
        self._schema = pa.schema([(name, _SPOOLED_TYPES[dtype]) for name, dtype in dtypes.items()])
        self._rows = pa.ipc.new_file(str(self._path("rows")), self._schema)
        self._key_file = pa.ipc.new_file(str(self._path("keys")), _KEY_SCHEMA)
        # Per category column: the code of each recent text (by digest: the texts
        # themselves go to the spool), how many codes were given, the texts not spooled
        # yet, and the first code of each spooled batch of texts.
        categories = [name for name, dtype in dtypes.items() if dtype == "category"]
        self._codes: dict[str, OrderedDict[bytes, int]] = {
            name: OrderedDict() for name in categories
        }
        self._n_codes: dict[str, int] = dict.fromkeys(categories, 0)
        self._new_texts: dict[str, list[str]] = {name: [] for name in categories}
        self._text_starts: dict[str, array] = {name: array("q") for name in categories}
        self._texts = {
            name: pa.ipc.new_file(str(self._path(f"texts-{index}")), _TEXT_SCHEMA)
            for index, name in enumerate(categories)
        }

    def _path(self, stem: str) -> Path:
        return Path(self._folder.name) / f"{stem}.arrow"

    def add(self, key: int, row: Mapping[str, Any]) -> None:
        """Add one row; every `CHUNK_ROWS` rows go to disk.

        Args:
            key: the row's place in the finished table's order.
            row: column -> value.
        """
        self._keys.append(key)
        for name, values in self._pending.items():
            value = row[name]
            values.append(value if name not in self._codes else self._code(name, value))
        if len(self._keys) == self.CHUNK_ROWS:
            self._spool()

    def _code(self, name: str, text: str | None) -> int:
        if text is None:
            return -1
        digest = hashlib.blake2b(text.encode(), digest_size=16).digest()
        codes = self._codes[name]
        code = codes.get(digest)
        if code is not None:
            codes.move_to_end(digest)
            return code
        code = codes[digest] = self._n_codes[name]
        self._n_codes[name] += 1
        if len(codes) > self.RECENT_TEXTS:
            codes.popitem(last=False)
        self._new_texts[name].append(text)
        return code

    def _spool(self) -> None:
        columns = [
            pa.array(values, self._schema.field(name).type)
            for name, values in self._pending.items()
        ]
        if len(columns[0]):
            self._rows.write_batch(pa.record_batch(columns, schema=self._schema))
            keys = pa.array(self._keys, pa.int64())
            self._key_file.write_batch(pa.record_batch([keys], schema=_KEY_SCHEMA))
            self._least_keys.append(min(self._keys))
            self._n_rows += len(self._keys)
        self._keys.clear()
        for values in self._pending.values():
            values.clear()
        for name, texts in self._new_texts.items():
            if texts:
                self._text_starts[name].append(self._n_codes[name] - len(texts))
                batch = pa.record_batch([pa.array(texts, pa.large_string())], _TEXT_SCHEMA)
                self._texts[name].write_batch(batch)
                texts.clear()

    def finish(self) -> SpooledTable:
        """The rows added so far, in key order; the builder takes no more rows."""
        self._spool()
        self._rows.close()
        self._key_file.close()
        for writer in self._texts.values():
            writer.close()
        return SpooledTable(
            self._folder,
            self._dtypes,
            self._n_rows,
            np.frombuffer(self._least_keys, dtype=np.int64),
            {
                name: (self._path(f"texts-{index}"), np.frombuffer(starts, dtype=np.int64))
                for index, (name, starts) in enumerate(self._text_starts.items())
            },
        )

    def frame(self) -> pd.DataFrame:
        return self.finish().frame()


class SpooledTable(ChunkedParquet):
    """A table on disk in arrival order, read in key order one row group at a time.

    `to_parquet(path)` writes it as pandas would write `frame()` (same schema, pandas
    metadata included), so a Kedro `ParquetDataset` saves it as it saves a DataFrame and
    loads a DataFrame back.
    """

    GROUP_ROWS = ROW_GROUP_ROWS

    def __init__(
        self,
        folder: tempfile.TemporaryDirectory,
        dtypes: Mapping[str, str],
        n_rows: int,
        least_keys: np.ndarray,
        texts: Mapping[str, tuple[Path, np.ndarray]],
    ) -> None:
        """Take over what `TableBuilder.finish` spooled.

        Args:
            folder: the spool folder (removed with the table).
            dtypes: column -> pandas dtype.
            n_rows: how many rows there are.
            least_keys: each spooled batch's least key.
            texts: per category column, its texts' file and each batch's first code.
        """
        self._folder = folder  # removed with the table
        self._dtypes = dict(dtypes)
        self._n_rows = n_rows
        self._least_keys = least_keys  # of each spooled batch
        self._texts = dict(texts)

    def __len__(self) -> int:
        return self._n_rows

    @property
    def columns(self) -> list[str]:
        return list(self._dtypes)

    def arrow_chunks(self) -> Iterator[pa.Table]:
        """The rows in key order, `GROUP_ROWS` at a time; a category column is a dictionary
        array of the texts its group uses, in order of first use."""
        folder = Path(self._folder.name)
        with (
            pa.OSFile(str(folder / "rows.arrow")) as source,
            pa.OSFile(str(folder / "keys.arrow")) as key_source,
        ):
            rows, keys = pa.ipc.open_file(source), pa.ipc.open_file(key_source)
            in_key_order = positions_in_key_order(
                lambda batch: keys.get_batch(batch).column(0).to_numpy(),
                self._least_keys,
                self.GROUP_ROWS,
            )
            for batches, within in in_key_order:
                group = _gather(rows, batches, within)
                for name in self._texts:
                    index = group.schema.get_field_index(name)
                    group = group.set_column(index, name, self._texts_of(name, group[name]))
                yield group

    def _texts_of(self, name: str, codes: pa.ChunkedArray) -> pa.DictionaryArray:
        codes = codes.to_numpy()
        used = codes >= 0
        local = np.zeros(len(codes), dtype=np.int32)
        local[used], first_used = pd.factorize(codes[used])
        path, starts = self._texts[name]
        with pa.OSFile(str(path)) as source:
            batches = np.searchsorted(starts, first_used, side="right") - 1
            texts = _gather(pa.ipc.open_file(source), batches, first_used - starts[batches])
        texts = texts.column(0).combine_chunks()
        # Codes given to one text twice (seen again beyond `RECENT_TEXTS`) become one entry.
        distinct = pc.unique(texts)
        if len(distinct) < len(texts):
            local[used] = pc.index_in(texts, value_set=distinct).to_numpy()[local[used]]
            texts = distinct
        return pa.DictionaryArray.from_arrays(pa.array(local, pa.int32(), mask=~used), texts)

    def parquet_schema(self) -> pa.Schema:
        """The Parquet schema: column types, and the pandas metadata of `frame()`'s dtypes."""
        empty = _frame_of({name: [] for name in self._dtypes}, self._dtypes)
        described = pa.Schema.from_pandas(empty, preserve_index=False)
        fields = [
            (name, _DICTIONARY if dtype == "category" else _SPOOLED_TYPES[dtype])
            for name, dtype in self._dtypes.items()
        ]
        return pa.schema(fields, metadata=described.metadata)

    def frame(self) -> pd.DataFrame:
        """The whole table as a DataFrame with the builder's dtypes."""
        chunks: dict[str, list[pa.Array]] = {name: [] for name in self._dtypes}
        for group in self.arrow_chunks():
            for name in self._dtypes:
                chunks[name].extend(group[name].chunks)
        return _frame_of(chunks, self._dtypes)


def write_parquet(
    path: Any,
    schema: pa.Schema,
    tables: Iterator[pa.Table],
    index: bool | None,
    row_group_size: int | None,
    **kwargs: Any,
) -> None:
    """`tables` written as one Parquet file with `schema` (its metadata too) as they come,
    or as parts when `path` is a `PartedTarget`, for a `to_parquet` that takes pandas'
    arguments: pyarrow, no index; `kwargs` go to `pyarrow.parquet.ParquetWriter`.

    Args:
        path: where to write (a path, a file, or a `PartedTarget`).
        schema: the table's schema.
        tables: the table, a piece at a time.
        index: pandas' `index` argument (no index is written).
        row_group_size: rows per row group at most (None: one per piece).
        **kwargs: arguments for `pyarrow.parquet.ParquetWriter`.
    """
    if index or kwargs.pop("engine", "pyarrow") != "pyarrow":
        raise ValueError("this table is written by pyarrow, without index")
    if isinstance(path, PartedTarget):
        path.write(schema, tables, row_group_size, **kwargs)
        return
    with pq.ParquetWriter(path, schema, **kwargs) as writer:
        for table in tables:
            writer.write_table(table.cast(schema), row_group_size=row_group_size)


def _gather(reader: pa.ipc.RecordBatchFileReader, batches: np.ndarray, within: np.ndarray):
    """The spooled rows at (`batches`, `within` each batch), as a table in that order;
    each spooled batch they touch is read once."""
    if len(batches) == 0:
        return reader.schema.empty_table()
    by_batch = np.argsort(batches, kind="stable")
    touched, first = np.unique(batches[by_batch], return_index=True)
    pieces = [
        reader.get_batch(int(batch)).take(pa.array(within[by_batch[begin:end]]))
        for batch, begin, end in zip(touched, first, [*first[1:], len(batches)], strict=True)
    ]
    gathered = pa.Table.from_batches(pieces, reader.schema).combine_chunks()
    in_order = np.empty_like(by_batch)
    in_order[by_batch] = np.arange(len(batches))
    return gathered.take(pa.array(in_order))


def _frame_of(chunks: Mapping[str, list[pa.Array]], dtypes: Mapping[str, str]) -> pd.DataFrame:
    columns = {}
    for name, dtype in dtypes.items():
        arrow_type = _DICTIONARY if dtype == "category" else _SPOOLED_TYPES[dtype]
        values = pa.chunked_array(chunks[name], arrow_type)
        columns[name] = _pandas_column(values, dtype)
    return pd.DataFrame(columns)


def _pandas_column(values: pa.ChunkedArray, dtype: str) -> Any:
    if dtype == "string":
        return pd.arrays.ArrowStringArray(values)  # chunked as it is: no second copy
    if dtype == "Float64":
        mask = values.is_null().to_numpy(zero_copy_only=False)
        return pd.arrays.FloatingArray(values.fill_null(0.0).to_numpy(), mask)
    if dtype == "object":
        return pd.Series(values.to_pylist(), dtype=object)  # typed even when empty
    if dtype == "category":
        return _categorical(values)
    return values.to_numpy(zero_copy_only=False)


def _categorical(values: pa.ChunkedArray) -> pd.Categorical:
    """One dictionary for all groups: each group's texts in order of first use, new ones
    appended, so the categories are in order of first use by a row."""
    unified = values.unify_dictionaries()
    if unified.num_chunks:
        categories = unified.chunk(0).dictionary
        codes = pa.chunked_array([chunk.indices for chunk in unified.chunks], pa.int32())
        codes = codes.fill_null(-1).to_numpy()
    else:
        categories, codes = pa.array([], pa.large_string()), np.array([], dtype=np.int32)
    return pd.Categorical.from_codes(
        codes,
        categories=pd.Index(pd.arrays.ArrowStringArray(categories)),
        validate=False,  # distinct by construction, codes in range
    )


class FrameSpool(ChunkedParquet):
    """DataFrames of one layout appended as a stage makes them (a chunk of prompts at a
    time), kept on disk as Arrow, written as Parquet a row group per chunk.

    Like `SpooledTable` to a Kedro `ParquetDataset`: `to_parquet(path)` writes what
    `frame().to_parquet(path)` would (pandas metadata included, so `pandas.read_parquet`
    gives back the dtypes), holding one chunk at a time. The first chunk fixes the schema;
    an empty spool writes `empty`'s.
    """

    def __init__(self, empty: pd.DataFrame, spool_dir: str | Path | None = None) -> None:
        """Start an empty spool.

        Args:
            empty: an empty frame of the layout (what an empty spool writes).
            spool_dir: where the spool folder goes (None: the system's temporary folder).
        """
        self._folder = tempfile.TemporaryDirectory(prefix="llmfb-frames-", dir=spool_dir)
        self._path = Path(self._folder.name) / "frames.arrow"
        self._empty = empty
        self._schema: pa.Schema | None = None
        self._writer: pa.ipc.RecordBatchFileWriter | None = None
        self._rows = 0
        self._closed = False

    def append(self, frame: pd.DataFrame) -> None:
        """Add a chunk to the spool; the first fixes the schema.

        Args:
            frame: the chunk.
        """
        if self._closed:
            raise ValueError("this spool is finished and takes no more rows")
        if self._schema is None:
            self._schema = pa.Schema.from_pandas(frame, preserve_index=False)
            self._writer = pa.ipc.new_file(str(self._path), self._schema)
        table = pa.Table.from_pandas(frame, schema=self._schema, preserve_index=False)
        self._writer.write_table(table)
        self._rows += len(frame)

    def finish(self) -> FrameSpool:
        """The spool, read-only from now on."""
        if self._writer is not None and not self._closed:
            self._writer.close()
        self._closed = True
        return self

    def __len__(self) -> int:
        return self._rows

    @property
    def columns(self) -> list[str]:
        return list(self._empty.columns) if self._schema is None else self._schema.names

    def parquet_schema(self) -> pa.Schema:
        if self._schema is None:
            return pa.Schema.from_pandas(self._empty, preserve_index=False)
        return self._schema

    def arrow_chunks(self) -> Iterator[pa.Table]:
        """The chunks as appended, one at a time."""
        self.finish()
        if self._schema is None:
            return
        # Read, not memory-mapped: a mapped file's pages stay resident once touched, so the
        # process would grow by the whole spool as it is written out.
        with pa.OSFile(str(self._path)) as source:
            reader = pa.ipc.open_file(source)
            for index in range(reader.num_record_batches):
                yield pa.Table.from_batches([reader.get_batch(index)])

    def frame(self) -> pd.DataFrame:
        tables = list(self.arrow_chunks())
        if not tables:
            return self._empty.copy()
        return pa.concat_tables(tables).to_pandas()
