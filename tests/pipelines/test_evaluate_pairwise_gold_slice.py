"""A pairwise samples file with gold on a random slice of its pairs, run through the
evaluate pipeline against the test server: every pair is judged, the judge is validated on
the labelled ones only, and its win rates and "A is better" share get prediction-powered
rows beside its own."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from llm_feedback.testing.server import FakeLLMServer, RequestContext
from tests.pipelines.test_evaluate_judge_validation import (
    llmbar_params,
    metric_values,
    shown,
    write_jsonl,
)

pytest.importorskip("ppi_py")

PAIRS, LABELS = 40, 16


def sliced_pairs(rng: np.random.Generator) -> tuple[list[dict[str, Any]], float]:
    """PAIRS pairs, the first response the better on about 70%; the worse one is "shiny" on
    one pair in five (it fools the judge); gold on LABELS random pairs. Also the gold share
    of pairs whose first response is the better."""
    labelled = set(rng.choice(PAIRS, LABELS, replace=False).tolist())
    first_better = rng.random(PAIRS) < 0.7
    rows = []
    for number in range(PAIRS):
        worse = f"a {'shiny' if number % 5 == 0 else 'weak'} answer {number}"
        better = f"a solid answer {number}"
        first, second = (better, worse) if first_better[number] else (worse, better)
        row = {
            "instance_id": f"pair-{number:02d}",
            "question": f"Question {number}?",
            "response_a": first,
            "response_b": second,
        }
        if number in labelled:
            row["label"] = "A" if first_better[number] else "B"
        rows.append(row)
    return rows, float(first_better.mean())


def taken_in(body: dict[str, Any], ctx: RequestContext) -> str:
    """Picks the shiny response, else the solid one: right on four pairs in five."""
    _, first, second = shown(body["messages"][-1]["content"])
    picks_first = "shiny" in first or ("solid" in first and "shiny" not in second)
    return f"My pick.\nVerdict: [[{'A' if picks_first else 'B'}]]"


def test_gold_on_a_slice_of_pairs_gives_prediction_powered_win_rates(run_kedro, tmp_path):
    rows, share = sliced_pairs(np.random.default_rng(5))
    samples = write_jsonl(tmp_path / "pairs.jsonl", rows)
    with FakeLLMServer(responder=taken_in) as server:
        run = run_kedro("evaluate", llmbar_params(server, samples))
        assert server.request_count == 2 * PAIRS  # every pair judged, in both orders
    judgments = run["catalog"].load("eval_judgments")
    assert len(judgments) == PAIRS and judgments["gold"].notna().sum() == LABELS
    metrics = run["catalog"].load("eval_metrics")
    # The judge's card counts the labelled pairs only (accuracy: both orders of each).
    validation = metrics[(metrics["raters"] == "fake-model~gold") & metrics["category"].isna()]
    counts = dict(zip(validation["metric"], validation["n"], strict=True))
    assert (counts["accuracy"], counts["accuracy_original_order"]) == (2 * LABELS, LABELS)
    assert metric_values(metrics, "fake-model~gold")["accuracy"] >= 0.5
    overall = metrics[metrics["raters"].isna() & metrics["category"].isna()]

    def row(model: str | None, metric: str, estimator: str) -> pd.Series:
        of_model = overall["model"].isna() if model is None else overall["model"] == model
        (found,) = overall[
            of_model & (overall["metric"] == metric) & (overall["estimator"] == estimator)
        ].index
        return overall.loc[found]

    for model, gold_rate in (("response_a", share), ("response_b", 1 - share)):
        judge = row(model, "win_rate", "judge")  # compute_metrics' own, beside the others
        assert pd.isna(judge["n_labels"])
        powered = row(model, "win_rate", "prediction_powered")
        assert (powered["n"], powered["n_labels"], powered["ci_method"]) == (PAIRS, LABELS, "ppi++")
        assert powered["ci_low"] <= gold_rate <= powered["ci_high"]
        assert row(model, "win_rate", "labels_only")["n_labels"] == LABELS
        # The judge saw no tie: binary, with its rates and the Rogan-Gladen rate.
        assert row(model, "win_rate", "rogan_gladen")["n_labels"] == LABELS
        assert row(model, "tpr", "labels_only")["ci_method"] == "wilson"
    judged_share = row(None, "a_better", "judge")
    assert judged_share["value"] == pytest.approx(row("response_a", "win_rate", "judge")["value"])
    corrected = row(None, "a_better", "prediction_powered")
    assert corrected["ci_low"] <= share <= corrected["ci_high"]
    assert corrected["n_labels"] == LABELS
