"""Intervals for the agreement rows of `eval_metrics`, clustered by instance_id like every
other interval there (`metric_intervals`): exact-match share as a clustered mean,
Spearman's rho by `stats.intervals.correlation_interval`, Cohen's kappa refitted per
resample (`validation.kappa.cohen_kappa` with the resample's row weights). Fleiss'
kappa keeps a null interval: no weighted implementation in the libraries we use.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from llm_feedback.evaluation.config import EvalIntervalParams
from llm_feedback.evaluation.metric_intervals import NO_INTERVAL, Interval, mean_intervals
from llm_feedback.stats.intervals import (
    bootstrap_method,
    bootstrap_replicates,
    correlation_interval,
    percentile_interval,
)
from llm_feedback.validation.agreement import (
    COHEN_KAPPA,
    EXACT_MATCH_SHARE,
    RATERS_SEPARATOR,
    SPEARMAN,
)
from llm_feedback.validation.kappa import cohen_kappa

MIN_ITEMS = 3


def agreement_interval(
    row: dict[str, object],
    ratings: pd.DataFrame,
    instances: pd.Series,
    intervals: EvalIntervalParams,
) -> Interval:
    """The interval of one `agreement_rows` row of two raters over `ratings`' items (one
    per judgment, its instance in `instances`).

    Args:
        row: one row of `agreement_rows`.
        ratings: one column per rater, one row per judgment.
        instances: each judgment's instance (the bootstrap's cluster).
        intervals: the evaluate interval settings.

    Returns:
        (low, high, method); no interval for Fleiss' kappa or below 3 items.
    """
    raters = str(row["raters"]).split(RATERS_SEPARATOR)
    if len(raters) != 2 or row["statistic"] not in (COHEN_KAPPA, SPEARMAN, EXACT_MATCH_SHARE):
        return NO_INTERVAL
    both = ratings[raters].dropna()
    if len(both) < MIN_ITEMS:
        return NO_INTERVAL
    x, y = both[raters[0]], both[raters[1]]
    clusters = instances.loc[both.index].to_numpy()
    if row["statistic"] == EXACT_MATCH_SHARE:
        same = pd.DataFrame(
            {"model": "", "instance_id": clusters, "value": (x.to_numpy() == y.to_numpy())}
        )
        return mean_intervals(same.astype({"value": "float64"}), intervals)[""]
    method = bootstrap_method(intervals.n_resamples)
    if row["statistic"] == SPEARMAN:
        _, low, high = correlation_interval(x, y, clusters, "spearman", **intervals.kwargs)
        return low, high, method

    def kappa(weights: np.ndarray) -> np.ndarray:
        # A resample with one category: kappa is undefined (NaN), left out of the interval.
        return np.array([cohen_kappa(x, y, sample_weight=weights)])

    replicates = bootstrap_replicates(
        pd.factorize(clusters)[0], kappa, intervals.n_resamples, intervals.seed
    )
    low, high = percentile_interval(replicates, intervals.confidence)
    return float(low[0]), float(high[0]), method
