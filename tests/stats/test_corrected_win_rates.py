"""A pairwise run's win rates and "A is better" share corrected by a slice of gold verdicts
(`evaluation.corrected`): a simulated judge right on 80% of the pairs, a random slice of
them labelled; over many seeds the prediction-powered 95% interval covers the gold share of
all the pairs at least 93% of the time, while the judge-only one, beside it, misses it.
Native samples may leave a pair's gold out (on both its rows)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from llm_feedback.core.errors import InputError
from llm_feedback.evaluation.corrected import A_BETTER, corrected_metrics
from llm_feedback.evaluation.samples import validate_samples
from llm_feedback.params import parse_evaluate
from llm_feedback.stats.prediction_powered import select_for_labels

pytest.importorskip("ppi_py")

PAIRS, LABELS, SEEDS = 400, 40, 200
CONFIG = parse_evaluate(
    {"mode": "pairwise"},
    {"local": {"backend": "openai", "model": "a", "base_url": "http://x/v1"}},
)


def simulated(
    rng: np.random.Generator, labelled: np.ndarray, **extra
) -> tuple[pd.DataFrame, float]:
    """Judgments of PAIRS pairs (output_1 first) whose first response is better on 70%, by
    a judge right on 80% of them (it errs both ways), gold on the `labelled` ones; and the
    gold share of all pairs."""
    gold = np.where(rng.random(PAIRS) < 0.7, "A", "B")
    right = rng.random(PAIRS) < 0.8
    outcome = np.where(right, gold, np.where(gold == "A", "B", "A"))
    judgments = pd.DataFrame(
        {
            "instance_id": [f"q{number}" for number in range(PAIRS)],
            "turn": 1,
            "replicate": 0,
            "model_a": "output_1",
            "model_b": "output_2",
            "outcome": outcome,
            "gold": np.where(labelled, gold, None),
            "category": None,
            "level": None,
            **extra,
        }
    )
    return judgments, float((gold == "A").mean())


def row(metrics: pd.DataFrame, model: str | None, metric: str, estimator: str) -> pd.Series:
    model_matches = metrics["model"].isna() if model is None else metrics["model"] == model
    (found,) = metrics[
        model_matches & (metrics["metric"] == metric) & (metrics["estimator"] == estimator)
    ].index
    return metrics.loc[found]


def covers(found: pd.Series, value: float) -> bool:
    return bool(found["ci_low"] <= value <= found["ci_high"])


def test_the_prediction_powered_a_share_and_win_rates_cover_the_gold_share():
    covered = {"a_better": 0, "win_rate": 0, "judge": 0}
    for seed in range(SEEDS):
        rng = np.random.default_rng(seed)
        labelled = np.zeros(PAIRS, dtype=bool)
        labelled[rng.choice(PAIRS, LABELS, replace=False)] = True
        judgments, share = simulated(rng, labelled)
        metrics = corrected_metrics(judgments, CONFIG)
        powered = row(metrics, None, A_BETTER, "prediction_powered")
        assert (powered["n"], powered["n_labels"], powered["ci_method"]) == (PAIRS, LABELS, "ppi++")
        covered["a_better"] += covers(powered, share)
        # output_2's win rate is the share of pairs whose second response is the better.
        covered["win_rate"] += covers(
            row(metrics, "output_2", "win_rate", "prediction_powered"), 1 - share
        )
        judge = row(metrics, None, A_BETTER, "judge")
        assert pd.isna(judge["n_labels"]) and judge["ci_method"] == "wilson"
        covered["judge"] += covers(judge, share)
    assert covered["a_better"] / SEEDS >= 0.93
    assert covered["win_rate"] / SEEDS >= 0.93
    # The judge says A on 0.7 * 0.8 + 0.3 * 0.2 = 62% of pairs, not 70%: its interval,
    # sampling noise only, misses the gold share most of the time.
    assert covered["judge"] / SEEDS < 0.5


def test_labels_drawn_with_unequal_probabilities_are_weighted():
    """A review queue drew the labels, four times likelier where the judge was unsure: the
    weighted estimate replaces the uniform ones, and still covers."""
    covered = 0
    for seed in range(SEEDS // 3):
        rng = np.random.default_rng(1000 + seed)
        unsure = rng.random(PAIRS) < 0.3
        selected, probability = select_for_labels(np.where(unsure, 4.0, 1.0), LABELS, rng)
        # As eval_judgments carries a native samples column: `<column>_a` and `_b`.
        judgments, share = simulated(
            rng, selected, selection_probability_a=probability, selection_probability_b=probability
        )
        metrics = corrected_metrics(judgments, CONFIG)
        a_better = metrics[metrics["metric"] == A_BETTER]
        assert set(a_better["estimator"]) == {"judge", "prediction_powered"}
        powered = row(metrics, None, A_BETTER, "prediction_powered")
        assert powered["ci_method"] == "ppi++-weighted"
        assert powered["n_labels"] == selected.sum()
        covered += covers(powered, share)
    assert covered / (SEEDS // 3) >= 0.9


def native_pairs(gold: list[str | None]) -> pd.DataFrame:
    """Native pairwise samples: two rows an instance, `gold` given row by row."""
    return pd.DataFrame(
        {
            "instance_id": [f"q{number // 2}" for number in range(len(gold))],
            "question": [f"Q{number // 2}?" for number in range(len(gold))],
            "response": [f"answer {number}" for number in range(len(gold))],
            "model": ["m1", "m2"] * (len(gold) // 2),
            "gold": gold,
        }
    )


def test_native_samples_may_leave_the_gold_of_a_pair_out():
    samples = validate_samples(native_pairs(["A", "A", None, None, "tie", "tie"]), CONFIG)
    assert samples["gold"].notna().tolist() == [True, True, False, False, True, True]
    with pytest.raises(InputError, match=r"row 3 \(instance_id 'q1'\), column 'gold': differs"):
        validate_samples(native_pairs(["A", "A", "B", None]), CONFIG)
