"""The preference pairs' test split and margin, as their consumers read them.

`split` ("train" / "test") is drawn by prompt, seeded: no prompt has pairs on both sides,
and a prompt's side depends only on the seed and its id. `margin` is score_chosen -
score_rejected, the column TRL's RewardTrainer subtracts in its loss. What TRL reads is
taken from TRL's own source (trl==1.16.0, installed without torch): its RewardTrainer's
dataset preparation runs here on the pairs as `datasets` loads them, and the columns it
keeps and the loss reads are read off that source, not written down here.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import json
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
from datasets import Value, load_dataset
from scipy.stats import binom

from llm_feedback.core.errors import ConfigError
from llm_feedback.params import parse_report
from llm_feedback.reporting import binarize
from llm_feedback.reporting.pairs import binarize_export, pair_split

from .builders import build_frames, on_disk
from .test_pairs import many_prompts

PROMPTS = 400


def pairs_of(n_prompts: int = PROMPTS, **options: Any) -> pd.DataFrame:
    frames = build_frames(many_prompts(n_prompts))
    options = {"strategy": "all_pairs", **options}  # several pairs a prompt
    return binarize(
        frames.completions, frames.overall_scores, frames.aspect_annotations, **options
    ).pairs


def test_every_prompt_is_on_one_side_and_the_test_share_is_the_fraction():
    pairs = pairs_of()
    sides = pairs.groupby("prompt_id")["split"].nunique()
    assert (sides == 1).all()  # no prompt spans both splits
    assert set(pairs["split"]) == {"train", "test"}
    test_prompts = pairs.loc[pairs["split"] == "test", "prompt_id"].nunique()
    # A prompt draws its side alone: the count is binomial(prompts, test_fraction).
    low, high = binom.interval(0.999, len(sides), 0.1)
    assert low <= test_prompts <= high
    default = parse_report({}).pairs
    assert (default.test_fraction, default.split_seed) == (0.1, 42)


def test_the_split_is_seeded_apart_from_the_pair_draw_and_stable_per_prompt():
    first = pairs_of(seed=1).groupby("prompt_id")["split"].first()
    # Another draw of the pairs: the same split.
    assert first.equals(pairs_of(seed=2).groupby("prompt_id")["split"].first())
    # Another split seed: another split.
    other = pairs_of(split_seed=7).groupby("prompt_id")["split"].first()
    assert not first.equals(other)
    # A prompt's side does not depend on which other prompts are present.
    few = pairs_of(20).groupby("prompt_id")["split"].first()
    assert few.equals(first[few.index])
    # The Hub push splits pairs without a `split` column (h4) by the same rule.
    assert all(pair_split(prompt, 0.1, 42) == side for prompt, side in first.items())


def test_a_zero_fraction_puts_every_pair_in_train_and_a_bad_one_is_refused():
    assert set(pairs_of(40, test_fraction=0.0)["split"]) == {"train"}
    assert set(pairs_of(40, test_fraction=0.999)["split"]) == {"test"}
    for bad in (1, 1.5, -0.1, True):
        with pytest.raises(ConfigError, match="test_fraction"):
            parse_report({"pairs": {"test_fraction": bad}})
    with pytest.raises(ConfigError, match="split_seed"):
        parse_report({"pairs": {"split_seed": "x"}})


def test_the_margin_is_the_chosen_score_minus_the_rejected():
    pairs = pairs_of(40)
    assert pairs["margin"].tolist() == (pairs["score_chosen"] - pairs["score_rejected"]).tolist()
    assert (pairs["margin"] > 0).all()  # chosen scored strictly higher


def test_the_counts_and_the_streamed_pairs_agree_with_the_column(tmp_path: Path):
    frames = build_frames(many_prompts(60))
    options = {"strategy": "all_pairs", "decontaminate": [], "test_fraction": 0.3}
    whole = binarize(
        frames.completions, frames.overall_scores, frames.aspect_annotations, **options
    ).pairs
    sources = [
        on_disk(tmp_path, name, getattr(frames, name))
        for name in ("completions", "overall_scores", "aspect_annotations")
    ]
    export = binarize_export(*sources, **options, prompts_per_chunk=7)
    streamed = export.pairs.frame()
    assert streamed["split"].tolist() == whole["split"].tolist()
    test = whole[whole["split"] == "test"]
    counts = export.counts.iloc[0]
    assert (counts["test_pairs"], counts["test_prompts"]) == (
        len(test),
        test["prompt_id"].nunique(),
    )
    h4 = binarize_export(*sources, **{**options, "layout": "h4"}, prompts_per_chunk=7)
    assert h4.counts.equals(export.counts)  # the h4 push splits them the same way


# --- TRL's RewardTrainer, from its own source --------------------------------------------


def reward_trainer_source() -> ast.ClassDef:
    spec = importlib.util.find_spec("trl.trainer.reward_trainer")
    assert spec is not None and spec.origin is not None
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "RewardTrainer")


def reward_trainer_methods(*names: str) -> dict[str, Any]:
    """RewardTrainer's methods `names`, compiled from TRL's source with the names they use
    from `datasets` and `trl.data_utils` (none of which needs torch); the module itself
    imports torch, which this venv does not have."""
    from datasets import Dataset, IterableDataset
    from trl.data_utils import _tokenize, get_dataset_column_names, is_conversational

    methods = {
        node.name: node
        for node in reward_trainer_source().body
        if isinstance(node, ast.FunctionDef) and node.name in names
    }
    namespace: dict[str, Any] = {
        "Dataset": Dataset,
        "IterableDataset": IterableDataset,
        "PreTrainedTokenizerBase": object,
        "RewardConfig": object,
        "_tokenize": _tokenize,
        "get_dataset_column_names": get_dataset_column_names,
        "is_conversational": is_conversational,
        "global_then_local_main_first": contextlib.nullcontext,
        "json": json,
        "warnings": warnings,
    }
    module = ast.Module(body=[methods[name] for name in names], type_ignores=[])
    exec(compile(module, "trl/trainer/reward_trainer.py", "exec"), namespace)  # noqa: S102
    return {name: namespace[name] for name in names}


def keys_read_from(method: str, variable: str) -> set[str]:
    """The constant keys `method` of RewardTrainer reads from `variable` (`inputs[...]`)."""
    node = next(n for n in reward_trainer_source().body if getattr(n, "name", None) == method)
    return {
        sub.slice.value
        for sub in ast.walk(node)
        if isinstance(sub, ast.Subscript)
        and isinstance(sub.value, ast.Name)
        and sub.value.id == variable
        and isinstance(sub.slice, ast.Constant)
    }


def test_the_reward_trainer_keeps_and_reads_the_margin(tmp_path: Path):
    pytest.importorskip("transformers", reason="test-only: pip install -e '.[dev]'")
    pytest.importorskip("trl", reason="test-only: pip install --no-deps trl==1.16.0")
    from tests.reporting.test_ecosystem import tiny_tokenizer

    path = tmp_path / "pairs.parquet"
    pairs_of(30).to_parquet(path)
    loaded = load_dataset("parquet", data_files=str(path), split="train", cache_dir=str(tmp_path))
    assert loaded.features["margin"] == Value("float64")
    assert loaded.features["split"] == Value("string")
    train = loaded.filter(lambda side: side == "train", input_columns="split")
    test = loaded.filter(lambda side: side == "test", input_columns="split")
    assert not set(train["prompt_id"]) & set(test["prompt_id"])
    assert train.num_rows + test.num_rows == loaded.num_rows and test.num_rows > 0

    methods = reward_trainer_methods("_prepare_dataset", "_set_signature_columns_if_needed")
    args = SimpleNamespace(dataset_num_proc=None, max_length=None)
    prepared = methods["_prepare_dataset"](None, train, tiny_tokenizer(), args, "train")
    trainer = SimpleNamespace(_signature_columns=None)
    methods["_set_signature_columns_if_needed"](trainer)
    # The Trainer drops every column not in the signature (remove_unused_columns).
    kept = prepared.select_columns(
        [column for column in prepared.column_names if column in trainer._signature_columns]
    )
    assert "margin" in kept.column_names and {"chosen_ids", "rejected_ids"} <= set(kept.features)
    scores = zip(train["score_chosen"], train["score_rejected"], strict=True)
    assert kept["margin"] == [chosen - rejected for chosen, rejected in scores]
    assert all(ids for ids in kept["chosen_ids"])  # TRL tokenized prompt + chosen
    # Its loss subtracts the margin from the reward difference.
    assert "margin" in keys_read_from("compute_loss", "inputs")
