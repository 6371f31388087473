"""A Parquet table (one file, or a folder of parts) that a step reads in the parts it
needs, not whole.

At UltraFeedback scale `aspect_annotations` holds about a gigabyte of text (rationales,
judge replies); the score fix needs four of its columns and the export needs a few
thousand prompts' rows at a time. `ParquetSource` reads only those: `read(columns)`, or
`rows_of` some keys, which reads only the row groups holding them (one or two per few
thousand prompts when the file is in key order, as the annotate stages write it).

A file in key order is also streamed: `key_chunks` gives it as DataFrames of whole prompts
(every row of a prompt in the same chunk), and `key_reader` reads another table in step
with them (a merge-join), so a stage holds one chunk of each table whatever their size.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from llm_feedback.core.errors import InputError
from llm_feedback.storage.parquet_parts import part_paths

# Rows per Parquet row group in the files the pipelines write: a load decodes one group at a
# time, and `rows_of` reads only the groups it needs.
ROW_GROUP_ROWS = 32_768
# A versioned dataset's file: <name>.parquet/<Kedro version>/<name>.parquet[/part-N.parquet].
_VERSIONED_FILE = re.compile(
    r"(?P<table>[^/]+)/(?P<version>\d{4}-\d\d-\d\dT\d\d\.\d\d\.\d\d\.\d{3}Z)/(?P=table)"
)
# What pyarrow raises for a file that is not (or no longer) Parquet: cut short by a full disk
# or a kill, overwritten, or another format.
UNREADABLE_PARQUET = (pa.ArrowException, OSError)


def unreadable_parquet(path: str, error: BaseException) -> InputError:
    """The error for a Parquet file that cannot be read: names the dataset and the version
    (when `path` is a versioned dataset's) and the file, and what to do.

    Args:
        path: the file (or folder of parts) that failed to read.
        error: pyarrow's error.

    Returns:
        An `InputError` to raise from `error`.
    """
    cause = " ".join(str(error).split()) or type(error).__name__
    found = _VERSIONED_FILE.search(path)
    if found is None:
        return InputError(
            f"{path}: not a readable Parquet file ({cause}); it is cut short or not Parquet: "
            "write it again"
        )
    dataset = found["table"].removesuffix(".parquet")
    folder = path[: found.start("version") + len(found["version"])]
    return InputError(
        f"{dataset} version {found['version']}: {path} is not a readable Parquet file "
        f"({cause}); a write cut short? Remove {folder} to read the previous version, or "
        f"rerun the pipeline that writes {dataset}"
    )


class ParquetSource:
    """A table at `path`: one Parquet file, or a folder of parts (`parquet_parts`) read as
    the one table in part order.

    `batch_rows`: rows per record batch when the table is streamed (`key_chunks`,
    `key_reader`, ...): what one read holds besides a chunk, whatever the table's size."""

    def __init__(self, path: str, filesystem: Any = None, batch_rows: int = ROW_GROUP_ROWS):
        """Name the table; nothing is read until asked for.

        Args:
            path: the table's file or folder of parts.
            filesystem: an fsspec filesystem (None: local).
            batch_rows: rows per record batch when streamed.
        """
        self.path = path
        self.filesystem = filesystem
        self.batch_rows = batch_rows
        self._keys: dict[str, pa.ChunkedArray] = {}
        self._paths: list[str] | None = None

    def __repr__(self) -> str:
        return f"ParquetSource({self.path!r})"

    def part_paths(self) -> list[str]:
        """The table's files: `[path]`, or its parts in order."""
        if self._paths is None:
            self._paths = part_paths(self.path, self.filesystem)
        return self._paths

    def _open(self, path: str) -> pq.ParquetFile:
        try:
            if self.filesystem is None:
                return pq.ParquetFile(path)
            return pq.ParquetFile(self.filesystem.open(path, "rb"))
        except FileNotFoundError:
            raise
        except UNREADABLE_PARQUET as error:
            raise unreadable_parquet(path, error) from error

    def _files(self) -> Iterator[pq.ParquetFile]:
        """Each part opened as it is reached, so a stream holds one open part at a time."""
        return (self._open(path) for path in self.part_paths())

    def _batches(self, columns: Sequence[str] | None) -> Iterator[pa.RecordBatch]:
        for parquet in self._files():
            yield from file_batches(parquet, self.batch_rows, columns)

    @property
    def schema(self) -> pa.Schema:
        """Every part's schema (they are written with one)."""
        return self._open(self.part_paths()[0]).schema_arrow

    @property
    def columns(self) -> list[str]:
        return self.schema.names

    @property
    def num_rows(self) -> int:
        return sum(parquet.metadata.num_rows for parquet in self._files())

    def head(self, rows: int, columns: Sequence[str] | None = None) -> pa.Table:
        """The first `rows` rows (of `columns`, those it has), reading no further than it
        needs: a few pages of the first row groups, not whole groups of text.

        Args:
            rows: how many rows.
            columns: the columns wanted (None: all; those the table has).

        Returns:
            The rows.
        """
        wanted = self._present(columns)
        pieces, held = [], 0
        for parquet in self._files():
            for batch in parquet.iter_batches(batch_size=max(rows, 1), columns=wanted):
                pieces.append(batch.slice(0, rows - held))
                held += pieces[-1].num_rows
                if held >= rows:
                    return pa.Table.from_batches(pieces)
        schema = (
            self.schema if wanted is None else pa.schema([self.schema.field(c) for c in wanted])
        )
        return pa.Table.from_batches(pieces, schema)

    def read(self, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """The whole table, or those of `columns` it has (the caller checks for the ones
        it requires, and names the dataset when one is missing).

        Args:
            columns: the columns wanted (None: all; those the table has).

        Returns:
            The table.
        """
        wanted = self._present(columns)
        try:
            return pd.read_parquet(self.path, columns=wanted, filesystem=self.filesystem)
        except FileNotFoundError:
            raise
        except UNREADABLE_PARQUET as error:
            raise unreadable_parquet(self.path, error) from error

    def rows_of(
        self, column: str, values: Sequence[Any], columns: Sequence[str] | None = None
    ) -> pd.DataFrame:
        """The rows whose `column` is one of `values`, in table order; `columns` as in
        `read`. The key column is read once and kept; of the rest, only the row groups
        holding those rows.

        Args:
            column: the column matched.
            values: the values wanted.
            columns: the columns wanted (None: all; those the table has).

        Returns:
            The rows.
        """
        files = list(self._files())
        if column not in self._keys:
            keys = [parquet.read(columns=[column]).column(column) for parquet in files]
            self._keys[column] = pa.chunked_array(
                [chunk for part in keys for chunk in part.chunks], keys[0].type
            )
        matches = pc.is_in(self._keys[column], value_set=pa.array(values))
        positions = np.flatnonzero(matches.to_numpy(zero_copy_only=False))
        if not len(positions):
            empty = files[0].schema_arrow.empty_table()
            return (empty if columns is None else empty.select(self._present(columns))).to_pandas()
        # Every row group of every part, in table order: (part, group within the part).
        groups_of = [
            (part, group)
            for part, parquet in enumerate(files)
            for group in range(parquet.num_row_groups)
        ]
        sizes = [files[part].metadata.row_group(group).num_rows for part, group in groups_of]
        group_starts = np.cumsum([0, *sizes])
        groups = np.searchsorted(group_starts, positions, side="right") - 1
        touched = np.unique(groups)
        # Each touched group's first row in the table of the touched groups.
        read_start = np.zeros(len(sizes), dtype=np.int64)
        read_start[touched] = np.cumsum([0, *(sizes[g] for g in touched[:-1])])
        wanted = self._present(columns)
        pieces = []
        for part, parquet in enumerate(files):
            in_part = [groups_of[g][1] for g in touched if groups_of[g][0] == part]
            if in_part:
                pieces.append(parquet.read_row_groups(in_part, columns=wanted))
        table = pa.concat_tables(pieces)
        within = positions - group_starts[groups] + read_start[groups]
        return table.take(pa.array(within, pa.int64())).to_pandas()

    def _present(self, columns: Sequence[str] | None) -> list[str] | None:
        if columns is None:
            return None
        present = set(self.columns)
        return [name for name in columns if name in present]

    # -- streaming -------------------------------------------------------------------
    def in_key_order(self, key: str = "prompt_id") -> bool:
        """Whether `key` never decreases down the file: read a record batch at a time,
        keeping only the last value, so checking costs no more memory at a million rows.

        Args:
            key: the key column.

        Returns:
            True when in order.
        """
        previous = None
        for batch in self._batches([key]):
            values = batch.column(0)
            if len(values) == 0:
                continue
            if previous is not None and pc.less(values[0], previous).as_py():
                return False
            if len(values) > 1 and pc.any(pc.less(values[1:], values[:-1])).as_py():
                return False
            previous = values[len(values) - 1]
        return True

    def distinct(self, column: str) -> list[Any]:
        """The distinct values of `column`, read a record batch at a time.

        Args:
            column: the column.

        Returns:
            The values, in first-seen order.
        """
        seen: dict[Any, None] = {}
        for batch in self._batches([column]):
            seen.update(dict.fromkeys(pc.unique(batch.column(0)).to_pylist()))
        return list(seen)

    def distinct_count(self, key: str = "prompt_id") -> int:
        """How many keys a file in key order holds (`in_key_order`), counted by batches.

        Args:
            key: the key column.

        Returns:
            The count.
        """
        count, previous = 0, None
        for batch in self._batches([key]):
            values = batch.column(0)
            if len(values) == 0:
                continue
            count += int(_key_starts(pa.chunked_array([values])).sum())
            count -= previous is not None and values[0].as_py() == previous
            previous = values[len(values) - 1].as_py()
        return count

    def row_batches(self, columns: Sequence[str] | None = None) -> Iterator[pd.DataFrame]:
        """The table as DataFrames of `batch_rows` rows, indexed by row position in the
        file: for steps whose rows are independent of each other (generation).

        Args:
            columns: the columns wanted (None: all; those the table has).

        Returns:
            The batches.
        """
        start = 0
        for batch in self._batches(self._present(columns)):
            yield _indexed(pa.Table.from_batches([batch]), start, None)
            start += batch.num_rows

    def key_chunks(
        self,
        keys_per_chunk: int,
        columns: Sequence[str] | None = None,
        key: str = "prompt_id",
    ) -> Iterator[pd.DataFrame]:
        """The table as DataFrames of `keys_per_chunk` keys each (the last may hold fewer),
        every row of a key in the same chunk, indexed by row position in the file. The file
        must hold each key's rows together (`in_key_order`).

        Args:
            keys_per_chunk: keys per chunk.
            columns: the columns wanted (None: all; those the table has).
            key: the key column.

        Returns:
            The chunks.
        """
        wanted = None if columns is None else [key, *(c for c in columns if c != key)]
        wanted = self._present(wanted)
        carried: list[pa.RecordBatch] = []
        seen = 0  # rows yielded so far: the index of the next chunk's first row
        batches = self._batches(wanted)
        for batch in batches:
            carried.append(batch)
            table = pa.Table.from_batches(carried)
            values = table.column(key)
            # A chunk ends where its `keys_per_chunk + 1`-th key starts.
            starts = np.flatnonzero(_key_starts(values))
            while len(starts) > keys_per_chunk:
                end = int(starts[keys_per_chunk])
                yield _indexed(table.slice(0, end), seen, columns)
                seen += end
                table = table.slice(end)
                starts = starts[keys_per_chunk:] - end
            carried = table.to_batches()
        if carried:
            tail = pa.Table.from_batches(carried)
            if tail.num_rows:
                yield _indexed(tail, seen, columns)

    def key_reader(self, columns: Sequence[str] | None = None, key: str = "prompt_id"):
        """A `KeyOrderedReader` over this file: the rows up to a key, chunk after chunk.

        Args:
            columns: the columns wanted (None: all; those the table has).
            key: the key column.

        Returns:
            The reader.
        """
        return KeyOrderedReader(self, columns, key)


class KeyOrderedReader:
    """A streaming merge-join over a file in key order (`ParquetSource.in_key_order`):
    `through(last)` gives the rows whose key is at most `last` that earlier calls did not
    give, reading on a record batch at a time. A caller walking its own chunks in key order
    gets each chunk's rows of this table while holding one chunk of it."""

    def __init__(self, source: ParquetSource, columns: Sequence[str] | None, key: str) -> None:
        """Open the file's batches; nothing is read until `through`.

        Args:
            source: the table, in key order.
            columns: the columns wanted (None: all).
            key: the key column.
        """
        self._key = key
        self._columns = columns
        self._wanted = source._present(
            None if columns is None else [key, *(c for c in columns if c != key)]
        )
        self._empty = source.schema.empty_table()
        self._batches = source._batches(self._wanted)
        self._held: pa.Table | None = None

    def through(self, last: Any) -> pd.DataFrame:
        """The rows not given yet whose key is at most `last`.

        Args:
            last: the greatest key of the caller's chunk.

        Returns:
            The rows.
        """
        pieces: list[pa.Table] = []
        while True:
            if self._held is None or self._held.num_rows == 0:
                batch = next(self._batches, None)
                if batch is None:
                    break
                self._held = pa.Table.from_batches([batch])
            keys = self._held.column(self._key)
            beyond = pc.greater(keys, pa.scalar(last, keys.type)).to_numpy(zero_copy_only=False)
            split = int(np.argmax(beyond)) if beyond.any() else len(beyond)
            pieces.append(self._held.slice(0, split))
            self._held = self._held.slice(split)
            if self._held.num_rows:
                break
        if not pieces:
            pieces = [self._empty if self._wanted is None else self._empty.select(self._wanted)]
        frame = pa.concat_tables(pieces).to_pandas()
        if self._columns is None:
            return frame
        return frame[[name for name in self._columns if name in frame.columns]]


def file_batches(
    parquet: pq.ParquetFile, batch_rows: int, columns: Sequence[str] | None = None
) -> Iterator[pa.RecordBatch]:
    """The file's record batches, `batch_rows` rows at most, a row group at a time: one
    `iter_batches` of some of a file's columns over all its groups keeps memory for every
    group it has passed (pyarrow 26: about 10 MiB per 32k rows of text), so streaming a
    large file that way grows with it; a fresh iterator per row group stays flat.

    Args:
        parquet: the open file.
        batch_rows: rows per batch at most.
        columns: the columns wanted (None: all; those the table has).

    Returns:
        The batches.
    """
    for group in range(parquet.num_row_groups):
        yield from parquet.iter_batches(batch_size=batch_rows, row_groups=[group], columns=columns)


def _key_starts(values: pa.ChunkedArray) -> np.ndarray:
    """True at each row whose key differs from the row before (the first row included)."""
    array = values.combine_chunks()
    if len(array) == 0:
        return np.zeros(0, dtype=bool)
    changed = pc.not_equal(array[1:], array[:-1]).to_numpy(zero_copy_only=False)
    return np.concatenate([[True], changed])


def _indexed(table: pa.Table, start: int, columns: Sequence[str] | None) -> pd.DataFrame:
    frame = table.to_pandas()
    frame.index = pd.RangeIndex(start, start + len(frame))
    if columns is not None:
        frame = frame[[name for name in columns if name in frame.columns]]
    return frame


# Prompts per chunk when a stage streams a table: a few thousand prompts' texts (about 25
# MB of completions at UltraFeedback's sizes), however many prompts the table holds.
CHUNK_PROMPTS = 4096


def table_chunks(
    table: pd.DataFrame | ParquetSource, prompts: int = CHUNK_PROMPTS, columns=None
) -> Iterator[pd.DataFrame]:
    """A table as chunks of whole prompts, at least one: a DataFrame as itself, a file
    `ParquetSource.key_chunks` of `prompts` prompts, or, when the file is not in prompt
    order, read whole (it cannot be streamed; the caller sorts it).

    Args:
        table: a DataFrame or a table on disk.
        prompts: prompts per chunk.
        columns: the columns wanted (None: all; those the table has).

    Returns:
        The chunks.
    """
    if isinstance(table, pd.DataFrame):
        yield table if columns is None else table[[c for c in columns if c in table.columns]]
        return
    if not table.in_key_order("prompt_id"):
        yield table.read(columns)
        return
    chunks = 0
    for chunk in table.key_chunks(prompts, columns):
        chunks += 1
        yield chunk
    if not chunks:  # every table gives a chunk, if only an empty one
        yield table.read(columns)


def table_batches(
    table: pd.DataFrame | ParquetSource, columns: Sequence[str] | None = None
) -> Iterator[pd.DataFrame]:
    """A table as DataFrames indexed by row position, for steps whose rows are independent
    of each other: a DataFrame whole, a file `ParquetSource.row_batches`.

    Args:
        table: a DataFrame or a table on disk.
        columns: the columns wanted (None: all; those the table has).

    Returns:
        The batches.
    """
    if isinstance(table, pd.DataFrame):
        yield table.reset_index(drop=True)
        return
    yield from table.row_batches(columns)


def rows_by_prompt(
    table: pd.DataFrame | ParquetSource, columns: Sequence[str]
) -> Callable[[Any, Any], pd.DataFrame]:
    """`rows(prompts, last)`: `table`'s rows of `prompts` (a chunk's, the greatest `last`),
    for chunks asked in prompt order: read in step when the file is in prompt order (a
    `KeyOrderedReader`: a row with no prompt among the chunks comes with the chunk after
    it), picked out of the row groups holding them otherwise.

    Args:
        table: a DataFrame or a table on disk.
        columns: the columns wanted.

    Returns:
        The function `rows(prompts, last)`.
    """
    if isinstance(table, pd.DataFrame):
        return _frame_rows_by_prompt(table[[name for name in columns if name in table.columns]])
    if table.in_key_order("prompt_id"):
        reader = table.key_reader(columns)
        return lambda prompts, last: reader.through(last)
    return lambda prompts, last: table.rows_of("prompt_id", list(prompts), columns)


def _frame_rows_by_prompt(frame: pd.DataFrame) -> Callable[[Any, Any], pd.DataFrame]:
    """`rows_by_prompt` of a DataFrame: its keys sorted once, so that each chunk looks up
    its range of prompts instead of testing every row of the frame."""
    keys = frame["prompt_id"].to_numpy(dtype=object)
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]

    def rows(prompts: Any, last: Any) -> pd.DataFrame:
        if not len(prompts):
            return frame.iloc[:0]
        start = np.searchsorted(ordered, min(prompts), side="left")
        stop = np.searchsorted(ordered, last, side="right")
        part = frame.iloc[np.sort(order[start:stop])]
        return part[part["prompt_id"].isin(prompts).to_numpy()]

    return rows


def as_frame(table: pd.DataFrame | ParquetSource, columns=None) -> pd.DataFrame:
    """A DataFrame of `table`, for the steps that need all of it at once.

    Args:
        table: a DataFrame or a table on disk.
        columns: the columns wanted (None: all; those the table has).

    Returns:
        The DataFrame.
    """
    if isinstance(table, pd.DataFrame):
        return table if columns is None else table[[c for c in columns if c in table.columns]]
    return table.read(columns)
