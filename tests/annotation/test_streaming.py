"""The annotate stages stream: completions on disk are read a chunk of whole prompts at a
time, and each stage's output equals the in-memory result row for row, is written a row
group per chunk, reads back with pandas and `datasets`, and costs no more memory at four
times the prompts. Real stages against the project's server, real Parquet files."""

from __future__ import annotations

import json
import random
import textwrap
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from llm_feedback.annotation import ultrafeedback_export
from llm_feedback.annotation.rescore import fix_overall_scores, overall_scores_table
from llm_feedback.annotation.stages import aspect_annotations_table, critiques_table
from llm_feedback.backends import EndpointConfig, LLMClient
from llm_feedback.core.errors import InputError
from llm_feedback.pipelines.datasets import ParquetDataset
from llm_feedback.storage.parquet_source import ParquetSource, table_chunks
from llm_feedback.testing.server import FakeLLMServer, schema_responder
from tests.conftest import peak_bytes_in_fresh_process

PROMPTS = 40
CHUNK = 8  # prompts per chunk: five chunks
ASPECTS = ["honesty", "helpfulness"]


def completions_frame(prompts: int, start: int = 0) -> pd.DataFrame:
    rows = [
        {
            "prompt_id": f"p{prompt:05d}",
            "completion_idx": index,
            "source": "flan",
            "instruction": f"Explain topic {prompt} in a sentence.",
            "model": f"m{index}",
            "principle": "helpfulness",
            "system_prompt": "",
            "response": f"Topic {prompt} is explained by answer {index}." * (1 + index),
        }
        for prompt in range(start, start + prompts)
        for index in range(4)
    ]
    return pd.DataFrame(rows)


def _save(data, path: Path) -> Path:
    """Through the project's catalog dataset, as a Kedro run saves a stage's output."""
    ParquetDataset(filepath=str(path)).save(data)
    return path


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """Every stage twice: on DataFrames (one chunk) and on the files (chunks of CHUNK)."""
    folder = tmp_path_factory.mktemp("streaming")
    completions = completions_frame(PROMPTS)
    on_disk = ParquetSource(str(_save(completions, folder / "completions.parquet")))

    def answer(body, ctx):
        reply = schema_responder(body, ctx)
        schema = (body.get("response_format") or {}).get("json_schema", {}).get("schema", {})
        if "feedback" in schema.get("properties", {}):  # some 10s: the fix re-asks them
            parsed = json.loads(reply)
            parsed["overall_score"] = 10 if len(body["messages"][-1]["content"]) % 3 else 7
            reply = json.dumps(parsed)
        return reply

    with FakeLLMServer(answer) as server:
        config = EndpointConfig.from_dict(
            {"backend": "openai", "model": "judge", "base_url": server.base_url}, name="judge"
        )
        with LLMClient(config, None, progress=False) as client:
            whole = {
                "aspects": aspect_annotations_table(completions, client, aspects=ASPECTS),
                "critiques": critiques_table(completions, client),
            }
            streamed = {
                "aspects": aspect_annotations_table(
                    on_disk, client, aspects=ASPECTS, prompts_per_chunk=CHUNK
                ),
                "critiques": critiques_table(on_disk, client, prompts_per_chunk=CHUNK),
            }
            files = {
                name: ParquetSource(str(_save(table, folder / f"{name}.parquet")))
                for name, table in streamed.items()
            }
            thresholds = {"flip_threshold": 1.0, "reannotate_threshold": 5.0}
            whole["scores"] = fix_overall_scores(
                completions,
                whole["aspects"].frame(),
                whole["critiques"].frame(),
                client,
                **thresholds,
            )
            streamed["scores"] = overall_scores_table(
                on_disk,
                files["aspects"],
                files["critiques"],
                client,
                prompts_per_chunk=CHUNK,
                **thresholds,
            )
    files["scores"] = ParquetSource(str(_save(streamed["scores"], folder / "scores.parquet")))
    whole["export"] = ultrafeedback_export(
        completions, whole["aspects"].frame(), whole["critiques"].frame(), whole["scores"]
    )
    streamed["export"] = ultrafeedback_export(
        on_disk, files["aspects"], files["critiques"], files["scores"], prompts_per_chunk=CHUNK
    )
    files["export"] = ParquetSource(str(_save(streamed["export"], folder / "export.parquet")))
    return folder, whole, files


def test_completions_on_disk_come_in_chunks_of_whole_prompts(tmp_path):
    completions = completions_frame(PROMPTS)
    # Row groups that cut prompts in two: a chunk still holds all four of a prompt's rows.
    completions.to_parquet(tmp_path / "c.parquet", row_group_size=7)
    chunks = list(table_chunks(ParquetSource(str(tmp_path / "c.parquet")), CHUNK))
    assert [chunk["prompt_id"].nunique() for chunk in chunks] == [CHUNK] * (PROMPTS // CHUNK)
    assert all(chunk.groupby("prompt_id").size().eq(4).all() for chunk in chunks)
    # Indexed by row in the file, so that an input error names the file's row.
    pd.testing.assert_frame_equal(pd.concat(chunks), completions)


def test_streaming_a_file_holds_arrow_memory_flat_across_its_row_groups(tmp_path):
    """60 row groups of prose-like texts (a few words, so Parquet dictionary-encodes
    them), some of their columns read a chunk and a merge-join step at a time: the Arrow
    memory held at the last groups is within 1.5x of that at the first five (one
    `iter_batches` of some columns over the whole file kept memory for every group it
    passed: 4x here; reading by groups took the export's peak at 256k prompts from 1.7
    to 0.77 GiB)."""
    rows = 60 * 512
    words = "the answer gives some detail and an example because it reads well".split()
    table = pa.table(
        {
            "prompt_id": [f"p{row // 4:07d}" for row in range(rows)],
            "text": [" ".join(random.Random(row).choices(words, k=200)) for row in range(rows)],
            "unread": [" ".join(random.Random(-row).choices(words, k=30)) for row in range(rows)],
        }
    )
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=512)
    pq.write_table(table, tmp_path / "u.parquet", row_group_size=512)
    del table  # what stays allocated is the reading's
    reader = ParquetSource(str(tmp_path / "u.parquet"), batch_rows=512).key_reader(["text"])
    held = []
    streamed = ParquetSource(str(tmp_path / "t.parquet"), batch_rows=512)
    for chunk in streamed.key_chunks(128, ["prompt_id", "text"]):
        assert len(reader.through(chunk["prompt_id"].max())) == len(chunk)
        held.append(pa.total_allocated_bytes())
    assert len(held) == 60
    # The last chunk comes after the file's last group was read and let go.
    assert max(held[-10:-1]) < 1.5 * max(held[:5]), (held[:5], held[-10:-1])


def test_a_bad_row_late_in_the_file_fails_before_any_call(tmp_path):
    completions = completions_frame(PROMPTS)
    completions.loc[150, "instruction"] = " "
    completions.to_parquet(tmp_path / "c.parquet")
    with FakeLLMServer(schema_responder) as server:
        config = EndpointConfig.from_dict(
            {"backend": "openai", "model": "judge", "base_url": server.base_url}, name="judge"
        )
        with LLMClient(config, None, progress=False) as client:
            source = ParquetSource(str(tmp_path / "c.parquet"))
            with pytest.raises(InputError, match="completions row 150, column 'instruction'"):
                critiques_table(source, client, prompts_per_chunk=CHUNK)
        assert server.request_count == 0


@pytest.mark.parametrize("stage", ["aspects", "critiques", "scores", "export"])
def test_a_streamed_stage_writes_the_in_memory_table_row_for_row(judged, stage, tmp_path):
    _, whole, files = judged
    expected = pd.read_parquet(_save(whole[stage], tmp_path / "whole.parquet"))
    got = files[stage].read()
    assert len(got) == len(expected) >= PROMPTS
    pd.testing.assert_frame_equal(got, expected)
    if stage == "scores":  # the re-asked 10s went through the judge in every chunk
        assert got["fix_action"].eq("reannotated").sum() > PROMPTS // CHUNK


def test_a_chunked_output_is_written_a_row_group_per_chunk(judged):
    folder, _, _ = judged
    for name in ("scores", "export"):
        assert pq.ParquetFile(folder / f"{name}.parquet").num_row_groups == PROMPTS // CHUNK


def test_streamed_outputs_read_back_with_pandas_and_datasets(judged):
    datasets = pytest.importorskip("datasets")
    folder, _, files = judged
    for name in ("aspects", "critiques", "scores", "export"):
        frame = pd.read_parquet(folder / f"{name}.parquet")
        loaded = datasets.Dataset.from_parquet(str(folder / f"{name}.parquet"))
        assert loaded.num_rows == len(frame) == len(files[name].read())
        assert loaded.column_names == list(frame.columns)


# A fresh process per size: Arrow's pool reports its peak since the process started.
_MEASURE = textwrap.dedent(
    """
    import sys, tracemalloc
    import pyarrow as pa
    from llm_feedback.annotation import ultrafeedback_export
    from llm_feedback.annotation.rescore import overall_scores_table
    from llm_feedback.storage.parquet_source import ParquetSource

    folder = sys.argv[1]
    source = lambda name: ParquetSource(f"{folder}/{name}.parquet", batch_rows=512)
    tracemalloc.start()
    scores = overall_scores_table(
        source("completions"), source("aspects"), source("critiques"), None,
        flip_threshold=5.0, reannotate_threshold=5.0, prompts_per_chunk=100,
    )
    scores.to_parquet(f"{folder}/scores.parquet")
    ultrafeedback_export(
        source("completions"), source("aspects"), source("critiques"), source("scores"),
        prompts_per_chunk=100,
    ).to_parquet(f"{folder}/export.parquet")
    print(tracemalloc.get_traced_memory()[1] + pa.default_memory_pool().max_memory())
    """
)


def _tiled(table: pd.DataFrame, copies: int) -> pd.DataFrame:
    """`table`'s rows for `copies` times its prompts, each copy under new prompt ids."""
    parts = []
    for copy in range(copies):
        part = table.copy()
        number = part["prompt_id"].str[1:].astype(int) + copy * PROMPTS
        part["prompt_id"] = "p" + number.map("{:07d}".format)
        parts.append(part)
    return pd.concat(parts, ignore_index=True)


def _peak_bytes(judged, folder: Path, copies: int) -> int:
    source, _, files = judged
    folder.mkdir()
    for name in ("completions", "aspects", "critiques"):
        table = files[name].read() if name in files else pd.read_parquet(source / f"{name}.parquet")
        _tiled(table, copies).to_parquet(folder / f"{name}.parquet", row_group_size=2048)
    return peak_bytes_in_fresh_process(_MEASURE, folder)


def test_memory_does_not_grow_with_the_number_of_prompts(judged, tmp_path):
    """The score fix and the export over 1,000 and 4,000 prompts, 100 prompts a chunk and
    record batches of 512 rows (the default, 32,768, would hold these small files whole):
    the larger run's peak (Python objects and Arrow buffers) within 1.5x of the smaller."""
    small = _peak_bytes(judged, tmp_path / "small", 25)
    large = _peak_bytes(judged, tmp_path / "large", 100)
    assert pq.ParquetFile(tmp_path / "large" / "export.parquet").metadata.num_rows == 4000
    assert large < 1.5 * small, (small, large)
