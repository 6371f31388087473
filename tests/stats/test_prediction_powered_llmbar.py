"""LLMBar Natural with GPT-4's recorded verdicts (first round, output_1 shown first) as the
judge and 30 random gold labels as the human slice: the prediction-powered estimate of
"output_1 is better" covers the full set's gold share in at least 94% of 500 slices."""

from __future__ import annotations

import json

import numpy as np
import pytest

from llm_feedback.stats.prediction_powered import PREDICTION_POWERED, mean_estimates
from llm_feedback.validation.formats import read_samples
from tests.conftest import SHARED_DATA

NATURAL = SHARED_DATA / "llmbar" / "natural"
RESULT = NATURAL / "gpt-4" / "vanilla" / "result.json"

pytestmark = pytest.mark.skipif(
    not RESULT.is_file(), reason="../shared/data/llmbar/natural (GPT-4 results) is not here"
)
pytest.importorskip("ppi_py", reason="the ppi extra (ppi-python) is not installed")


def gpt4_says_output_1() -> np.ndarray:
    """1 where GPT-4's first-round verdict (swap = False) names output_1, 0 for output_2,
    NaN for anything else (an unreadable verdict)."""
    results = json.loads(RESULT.read_text("utf-8"))
    winners = [item["results"][0]["swap = False"]["winner"] for item in results]
    return np.array([{"1": 1.0, "2": 0.0}.get(str(winner), np.nan) for winner in winners])


def test_thirty_gold_labels_correct_gpt4_in_at_least_94_percent_of_slices():
    samples = read_samples(NATURAL / "dataset.json", "llmbar")
    # Two rows an item, output_1 first: gold "A" is "output_1 is better".
    gold = (samples.iloc[::2]["gold"] == "A").to_numpy(dtype=float)
    judge = gpt4_says_output_1()
    assert len(judge) == len(gold) == 100
    truth = gold.mean()
    rng = np.random.default_rng(44)
    covered, estimates = [], []
    for _ in range(500):
        slice_ = rng.choice(len(gold), 30, replace=False)
        rows = mean_estimates(judge, judge[slice_], gold[slice_], metric="output_1_better")
        rows = rows.set_index("estimator")
        powered = rows.loc[PREDICTION_POWERED]
        assert powered["n_labels"] == 30 and powered["n_judged"] == np.isfinite(judge).sum()
        covered.append(powered["ci_low"] <= truth <= powered["ci_high"])
        estimates.append(powered["estimate"])
    assert np.mean(covered) >= 0.94
    # Centred on the gold share (the judge's own share differs from it by 0.01 here).
    assert np.mean(estimates) == pytest.approx(truth, abs=0.005)
