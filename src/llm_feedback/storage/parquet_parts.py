"""Tables too large for one file, written as a folder of Parquet parts.

A dataset at `<name>.parquet` is one Parquet file while it is small; once the file would
pass `PART_BYTES`, the same path is a folder of parts, `part-00000.parquet`,
`part-00001.parquet`, ..., each holding whole row groups and the same schema (its pandas
metadata included). Whatever reads a folder of Parquet files reads it as the one table, in
part order: `pandas.read_parquet(path)`, `pyarrow.parquet.read_table(path)`, Kedro's
`ParquetDataset`, `datasets.load_dataset("parquet", data_dir=path)`, and the project's own
`ParquetSource`. At a million prompts `aspect_annotations` is about 4 GB of Parquet: in parts
of 512 MiB each one can be copied, uploaded or opened by a notebook on its own.

`save_parquet` writes the parts in a staging folder beside the target and moves them over it
when all are written, so a run killed mid-write leaves the old version, or none: one part
becomes the plain file it always was, several the folder. A staging folder is named after
its host and process; the next save of the same table removes those that a process of this
host left behind when it was killed (a gigabyte each at scale, and hidden).
"""

from __future__ import annotations

import os
import posixpath
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

# A part is closed after the row group that takes it to this many bytes: a 4 GB table is
# eight files, a table of the default run's size stays one.
PART_BYTES = 512 * 2**20
# Sets every Parquet dataset's default (a dataset's `save_args: {part_bytes: N}` wins).
PART_BYTES_ENV = "LLM_FEEDBACK_PART_BYTES"
PART_PREFIX = "part-"
PART_SUFFIX = ".parquet"
STAGING_SUFFIX = ".partial"


def part_name(number: int) -> str:
    """The file name of part `number`: `part-NNNNN.parquet`.

    Args:
        number: the part's number.

    Returns:
        The name.
    """
    return f"{PART_PREFIX}{number:05d}{PART_SUFFIX}"


def part_paths(path: str, filesystem: Any = None) -> list[str]:
    """The files of the table at `path`: `[path]` for one file, else the folder's parts in
    order. `filesystem`: an fsspec filesystem, or None for a local path.

    Args:
        path: the table's file or folder.
        filesystem: an fsspec filesystem (None: local).

    Returns:
        The files, in order.
    """
    if filesystem is None:
        if not os.path.isdir(path):
            return [path]
        names = os.listdir(path)
    else:
        if not filesystem.isdir(path):
            return [path]
        names = [
            posixpath.basename(entry.rstrip("/")) for entry in filesystem.ls(path, detail=False)
        ]
    parts = sorted(
        name for name in names if name.startswith(PART_PREFIX) and name.endswith(PART_SUFFIX)
    )
    if not parts:
        raise FileNotFoundError(f"{path}: a folder without a {PART_PREFIX}*{PART_SUFFIX} file")
    return [posixpath.join(path, name) for name in parts]


class PartedTarget:
    """Where `write_parquet` writes a table as parts (see the module's docstring): given as
    the `path` of a table's `to_parquet`, it opens `part-NNNNN.parquet` files in `folder`
    one after another, each closed once it holds `part_bytes`."""

    def __init__(self, filesystem: Any, folder: str, part_bytes: int = PART_BYTES) -> None:
        """Name the folder; no part is open until a write.

        Args:
            filesystem: the fsspec filesystem.
            folder: the folder the parts go in.
            part_bytes: the size a part is closed at.
        """
        if part_bytes <= 0:
            raise ValueError(f"part_bytes must be positive, got {part_bytes}")
        self.filesystem = filesystem
        self.folder = folder
        self.part_bytes = part_bytes
        self.parts: list[str] = []

    def _open(self) -> Any:
        path = posixpath.join(self.folder, part_name(len(self.parts)))
        self.parts.append(path)
        return self.filesystem.open(path, "wb")

    def write(
        self,
        schema: pa.Schema,
        tables: Iterator[pa.Table],
        row_group_size: int | None = None,
        **kwargs: Any,
    ) -> None:
        """`tables` cast to `schema`, as row groups of parts; at least one part, if empty.

        Args:
            schema: the table's schema.
            tables: the table, a piece at a time.
            row_group_size: rows per row group (None: one per piece).
            **kwargs: arguments for `pyarrow.parquet.ParquetWriter`.
        """
        handle = writer = None
        try:
            for group in _row_groups(tables, row_group_size):
                if writer is None:
                    handle = self._open()
                    writer = pq.ParquetWriter(handle, schema, **kwargs)
                writer.write_table(group.cast(schema))
                if handle.tell() >= self.part_bytes:
                    writer.close()
                    handle.close()
                    handle = writer = None
            if not self.parts:
                handle = self._open()
                writer = pq.ParquetWriter(handle, schema, **kwargs)
        finally:
            if writer is not None:
                writer.close()
            if handle is not None:
                handle.close()

    def write_frame(self, frame: pd.DataFrame, **save_args: Any) -> None:
        """A DataFrame written by its own `to_parquet` (pandas' metadata, attributes and
        index as pandas writes them); a file past `part_bytes` is then split into parts a
        row group at a time (a frame that large is rare: the large tables stream).

        Args:
            frame: the frame.
            **save_args: arguments for its `to_parquet`.
        """
        whole = posixpath.join(self.folder, "whole.parquet")
        with self.filesystem.open(whole, "wb") as handle:
            frame.to_parquet(handle, **save_args)
        if self.filesystem.size(whole) <= self.part_bytes:
            self.parts.append(posixpath.join(self.folder, part_name(0)))
            self.filesystem.mv(whole, self.parts[0])
            return
        with self.filesystem.open(whole, "rb") as handle:
            parquet = pq.ParquetFile(handle)
            groups = (parquet.read_row_group(group) for group in range(parquet.num_row_groups))
            self.write(
                parquet.schema_arrow, groups, compression=save_args.get("compression", "snappy")
            )
        self.filesystem.rm(whole)


def _row_groups(tables: Iterator[pa.Table], rows: int | None) -> Iterator[pa.Table]:
    """Each table whole, or in slices of `rows` rows: one row group each, so that a part
    ends between two groups."""
    for table in tables:
        if not rows or table.num_rows <= rows:
            yield table
            continue
        for start in range(0, table.num_rows, rows):
            yield table.slice(start, rows)


def save_parquet(
    filesystem: Any,
    protocol: str,
    path: str,
    data: Any,
    save_args: dict[str, Any],
    *,
    part_bytes: int = PART_BYTES,
    versioned: bool = False,
) -> None:
    """`data` (a DataFrame, or a table whose `to_parquet` takes a `PartedTarget`) written
    to `path` as one file or a folder of parts, through a staging folder beside it; a
    failure or a kill (Ctrl-C included) removes the staging folder and leaves `path` as it
    was. `versioned`: `path` is Kedro's `<table>/<version>/<name>`, and a killed save's
    staging is looked for in every version's folder.

    Args:
        filesystem: the fsspec filesystem.
        protocol: its protocol.
        path: where the table goes.
        data: the table.
        save_args: arguments for `to_parquet`.
        part_bytes: the size a part is closed at.
        versioned: whether `path` is in Kedro's version folders.
    """
    remove_abandoned_staging(filesystem, path, versioned)
    folder, name = posixpath.split(path)
    owner = f"{socket.gethostname()}-{os.getpid()}"
    staging = posixpath.join(folder, f".{name}.{uuid.uuid4().hex[:12]}.{owner}{STAGING_SUFFIX}")
    filesystem.makedirs(staging, exist_ok=True)
    target = PartedTarget(filesystem, staging, part_bytes)
    try:
        if isinstance(data, pd.DataFrame):
            target.write_frame(data, **save_args)
        else:
            data.to_parquet(target, **save_args)
        _publish(filesystem, protocol, target.parts, staging, path)
    finally:
        if filesystem.exists(staging):
            filesystem.rm(staging, recursive=True)


def remove_abandoned_staging(filesystem: Any, path: str, versioned: bool = False) -> list[str]:
    """Remove the staging folders of `path` (in its version folders, if `versioned`) whose
    process, on this host, is gone: a save killed without its cleanup (SIGKILL, out of
    memory). A version folder left holding nothing else goes too. Returns what was removed.

    Args:
        filesystem: the fsspec filesystem.
        path: the table's path.
        versioned: whether `path` is in Kedro's version folders.

    Returns:
        The paths removed.
    """
    folder, name = posixpath.split(path)
    parent = posixpath.dirname(folder) if versioned else folder
    pattern = posixpath.join(parent, "*" if versioned else "", f".{name}.*{STAGING_SUFFIX}")
    removed = []
    for staging in filesystem.glob(pattern):
        if not _abandoned(posixpath.basename(staging.rstrip("/")), name):
            continue
        filesystem.rm(staging, recursive=True)
        removed.append(staging)
        version = posixpath.dirname(staging.rstrip("/"))
        if not versioned or version == folder:
            continue
        try:
            left = filesystem.ls(version, detail=False)
        except FileNotFoundError:  # object storage: a prefix with nothing left is gone
            continue
        if not left:
            filesystem.rm(version, recursive=True)
    return removed


def _abandoned(staging: str, name: str) -> bool:
    """Whether `.<name>.<id>.<host>-<pid>.partial` was made by a process of this host that
    no longer runs (another host's, or an unnamed one, cannot be told: kept)."""
    owner = staging[len(name) + 2 : -len(STAGING_SUFFIX)].partition(".")[2]
    host, _, pid = owner.rpartition("-")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's process: alive
        return False
    return False


def _publish(filesystem: Any, protocol: str, parts: list[str], staging: str, path: str) -> None:
    """The staged parts moved to `path`: one as the file, several as the folder; what was at
    `path` (an unversioned dataset's last save) is replaced."""
    source = parts[0] if len(parts) == 1 else staging
    if protocol != "file":
        # Object storage has no folders to move (nor atomic moves): each part is copied to
        # its place; only complete parts ever reach `path`.
        if filesystem.exists(path):
            filesystem.rm(path, recursive=True)
        if len(parts) == 1:
            filesystem.mv(parts[0], path)
        for part in parts if len(parts) > 1 else []:
            filesystem.mv(part, posixpath.join(path, posixpath.basename(part)))
        return
    for part in parts:  # on disk before the move, so a crash cannot publish empty files
        descriptor = os.open(part, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
    if os.path.isdir(path) or (len(parts) > 1 and os.path.exists(path)):
        # os.replace cannot put a folder over a file or a non-empty folder: the old one is
        # moved aside first and removed once the new one is in place.
        aside = f"{staging}.old"
        os.replace(path, aside)
        try:
            os.replace(source, path)
        except BaseException:
            os.replace(aside, path)
            raise
        filesystem.rm(aside, recursive=True)
    else:
        os.replace(source, path)
