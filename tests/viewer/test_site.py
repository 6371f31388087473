"""The viewer's files and their Kedro dataset, without a browser: a versioned site written
whole or not at all, data files that hold the tables' records, chunks and shards."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from kedro.io import Version

from llm_feedback.errors import InputError
from llm_feedback.parquet_source import ParquetSource
from llm_feedback.pipelines.site_dataset import StaticSiteDataset
from llm_feedback.viewer import feedback_site
from llm_feedback.viewer.site import INDEX_CHUNK_ROWS
from tests.viewer.frames import HOSTILE, feedback_frames


def _payload(path: Path) -> list:
    """The JSON arguments of a data file's one call, `LLMF.<name>(a, b);`."""
    return _payload_text(path.read_text(encoding="utf-8"))


def test_the_dataset_writes_a_versioned_site_and_loads_its_index(tmp_path):
    site = feedback_site(*feedback_frames(40), shard_size=16)
    dataset = StaticSiteDataset(filepath=str(tmp_path / "viewer"), version=Version(None, None))
    dataset.save(site)
    index = Path(dataset.load())
    assert index.name == "index.html" and index.is_file()
    folder = index.parent
    assert sorted(p.name for p in (folder / "data").iterdir()) == [
        "index-0000.js",
        "manifest.js",
        "shard-00000.js",
        "shard-00001.js",
        "shard-00002.js",
    ]
    manifest = _payload(folder / "data" / "manifest.js")[0]
    assert manifest["n_shards"] == 3 and manifest["n_chunks"] == 1
    shard, records = _payload(folder / "data" / "shard-00000.js")
    assert shard == 0 and len(records) == 16
    assert records["p-known"]["completions"][1]["response"] == HOSTILE  # as data, unchanged
    assert not [p for p in tmp_path.rglob(".*partial*")]


def test_a_failed_write_leaves_no_site_and_no_partial_folder(tmp_path):
    class Broken:
        def write(self, directory: Path) -> None:
            directory.mkdir(parents=True)
            (directory / "index.html").write_text("half")
            raise OSError("disk full")

    dataset = StaticSiteDataset(filepath=str(tmp_path / "viewer"))
    with pytest.raises(Exception, match="disk full"):
        dataset.save(Broken())
    assert not dataset.exists()
    assert not list(tmp_path.rglob("index.html"))


def test_a_large_index_is_chunked():
    site = feedback_site(*feedback_frames(3), shard_size=2)
    entries = list(site.entries()) * (INDEX_CHUNK_ROWS // 3 + 1)
    big = type(site)(**{**vars(site), "entries": lambda: iter(entries)})
    names = [name for name, _ in big.files() if name.startswith("data/index-")]
    assert names == ["data/index-0000.js", "data/index-0001.js"]


def test_on_a_remote_filesystem_the_site_is_uploaded_whole():
    import fsspec

    site = feedback_site(*feedback_frames(5), shard_size=2)
    dataset = StaticSiteDataset(filepath="memory:///bucket/viewer", version=Version(None, None))
    dataset.save(site)
    index = dataset.load()
    assert index.startswith("memory:///bucket/viewer/") and index.endswith("/index.html")
    memory = fsspec.filesystem("memory")
    folder = index.removeprefix("memory://").rsplit("/", 1)[0]
    assert sorted(p.rsplit("/", 1)[1] for p in memory.find(folder + "/data")) == [
        "index-0000.js",
        "manifest.js",
        "shard-00000.js",
        "shard-00001.js",
        "shard-00002.js",
    ]
    assert dataset.exists()


def test_a_site_read_from_files_a_few_prompts_at_a_time_is_the_site_of_the_whole_tables(
    tmp_path,
):
    """The node's path: tables on disk in prompt order, as the annotate stages write them,
    read in chunks of 7 prompts (not a multiple of the 16-record shards) and with row groups
    of 10 rows, give the same files as the tables whole; a judge row of a prompt without
    completions is left out either way."""
    completions, aspects, critiques, scores = feedback_frames(40)
    orphan = aspects.iloc[:1].assign(prompt_id="p-zz-orphan")
    frames = [
        frame.sort_values(["prompt_id", "completion_idx"], kind="stable").reset_index(drop=True)
        for frame in (completions, pd.concat([aspects, orphan]), critiques, scores)
    ]
    sources = []
    for name, frame in zip(("completions", "aspects", "critiques", "scores"), frames, strict=True):
        path = tmp_path / f"{name}.parquet"
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=10)
        sources.append(ParquetSource(str(path), batch_rows=10))

    whole = dict(feedback_site(*frames, shard_size=16).files())
    streamed = dict(feedback_site(*sources, shard_size=16, prompts_per_chunk=7).files())
    assert streamed == whole
    manifest = _payload_text(whole["data/manifest.js"])[0]
    assert manifest["summary"] == "40 prompts" and manifest["n_shards"] == 3
    assert "p-zz-orphan" not in "".join(whole.values())


def test_a_table_without_a_required_column_fails_before_the_site_is_written(tmp_path):
    completions, aspects, critiques, scores = feedback_frames(3)
    path = tmp_path / "aspects.parquet"
    aspects.drop(columns="rating").to_parquet(path)
    with pytest.raises(InputError, match="aspect_annotations: missing column.*'rating'"):
        feedback_site(completions, ParquetSource(str(path)), critiques, scores)


def _payload_text(text: str) -> list:
    return json.loads("[" + text[text.index("(") + 1 : text.rindex(")")] + "]")
