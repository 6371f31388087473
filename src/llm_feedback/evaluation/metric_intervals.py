"""Intervals for `eval_metrics`, and each model's mean difference to a baseline model.

Every interval is a percentile bootstrap clustered by `instance_id`
(`llm_feedback.stats.intervals`): an instance's replicates, turns, criteria and both
orders of a pairwise comparison enter a resample together, and every model of one call
shares the same resampled instances, so differences between models are paired.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from llm_feedback.evaluation.config import EvalIntervalParams
from llm_feedback.stats.intervals import (
    bootstrap_method,
    check_bootstrap,
    grouped_mean_intervals,
    percentile_interval,
    ratio,
    resampled_totals,
)

Interval = tuple[float, float, str]
NO_INTERVAL: Interval = (np.nan, np.nan, None)


def mean_intervals(
    observations: pd.DataFrame, intervals: EvalIntervalParams, weight: str | None = None
) -> dict[str, Interval]:
    """{model: (ci_low, ci_high, ci_method)} of the (weighted) mean of `value` per model,
    from rows of model, instance_id, value[, weight] (NaN values left out).

    Args:
        observations: rows of model, instance_id, value[, weight].
        intervals: the evaluate interval settings.
        weight: the weight column (None: unweighted).

    Returns:
        The interval per model.
    """
    table = grouped_mean_intervals(
        observations, "value", "instance_id", ["model"], weight=weight, **intervals.kwargs
    )
    return {
        row.model: (float(row.ci_low), float(row.ci_high), row.method) for row in table.itertuples()
    }


def scaled(interval: Interval, offset: float, factor: float) -> Interval:
    """The interval of factor * (x - offset) (a linear map keeps percentile bounds).

    Args:
        interval: (ci_low, ci_high, ci_method) of x.
        offset: subtracted first.
        factor: then multiplied by.

    Returns:
        The mapped interval.
    """
    low, high, method = interval
    return factor * (low - offset), factor * (high - offset), method


def win_rate_observations(judgments: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, comparison): the model's score in it (1 win, 0.5 tie, 0 loss,
    NaN without an outcome) and the comparison's instance_id.

    Args:
        judgments: eval_judgments' pairwise rows.

    Returns:
        The observations.
    """
    outcome = judgments["outcome"].astype("object")
    as_a = outcome.map({"A": 1.0, "tie": 0.5, "B": 0.0}).astype("float64")
    return pd.DataFrame(
        {
            "model": [*judgments["model_a"], *judgments["model_b"]],
            "instance_id": [*judgments["instance_id"], *judgments["instance_id"]],
            "value": [*as_a, *(1.0 - as_a)],
        }
    )


def paired_differences(
    observations: pd.DataFrame, baseline: str, intervals: EvalIntervalParams
) -> pd.DataFrame:
    """Each other model's mean of `value` minus the baseline's over the instances both have
    a value for, with a paired bootstrap interval (instances resampled, each model's
    per-instance mean kept with its instance).

    Columns: model, value (the difference), n (shared instances), ci_low, ci_high,
    ci_method. Empty when the baseline is absent or alone.

    Args:
        observations: rows of model, instance_id, value.
        baseline: the baseline model.
        intervals: the evaluate interval settings.

    Returns:
        The differences (columns above).
    """
    check_bootstrap(intervals.n_resamples, intervals.confidence)
    per_instance = (
        observations.dropna(subset=["value"])
        .groupby(["instance_id", "model"], sort=True)["value"]
        .mean()
        .unstack("model")
    )
    columns = ["model", "value", "n", "ci_low", "ci_high", "ci_method"]
    if baseline not in per_instance.columns:
        return pd.DataFrame(columns=columns)
    rows = []
    for model in per_instance.columns.drop(baseline):
        shared = per_instance[[model, baseline]].dropna()
        if shared.empty:
            continue
        # A mean difference is a ratio of sums: resample the instances' (difference, 1); a
        # resample that weighs no instance (all weights 0) is undefined.
        sums = np.column_stack([shared[model] - shared[baseline], np.ones(len(shared))])
        totals = resampled_totals(sums, intervals.n_resamples, intervals.seed)
        low, high = percentile_interval(ratio(totals[:, 0], totals[:, 1]), intervals.confidence)
        rows.append(
            {
                "model": model,
                "value": float(sums[:, 0].mean()),
                "n": len(shared),
                "ci_low": float(low[0]),
                "ci_high": float(high[0]),
                "ci_method": bootstrap_method(intervals.n_resamples) + "-paired",
            }
        )
    return pd.DataFrame(rows, columns=columns)


def baseline_model(models: pd.Series, chosen: str | None) -> str | None:
    """The chosen baseline, or the first model by name (None without models).

    Args:
        models: the models' names.
        chosen: the configured baseline (None: none).

    Returns:
        The baseline, or None.
    """
    names = sorted(models.dropna().unique())
    if chosen is not None:
        return chosen
    return names[0] if names else None


def interval_fields(interval: Interval) -> Mapping[str, object]:
    """An interval as a metric row's columns.

    Args:
        interval: (ci_low, ci_high, ci_method).

    Returns:
        {ci_low, ci_high, ci_method}.
    """
    low, high, method = interval
    return {"ci_low": low, "ci_high": high, "ci_method": method}
