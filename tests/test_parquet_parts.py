"""A table past `part_bytes` is a folder of Parquet parts at its usual path: one version, one
catalog entry, read as the one table by pandas, pyarrow, `datasets`, Kedro and
`ParquetSource`; a table below it stays the one file it always was."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from kedro.io import Version

from llm_feedback.core.errors import ConfigError
from llm_feedback.pipelines.datasets import (
    LatestParquetDataset,
    ParquetDataset,
    ParquetSourceDataset,
)
from llm_feedback.storage.parquet_parts import PART_BYTES_ENV, part_paths
from llm_feedback.storage.parquet_source import ParquetSource
from llm_feedback.storage.spool import FrameSpool

PROMPTS = 6000
GROUP_ROWS = 1000
PART_BYTES = 80_000  # a few row groups of the table below per part


def annotations(prompts: int = PROMPTS) -> pd.DataFrame:
    """Four rows per prompt, in prompt order, with the dtypes the judge tables have."""
    rows = prompts * 4
    rng = np.random.default_rng(7)
    rating = pd.array(rng.integers(1, 6, rows).astype(float), dtype="Float64")
    rating[::13] = pd.NA
    return pd.DataFrame(
        {
            "prompt_id": np.repeat([f"p{i:06d}" for i in range(prompts)], 4),
            "model": pd.Categorical(np.tile(["alpha", "beta", "gamma", "delta"], prompts)),
            "rating": rating,
            "rationale": pd.array(
                [f"rationale {i} " + "x" * int(rng.integers(5, 60)) for i in range(rows)],
                dtype="string",
            ),
        }
    )


def spooled(frame: pd.DataFrame) -> FrameSpool:
    """`frame` as a stage streams it: appended a chunk of prompts at a time."""
    spool = FrameSpool(frame.iloc[:0])
    for start in range(0, len(frame), 4096):
        spool.append(frame.iloc[start : start + 4096].reset_index(drop=True))
    return spool.finish()


def saved(tmp_path: Path, name: str, table, part_bytes: int = PART_BYTES) -> ParquetSource:
    dataset = ParquetSourceDataset(
        filepath=str(tmp_path / f"{name}.parquet"),
        version=Version(None, None),
        save_args={"row_group_size": GROUP_ROWS, "part_bytes": part_bytes},
    )
    dataset.save(table)
    return dataset.load()


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return annotations()


@pytest.fixture
def parted(tmp_path: Path, frame: pd.DataFrame) -> ParquetSource:
    return saved(tmp_path, "parted", spooled(frame))


@pytest.fixture
def single(tmp_path: Path, frame: pd.DataFrame) -> ParquetSource:
    return saved(tmp_path, "single", spooled(frame), part_bytes=2**40)


def test_a_streamed_table_past_part_bytes_is_written_as_parts_of_whole_row_groups(parted, frame):
    folder = Path(parted.path)
    assert folder.is_dir() and folder.name == "parted.parquet"
    parts = sorted(folder.iterdir())
    assert [p.name for p in parts] == [f"part-{n:05d}.parquet" for n in range(len(parts))]
    assert len(parts) >= 3
    files = [pq.ParquetFile(p) for p in parts]
    largest_group = max(
        sum(group.column(c).total_compressed_size for c in range(group.num_columns))
        for f in files
        for group in (f.metadata.row_group(g) for g in range(f.num_row_groups))
    )
    for part in parts[:-1]:  # each closed by the group that took it to part_bytes
        assert PART_BYTES <= part.stat().st_size <= PART_BYTES + 2 * largest_group
    assert {f.metadata.row_group(0).num_rows for f in files[:-1]} == {GROUP_ROWS}
    assert all(f.schema_arrow == files[0].schema_arrow for f in files)  # pandas metadata too
    # Nothing but the version's table is left in its folder: no staging folder.
    assert [p.name for p in folder.parent.iterdir()] == ["parted.parquet"]


def test_every_reader_of_a_parquet_folder_reads_the_parts_as_the_one_table(parted, frame):
    import datasets

    pd.testing.assert_frame_equal(pd.read_parquet(parted.path), frame)
    assert pq.read_table(parted.path).num_rows == len(frame)
    loaded = ParquetDataset(filepath=parted.path).load()  # Kedro's own load of the path
    pd.testing.assert_frame_equal(loaded, frame)
    hub = datasets.load_dataset(
        "parquet",
        data_dir=parted.path,
        split="train",
        cache_dir=str(Path(parted.path).parent / "hf"),
    )
    assert hub["prompt_id"] == frame["prompt_id"].tolist()
    assert hub["rationale"] == frame["rationale"].tolist()


def test_a_parquet_source_reads_parts_as_it_reads_the_one_file(parted, single, frame):
    assert len(part_paths(parted.path)) > 1 and part_paths(single.path) == [single.path]
    assert (parted.num_rows, parted.columns, parted.schema) == (
        single.num_rows,
        single.columns,
        single.schema,
    )
    pd.testing.assert_frame_equal(
        parted.read(["rating", "model"]), single.read(["rating", "model"])
    )
    # Keys in the first, a middle and the last part, read from the groups holding them only.
    keys = ["p000002", "p003001", "p005999", "not there"]
    pd.testing.assert_frame_equal(
        parted.rows_of("prompt_id", keys), single.rows_of("prompt_id", keys)
    )
    assert parted.rows_of("prompt_id", ["none"]).empty
    assert parted.in_key_order() and parted.distinct_count() == PROMPTS
    assert parted.distinct("model") == single.distinct("model")
    for ours, theirs in zip(parted.key_chunks(777), single.key_chunks(777), strict=True):
        pd.testing.assert_frame_equal(ours, theirs)
    for ours, theirs in zip(parted.row_batches(), single.row_batches(), strict=True):
        pd.testing.assert_frame_equal(ours, theirs)
    readers = parted.key_reader(["rating"]), single.key_reader(["rating"])
    for last in ("p001500", "p004999", "p005999"):
        pd.testing.assert_frame_equal(readers[0].through(last), readers[1].through(last))
    assert parted.head(3).equals(single.head(3))
    assert parted.head(10_000, ["prompt_id"]).num_rows == 10_000


def test_a_preview_and_the_latest_version_read_a_folder_of_parts(tmp_path, frame):
    path = str(tmp_path / "t.parquet")
    arguments = {
        "filepath": path,
        "save_args": {"row_group_size": GROUP_ROWS, "part_bytes": PART_BYTES},
    }
    dataset = ParquetDataset(**arguments, version=Version(None, None))
    dataset.save(frame)
    whole = ParquetDataset(filepath=str(tmp_path / "w.parquet"), version=Version(None, None))
    whole.save(frame)
    assert dataset.preview(4) == whole.preview(4)
    latest = LatestParquetDataset(filepath=path, columns="JUDGE_VALIDATION_COLUMN_TYPES")
    pd.testing.assert_frame_equal(latest.load(), frame)


def test_a_data_frame_past_part_bytes_is_split_by_its_row_groups_as_pandas_wrote_it(
    tmp_path, frame
):
    table = frame.copy()
    table.attrs["run"] = "kept"
    dataset = ParquetDataset(
        filepath=str(tmp_path / "f.parquet"),
        save_args={"row_group_size": GROUP_ROWS, "part_bytes": PART_BYTES},
    )
    dataset.save(table)
    assert len(part_paths(str(tmp_path / "f.parquet"))) >= 3
    loaded = dataset.load()
    pd.testing.assert_frame_equal(loaded, table)
    assert loaded.attrs == {"run": "kept"}


def test_a_table_below_part_bytes_stays_one_file(tmp_path, frame):
    source = saved(tmp_path, "small", spooled(frame.head(400)))
    assert Path(source.path).is_file()
    default = ParquetDataset(filepath=str(tmp_path / "d.parquet"), version=Version(None, None))
    default.save(frame)  # the default part size: 512 MiB
    assert Path(default.source().path).is_file()
    assert sorted(p.name for p in Path(default.source().path).parent.iterdir()) == ["d.parquet"]


def test_an_unversioned_table_turns_from_a_file_into_parts_and_back(tmp_path, frame):
    path = tmp_path / "u.parquet"
    dataset = ParquetDataset(
        filepath=str(path), save_args={"row_group_size": GROUP_ROWS, "part_bytes": PART_BYTES}
    )
    for rows in (10, len(frame), len(frame) // 2, 10):
        dataset.save(frame.head(rows))
        assert path.is_file() == (rows == 10)
        pd.testing.assert_frame_equal(dataset.load(), frame.head(rows))
        assert [p.name for p in tmp_path.iterdir()] == ["u.parquet"]


class _BreaksAfterSomeParts:
    """A streamed table whose source fails after writing several parts' worth of rows."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self._frame = frame

    def to_parquet(self, target, **kwargs):
        from llm_feedback.storage.spool import write_parquet

        def groups() -> Iterator[pa.Table]:
            schema = pa.Schema.from_pandas(self._frame, preserve_index=False)
            for start in range(0, len(self._frame) // 2, GROUP_ROWS):
                yield pa.Table.from_pandas(self._frame.iloc[start : start + GROUP_ROWS], schema)
            raise OSError("judge table source vanished")

        schema = pa.Schema.from_pandas(self._frame, preserve_index=False)
        write_parquet(
            target,
            schema,
            groups(),
            kwargs.pop("index", None),
            kwargs.pop("row_group_size"),
            **kwargs,
        )


def test_a_table_failing_after_some_parts_leaves_the_last_version_and_no_staging(tmp_path, frame):
    folder = tmp_path / "t.parquet"
    arguments = {
        "filepath": str(folder),
        "save_args": {"row_group_size": GROUP_ROWS, "part_bytes": PART_BYTES},
    }
    ParquetDataset(**arguments, version=Version(None, None)).save(frame.head(100))
    with pytest.raises(Exception, match="source vanished"):
        ParquetDataset(**arguments, version=Version(None, None)).save(_BreaksAfterSomeParts(frame))
    pd.testing.assert_frame_equal(
        ParquetDataset(**arguments, version=Version(None, None)).load(), frame.head(100)
    )
    left = [p.relative_to(folder) for p in folder.rglob("*") if p.is_file()]
    assert len(left) == 1 and left[0].name == "t.parquet"  # the first version, no part


def _staging(folder: Path, name: str, owner: str) -> Path:
    """A staging folder as `save_parquet` names it, holding a part already written."""
    staging = folder / f".{name}.0123456789ab.{owner}.partial"
    staging.mkdir(parents=True)
    (staging / "part-00000.parquet").write_bytes(b"PAR1 half a part")
    return staging


@pytest.fixture(scope="module")
def dead_pid() -> int:
    """The pid of a process of this host that has exited (what a SIGKILL leaves)."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_save_killed_mid_write_leaves_staging_that_the_next_save_removes(
    tmp_path, frame, dead_pid
):
    host = socket.gethostname()
    killed = _staging(tmp_path, "u.parquet", f"{host}-{dead_pid}")
    running = _staging(tmp_path, "u.parquet", f"{host}-{os.getpid()}")  # a save under way
    elsewhere = _staging(tmp_path, "u.parquet", f"other-host-{dead_pid}")  # cannot be told
    other_table = _staging(tmp_path, "v.parquet", f"{host}-{dead_pid}")
    ParquetDataset(filepath=str(tmp_path / "u.parquet")).save(frame.head(10))
    assert not killed.exists()
    assert running.exists() and elsewhere.exists() and other_table.exists()
    assert (tmp_path / "u.parquet").is_file()


def test_a_versioned_save_removes_a_killed_version_s_staging_and_its_empty_folder(
    tmp_path, frame, dead_pid
):
    root = tmp_path / "t.parquet"
    killed_version = root / "2026-12-01T10.00.00.000Z"
    _staging(killed_version, "t.parquet", f"{socket.gethostname()}-{dead_pid}")
    dataset = ParquetDataset(
        filepath=str(root),
        version=Version(None, None),
        save_args={"row_group_size": GROUP_ROWS, "part_bytes": PART_BYTES},
    )
    dataset.save(frame)
    (saved_version,) = root.iterdir()
    assert saved_version.name != killed_version.name
    assert [p.name for p in saved_version.iterdir()] == ["t.parquet"]
    pd.testing.assert_frame_equal(dataset.load(), frame)


@pytest.mark.parametrize("part_bytes", [0, -5, "half", True])
def test_part_bytes_that_are_not_a_positive_number_are_refused_naming_the_dataset(
    tmp_path, part_bytes
):
    with pytest.raises(ConfigError, match=r"t\.parquet: part_bytes .* got"):
        ParquetDataset(filepath=str(tmp_path / "t.parquet"), save_args={"part_bytes": part_bytes})


def test_the_environment_sets_every_dataset_s_part_size(tmp_path, frame, monkeypatch):
    monkeypatch.setenv(PART_BYTES_ENV, str(PART_BYTES))
    dataset = ParquetDataset(
        filepath=str(tmp_path / "e.parquet"), save_args={"row_group_size": GROUP_ROWS}
    )
    dataset.save(frame)
    assert os.path.isdir(tmp_path / "e.parquet")
    monkeypatch.setenv(PART_BYTES_ENV, "lots")
    with pytest.raises(ConfigError, match=PART_BYTES_ENV):
        ParquetDataset(filepath=str(tmp_path / "e.parquet"))


def test_the_readme_s_datasets_snippet_loads_the_latest_version_in_parts(
    tmp_path, frame, monkeypatch
):
    import textwrap

    import datasets

    from tests.conftest import documentation_text

    block = documentation_text().split("- **With `datasets`**", 1)[1].split("```python\n", 1)[1]
    snippet = textwrap.dedent(block.split("```", 1)[0])
    folder = tmp_path / "data" / "07_model_output" / "preference_pairs.parquet"
    older = ParquetDataset(filepath=str(folder), version=Version(None, "2026-01-01T00.00.00.000Z"))
    older.save(frame.head(10))
    newer = ParquetDataset(
        filepath=str(folder),
        version=Version(None, "2026-02-01T00.00.00.000Z"),
        save_args={"row_group_size": GROUP_ROWS, "part_bytes": PART_BYTES},
    )
    newer.save(frame)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf"))
    namespace: dict = {}
    exec(snippet, namespace)  # noqa: S102 - the documentation's own code, verbatim
    assert len(namespace["files"]) > 1
    assert namespace["dataset"]["prompt_id"] == frame["prompt_id"].tolist()
