"""The viewer's labels.jsonl, downloaded as it is (pairs and scores mixed, several pairs per
prompt, two reviewers), is evaluate's gold: a pairwise judge is validated on the pairs, a
scoring judge on the scores. Gold scores on a slice of a run's responses correct its
means (`estimator` rows in eval_metrics)."""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pandas as pd
import pytest

from llm_feedback.testing.server import FakeLLMServer, RequestContext
from tests.pipelines.test_evaluate_judge_validation import (
    always_first,
    llmbar_params,
    metric_values,
)
from tests.validation.test_viewer_labels import COMPLETIONS, two_reviewers


def test_a_pairwise_judge_is_validated_on_the_downloaded_pairs(run_kedro, tmp_path):
    samples = two_reviewers(tmp_path / "labels.jsonl")
    with FakeLLMServer(responder=always_first) as server:
        run = run_kedro("evaluate", llmbar_params(server, samples))
        # Four pairs in both orders; p2 shows the texts of p1's alpha~beta: those calls shared.
        assert server.request_count == 2 * 3
    judgments = run["catalog"].load("eval_judgments")
    assert judgments["gold"].notna().all()
    assert sorted(judgments["instance_id"]) == [
        "p1:alpha~beta",
        "p1:alpha~gamma",
        "p1:gamma~beta",
        "p2",
    ]
    measured = metric_values(run["catalog"].load("eval_metrics"), "fake-model~gold")
    # Gold: A (gamma~beta), A (alpha~beta), tie (alpha~gamma), B (p2); the judge says A.
    assert measured["accuracy_original_order"] == pytest.approx(2 / 4)


def test_a_scoring_judge_is_validated_on_the_downloaded_scores(run_kedro, tmp_path):
    samples = two_reviewers(tmp_path / "labels.jsonl")
    gold = {"2": 6.5, "Nine.": 2.5}

    def near_gold(body: dict[str, Any], ctx: RequestContext) -> str:
        prompt = body["messages"][-1]["content"]
        response = next(
            r for _, r in COMPLETIONS.values() if re.search(rf"\n{re.escape(r)}\n", prompt)
        )
        return f"Fair.\nRating: [[{round(gold[response])}]]"

    with FakeLLMServer(responder=near_gold) as server:
        run = run_kedro("evaluate", llmbar_params(server, samples, mode="single_1_10"))
    judgments = run["catalog"].load("eval_judgments")
    assert sorted(judgments["model"]) == ["alpha", "beta"]
    measured = metric_values(run["catalog"].load("eval_metrics"), "fake-model~gold")
    # The judge says 6 and 2 (Python rounds halves to even) where the reviewers' means are
    # 6.5 (7 and 6 from two reviewers) and 2.5: each half a point under.
    assert measured["mean_difference"] == pytest.approx(-0.5)
    assert measured["within_1_agreement"] == 1.0 and measured["exact_agreement"] == 0.0


def test_a_slice_of_gold_scores_corrects_each_models_mean(run_kedro, tmp_path):
    """The judge rates every response two points high; people scored 12 of each model's 30
    responses. The prediction-powered mean is near the people's mean over all 30; the judge's
    own row stays as it was, named `judge`."""
    rng = np.random.default_rng(8)
    rows, truth = [], {}
    for model in ("alpha", "beta"):
        human = rng.integers(2, 8, 30)
        truth[model] = human.mean()
        labelled = set(rng.choice(30, 12, replace=False).tolist())
        rows += [
            {
                "instance_id": f"q{number}",
                "question": f"Q{number}?",
                "response": f"{model} worth {score}",
                "model": model,
                "gold_score": float(score) if number in labelled else None,
            }
            for number, score in enumerate(human)
        ]
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")

    def two_high(body: dict[str, Any], ctx: RequestContext) -> str:
        worth = int(re.search(r"worth (\d+)", body["messages"][-1]["content"]).group(1))
        return f"Fine.\nRating: [[{worth + 2}]]"

    with FakeLLMServer(responder=two_high) as server:
        run = run_kedro("evaluate", llmbar_params(server, samples, mode="single_1_10"))
    metrics = run["catalog"].load("eval_metrics")
    means = metrics[(metrics["metric"] == "mean") & metrics["category"].isna()]
    for model, human_mean in truth.items():
        rows_of = means[means["model"] == model].set_index("estimator")
        assert set(rows_of.index) == {"judge", "prediction_powered", "labels_only"}
        assert rows_of.loc["judge", "value"] == pytest.approx(human_mean + 2)
        assert pd.isna(rows_of.loc["judge", "n_labels"])
        powered = rows_of.loc["prediction_powered"]
        # PPI++ tunes how far it trusts the judge from the slice: not exactly the offset.
        assert powered["value"] == pytest.approx(human_mean, abs=0.25)
        assert powered["ci_low"] <= human_mean <= powered["ci_high"]
        assert powered["n_labels"] == rows_of.loc["labels_only", "n_labels"] == 12
        assert powered["n"] == 30
    # The agreement and validation rows are no model's estimate.
    assert metrics.loc[metrics["raters"].notna(), "estimator"].isna().all()


def test_a_pass_fail_judge_gets_its_rates_and_the_rogan_gladen_pass_rate(run_kedro, tmp_path):
    """40 responses, people's verdicts on 20: 10 passes of which the judge passes 8, 10
    fails of which it fails 7. TPR 0.8 and TNR 0.7 with Wilson's intervals; the pass rate
    corrected as Rogan and Gladen do."""
    judge_passes = [True] * 8 + [False] * 2 + [False] * 7 + [True] * 3 + [True] * 13 + [False] * 7
    gold = [1.0] * 10 + [0.0] * 10 + [None] * 20
    rows = [
        {
            "instance_id": f"b{number}",
            "question": f"Question {number}?",
            "response": f"answer {number} {'passes' if passes else 'fails'}",
            "reference": "the reference",
            "model": "m",
            "gold_score": label,
        }
        for number, (passes, label) in enumerate(zip(judge_passes, gold, strict=True))
    ]
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")

    def by_marker(body: dict[str, Any], ctx: RequestContext) -> str:
        return "1" if "passes" in body["messages"][-1]["content"] else "0"

    with FakeLLMServer(responder=by_marker) as server:
        params = llmbar_params(server, samples, mode="binary", binary_reply="0/1")
        run = run_kedro("evaluate", params)
    metrics = run["catalog"].load("eval_metrics")
    overall = metrics[(metrics["model"] == "m") & metrics["category"].isna()]

    def row(metric: str, estimator: str) -> pd.Series:
        (found,) = overall[
            (overall["metric"] == metric) & (overall["estimator"] == estimator)
        ].index
        return overall.loc[found]

    tpr, tnr = row("tpr", "labels_only"), row("tnr", "labels_only")
    assert (tpr["value"], tnr["value"]) == (pytest.approx(0.8), pytest.approx(0.7))
    assert (tpr["ci_method"], tpr["n"], tnr["n"]) == ("wilson", 10, 10)
    judge_rate = sum(judge_passes) / 40
    assert row("mean", "judge")["value"] == pytest.approx(judge_rate)
    corrected = row("mean", "rogan_gladen")
    assert corrected["value"] == pytest.approx((judge_rate + 0.7 - 1) / (0.8 + 0.7 - 1))
    assert corrected["n_labels"] == 20
    assert row("mean", "prediction_powered")["n_labels"] == 20
