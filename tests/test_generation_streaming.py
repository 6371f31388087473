"""Generation streams: sampled prompts on disk are read a record batch at a time, the
completions equal the in-memory result row for row (in the sampled order, two endpoints
answering), a bad row late in the file fails before any call, and memory does not grow
with the number of prompts. Real calls to the project's server, real Parquet files."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from llm_feedback.backends.endpoints import parse_endpoints, parse_model_pool
from llm_feedback.completions.generation import completions_table, generate_completions
from llm_feedback.core.errors import InputError
from llm_feedback.pipelines.datasets import ParquetDataset
from llm_feedback.storage.parquet_source import ParquetSource
from llm_feedback.testing.server import FakeLLMServer
from tests.conftest import peak_bytes_in_fresh_process

MODELS = ("m0", "m1", "m2", "m3")


def sampled_frame(prompts: int) -> pd.DataFrame:
    """Four slots per prompt; the models alternate, so each endpoint's rows interleave."""
    rows = [
        {
            "prompt_id": f"p{prompt:06d}",
            "completion_idx": slot,
            "source": "flan" if prompt % 2 else "truthful_qa",
            "instruction": f"Say something about topic {prompt}, slot {slot}.",
            "model": MODELS[(prompt + slot) % 4],
            "principle": "honesty",
            "system_prompt": f"Be honest ({slot}).",
            "correct_answers": ["yes"] if prompt % 2 == 0 else [],
            "incorrect_answers": ["no"] if prompt % 2 == 0 else [],
        }
        for prompt in range(prompts)
        for slot in range(4)
    ]
    return pd.DataFrame(rows)


def pool_for(base_url: str):
    """m0 and m1 on one endpoint, m2 and m3 on another: generation runs one after the other."""
    endpoints = parse_endpoints(
        {
            name: {"backend": "openai", "model": "fake", "base_url": base_url}
            for name in ("first", "second")
        }
    )
    return parse_model_pool(
        {model: {"endpoint": "first" if model in MODELS[:2] else "second"} for model in MODELS},
        endpoints,
        {"temperature": 1.0, "max_tokens": 64},
    )


def test_streamed_generation_writes_the_in_memory_table_row_for_row(tmp_path):
    sampled = sampled_frame(30)
    path = tmp_path / "sampled.parquet"
    ParquetDataset(filepath=str(path)).save(sampled)
    # 7 rows a batch: batches cut prompts, and each endpoint's rows, at odd places.
    on_disk = ParquetSource(str(path), batch_rows=7)
    with FakeLLMServer() as server:
        pool = pool_for(server.base_url)
        whole = generate_completions(sampled, pool, None, progress=False)
        streamed = completions_table(on_disk, pool, None, progress=False)
        assert server.request_count == 2 * len(sampled)
    out = tmp_path / "completions.parquet"
    ParquetDataset(filepath=str(out)).save(streamed)
    got = pd.read_parquet(out)
    pd.testing.assert_frame_equal(got.drop(columns="latency_s"), whole.drop(columns="latency_s"))
    keys = ["prompt_id", "completion_idx"]
    assert got[keys].values.tolist() == sampled[keys].values.tolist()  # the sampled order
    assert set(got["endpoint"]) == {"first", "second"}
    assert got["response"].str.len().gt(0).all() and got["error"].isna().all()
    assert got.loc[0, "correct_answers"].tolist() == ["yes"]
    # `datasets` reads the file as written, every column and row.
    datasets = pytest.importorskip("datasets")
    loaded = datasets.Dataset.from_parquet(str(out))
    assert loaded.num_rows == len(got) and loaded.column_names == list(got.columns)
    assert loaded[0]["correct_answers"] == ["yes"]


def test_a_bad_row_late_in_the_sampled_file_fails_before_any_call(tmp_path):
    sampled = sampled_frame(30)
    sampled.loc[101, "model"] = "not-in-the-pool"
    sampled.to_parquet(tmp_path / "sampled.parquet")
    with FakeLLMServer() as server:
        source = ParquetSource(str(tmp_path / "sampled.parquet"), batch_rows=16)
        with pytest.raises(InputError, match="sampled_prompts row 101 .*'not-in-the-pool'"):
            completions_table(source, pool_for(server.base_url), None, progress=False)
        assert server.request_count == 0


# A fresh process per size: Arrow's pool reports its peak since the process started. The
# spool's chunks and its groups in key order are cut to 256 rows so that these small runs
# spool and write as a large one does.
_MEASURE = textwrap.dedent(
    """
    import sys, tracemalloc
    import pyarrow as pa
    from llm_feedback.backends.endpoints import parse_endpoints, parse_model_pool
    from llm_feedback.completions.generation import completions_table
    from llm_feedback.storage.parquet_source import ParquetSource
    from llm_feedback.storage.spool import SpooledTable, TableBuilder
    from llm_feedback.testing.server import serve_in_subprocess

    TableBuilder.CHUNK_ROWS = SpooledTable.GROUP_ROWS = 256
    folder = sys.argv[1]
    with serve_in_subprocess(responder="echo") as url:
        endpoints = parse_endpoints({"e": {"backend": "openai", "model": "f", "base_url": url}})
        pool = parse_model_pool(
            {m: {"endpoint": "e"} for m in ("m0", "m1", "m2", "m3")}, endpoints, {}
        )
        tracemalloc.start()
        table = completions_table(
            ParquetSource(f"{folder}/sampled.parquet", batch_rows=256), pool,
            f"{folder}/request_cache.sqlite", progress=False,
        )
        table.to_parquet(f"{folder}/completions.parquet")
        print(tracemalloc.get_traced_memory()[1] + pa.default_memory_pool().max_memory())
    """
)


def _peak_bytes(folder: Path, prompts: int) -> int:
    folder.mkdir()
    sampled_frame(prompts).to_parquet(folder / "sampled.parquet", row_group_size=1024)
    return peak_bytes_in_fresh_process(_MEASURE, folder)


def test_generation_memory_does_not_grow_with_the_number_of_prompts(tmp_path):
    """1,600 and 6,400 sampled rows, record batches of 256, with the request cache (as a
    run has it: answers it holds are not kept in memory): the larger run's peak (Python
    objects and Arrow buffers) within 1.5x of the smaller."""
    small = _peak_bytes(tmp_path / "small", 400)
    large = _peak_bytes(tmp_path / "large", 1600)
    assert pq.ParquetFile(tmp_path / "large" / "completions.parquet").metadata.num_rows == 6400
    assert large < 1.5 * small, (small, large)
