"""The viewer's files and their Kedro dataset, without a browser: a versioned site written
whole or not at all, data files that hold the tables' records, chunks and shards."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from kedro.io import Version

from llm_feedback.annotation.aspects import ASPECTS
from llm_feedback.core.errors import InputError
from llm_feedback.pipelines.site_dataset import StaticSiteDataset
from llm_feedback.replies.status import UNREADABLE
from llm_feedback.storage.parquet_source import ParquetSource
from llm_feedback.storage.schema import ULTRAFEEDBACK_ASPECTS
from llm_feedback.viewer import feedback_site
from llm_feedback.viewer.site import INDEX_CHUNK_ROWS, MAX_TOKEN_CHARS, SEARCH_BUCKETS
from tests.viewer.frames import (
    HOSTILE,
    RATIONALE_ONLY_AT,
    RATIONALE_ONLY_WORD,
    feedback_frames,
)

# One index chunk's search files, a bucket each.
SEARCH_FILES = [f"search-0000-{bucket:02d}.js" for bucket in range(SEARCH_BUCKETS)]


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
        *SEARCH_FILES,
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
    names = [name for name, _ in big.files()]
    assert [name for name in names if name.startswith("data/index-")] == [
        "data/index-0000.js",
        "data/index-0001.js",
    ]
    # A chunk's search files come with it.
    searched = {name.split("-")[1] for name in names if name.startswith("data/search-")}
    assert searched == {"0000", "0001"}


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
        *SEARCH_FILES,
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


def _search_index(files: dict[str, str]) -> dict[str, set[tuple[int, int]]]:
    """token -> {(row in index order, field mask)}, read back from the search files."""
    manifest = _payload_text(files["data/manifest.js"])[0]
    bits = len(manifest["search"]["fields"])
    found: dict[str, set[tuple[int, int]]] = defaultdict(set)
    for name, text in files.items():
        if not name.startswith("data/search-"):
            continue
        chunk, bucket, postings = _payload_text(text)
        for token, steps in postings.items():
            assert ord(token[0]) % SEARCH_BUCKETS == bucket
            code = 0
            for step in steps.split(","):
                code += int(step, 16)
                found[token].add((chunk * INDEX_CHUNK_ROWS + (code >> bits), code & (2**bits - 1)))
    return found


def _words(texts) -> set[str]:
    return {w[:MAX_TOKEN_CHARS] for t in texts for w in re.findall(r"[^\W_]+", str(t).lower())}


def test_the_search_index_holds_every_word_of_every_text_in_its_field():
    """Each prompt's words, field by field from the tables, are in the index at the prompt's
    row with that field's bit, and nothing else is: a word written only in one rationale,
    a non-ASCII one and an over-long one included."""
    completions, aspects, critiques, scores = feedback_frames(40)
    aspects.loc[aspects.index[5], "rationale"] += " Überprüfung " + "x" * 50
    files = dict(feedback_site(completions, aspects, critiques, scores).files())
    manifest = _payload_text(files["data/manifest.js"])[0]
    fields = manifest["search"]["fields"]
    order = list(dict.fromkeys(completions["prompt_id"]))
    by_prompt = {
        "instruction": completions.groupby("prompt_id")["instruction"].first(),
        "responses": completions.groupby("prompt_id")["response"].agg(list),
        "rationales": aspects.groupby("prompt_id")["rationale"].agg(list),
        "critiques": critiques.groupby("prompt_id")["critique"].agg(list),
    }
    expected: dict[str, set[tuple[int, int]]] = defaultdict(set)
    for row, prompt_id in enumerate(order):
        masks: dict[str, int] = defaultdict(int)
        for bit, name in enumerate(fields):
            texts = by_prompt[name][prompt_id]
            texts = [prompt_id, texts] if name == "instruction" else texts
            for word in _words(texts):
                masks[word] |= 1 << bit
        for word, mask in masks.items():
            expected[word].add((row, mask))
    assert _search_index(files) == expected
    word = RATIONALE_ONLY_WORD.lower()
    assert expected[word] == {(order.index(RATIONALE_ONLY_AT[0]), 1 << fields.index("rationales"))}
    assert "überprüfung" in expected and "x" * MAX_TOKEN_CHARS in expected


def test_index_rows_carry_the_sort_columns_computed_from_the_tables():
    completions, aspects, critiques, scores = feedback_frames(40)
    files = dict(feedback_site(completions, aspects, critiques, scores).files())
    manifest = _payload_text(files["data/manifest.js"])[0]
    rows = pd.DataFrame(_payload_text(files["data/index-0000.js"])[1], columns=manifest["columns"])
    rows = rows.set_index("id").sort_index()
    by_prompt = scores.groupby("prompt_id")
    overall = by_prompt["overall_score_fixed"].mean().round(2)
    fine = by_prompt["fine_grained_score"].mean().round(2)
    per_completion = aspects.groupby(["prompt_id", "completion_idx"])["rating"].mean()
    spread = per_completion.groupby("prompt_id").agg(lambda r: r.max() - r.min()).round(2)
    moves = aspects.groupby(["prompt_id", "aspect", "completion_idx"])["rating"].agg(
        lambda r: r.max() - r.min()
    )
    shuffle = moves.groupby("prompt_id").max()
    pd.testing.assert_series_equal(rows["overall"], overall, check_names=False)
    pd.testing.assert_series_equal(rows["fine"], fine, check_names=False)
    pd.testing.assert_series_equal(rows["spread"], spread, check_names=False)
    pd.testing.assert_series_equal(rows["shuffle"], shuffle, check_names=False)
    unreadable = set(aspects.loc[aspects["parse_status"].isin(UNREADABLE), "prompt_id"])
    injected = set(critiques.loc[critiques["suspected_injection"], "prompt_id"])
    flipped = set(scores.loc[scores["fix_action"] == "flipped", "prompt_id"])
    for prompt_id, flags in rows["flags"].items():
        assert ("injection" in flags) == (prompt_id in injected)
        assert ("unreadable" in flags) == (prompt_id in unreadable)
        assert ("fix: flipped" in flags) == (prompt_id in flipped)
    assert unreadable and injected and flipped and shuffle.nunique() > 1 and fine.nunique() > 1
    # One shuffle: nothing can move between shuffles.
    one = feedback_site(completions, aspects[aspects["shuffle_idx"] == 0], critiques, scores)
    first = _payload_text(dict(one.files())["data/index-0000.js"])[1][0]
    assert first[manifest["columns"].index("shuffle")] is None


def test_a_prompt_page_lists_the_aspects_in_ultrafeedbacks_order():
    completions, aspects, critiques, scores = feedback_frames(3)
    others = [name for name in ASPECTS if name not in ULTRAFEEDBACK_ASPECTS]
    names = [*ULTRAFEEDBACK_ASPECTS, *others]
    one = aspects[aspects["aspect"] == aspects["aspect"].iloc[0]]
    every = pd.concat([one.assign(aspect=name) for name in reversed(names)])
    every = pd.concat([every, one.assign(aspect="a_custom_aspect")], ignore_index=True)
    files = dict(feedback_site(completions, every, critiques, scores).files())
    record = _payload_text(files["data/shard-00000.js"])[1]["p-known"]
    shown = list(dict.fromkeys(row[0] for row in record["aspects"]))
    extra = sorted({*others, "a_custom_aspect"})
    assert shown == [*ULTRAFEEDBACK_ASPECTS, *extra]
