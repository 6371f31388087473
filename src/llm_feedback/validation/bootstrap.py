"""Clustered bootstrap over instances, vectorised, and the long metric table it fills.

Every statistic here is a function of sums over instances (numerators, denominators,
confusion counts, weighted moments), so one resample is a vector of instance counts
`w` (multinomial: n draws of n instances with replacement) and every resampled sum is
`w @ per_instance_sums`: all resamples at once, both orders and all replicates of an
instance moving together. The interval is the 2.5th and 97.5th percentile of the
resampled values (NaN resamples, e.g. with no item of a kind, left out).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 0
CONFIDENCE = 0.95
METRIC_COLUMNS = (
    "judge",
    "metric",
    "value",
    "ci_low",
    "ci_high",
    "ci_method",
    "resamples",
    "n",
    "category",
)


def ci_method(resamples: int, seed: int) -> str:
    """How an interval was computed, as the table's `ci_method` says it."""
    return f"cluster bootstrap percentile 95% (instances; {resamples} resamples, seed {seed})"


def resample_weights(n_clusters: int, resamples: int, seed: int) -> np.ndarray:
    """(resamples, n_clusters) counts: how often each instance is drawn in each resample."""
    rng = np.random.default_rng(seed)
    return rng.multinomial(n_clusters, np.full(n_clusters, 1.0 / n_clusters), size=resamples)


def cluster_sums(codes: np.ndarray, values: np.ndarray, n_clusters: int) -> np.ndarray:
    """Per-cluster sums of the rows of `values` (rows x k) by cluster code."""
    sums = np.zeros((n_clusters, values.shape[1]))
    np.add.at(sums, codes, values)
    return sums


def ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator, NaN where the denominator is 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(
            denominator > 0, numerator / np.where(denominator > 0, denominator, 1), np.nan
        )


def interval(replicates: np.ndarray) -> tuple[float, float]:
    """The percentile interval of the finite replicates; NaN when there are none."""
    finite = replicates[np.isfinite(replicates)]
    if finite.size == 0:
        return float("nan"), float("nan")
    tail = 100 * (1 - CONFIDENCE) / 2
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high)


def metric_row(
    metric: str,
    value: float,
    replicates: np.ndarray | None,
    n: int,
    *,
    resamples: int,
    seed: int,
    category: Any = None,
    judge: Any = None,
) -> dict[str, Any]:
    """One row of the metric table; `replicates` None: a count, no interval."""
    if replicates is None:
        low = high = float("nan")
        method, count = None, 0
    else:
        low, high = interval(replicates)
        method, count = ci_method(resamples, seed), resamples
    return {
        "judge": judge,
        "metric": metric,
        "value": float(value),
        "ci_low": low,
        "ci_high": high,
        "ci_method": method,
        "resamples": count,
        "n": int(n),
        "category": category,
    }


def metric_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The long metric table, typed."""
    return pd.DataFrame(rows, columns=list(METRIC_COLUMNS)).astype(
        {
            "judge": "string",
            "metric": "string",
            "value": "float64",
            "ci_low": "float64",
            "ci_high": "float64",
            "ci_method": "string",
            "resamples": "int64",
            "n": "int64",
            "category": "string",
        }
    )


def categories(frame: pd.DataFrame) -> list[Any]:
    """None (all items) first, then every category present, in order of appearance."""
    if "category" not in frame.columns:
        return [None]
    present = [c for c in dict.fromkeys(frame["category"]) if isinstance(c, str)]
    return [None, *present]
