"""Position, length and self-preference diagnostics on ratings with a known bias."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from llm_feedback.stats.bias import (
    length_correlation,
    mean_by_position,
    position_slope,
    rating_by_length_bins,
    self_preference,
)


def one_shuffle_ratings(seed: int, position_bias: float, n_prompts: int = 800) -> pd.DataFrame:
    """4 completions a prompt shown in a random order once; the judge takes
    `position_bias` rating points per position further down."""
    rng = np.random.default_rng(seed)
    prompt = np.repeat(np.arange(n_prompts), 4)
    position = np.concatenate([rng.permutation(4) for _ in range(n_prompts)])
    quality = rng.normal(3, 0.8, len(prompt)) + np.repeat(rng.normal(0, 0.5, n_prompts), 4)
    length = rng.lognormal(6, 0.5, len(prompt))
    rating = quality + position_bias * position + 0.2 * np.log(length)
    return pd.DataFrame(
        {
            "prompt_id": prompt.astype(str),
            "aspect": "helpfulness",
            "position": position,
            "length": length,
            "rating": rating,
        }
    )


def test_a_position_bias_shows_in_the_slope_from_one_shuffle():
    biased = position_slope(one_shuffle_ratings(0, position_bias=-0.25)).iloc[0]
    assert biased["ci_low"] <= -0.25 <= biased["ci_high"] and biased["ci_high"] < 0
    fair = position_slope(one_shuffle_ratings(1, position_bias=0.0)).iloc[0]
    assert fair["ci_low"] <= 0 <= fair["ci_high"]
    ratings = one_shuffle_ratings(1, position_bias=0.0)
    assert fair["slope"] == pytest.approx(np.polyfit(ratings["position"], ratings["rating"], 1)[0])
    assert fair["method"] == "ols-wald-cluster" and fair["n"] == 3200


def test_mean_by_position_has_an_interval_per_position():
    table = mean_by_position(one_shuffle_ratings(2, -0.25), n_resamples=100)
    assert list(table["position"]) == [0, 1, 2, 3]
    assert table["estimate"].is_monotonic_decreasing
    assert (table["ci_low"] < table["estimate"]).all() and (
        table["estimate"] < table["ci_high"]
    ).all()


def test_length_correlation_is_spearmans_rho_with_an_interval():
    ratings = one_shuffle_ratings(3, 0.0)
    row = length_correlation(ratings, n_resamples=300).iloc[0]
    expected = spearmanr(ratings["rating"], ratings["length"]).statistic
    assert row["spearman"] == pytest.approx(expected)
    assert row["ci_low"] < expected < row["ci_high"]
    assert row["ci_high"] - row["ci_low"] == pytest.approx(2 * 1.96 / np.sqrt(3200), rel=0.3)
    bins = rating_by_length_bins(ratings, n_resamples=50)
    assert len(bins) == 10 and bins["n"].sum() == 3200
    assert bins["estimate"].iloc[-1] > bins["estimate"].iloc[0]  # longer rated higher
    assert (bins["length_low"] <= bins["length_high"]).all()


def test_self_preference_is_own_minus_others_mean_with_a_clustered_interval():
    ratings = pd.DataFrame(
        {
            "prompt_id": ["p1", "p1", "p2", "p2", "p3", "p3"],
            "model": ["judge", "other", "judge", "other", "judge", "other"],
            "judge_model": "judge",
            "rating": [5.0, 3.0, 4.0, 4.0, 5.0, 2.0],
        }
    )
    row = self_preference(ratings, n_resamples=500).iloc[0]
    assert row["judge_model"] == "judge" and (row["n_own"], row["n_others"]) == (3, 3)
    assert row["difference"] == pytest.approx(14 / 3 - 3)
    # Per-prompt differences are 2, 0, 3: a resample of prompts ranges from 0 to 3.
    assert 0 <= row["ci_low"] <= row["difference"] <= row["ci_high"] <= 3
    assert self_preference(ratings.assign(judge_model="gpt-4"), n_resamples=20).empty


def test_the_slope_and_its_interval_are_statsmodels_cluster_robust_ols_in_any_chunks():
    import statsmodels.api as sm

    from llm_feedback.stats.bias import SlopeTally

    ratings = one_shuffle_ratings(4, position_bias=-0.1, n_prompts=300)
    fit = sm.OLS(ratings["rating"], sm.add_constant(ratings["position"].astype(float))).fit(
        cov_type="cluster", cov_kwds={"groups": pd.factorize(ratings["prompt_id"])[0]}
    )
    half = 1.959963984540054 * np.sqrt(fit.cov_params().iloc[1, 1])
    tally = SlopeTally(confidence=0.95)
    chunks = [ratings.iloc[start : start + 4 * 37] for start in range(0, len(ratings), 4 * 37)]
    for walk in (tally.count, tally.add):
        for chunk in chunks:  # whole prompts per chunk, as the report walks them
            walk(chunk)
    row = tally.result().iloc[0]
    assert row["slope"] == pytest.approx(fit.params.iloc[1])
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(
        (fit.params.iloc[1] - half, fit.params.iloc[1] + half)
    )


@pytest.mark.parametrize("lengths", ["continuous", "repeating"])
def test_length_bins_from_counted_lengths_are_pandas_qcut_deciles(lengths):
    from llm_feedback.stats.bias import _quantile_edges

    rng = np.random.default_rng(6)
    values = rng.lognormal(6, 0.5, 999)
    if lengths == "repeating":  # few distinct lengths: qcut drops the repeated edges
        values = rng.choice([10.0, 20.0, 20.0, 35.0, 400.0], size=999)
    series = pd.Series(values)
    _, expected = pd.qcut(series, 10, labels=False, retbins=True, duplicates="drop")
    edges = np.unique(_quantile_edges(series.value_counts().to_dict(), 10))
    assert edges == pytest.approx(expected)
