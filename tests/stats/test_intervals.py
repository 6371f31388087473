"""Clustered bootstrap and Wilson intervals against hand computations and statsmodels."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from llm_feedback.core.errors import ConfigError
from llm_feedback.stats import intervals
from llm_feedback.stats.intervals import (
    ResampledTotals,
    bootstrap_replicates,
    cluster_ids,
    correlation_interval,
    grouped_mean_intervals,
    percentile_interval,
    poisson_weights,
    resample_counts,
    wilson_interval,
)


def test_weights_are_poisson_draws_that_repeat_with_the_seed():
    counts = np.vstack(list(resample_counts(n_clusters=400, n_resamples=500, seed=3)))
    assert counts.shape == (500, 400)
    # Poisson(1): each weight's share of 0, 1, 2, 3 against scipy's probabilities.
    shares = np.bincount(counts.astype(int).ravel(), minlength=4)[:4] / counts.size
    assert shares == pytest.approx(stats.poisson.pmf(np.arange(4), 1.0), abs=0.004)
    assert counts.mean() == pytest.approx(1.0, abs=0.01)
    assert counts.var() == pytest.approx(1.0, abs=0.02)
    # Weights of different clusters and resamples are uncorrelated.
    assert abs(np.corrcoef(counts[:, 0], counts[:, 1])[0, 1]) < 0.15
    assert abs(np.corrcoef(counts[0], counts[1])[0, 1]) < 0.15
    assert np.array_equal(counts, np.vstack(list(resample_counts(400, 500, seed=3))))
    assert not np.array_equal(counts, np.vstack(list(resample_counts(400, 500, seed=4))))


def test_a_clusters_weight_depends_on_its_id_alone_so_chunks_add_up_to_the_whole():
    """The streaming property: totals added a chunk of clusters at a time, in any order and
    with a cluster's rows split between chunks, are the totals of all clusters at once."""
    rng = np.random.default_rng(0)
    ids = cluster_ids(pd.Series([f"p{i}" for i in range(300)]))
    sums = rng.normal(size=(300, 3))
    whole = ResampledTotals(200, seed=7).add(ids, sums).totals
    streamed = ResampledTotals(200, seed=7)
    order = rng.permutation(300)
    halves = [order[:170], order[170:], order[:40]]  # the last chunk repeats 40 clusters...
    parts = [sums[order[:170]], sums[order[170:]], np.zeros((40, 3))]
    parts[0][:40] -= 1.0  # ...whose rows were split: -1 in one chunk, +1 in the other
    parts[2][:] = 1.0
    for chunk, part in zip(halves, parts, strict=True):
        streamed.add(ids[chunk], part)
    assert streamed.totals == pytest.approx(whole)
    # Ids, not positions: the same prompt weighs the same in a table that lacks others.
    assert np.array_equal(
        poisson_weights(ids[5:6], 0, 50, 7)[:, 0], poisson_weights(ids, 0, 50, 7)[:, 5]
    )


def test_resamples_too_many_to_keep_are_made_again_the_same(monkeypatch):
    kept = np.vstack(list(resample_counts(n_clusters=300, n_resamples=40, seed=5)))
    # Past the bound nothing is kept: each use makes the seed's weights again, a few
    # resamples at a time, and gets the very weights that would have been kept.
    monkeypatch.setattr(intervals, "KEPT_COUNTS", 0)
    monkeypatch.setattr(intervals, "CHUNK_ELEMENTS", 300 * 7)
    intervals._kept_counts.cache_clear()
    chunks = list(resample_counts(n_clusters=300, n_resamples=40, seed=5))
    assert [len(chunk) for chunk in chunks] == [7, 7, 7, 7, 7, 5]
    assert np.array_equal(np.vstack(chunks), kept)
    assert intervals._kept_counts.cache_info().currsize == 0


def test_wilson_matches_statsmodels_and_the_formula_by_hand():
    low, high = wilson_interval(np.array([7, 0, 20]), np.array([20, 10, 20]))
    expected = proportion_confint([7, 0, 20], [20, 10, 20], alpha=0.05, method="wilson")
    assert np.allclose(low, expected[0]) and np.allclose(high, expected[1])
    # By hand for 7/20: (p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)
    z, p, n = 1.959963984540054, 7 / 20, 20
    centre, half = p + z * z / (2 * n), z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert low[0] == pytest.approx((centre - half) / (1 + z * z / n))
    assert high[0] == pytest.approx((centre + half) / (1 + z * z / n))
    assert np.isnan(wilson_interval(0, 0)[0])


def test_percentile_interval_is_numpy_quantiles_and_skips_undefined_resamples():
    replicates = np.arange(1001, dtype="float64")
    low, high = percentile_interval(replicates)
    assert (low[0], high[0]) == pytest.approx((25.0, 975.0))
    with_nan = np.column_stack([np.r_[replicates, np.nan], np.full(1002, np.nan)])
    low, high = percentile_interval(with_nan)
    assert low[0] == pytest.approx(25.0) and np.isnan(low[1]) and np.isnan(high[1])


def test_a_grouped_mean_matches_a_per_resample_loop_by_hand():
    rng = np.random.default_rng(0)
    values = rng.normal(size=30)
    frame = pd.DataFrame({"prompt_id": [f"p{i}" for i in range(30)], "rating": values})
    row = grouped_mean_intervals(frame, "rating", "prompt_id", n_resamples=200, seed=11).iloc[0]
    weights = poisson_weights(cluster_ids(frame["prompt_id"]), 0, 200, 11)
    by_hand = [np.repeat(values, w.astype(int)).mean() for w in weights if w.sum()]
    assert row["estimate"] == pytest.approx(values.mean())
    assert row["ci_low"] == pytest.approx(np.quantile(by_hand, 0.025))
    assert row["ci_high"] == pytest.approx(np.quantile(by_hand, 0.975))


def test_bootstrap_interval_of_a_mean_is_close_to_the_normal_one():
    values = np.random.default_rng(1).normal(loc=3, scale=1, size=400)
    frame = pd.DataFrame({"prompt_id": np.arange(400), "rating": values})
    row = grouped_mean_intervals(frame, "rating", "prompt_id", n_resamples=2000, seed=0).iloc[0]
    half = 1.96 * values.std(ddof=1) / np.sqrt(400)
    assert row["estimate"] == pytest.approx(values.mean())
    assert row["ci_low"] == pytest.approx(values.mean() - half, abs=0.02)
    assert row["ci_high"] == pytest.approx(values.mean() + half, abs=0.02)
    assert row["method"] == "poisson-bootstrap-2000-cluster" and row["n"] == 400


def test_clustering_keeps_both_orders_of_a_pair_together():
    # Each pair is judged in both orders and the judge always picks the first-shown answer:
    # per pair, the outcome for model A is 1 in one order and 0 in the other, so A's win
    # rate is exactly 0.5 in every resample of pairs. Resampling rows would break the
    # pairs apart and give an interval of width ~0.1.
    n_pairs = 200
    frame = pd.DataFrame(
        {
            "pair": np.repeat(np.arange(n_pairs), 2),
            "outcome_a": np.tile([1.0, 0.0], n_pairs),
        }
    )
    clustered = grouped_mean_intervals(frame, "outcome_a", "pair", n_resamples=500, seed=0)
    assert clustered.loc[0, "ci_low"] == clustered.loc[0, "ci_high"] == 0.5
    per_row = grouped_mean_intervals(
        frame.assign(row=np.arange(len(frame))), "outcome_a", "row", n_resamples=500, seed=0
    )
    assert per_row.loc[0, "ci_high"] - per_row.loc[0, "ci_low"] > 0.05


def test_grouped_means_share_resamples_and_leave_out_missing_values():
    frame = pd.DataFrame(
        {
            "prompt_id": ["p1", "p1", "p2", "p2", "p3", "p3"],
            "model": ["a", "b", "a", "b", "a", "b"],
            "rating": [1.0, 2.0, 3.0, np.nan, 5.0, 4.0],
        }
    )
    table = grouped_mean_intervals(frame, "rating", "prompt_id", ["model"], n_resamples=100)
    assert list(table["model"]) == ["a", "b"]
    assert list(table["n"]) == [3, 2]
    assert table["estimate"].tolist() == pytest.approx([3.0, 3.0])
    assert (table["ci_low"] <= table["estimate"]).all()
    assert (table["estimate"] <= table["ci_high"]).all()
    assert table.loc[0, "ci_low"] >= 1.0 and table.loc[0, "ci_high"] <= 5.0


def test_bootstrap_replicates_give_a_clusters_rows_one_weight():
    codes = np.array([0, 0, 1, 2, 2, 2])
    seen = []
    bootstrap_replicates(codes, lambda w: seen.append(w) or np.array([w.sum()]), n_resamples=20)
    for weights in seen:
        assert weights[0] == weights[1] and weights[3] == weights[4] == weights[5]


def test_bad_resample_counts_are_refused_by_name():
    with pytest.raises(ConfigError, match="n_resamples"):
        grouped_mean_intervals(pd.DataFrame({"p": [1], "v": [1.0]}), "v", "p", n_resamples=0)


def test_correlation_interval_matches_scipy_and_covers_the_fisher_interval():
    from scipy.stats import pearsonr, spearmanr

    rng = np.random.default_rng(4)
    x = rng.normal(size=500)
    y = 0.5 * x + rng.normal(size=500)
    clusters = np.arange(500)
    r, low, high = correlation_interval(x, y, clusters, "pearson", n_resamples=1000)
    assert r == pytest.approx(pearsonr(x, y).statistic)
    fisher = np.tanh(np.arctanh(r) + np.array([-1, 1]) * 1.96 / np.sqrt(497))
    assert (low, high) == pytest.approx(tuple(fisher), abs=0.02)
    rho, _, _ = correlation_interval(x, np.round(y), clusters, "spearman", n_resamples=50)
    assert rho == pytest.approx(spearmanr(x, np.round(y)).statistic)
    assert np.isnan(correlation_interval([1, 1, 1], [1, 2, 3], [0, 1, 2])[0])


def test_grouped_means_added_a_chunk_at_a_time_are_the_means_of_the_rows_at_once():
    rng = np.random.default_rng(2)
    frame = pd.DataFrame(
        {
            "prompt_id": rng.integers(0, 150, size=900).astype(str),
            "model": rng.choice(["a", "b", "c"], size=900),
            "aspect": rng.choice(["honesty", "helpfulness"], size=900),
            "rating": np.where(rng.random(900) < 0.1, np.nan, rng.integers(1, 6, size=900)),
        }
    )
    whole = grouped_mean_intervals(frame, "rating", "prompt_id", ["model", "aspect"], seed=9)
    # Chunks of rows in a shuffled order: a prompt's rows and a group's first row land in
    # any chunk; a chunk may hold no used row at all.
    means = intervals.GroupedMeans("rating", "prompt_id", ["model", "aspect"], seed=9)
    shuffled = frame.sample(frac=1.0, random_state=0)
    for start in range(0, len(shuffled), 97):
        means.add(shuffled.iloc[start : start + 97])
    means.add(frame.iloc[:0])
    streamed = means.result()
    assert streamed[["model", "aspect", "n", "method"]].equals(
        whole[["model", "aspect", "n", "method"]]
    )
    for column in ("estimate", "ci_low", "ci_high"):
        assert streamed[column].to_numpy() == pytest.approx(whole[column].to_numpy())
    empty = intervals.GroupedMeans("rating", "prompt_id", ["model"]).result()
    assert list(empty.columns) == ["model", "n", *intervals.INTERVAL_COLUMNS] and empty.empty
