"""A Parquet table that a step reads in the parts it needs, not whole.

At UltraFeedback scale `aspect_annotations` holds about a gigabyte of text (rationales,
judge replies); the score fix needs four of its columns and the export needs a few
thousand prompts' rows at a time. `ParquetSource` reads only those: `read(columns)`, or
`rows_of` some keys, which reads only the row groups holding them (one or two per few
thousand prompts when the file is in key order, as the annotate stages write it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

# Rows per Parquet row group in the files the pipelines write: a load decodes one group at a
# time, and `rows_of` reads only the groups it needs.
ROW_GROUP_ROWS = 32_768


class ParquetSource:
    def __init__(self, path: str, filesystem: Any = None) -> None:
        self.path = path
        self.filesystem = filesystem
        self._keys: dict[str, pa.ChunkedArray] = {}

    def __repr__(self) -> str:
        return f"ParquetSource({self.path!r})"

    def _file(self) -> pq.ParquetFile:
        if self.filesystem is None:
            return pq.ParquetFile(self.path)
        return pq.ParquetFile(self.filesystem.open(self.path, "rb"))

    @property
    def columns(self) -> list[str]:
        return self._file().schema_arrow.names

    def read(self, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """The whole table, or those of `columns` it has (the caller checks for the ones
        it requires, and names the dataset when one is missing)."""
        return pd.read_parquet(
            self.path, columns=self._present(columns), filesystem=self.filesystem
        )

    def rows_of(
        self, column: str, values: Sequence[Any], columns: Sequence[str] | None = None
    ) -> pd.DataFrame:
        """The rows whose `column` is one of `values`, in file order; `columns` as in
        `read`. The key column is read once and kept; of the rest, only the row groups
        holding those rows."""
        parquet = self._file()
        if column not in self._keys:
            self._keys[column] = parquet.read(columns=[column]).column(column)
        matches = pc.is_in(self._keys[column], value_set=pa.array(values))
        positions = np.flatnonzero(matches.to_numpy(zero_copy_only=False))
        if not len(positions):
            empty = parquet.schema_arrow.empty_table()
            return (empty if columns is None else empty.select(self._present(columns))).to_pandas()
        sizes = [parquet.metadata.row_group(i).num_rows for i in range(parquet.num_row_groups)]
        group_starts = np.cumsum([0, *sizes])
        groups = np.searchsorted(group_starts, positions, side="right") - 1
        touched = np.unique(groups)
        # Each touched group's first row in the table of the touched groups.
        read_start = np.zeros(len(sizes), dtype=np.int64)
        read_start[touched] = np.cumsum([0, *(sizes[g] for g in touched[:-1])])
        table = parquet.read_row_groups(touched.tolist(), columns=self._present(columns))
        within = positions - group_starts[groups] + read_start[groups]
        return table.take(pa.array(within, pa.int64())).to_pandas()

    def _present(self, columns: Sequence[str] | None) -> list[str] | None:
        if columns is None:
            return None
        present = set(self.columns)
        return [name for name in columns if name in present]
