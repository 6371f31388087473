"""The viewer's labels.jsonl, downloaded as it is (pairs and scores mixed, several pairs per
prompt, two reviewers), is evaluate's gold: a pairwise judge is validated on the pairs, a
scoring judge on the scores."""

from __future__ import annotations

import re
from typing import Any

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
