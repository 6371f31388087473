"""eval_metrics' intervals (clustered by instance), mean differences to a baseline, and
eval_model_ranking from pairwise judgments, through the judge's real HTTP server."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import numpy as np
import pandas as pd
import pytest

from llm_feedback.core.errors import ConfigError
from llm_feedback.evaluation import run_evaluation
from llm_feedback.params import parse_evaluate
from llm_feedback.testing.server import FakeLLMServer, RequestContext
from tests.conftest import endpoints_via

# Metrics that are estimates (an interval each) and counts (none).
ESTIMATES = {"mean", "normalised_mean", "win_rate", "pass_at_k", "pass_at_k_first"}
COUNTS = {"n_reasks", "wins", "losses", "ties", "n_inconsistent", "n_invalid"}


def draw(*parts: object) -> float:
    """A fixed pseudo-random number in [0, 1) per key: the judge's 'noise', the same in
    every request about that key (so both orders of a pair get one decision)."""
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def response_of(body: dict[str, Any]) -> str:
    text = "\n".join(message["content"] for message in body["messages"])
    return re.search(r"\b(?:strong|weak) i\d+\b", text).group(0)


def scoring_judge_score(response: str) -> int:
    """'model instance' answers rated 1-10: strong around 8, weak around 4, per instance."""
    model, instance = response.split()
    centre = 8 if model == "strong" else 4
    return centre + round(4 * draw(model, instance) - 2)


def scoring_judge(body: dict[str, Any], ctx: RequestContext) -> str:
    return f"Rating: [[{scoring_judge_score(response_of(body))}]]"


def pointwise_rows(replicates: int, models=("strong", "weak"), n: int = 30) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "instance_id": f"i{index}",
                "question": f"Question {index}?",
                "response": f"{model} i{index}",
                "model": model,
                "replicate": replicate,
            }
            for index in range(n)
            for model in models
            for replicate in range(replicates)
        ]
    )


def evaluate(server: FakeLLMServer, samples: pd.DataFrame, **params: Any):
    endpoints = endpoints_via(server, structured_output=False)
    params = {"judge": {"endpoint": "local"}, "max_reasks": 0, **params}
    return run_evaluation(samples, params, endpoints, None, progress=False)


def overall(metrics: pd.DataFrame, name: str) -> pd.DataFrame:
    chosen = metrics[
        (metrics["metric"] == name) & metrics["category"].isna() & metrics["criterion"].isna()
    ]
    return chosen.set_index("model")


def test_every_estimate_has_an_interval_around_it_and_counts_have_none():
    with FakeLLMServer(scoring_judge) as server:
        _, metrics = evaluate(server, pointwise_rows(2), mode="single_1_10")
    estimates = metrics[
        metrics["metric"].isin(ESTIMATES) | metrics["metric"].str.startswith("mean_d")
    ]
    assert set(estimates["metric"]) >= {"mean", "normalised_mean", "mean_difference_vs_strong"}
    assert estimates["ci_method"].str.startswith("poisson-bootstrap-1000-cluster").all()
    assert (estimates["ci_low"] <= estimates["value"]).all()
    assert (estimates["value"] <= estimates["ci_high"]).all()
    assert (estimates["ci_high"] > estimates["ci_low"]).all()
    counts = metrics[metrics["metric"].isin(COUNTS)]
    assert len(counts) and counts[["ci_low", "ci_high", "ci_method"]].isna().all().all()
    # normalised_mean's interval is mean's on the 0-100 scale.
    mean, normalised = overall(metrics, "mean"), overall(metrics, "normalised_mean")
    assert normalised["ci_low"].to_numpy() == pytest.approx(
        100 * (mean["ci_low"].to_numpy() - 1) / 9
    )
    # The baseline is the first model by name; weak - strong is about -4 and excludes 0.
    difference = overall(metrics, "mean_difference_vs_strong").loc["weak"]
    assert difference["n"] == 30
    assert difference["value"] == pytest.approx(
        mean.at["weak", "value"] - mean.at["strong", "value"]
    )
    assert difference["ci_low"] < difference["value"] < difference["ci_high"] < 0


def test_a_chosen_baseline_and_a_lone_model():
    with FakeLLMServer(scoring_judge) as server:
        _, metrics = evaluate(
            server, pointwise_rows(1), mode="single_1_10", ranking={"baseline": "weak"}
        )
        _, alone = evaluate(server, pointwise_rows(1, models=("weak",)), mode="single_1_10")
    assert overall(metrics, "mean_difference_vs_weak").loc["strong", "value"] > 3
    assert not alone["metric"].str.startswith("mean_difference").any()


def test_the_bootstrap_resamples_instances_not_rows():
    """Identical replicates add rows but no instances: clustered by instance, the interval
    is exactly the one-replicate interval (a row bootstrap would shrink it by about half
    with four replicates)."""
    with FakeLLMServer(scoring_judge) as server:
        _, once = evaluate(server, pointwise_rows(1), mode="single_1_10")
        _, four = evaluate(server, pointwise_rows(4), mode="single_1_10")
    columns = ["value", "ci_low", "ci_high"]
    for name in ("mean", "mean_difference_vs_strong"):
        assert np.allclose(overall(once, name)[columns], overall(four, name)[columns])
    assert (overall(four, "mean")["n"] == 4 * overall(once, "mean")["n"]).all()


STRENGTH = {"m1": 0.0, "m2": 1.0, "m3": 2.0}


def pairwise_judge(body: dict[str, Any], ctx: RequestContext) -> str:
    """Bradley-Terry with strengths STRENGTH: one decision per (instance, pair), the same
    in both orders; the verdict names whichever letter shows the winner."""
    text = body["messages"][-1]["content"]
    shown = re.findall(r"<<<RESPONSE [AB] BEGIN \w+>>>\n(m\d) (i\d+)", text)
    (first, instance), (second, _) = shown
    low, high = sorted([first, second])
    p_high = 1 / (1 + np.exp(STRENGTH[low] - STRENGTH[high]))
    winner = high if draw(instance, low, high) < p_high else low
    return "[[A]]" if winner == first else "[[B]]"


def pairwise_rows(replicates: int = 1, n: int = 40) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "instance_id": f"i{index}",
                "question": f"Question {index}?",
                "response": f"{model} i{index}" + " more" * int(5 * draw(model, index)),
                "model": model,
                "replicate": replicate,
            }
            for index in range(n)
            for model in STRENGTH
            for replicate in range(replicates)
        ]
    )


def test_pairwise_win_rates_are_clustered_by_instance():
    with FakeLLMServer(pairwise_judge) as server:
        _, once = evaluate(server, pairwise_rows(1), mode="pairwise")
        _, twice = evaluate(server, pairwise_rows(2), mode="pairwise")
    rates_once, rates_twice = overall(once, "win_rate"), overall(twice, "win_rate")
    assert (rates_once["ci_low"] < rates_once["value"]).all()
    assert (rates_once["value"] < rates_once["ci_high"]).all()
    columns = ["value", "ci_low", "ci_high"]
    assert np.allclose(rates_once[columns], rates_twice[columns])


def test_the_evaluate_pipeline_ranks_pairwise_models(run_kedro, tmp_path):
    samples_path = tmp_path / "pairs.jsonl"
    pairwise_rows().to_json(samples_path, orient="records", lines=True)
    with FakeLLMServer(pairwise_judge) as server:
        params = {
            "endpoints": endpoints_via(server, structured_output=False),
            "evaluate": {"mode": "pairwise", "max_reasks": 0},
            "eval_samples_path": str(samples_path),
        }
        catalog = run_kedro("evaluate", params)["catalog"]
    ranking = catalog.load("eval_model_ranking").set_index("model")
    assert list(ranking.sort_values("rank").index) == ["m3", "m2", "m1"]
    assert (ranking["ci_low"] < ranking["score"]).all()
    assert (ranking["score"] < ranking["ci_high"]).all()
    assert set(ranking["baseline"]) == {"m1"}
    assert pd.isna(ranking.at["m1", "win_rate"]) and pd.isna(ranking.at["m1", "wins"])
    for model in ("m2", "m3"):
        row = ranking.loc[model]
        assert row["wins"] + row["ties"] + row["losses"] == 40
        assert row["win_rate"] == pytest.approx(row["wins"] / 40)  # no ties from this judge
        assert row["win_rate_ci_low"] < row["win_rate"] < row["win_rate_ci_high"]
        assert 0 < row["lc_win_rate"] < 1 and np.isfinite(row["length_coefficient"])
    assert ranking.at["m3", "win_rate"] > ranking.at["m2", "win_rate"] > 0.5
    # Beside the raw ranking, the style-controlled one and how much style explained.
    styled = ranking["style_controlled_score"]
    assert (ranking["style_controlled_score_ci_low"] < styled).all()
    assert (styled < ranking["style_controlled_score_ci_high"]).all()
    assert set(ranking["style_method"]) == {
        "bradley-terry-style-control, poisson-bootstrap-1000-cluster-one-step"
    }
    assert set(ranking.loc[["m2", "m3"], "lc_method"]) == {
        "poisson-bootstrap-1000-cluster-one-step"
    }
    coefficients = catalog.load("eval_style_coefficients").set_index("feature")
    assert list(coefficients.index) == ["length", "headers", "bold", "list_items"]
    length = coefficients.loc["length"]
    assert length["ci_low"] <= length["coefficient"] <= length["ci_high"]
    assert (tmp_path / "data" / "08_reporting" / "figures" / "eval_model_ranking.png").is_file()


def test_a_pointwise_run_has_an_empty_ranking(run_kedro, tmp_path):
    samples_path = tmp_path / "points.jsonl"
    pointwise_rows(1, n=3).to_json(samples_path, orient="records", lines=True)
    with FakeLLMServer(scoring_judge) as server:
        params = {
            "endpoints": endpoints_via(server, structured_output=False),
            "evaluate": {"mode": "single_1_10", "max_reasks": 0},
            "eval_samples_path": str(samples_path),
        }
        catalog = run_kedro("evaluate", params)["catalog"]
    ranking = catalog.load("eval_model_ranking")
    assert ranking.empty and "lc_win_rate" in ranking.columns
    assert catalog.load("eval_style_coefficients").empty


def test_agreement_with_a_recording_carries_clustered_intervals():
    samples = pointwise_rows(1)
    # A recording that agrees with the judge on most instances and is off by 3 elsewhere.
    judged = [scoring_judge_score(row.response) for row in samples.itertuples()]
    off = [3 * (draw("off", row.instance_id) < 0.3) for row in samples.itertuples()]
    recorded = [min(10, score + shift) for score, shift in zip(judged, off, strict=True)]
    samples["recorded_score"] = recorded
    with FakeLLMServer(scoring_judge) as server:
        _, metrics = evaluate(server, samples, mode="single_1_10")
    agreement = metrics[metrics["raters"] == "recorded~judge"].set_index("metric")
    assert set(agreement.index) == {"spearman", "exact_match_share"}
    share = agreement.loc["exact_match_share"]
    assert 0.5 < share["value"] < 0.95
    assert share["ci_low"] < share["value"] < share["ci_high"]
    rho = agreement.loc["spearman"]
    assert rho["ci_low"] < rho["value"] < rho["ci_high"]
    assert set(agreement["ci_method"]) == {"poisson-bootstrap-1000-cluster"}


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ({"intervals": {"n_resamples": 5}}, "evaluate.intervals.n_resamples"),
        ({"intervals": {"confidence": 1.5}}, "evaluate.intervals.confidence"),
        ({"intervals": {"resamples": 100}}, "evaluate.intervals.resamples: unknown setting"),
        ({"ranking": {"baseline": 3}}, "evaluate.ranking.baseline"),
    ],
)
def test_bad_interval_and_ranking_parameters_name_themselves(block, message):
    endpoints = {"local": {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"}}
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_evaluate({"judge": {"endpoint": "local"}, **block}, endpoints)


def test_the_interval_parameters_reach_the_metrics():
    endpoints = {"local": {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"}}
    params = parse_evaluate(
        {"judge": {"endpoint": "local"}, "intervals": {"n_resamples": 200, "seed": 3}}, endpoints
    )
    assert params.intervals.kwargs == {"n_resamples": 200, "seed": 3, "confidence": 0.95}
    assert params.ranking.baseline is None
