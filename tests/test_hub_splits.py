"""Preference pairs go up to the Hub as the splits `train` and `test`: the trl layout by its
`split` column (not pushed itself), the h4 layout by prompt_id with the recorded test
fraction and seed. What the Hub would serve is read back with `datasets`' own loader from
a folder laid out as `push_to_hub` lays out the repository (the card's `configs` naming
each split's files)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from datasets import Features, load_dataset
from huggingface_hub import DatasetCard

from llm_feedback.core.errors import ConfigError
from llm_feedback.reporting import binarize
from llm_feedback.storage.schema import PREFERENCE_PAIRS_ARROW_SCHEMA
from tests.reporting.builders import build_frames
from tests.reporting.test_pairs import many_prompts
from tests.test_hub import push

PROMPTS = 60


def pairs_of(layout: str = "trl") -> pd.DataFrame:
    frames = build_frames(many_prompts(PROMPTS))
    return binarize(
        frames.completions,
        frames.overall_scores,
        frames.aspect_annotations,
        strategy="all_pairs",
        layout=layout,
        test_fraction=0.2,
        split_seed=3,
    ).pairs


def served(built, tmp_path: Path):
    """The pushed repository as `datasets` loads it: each split's Parquet file where the
    card's `configs` say, and the card as README.md."""
    repo = tmp_path / "repo"
    for split, dataset in built.data.items():
        folder = repo / built.config_name
        folder.mkdir(parents=True, exist_ok=True)
        dataset.to_parquet(str(folder / f"{split}-00000-of-00001.parquet"))
    (repo / "README.md").write_text(built.card, encoding="utf-8")
    return load_dataset(str(repo), built.config_name, cache_dir=str(tmp_path / "hf"))


def test_trl_pairs_go_up_as_their_train_and_test_splits(tmp_path: Path):
    pairs = pairs_of()
    built = push(pairs, "preference_pairs")
    assert list(built.data) == ["train", "test"]
    pushed = pa.schema([f for f in PREFERENCE_PAIRS_ARROW_SCHEMA if f.name != "split"])
    for side, dataset in built.data.items():
        expected = pairs[pairs["split"] == side]
        assert dataset.features == Features.from_arrow_schema(pushed)  # the Hub split says it
        assert dataset["prompt_id"] == expected["prompt_id"].tolist()
        assert dataset["margin"] == expected["margin"].tolist()
    assert not set(built.data["train"]["prompt_id"]) & set(built.data["test"]["prompt_id"])
    card = DatasetCard(built.card)
    sizes = pairs["split"].value_counts()
    assert card.data.dataset_info[0]["splits"] == [
        {"name": side, "num_examples": int(sizes[side])} for side in ("train", "test")
    ]
    assert "no prompt is in both" in card.text and "margin" in card.text

    loaded = served(built, tmp_path)
    assert sorted(loaded) == ["test", "train"]
    for side in ("train", "test"):
        assert loaded[side].num_rows == sizes[side]
        assert loaded[side]["prompt_id"] == built.data[side]["prompt_id"]

    with pytest.raises(ConfigError, match="carry their own train and test splits"):
        push(pairs, "preference_pairs", split="train")


def test_h4_pairs_are_split_by_prompt_as_the_trl_column_says():
    trl, h4 = pairs_of(), pairs_of("h4")
    built = push(h4, "preference_pairs", test_split=(0.2, 3))  # from the run record
    assert list(built.data) == ["train", "test"]
    for side in ("train", "test"):
        assert set(built.data[side]["prompt_id"]) == set(trl.loc[trl["split"] == side, "prompt_id"])
    assert list(push(h4, "preference_pairs").data) == ["train"]  # none recorded: one split


def test_pairs_written_before_the_split_existed_still_go_up(tmp_path: Path):
    older = pairs_of().drop(columns=["margin", "split"])
    assert list(push(older, "preference_pairs").data) == ["train"]
    built = push(older, "preference_pairs", test_split=(0.2, 3))
    assert built.data["test"].num_rows == (pairs_of()["split"] == "test").sum()


def test_a_streamed_push_of_split_pairs_is_the_push_of_the_frame(tmp_path: Path):
    from llm_feedback.pipelines.datasets import ParquetDataset
    from llm_feedback.storage.parquet_source import ParquetSource

    pairs = pairs_of()
    path = tmp_path / "pairs.parquet"
    ParquetDataset(filepath=str(path), save_args={"row_group_size": 5}).save(pairs)
    workdir = tmp_path / "push"
    workdir.mkdir()
    streamed = push(ParquetSource(str(path), batch_rows=7), "preference_pairs", workdir=workdir)
    whole = push(pairs, "preference_pairs")
    for side in ("train", "test"):
        assert streamed.data[side].to_list() == whole.data[side].to_list()
    assert streamed.card == whole.card
