"""Sampling raw prompts on disk, a record batch at a time: the same table as sampling them
in memory, written a row group per batch, and every problem found before anything is
drawn, named by its row in the file."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from llm_feedback.completions.sampling import (
    SAMPLED_PROMPTS_ARROW_SCHEMA,
    sample_prompt_file,
    sample_prompts,
)
from llm_feedback.core.errors import InputError
from llm_feedback.pipelines.datasets import ParquetDataset
from llm_feedback.storage.parquet_source import ParquetSource
from tests.test_sampling import POOL, small_raw, synthetic_prompts

BATCH = 7  # rows per record batch: a file of 40 prompts is read in six


def _on_disk(raw: pd.DataFrame, path: Path) -> ParquetSource:
    raw.to_parquet(path)
    return ParquetSource(str(path), batch_rows=BATCH)


def _raw(n: int = 40) -> pd.DataFrame:
    raw = synthetic_prompts(n)
    raw["correct_answers"] = [["yes"] if i % 5 == 0 else None for i in range(n)]
    raw["reference_answer"] = ["ref" if i % 3 == 0 else None for i in range(n)]
    return raw


@pytest.mark.parametrize(
    "options",
    [{}, {"max_prompts": 11}, {"seed": 7, "verbalized_calibration_rate": 0.5}],
)
def test_a_file_is_sampled_as_the_same_table_as_in_memory(tmp_path, options):
    raw = _raw()
    expected = sample_prompts(raw, POOL, 4, **{"seed": 1, **options})
    streamed = sample_prompt_file(
        _on_disk(raw, tmp_path / "raw.parquet"), POOL, 4, **{"seed": 1, **options}
    )
    assert len(streamed) == len(expected)
    pd.testing.assert_frame_equal(streamed.frame(), expected)
    # Saved as the catalog saves the node's output: a row group per batch of prompts.
    ParquetDataset(filepath=str(tmp_path / "sampled.parquet")).save(streamed)
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "sampled.parquet"), expected)
    # One explicit schema (an all-empty answer column is still a list of strings).
    schema = pq.read_schema(tmp_path / "sampled.parquet")
    assert schema.remove_metadata().equals(SAMPLED_PROMPTS_ARROW_SCHEMA)
    if not options:
        assert pq.ParquetFile(tmp_path / "sampled.parquet").num_row_groups == 6


def test_a_prompt_id_repeated_in_a_later_batch_fails_before_anything_is_drawn(tmp_path):
    raw = _raw()
    raw.loc[33, "prompt_id"] = raw.loc[2, "prompt_id"]  # batches 0 and 4
    with pytest.raises(InputError) as error:
        sample_prompt_file(_on_disk(raw, tmp_path / "raw.parquet"), POOL, 4)
    assert "raw_prompts row 33 (prompt_id 'p000002'), column 'prompt_id': duplicate" in str(
        error.value
    )
    assert "first used at row 2" in str(error.value)


def test_a_bad_row_is_named_by_its_row_in_the_file(tmp_path):
    raw = _raw()
    raw.loc[30, "instruction"] = "   "
    with pytest.raises(
        InputError, match=r"raw_prompts row 30 \(prompt_id 'p000030'\), column 'instruction'"
    ):
        sample_prompt_file(_on_disk(raw, tmp_path / "raw.parquet"), POOL, 4)


def test_a_file_without_a_required_column_is_named(tmp_path):
    raw = _raw().drop(columns="instruction")
    with pytest.raises(InputError, match="required column 'instruction' is missing"):
        sample_prompt_file(_on_disk(raw, tmp_path / "raw.parquet"), POOL, 4)


def test_an_empty_file_gives_the_empty_table(tmp_path):
    raw = small_raw().iloc[:0]
    streamed = sample_prompt_file(_on_disk(raw, tmp_path / "raw.parquet"), POOL, 4)
    pd.testing.assert_frame_equal(streamed.frame(), sample_prompts(raw, POOL, 4))


def test_unweighted_sources_are_counted_once_over_every_batch(tmp_path, caplog):
    raw = _raw().assign(source="my_forum")
    streamed = sample_prompt_file(_on_disk(raw, tmp_path / "raw.parquet"), POOL, 4)
    with caplog.at_level(logging.WARNING, logger="llm_feedback.completions.sampling"):
        streamed.frame()
    warnings = [
        r.getMessage() for r in caplog.records if "without principle weights" in r.getMessage()
    ]
    assert warnings == [
        "sample: 40 prompt(s) from source(s) without principle weights use helpfulness "
        "(my_forum: 40); give them weights in sample.principle_weights"
    ]
