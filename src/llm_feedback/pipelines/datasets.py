"""The project's own Kedro datasets.

* `JSONLinesDataset`: JSON Lines read by `llm_feedback.storage.jsonl`, so that a bad line in an
  input file is reported with its file and line number.
* `SamplesFileDataset` (in `samples_dataset.py`: its readers import scikit-learn, which
  only evaluate runs need): the evaluate pipeline's samples file in any format (a JSON list,
  JSON Lines or Parquet; `evaluation.sample_files`), read as its records; the node turns
  them into eval_samples rows by `evaluate.samples_format`.
* `LatestParquetDataset`: the latest version of a versioned Parquet dataset, or an empty
  frame with the given columns when none has been written yet (a node that accumulates
  across runs reads its own previous output through it).
* `ParquetDataset`, `TextDataset` and `PartitionedDataset` (and `MatplotlibDataset`, in
  `figure_dataset.py`, so that only runs that draw figures import matplotlib):
  kedro-datasets' own (same arguments, same files, same load), with a kedro-viz preview
  that always serialises, and saves that never leave a partial file: each writes a
  temporary file (Parquet: a staging folder of parts, `parquet_parts`) in the target's
  folder and moves it over the target (`os.replace`), so a kill or a failure mid-write
  leaves the old file, or none.

kedro-viz puts whatever a dataset's `preview()` returns into JSON. kedro-datasets' Parquet
preview hands it numpy arrays and dicts for list and struct columns, which fails `kedro viz
build --include-previews` (with exit status 0) and answers HTTP 500 in `kedro viz run`.
Here every table cell is a JSON-safe scalar: lists and structs become short JSON text, long
text is cut. The text and partitioned datasets of kedro-datasets have no preview at all.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import posixpath
import uuid
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, ClassVar, NewType

import fsspec
import numpy as np
import pandas as pd
from kedro.io import AbstractDataset, DatasetError
from kedro.io.core import get_filepath_str
from kedro_datasets._typing import TablePreview
from kedro_datasets.pandas import ParquetDataset as _KedroParquetDataset
from kedro_datasets.partitions import PartitionedDataset as _KedroPartitionedDataset
from kedro_datasets.text import TextDataset as _KedroTextDataset

from llm_feedback.core.errors import ConfigError, InputError, output_error
from llm_feedback.evaluation.attachments import SOURCE_DIR_ATTR
from llm_feedback.storage.jsonl import read_jsonl
from llm_feedback.storage.parquet_parts import PART_BYTES, PART_BYTES_ENV, save_parquet
from llm_feedback.storage.parquet_source import (
    ROW_GROUP_ROWS,
    UNREADABLE_PARQUET,
    ParquetSource,
    unreadable_parquet,
)
from llm_feedback.storage.remote_root import require_local

# kedro-viz shows a data node's preview by the name of `preview()`'s return annotation;
# "TextPreview" is drawn as preformatted text (no Markdown rendering of `_` or `*`).
TextPreview = NewType("TextPreview", str)

PREVIEW_ROWS = 5
CELL_CHARS = 200  # a table cell, JSON text included
STRING_CHARS = 60  # a string inside a list or struct cell
NESTED_DEPTH = 2  # list/struct levels shown before "{…N fields}" / "[…N items]"
TEXT_CHARS = 4000  # a text file's preview


def replace_atomically(
    fs: Any,
    protocol: str,
    path: str,
    write: Callable[[Any], None],
    mode: str = "wb",
    named: str | None = None,
    kept: str = "",
) -> None:
    """Call `write(handle)` on a temporary file beside `path`, then move it over `path`.

    A local file is flushed to disk before `os.replace`; another file system gets its own
    move. On any failure (Ctrl-C included) the temporary file is removed and `path` is as
    it was; a full or read-only disk is an `OutputError` naming `named` (default: `path`)
    and saying what is `kept`.

    Args:
        fs: the fsspec filesystem.
        protocol: its protocol.
        path: the file to replace.
        write: writes the content to an open handle.
        mode: the handle's mode.
        named: the dataset, named in an `OutputError` (default: `path`).
        kept: what stays as it was, said in an `OutputError`.
    """
    folder, name = posixpath.split(path)
    temporary = posixpath.join(folder, f".{name}.{uuid.uuid4().hex[:12]}.partial")
    try:
        if protocol == "file":
            os.makedirs(folder or ".", exist_ok=True)
            with open(temporary, mode) as handle:  # noqa: PTH123 - a mode chosen by the caller
                write(handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, path)
        else:
            with fs.open(temporary, mode) as handle:
                write(handle)
            fs.mv(temporary, path)
    except BaseException as error:
        if fs.exists(temporary):
            fs.rm(temporary)
        failed = output_error(named or path, error, kept)
        if failed is not None:
            raise failed from error
        raise


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# What Parquet (numpy arrays, dicts from struct columns), pandas and JSON give for a list
# or a struct.
NESTED = (Mapping, list, tuple, np.ndarray, pd.Series)


def _json_scalar(value: Any) -> Any:
    """A scalar as JSON holds it: a number, a bool, None or text."""
    if isinstance(value, np.generic):  # numpy scalars: np.int64, np.bool_, np.str_, ...
        value = value.item()
    if value is None or value is pd.NaT or value is pd.NA:
        return None
    if isinstance(value, float | Decimal):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    # dates and times; anything else as its text
    return value.isoformat() if isinstance(value, dt.date | dt.time) else str(value)


def _compact(value: Any, depth: int) -> Any:
    """A JSON-safe, shortened copy of a list/struct value for a preview cell."""
    if not isinstance(value, NESTED):
        safe = _json_scalar(value)
        return _truncate(safe, STRING_CHARS) if isinstance(safe, str) else safe
    if isinstance(value, Mapping):
        if depth >= NESTED_DEPTH:
            return f"{{…{len(value)} fields}}"
        return {str(key): _compact(item, depth + 1) for key, item in value.items()}
    items = list(value)
    if depth >= NESTED_DEPTH:
        return f"[…{len(items)} items]"
    return [_compact(item, depth + 1) for item in items]


def preview_cell(value: Any, limit: int = CELL_CHARS) -> Any:
    """One table cell as kedro-viz can show it: a number, a bool, None or a string.

    Text is cut to `limit` characters; a list or struct (a numpy array from Parquet, a
    dict from a struct column) becomes JSON text, its strings cut to `STRING_CHARS` and
    levels from `NESTED_DEPTH` on summarised as "{…N fields}" / "[…N items]".

    Args:
        value: the cell.
        limit: the most characters of text.

    Returns:
        The cell as kedro-viz shows it.
    """
    if isinstance(value, NESTED):
        safe = json.dumps(_compact(value, 0), ensure_ascii=False)
    else:
        safe = _json_scalar(value)
    return _truncate(safe, limit) if isinstance(safe, str) else safe


def table_preview(frame: pd.DataFrame, nrows: int = PREVIEW_ROWS) -> dict[str, Any]:
    """`frame`'s first `nrows` rows in pandas' "split" layout (what kedro-viz's table
    preview reads), every cell JSON-safe.

    Args:
        frame: the table.
        nrows: how many rows.

    Returns:
        The "split" layout.
    """
    head = frame.head(nrows)
    return {
        "index": [preview_cell(label) for label in head.index],
        "columns": [str(column) for column in head.columns],
        "data": [[preview_cell(cell) for cell in row] for row in head.itertuples(index=False)],
    }


def _rows_preview(columns: list[str], rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "index": list(range(len(rows))),
        "columns": [str(column) for column in columns],
        "data": [[preview_cell(row[column]) for column in columns] for row in rows],
    }


class ParquetDataset(_KedroParquetDataset):
    """`kedro_datasets.pandas.ParquetDataset` with a preview that always serialises and a
    save that never leaves a half-written file.

    `type: llm_feedback.pipelines.datasets.ParquetDataset`, the same arguments (`filepath`,
    `versioned`, `load_args`, ...); load is kedro-datasets' own.

    Row groups hold `ROW_GROUP_ROWS` rows unless `save_args` say otherwise: reading a table
    of a quarter of a million completions decodes one group at a time (a single group
    doubles the memory a load needs), and a preview or a `ParquetSource` reads only the
    groups it needs.

    A table past `save_args.part_bytes` (default `PART_BYTES`, 512 MiB, or the environment's
    `LLM_FEEDBACK_PART_BYTES`) is written as a folder of parts at the same path
    (`parquet_parts`): still one version, one catalog entry, one `pandas.read_parquet`.
    """

    DEFAULT_SAVE_ARGS: ClassVar[dict[str, Any]] = {"row_group_size": ROW_GROUP_ROWS}

    def __init__(self, *, save_args: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """Kedro's `ParquetDataset`, with our `part_bytes` save argument taken out of pandas'.

        Args:
            save_args: pandas' save arguments, plus `part_bytes` (default:
                $LLM_FEEDBACK_PART_BYTES, else `parquet_parts.PART_BYTES`).
            **kwargs: `kedro_datasets.pandas.ParquetDataset`'s arguments.
        """
        super().__init__(save_args=save_args, **kwargs)
        # Ours, not pandas': a table that would be a larger file is written as parts.
        configured = self._save_args.pop("part_bytes", os.environ.get(PART_BYTES_ENV))
        self._part_bytes = _positive_bytes(configured, self._filepath)

    def save(self, data: pd.DataFrame) -> None:
        """Write the table in a staging folder, then move it over the target
        (`parquet_parts.save_parquet`): one file, or a folder of parts once it would pass
        `part_bytes`. A run killed or failing while writing leaves nothing that a later run
        or notebook would load as the latest version.

        Args:
            data: the table (a DataFrame, or a table that writes itself).
        """
        save_path = get_filepath_str(self._get_save_path(), self._protocol)
        try:
            save_parquet(
                self._fs,
                self._protocol,
                save_path,
                data,
                self._save_args,
                part_bytes=self._part_bytes,
                versioned=self._version is not None,
            )
        except OSError as error:
            kept = "every earlier version" if self._version is not None else ""
            failed = output_error(save_path, error, kept)
            if failed is None:
                raise
            raise failed from error
        self._invalidate_cache()

    def load(self) -> pd.DataFrame:
        """kedro-datasets' load; a file that is not readable Parquet (cut short by a full
        disk or a kill) is an `InputError` naming the dataset, its version and the file."""
        try:
            return super().load()
        except DatasetError as error:
            cause = error.__cause__
            if isinstance(cause, UNREADABLE_PARQUET) and not isinstance(cause, FileNotFoundError):
                load_path = get_filepath_str(self._get_load_path(), self._protocol)
                raise unreadable_parquet(load_path, cause) from error
            raise

    def source(self) -> ParquetSource:
        """The version the catalog would load, as a `ParquetSource` (read as needed)."""
        load_path = get_filepath_str(self._get_load_path(), self._protocol)
        return ParquetSource(load_path, None if self._protocol == "file" else self._fs)

    def preview(self, nrows: int = PREVIEW_ROWS) -> TablePreview:
        """The first `nrows` rows of the version the catalog would load; reads only the
        first row group it needs.

        Args:
            nrows: how many rows.

        Returns:
            The preview.
        """
        columns = self._load_args.get("columns")
        source = self.source()
        rows = source.head(nrows, columns).to_pylist()
        return TablePreview(_rows_preview(list(columns or source.columns), rows))


def _positive_bytes(configured: Any, filepath: Any) -> int:
    """`part_bytes` of a dataset's save_args, else of `PART_BYTES_ENV`, else `PART_BYTES`."""
    if configured is None:
        return PART_BYTES
    try:
        value = int(configured)
    except (TypeError, ValueError):
        value = 0
    if value <= 0 or isinstance(configured, bool):
        raise ConfigError(
            f"{filepath}: part_bytes (save_args, or {PART_BYTES_ENV}) must be a positive "
            f"whole number of bytes, got {configured!r}"
        )
    return value


class ParquetSourceDataset(ParquetDataset):
    """A `ParquetDataset` (same arguments, same files, same save) that loads a
    `ParquetSource`: a node reads the columns or rows it needs instead of the whole table;
    `.read()` is the DataFrame `ParquetDataset` would load."""

    def load(self) -> ParquetSource:
        return self.source()


class TextDataset(_KedroTextDataset):
    """`kedro_datasets.text.TextDataset` with a kedro-viz preview: the file's beginning as
    plain text, and an atomic save. `type: llm_feedback.pipelines.datasets.TextDataset`,
    the same arguments."""

    def save(self, data: str) -> None:
        """Write the text to a temporary file, then move it over the target.

        Args:
            data: the text.
        """
        save_path = get_filepath_str(self._get_save_path(), self._protocol)
        encoded = data.encode(self._fs_open_args_save.get("encoding") or "utf-8")
        replace_atomically(
            self._fs, self._protocol, save_path, lambda handle: handle.write(encoded)
        )
        self._invalidate_cache()

    def preview(self, max_chars: int = TEXT_CHARS) -> TextPreview:
        """The file's beginning, for kedro-viz.

        Args:
            max_chars: the most characters shown.

        Returns:
            The preview.
        """
        return TextPreview(_truncate(self.load(), max_chars))


class PartitionedDataset(_KedroPartitionedDataset):
    """`kedro_datasets.partitions.PartitionedDataset` with a kedro-viz preview: the first
    rows of its partitions in partition order, each with the `partition` it comes from.
    `type: llm_feedback.pipelines.datasets.PartitionedDataset`, the same arguments.

    A folder without a file of `filename_suffix` is an input error that says which files
    are read and which were found instead (kedro-datasets says "No partitions found")."""

    def load(self) -> dict[str, Any]:
        try:
            return super().load()
        except DatasetError as error:
            if not str(error).startswith("No partitions found"):
                raise
            raise InputError(self._no_partitions()) from None

    def _no_partitions(self) -> str:
        suffix = self._filename_suffix or "data"
        folder = str(self._path)
        # Through the dataset's own filesystem: the data root may be remote.
        others = (
            sorted(posixpath.basename(str(entry)) for entry in self._filesystem.ls(folder))
            if self._filesystem.isdir(folder)
            else []
        )
        found = (
            f"found only {', '.join(others[:5])}{' ...' if len(others) > 5 else ''}"
            if others
            else "the folder is empty or missing"
        )
        return (
            f"{folder}: no {suffix} file to read ({found}); only {suffix} files are read: "
            f"save the input as {suffix} (JSON Lines, one object per line)"
        )

    def preview(self, nrows: int = PREVIEW_ROWS) -> TablePreview:
        """The first rows of the partitions, in name order, each with its partition's name.

        Args:
            nrows: how many rows.

        Returns:
            The preview.
        """
        heads: list[pd.DataFrame] = []
        remaining = nrows
        for partition, load in sorted(self.load().items()):
            if remaining <= 0:
                break
            data = load()
            frame = data if isinstance(data, pd.DataFrame) else pd.DataFrame({"value": [data]})
            head = frame.head(remaining).copy()
            head.insert(0, "partition", partition)
            heads.append(head)
            remaining -= len(head)
        if not heads:
            return TablePreview(table_preview(pd.DataFrame(columns=["partition"]), nrows))
        return TablePreview(table_preview(pd.concat(heads, ignore_index=True), nrows))


class JSONLinesDataset(AbstractDataset[pd.DataFrame, pd.DataFrame]):
    """Read-only: `type: llm_feedback.pipelines.datasets.JSONLinesDataset`, `filepath`."""

    def __init__(self, filepath: str, metadata: dict[str, Any] | None = None) -> None:
        """Name the file; nothing is read until `load`.

        Args:
            filepath: the JSON Lines file.
            metadata: Kedro's free-form dataset metadata.
        """
        self._filepath = require_local(filepath, "JSON Lines input")  # read with line numbers
        self.metadata = metadata

    def load(self) -> pd.DataFrame:
        frame = read_jsonl(self._filepath)
        if frame.empty and not len(frame.columns):
            raise InputError(
                f"{self._filepath}: the file is empty (no JSON object on any line); add one "
                "JSON object per line, or remove the file"
            )
        # Paths inside the file (e.g. eval_samples' images) are relative to its folder.
        frame.attrs[SOURCE_DIR_ATTR] = str(self._filepath.resolve().parent)
        return frame

    def save(self, data: pd.DataFrame) -> None:
        """Refuse: the file is input data.

        Args:
            data: what a node would write.
        """
        raise DatasetError(f"{self._filepath} is input data; this dataset does not write it")

    def preview(self, nrows: int = PREVIEW_ROWS) -> TablePreview:
        """The file's first rows, for kedro-viz.

        Args:
            nrows: how many rows.

        Returns:
            The preview.
        """
        return TablePreview(table_preview(self.load(), nrows))

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath)}

    def _exists(self) -> bool:
        return self._filepath.is_file()


class LatestParquetDataset(AbstractDataset[pd.DataFrame, pd.DataFrame]):
    """Read-only: `filepath` of a versioned Parquet dataset and `columns` (the schema.py
    table name of its columns, e.g. JUDGE_VALIDATION_COLUMN_TYPES): its latest version, or
    an empty frame of those columns before the first one is written."""

    def __init__(self, filepath: str, columns: str, metadata: dict[str, Any] | None = None) -> None:
        """Name the versioned table and its columns' table in schema.py.

        Args:
            filepath: the versioned dataset's folder.
            columns: the name of its column table in schema.py.
            metadata: Kedro's free-form dataset metadata.
        """
        from llm_feedback.storage import schema  # noqa: PLC0415 - the table named in the catalog

        self._filepath = filepath
        # Through fsspec: the data root may be a bucket.
        self._fs, self._path = fsspec.core.url_to_fs(filepath)
        if not isinstance(getattr(schema, columns, None), dict):
            raise DatasetError(f"{filepath}: columns {columns!r} is not a table of schema.py")
        self._types: dict[str, str] = getattr(schema, columns)
        self.metadata = metadata

    def _latest(self) -> str | None:
        """The file of the newest version (versions are named by sortable timestamps)."""
        if not self._fs.isdir(self._path):
            return None
        name = posixpath.basename(self._path)
        versions = sorted(
            f"{version}/{name}"
            for version in self._fs.ls(self._path, detail=False)
            if self._fs.exists(f"{version}/{name}")  # a file, or a folder of parts
        )
        return versions[-1] if versions else None

    def load(self) -> pd.DataFrame:
        latest = self._latest()
        if latest is None:
            return pd.DataFrame(columns=list(self._types)).astype(self._types)
        return ParquetSource(latest, self._fs).read()

    def save(self, data: pd.DataFrame) -> None:
        """Refuse: this dataset only reads.

        Args:
            data: what a node would write.
        """
        raise DatasetError(f"{self._filepath}: this dataset reads the latest version only")

    def preview(self, nrows: int = PREVIEW_ROWS) -> TablePreview:
        """The latest version's first rows, for kedro-viz.

        Args:
            nrows: how many rows.

        Returns:
            The preview.
        """
        return TablePreview(table_preview(self.load(), nrows))

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath)}

    def _exists(self) -> bool:
        return True


class OptionalCSVDataset(AbstractDataset[pd.DataFrame, pd.DataFrame]):
    """A CSV table one stage writes and later stages read: before it is first written (a
    data root made by an older version, or a stage run on its own) it loads as an empty
    frame, which the readers take as "not measured". `type:
    llm_feedback.pipelines.datasets.OptionalCSVDataset`, `filepath`."""

    def __init__(self, filepath: str, metadata: dict[str, Any] | None = None) -> None:
        """Name the file; nothing is read until `load`.

        Args:
            filepath: the CSV file.
            metadata: Kedro's free-form dataset metadata.
        """
        self._filepath = filepath
        self._fs, self._path = fsspec.core.url_to_fs(filepath)
        protocol = self._fs.protocol
        self._protocol = protocol if isinstance(protocol, str) else protocol[0]
        self.metadata = metadata

    def load(self) -> pd.DataFrame:
        if not self._fs.exists(self._path):
            return pd.DataFrame()
        with self._fs.open(self._path, "rb") as handle:
            return pd.read_csv(handle)

    def save(self, data: pd.DataFrame) -> None:
        """Write the table as CSV to a temporary file, then move it over the target.

        Args:
            data: the table.
        """
        encoded = data.to_csv(index=False).encode("utf-8")
        replace_atomically(self._fs, self._protocol, self._path, lambda h: h.write(encoded))

    def preview(self, nrows: int = PREVIEW_ROWS) -> TablePreview:
        """The table's first rows, for kedro-viz.

        Args:
            nrows: how many rows.

        Returns:
            The preview.
        """
        return TablePreview(table_preview(self.load(), nrows))

    def _describe(self) -> dict[str, Any]:
        return {"filepath": self._filepath}

    def _exists(self) -> bool:
        return self._fs.exists(self._path)
