"""Meta-evaluation of pointwise judging: the judge's scores against gold scores.

Input: one row per judged response: `instance_id`, `score` (the judge's, NaN when the call
failed or its reply could not be read), `gold_score`, optional `category`. An instance may
hold several rows (several responses, replicates); the bootstrap resamples instances.

Metrics (over the readable rows; `n` the rows a metric is over):
`spearman` and `pearson` (scipy for the point value), `exact_agreement` (score equal to the
gold), `within_1_agreement` (at most 1 apart), `mean_difference` (judge minus gold: > 0, the
judge is the more generous), `unreadable_share` (over all rows) and `unreadable_count`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import pearsonr, spearmanr

from llm_feedback.core.errors import InputError, require_columns
from llm_feedback.stats.intervals import cluster_sums, ratio, resample_matrix
from llm_feedback.validation.metric_table import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    categories,
    metric_row,
    metric_table,
)

POINTWISE_METRICS = (
    "spearman",
    "pearson",
    "exact_agreement",
    "within_1_agreement",
    "mean_difference",
    "unreadable_share",
    "unreadable_count",
)
_TOLERANCE = 1e-9
_CHUNK = 250  # resamples at a time: memory is rows x chunk


def weighted_pearson(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Pearson's r of x and y (n,) under row weights (..., n), vectorised over resamples.
    (Written out: scipy has no weighted, batched Pearson; the point value uses scipy.)

    Args:
        x: the first values (n,).
        y: the second values (n,).
        weights: row weights (..., n).

    Returns:
        r per leading index.
    """
    total = weights.sum(-1)
    mean_x = ratio((weights * x).sum(-1), total)[..., None]
    mean_y = ratio((weights * y).sum(-1), total)[..., None]
    dx, dy = x - mean_x, y - mean_y
    covariance = (weights * dx * dy).sum(-1)
    spread = np.sqrt((weights * dx * dx).sum(-1) * (weights * dy * dy).sum(-1))
    return ratio(covariance, np.where(spread > 1e-12, spread, 0.0))


def weighted_ranks(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Mid-ranks of `values` (n,) in each resample where row i appears weights[..., i]
    times: the ranks scipy's `rankdata` would give the repeated rows, computed from the
    weights without repeating them (scipy ranks one sample at a time).

    Args:
        values: the values (n,).
        weights: row weights (..., n).

    Returns:
        The mid-ranks (..., n).
    """
    order = np.argsort(values, kind="stable")
    unique, inverse = np.unique(values, return_inverse=True)
    # The last sorted position of each distinct value: cumulative weight through it.
    last = np.searchsorted(values[order], unique, side="right") - 1
    below_and_tied = np.cumsum(weights[..., order], axis=-1)[..., last]
    per_value = np.diff(below_and_tied, axis=-1, prepend=0.0)
    midrank = below_and_tied - per_value + (per_value + 1) / 2
    return midrank[..., inverse]


def weighted_spearman(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Spearman's rho under row weights (..., n): Pearson's r of the weighted mid-ranks.

    Args:
        x: the first values (n,).
        y: the second values (n,).
        weights: row weights (..., n).

    Returns:
        rho per leading index.
    """
    rank_x, rank_y = weighted_ranks(x, weights), weighted_ranks(y, weights)
    total = weights.sum(-1, keepdims=True)
    mean_x = ratio((weights * rank_x).sum(-1, keepdims=True), total)
    mean_y = ratio((weights * rank_y).sum(-1, keepdims=True), total)
    dx, dy = rank_x - mean_x, rank_y - mean_y
    covariance = (weights * dx * dy).sum(-1)
    spread = np.sqrt((weights * dx * dx).sum(-1) * (weights * dy * dy).sum(-1))
    return ratio(covariance, np.where(spread > 1e-12, spread, 0.0))


def _correlation(function, x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")  # undefined: scipy would warn and return NaN
    return float(function(x, y).statistic)


def _table_rows(scores: pd.DataFrame, resamples: int, seed: int, category: Any, judge: Any):
    codes, instances = pd.factorize(scores["instance_id"])
    n_clusters = len(instances)
    judged = scores["score"].to_numpy(dtype="float64")
    gold = scores["gold_score"].to_numpy(dtype="float64")
    if np.isnan(gold).any():
        row = int(np.flatnonzero(np.isnan(gold))[0])
        raise InputError(f"pointwise scores row {row}, column 'gold_score': is missing")
    readable = np.isfinite(judged)
    difference = np.where(readable, judged - gold, 0.0)
    per_row = np.column_stack(
        [
            readable,
            readable & (np.abs(difference) < _TOLERANCE),
            readable & (np.abs(difference) <= 1 + _TOLERANCE),
            difference,
            ~readable,
            np.ones(len(judged)),
        ]
    ).astype("float64")
    per_cluster = cluster_sums(codes, per_row, n_clusters)
    weights = resample_matrix(n_clusters, resamples, seed)
    resampled = weights @ per_cluster
    count, exact, within, diff, unreadable, rows = np.moveaxis(resampled, -1, 0)
    x, y, row_codes = judged[readable], gold[readable], codes[readable]
    spearman_reps, pearson_reps = np.empty(resamples), np.empty(resamples)
    for start in range(0, resamples, _CHUNK):
        row_weights = weights[start : start + _CHUNK][:, row_codes].astype("float64")
        spearman_reps[start : start + _CHUNK] = weighted_spearman(x, y, row_weights)
        pearson_reps[start : start + _CHUNK] = weighted_pearson(x, y, row_weights)
    totals = per_cluster.sum(axis=0)
    n_readable, n_rows = int(totals[0]), int(totals[5])
    options = {"resamples": resamples, "seed": seed, "category": category, "judge": judge}
    return [
        metric_row("spearman", _correlation(spearmanr, x, y), spearman_reps, n_readable, **options),
        metric_row("pearson", _correlation(pearsonr, x, y), pearson_reps, n_readable, **options),
        metric_row(
            "exact_agreement",
            ratio(totals[1], totals[0]),
            ratio(exact, count),
            n_readable,
            **options,
        ),
        metric_row(
            "within_1_agreement",
            ratio(totals[2], totals[0]),
            ratio(within, count),
            n_readable,
            **options,
        ),
        metric_row(
            "mean_difference",
            ratio(totals[3], totals[0]),
            ratio(diff, count),
            n_readable,
            **options,
        ),
        metric_row(
            "unreadable_share",
            ratio(totals[4], totals[5]),
            ratio(unreadable, rows),
            n_rows,
            **options,
        ),
        metric_row("unreadable_count", totals[4], None, n_rows, **options),
    ]


def pointwise_metrics(
    scores: pd.DataFrame,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    judge: str | None = None,
) -> pd.DataFrame:
    """The long metric table of a judge's scores against the gold, over all items and per
    category, each rate and mean with its clustered bootstrap interval.

    Args:
        scores: instance_id, score, gold_score and optional category.
        resamples: bootstrap resamples of each interval.
        seed: the bootstrap's seed.
        judge: the judge's name for the `judge` column.

    Returns:
        The long metric table.
    """
    require_columns(scores, ["instance_id", "score", "gold_score"], "pointwise scores")
    if scores.empty:
        raise InputError("pointwise scores: no rows")
    rows: list[dict[str, Any]] = []
    for category in categories(scores):
        subset = scores if category is None else scores[scores["category"] == category]
        rows += _table_rows(subset.reset_index(drop=True), resamples, seed, category, judge)
    return metric_table(rows)
