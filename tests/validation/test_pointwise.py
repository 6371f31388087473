"""Pointwise meta-evaluation: correlations, agreement shares and the resampling helpers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import pearsonr, rankdata, spearmanr

from llm_feedback.core.errors import InputError
from llm_feedback.validation.metrics import metric_value
from llm_feedback.validation.pointwise import (
    pointwise_metrics,
    weighted_pearson,
    weighted_ranks,
    weighted_spearman,
)


def test_weighted_statistics_equal_scipy_on_repeated_rows() -> None:
    rng = np.random.default_rng(3)
    x = rng.integers(1, 6, 25).astype(float)  # many ties
    y = x + rng.integers(-2, 3, 25)
    weights = rng.integers(0, 4, (5, 25)).astype(float)
    spearman = weighted_spearman(x, y, weights)
    pearson = weighted_pearson(x, y, weights)
    for row in range(5):
        repeated = np.repeat(np.arange(25), weights[row].astype(int))
        assert spearman[row] == pytest.approx(spearmanr(x[repeated], y[repeated]).statistic)
        assert pearson[row] == pytest.approx(pearsonr(x[repeated], y[repeated]).statistic)
        ranks = weighted_ranks(x, weights[row])
        assert ranks[repeated] == pytest.approx(rankdata(x[repeated]))


def scores_frame() -> pd.DataFrame:
    # Judge vs gold on six responses of three instances; the last call failed.
    return pd.DataFrame(
        {
            "instance_id": ["q1", "q1", "q2", "q2", "q3", "q3"],
            "score": [7.0, 3.0, 8.0, 5.0, 2.0, np.nan],
            "gold_score": [7.0, 4.0, 6.0, 5.0, 2.0, 9.0],
            "category": ["a", "a", "a", "b", "b", "b"],
        }
    )


def test_pointwise_metrics_by_hand() -> None:
    frame = scores_frame()
    table = pointwise_metrics(frame, resamples=300, judge="j")
    readable = frame.dropna()
    assert metric_value(table, "exact_agreement") == 3 / 5
    assert metric_value(table, "within_1_agreement") == 4 / 5
    assert metric_value(table, "mean_difference") == pytest.approx((0 - 1 + 2 + 0 + 0) / 5)
    assert metric_value(table, "unreadable_share") == 1 / 6
    assert metric_value(table, "unreadable_count") == 1
    assert metric_value(table, "spearman") == pytest.approx(
        spearmanr(readable["score"], readable["gold_score"]).statistic
    )
    assert metric_value(table, "pearson") == pytest.approx(
        pearsonr(readable["score"], readable["gold_score"]).statistic
    )
    assert metric_value(table, "exact_agreement", "a") == 1 / 3
    assert metric_value(table, "within_1_agreement", "b") == 1.0
    # Two readable rows in category b: too few for a correlation, NaN rather than a warning.
    assert np.isnan(metric_value(table, "spearman", "b"))
    overall = table[table["category"].isna()].set_index("metric").drop(index="unreadable_count")
    assert (overall["ci_low"] <= overall["value"] + 1e-12).all()
    assert (overall["value"] <= overall["ci_high"] + 1e-12).all()
    assert overall["ci_method"].str.contains("300 resamples").all()


def test_pointwise_refuses_missing_gold() -> None:
    frame = scores_frame()
    frame.loc[2, "gold_score"] = np.nan
    with pytest.raises(InputError, match="row 2, column 'gold_score': is missing"):
        pointwise_metrics(frame, resamples=10)
