"""A whole validation run: samples as published and a judge's verdicts to its card rows."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from llm_feedback.validation.card import card_lines
from llm_feedback.validation.formats import read_samples
from llm_feedback.validation.identity import judge_identity
from llm_feedback.validation.metrics import metric_value
from llm_feedback.validation.validate import validate_pairwise, validate_pointwise
from llm_feedback.validation.verdicts import pairs_table, verdicts_from_llmbar
from tests.conftest import SHARED_DATA

NATURAL = SHARED_DATA / "llmbar" / "natural"
IDENTITY = judge_identity("local", "judge-model", "template {question}", {"temperature": 0})
WHEN = "2026-12-01T21:30:00Z"


@pytest.mark.skipif(not (NATURAL / "dataset.json").is_file(), reason="../shared/data/llmbar absent")
def test_llmbar_gpt4_card() -> None:
    samples = read_samples(NATURAL / "dataset.json")
    verdicts = verdicts_from_llmbar(
        NATURAL / "gpt-4" / "vanilla" / "result.json", pairs_table(samples)
    )
    identity = judge_identity("openai", "gpt-4", "LLMBar Vanilla", {"temperature": 0})
    result = validate_pairwise(
        samples, identity, "llmbar-natural", created_at=WHEN, verdicts=verdicts, resamples=300
    )
    judge = result.card[(result.card["kind"] == "judge")]
    assert metric_value(judge, "accuracy") == pytest.approx(0.955)
    assert metric_value(judge, "accuracy_both_orders") == pytest.approx(0.93)
    text = card_lines(result.card, identity["judge_key"])
    assert "cannot be told apart" not in text
    assert "| accuracy | 0.955 [" in text
    assert result.annotators.empty  # one label per item


def write_mtbench(path: Path) -> Path:
    def conversation(answer: str) -> list[dict]:
        return [{"role": "user", "content": "Q"}, {"role": "assistant", "content": answer}]

    rows = []
    for question in range(12):
        for judge, winner in (
            ("expert_0", "model_a"),
            ("expert_1", "model_a" if question % 3 else "tie"),
        ):
            rows.append(
                {
                    "question_id": question,
                    "model_a": "alpha",
                    "model_b": "beta",
                    "winner": winner,
                    "judge": judge,
                    "turn": 1,
                    "conversation_a": conversation("a much longer answer" * (question % 2 + 1)),
                    "conversation_b": conversation("short"),
                }
            )
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    return path


def test_several_annotators_judgments_and_logprobs(tmp_path: Path) -> None:
    samples = read_samples(write_mtbench(tmp_path / "human.jsonl"))
    pairs = pairs_table(samples)
    # eval_judgments rows as the pipeline writes them: this judge always prefers alpha.
    judgments = pd.DataFrame(
        {
            "instance_id": pairs["instance_id"],
            "model_a": "alpha",
            "model_b": "beta",
            "verdict_a_first": "A",
            "verdict_b_first": "A",
        }
    )
    calls = []
    for instance in pairs["instance_id"]:
        for order, p_first in (("original", 0.9), ("swapped", 0.3)):  # bias +0.2 for first
            calls.append(
                {
                    "instance_id": instance,
                    "order": order,
                    "p_first": p_first,
                    "p_second": 1 - p_first,
                    "p_tie": 0.0,
                    "margin": 2 * p_first - 1,
                    "argmax_verdict": "first" if p_first > 0.5 else "second",
                    "source": "logprobs",
                }
            )
    result = validate_pairwise(
        samples,
        IDENTITY,
        "mtbench-human-toy",
        created_at=WHEN,
        judgments=judgments,
        calls=pd.DataFrame(calls),
        resamples=200,
    )
    card = result.card
    assert set(card["verdict_source"].dropna()) == {"argmax", "logprobs", "logprobs_calibrated"}
    assert card["position_bias"].iloc[0] == pytest.approx(0.2)
    assert card["usable_probability_share"].iloc[0] == 1.0
    argmax = card[(card["kind"] == "judge") & (card["verdict_source"] == "argmax")]
    # Gold: A on 8 items, a tie (A vs tie) on the 4 with question % 3 == 0.
    assert metric_value(argmax, "accuracy") == pytest.approx(8 / 12)
    weighted = card[(card["kind"] == "judge") & (card["verdict_source"] == "logprobs")]
    # P(A) is 0.9 shown first and 0.7 shown second: accuracy (0.9 + 0.7) / 2 on the 8.
    assert metric_value(weighted, "accuracy") == pytest.approx(0.8 * 8 / 12)
    calibrated = card[card["verdict_source"] == "logprobs_calibrated"]
    assert metric_value(calibrated, "positional_agreement") == 1.0
    kappa = result.annotators.set_index(["metric"])["value"]
    assert kappa["exact_match_share"] == pytest.approx(8 / 12)
    by_source = result.by_annotator
    expert_0 = by_source[by_source["gold_source"] == "expert_0"]
    assert metric_value(expert_0, "accuracy") == 1.0
    text = card_lines(card, IDENTITY["judge_key"])
    assert "first-position bias +0.200" in text


def test_pointwise_validation_with_expected_scores() -> None:
    scores = pd.DataFrame(
        {
            "instance_id": [f"q{k}" for k in range(8)],
            "score": [1.0, 2, 3, 4, 5, 6, 7, np.nan],
            "expected_score": [1.5, 2, 3, 4, 5, 6, 6.5, np.nan],
            "source": ["logprobs"] * 7 + ["argmax"],
            "gold_score": [1.0, 2, 3, 4, 5, 6, 8, 3],
        }
    )
    result = validate_pointwise(scores, IDENTITY, "toy", created_at=WHEN, resamples=100)
    card = result.card
    argmax = card[card["verdict_source"] == "argmax"]
    assert metric_value(argmax, "exact_agreement") == pytest.approx(6 / 7)
    weighted = card[card["verdict_source"] == "logprobs"]
    assert metric_value(weighted, "mean_difference") == pytest.approx((0.5 - 1.5) / 7)
    assert "| spearman |" in card_lines(card, IDENTITY["judge_key"])
