"""Judge-bias diagnostics measurable from one annotate run, with clustered intervals.

Input (`ratings`): one row per rating, with at least
  prompt_id: the cluster (the completions of a prompt are judged together, so they share
    the judge's state, the shown order and the prompt's difficulty);
  rating: the rating (NaN rows are left out);
  and per diagnostic: position (0-based shown position), length (completion length),
  model and judge_model (self-preference); `by` columns (e.g. aspect) group the output.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import statsmodels.api as sm
from scipy.stats import norm

from llm_feedback.errors import require_columns
from llm_feedback.stats.intervals import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    bootstrap_method,
    check_bootstrap,
    cluster_sums,
    correlation_interval,
    grouped_mean_intervals,
    percentile_interval,
    resampled_totals,
)

SLOPE_METHOD = "ols-wald-cluster"


def _rated(ratings: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    require_columns(ratings, ["prompt_id", "rating", *columns], "ratings")
    frame = ratings.loc[:, ["prompt_id", *dict.fromkeys(columns)]].copy()
    frame["rating"] = pd.to_numeric(ratings["rating"]).to_numpy(dtype="float64", na_value=np.nan)
    return frame.dropna(subset=["rating"])


def _groups(frame: pd.DataFrame, by: Sequence[str]):
    if not by:
        return [((), frame)]
    return [
        (key if isinstance(key, tuple) else (key,), part)
        for key, part in frame.groupby(list(by), sort=True)
    ]


def position_slope(
    ratings: pd.DataFrame,
    by: Sequence[str] = ("aspect",),
    *,
    confidence: float = DEFAULT_CONFIDENCE,
) -> pd.DataFrame:
    """Per group, the slope of a linear regression of rating on shown position (rating
    points per position further down), with a cluster-robust (by prompt) Wald interval.
    Shown positions are random, so a slope whose interval excludes 0 is position bias;
    one shuffle suffices.

    Columns: the `by` columns, n, slope, ci_low, ci_high, method.
    """
    frame = _rated(ratings, ["position", *by])
    z = norm.ppf(0.5 + confidence / 2)
    rows = []
    for key, part in _groups(frame, by):
        position = part["position"].to_numpy(dtype="float64")
        slope = low = high = np.nan
        # Two prompts at least: the cluster-robust variance needs spread between clusters.
        if len(part) >= 3 and np.ptp(position) > 0 and part["prompt_id"].nunique() >= 2:
            design = sm.add_constant(position, has_constant="add")
            groups = pd.factorize(part["prompt_id"])[0]
            fit = sm.OLS(part["rating"].to_numpy(), design).fit(
                cov_type="cluster", cov_kwds={"groups": groups}
            )
            # From the covariance, clipped: with a handful of prompts the cluster-robust
            # variance can come out a rounding error below 0.
            slope = float(fit.params[1])
            error = float(np.sqrt(max(np.asarray(fit.cov_params())[1, 1], 0.0)))
            low, high = slope - z * error, slope + z * error
        rows.append(
            {
                **dict(zip(by, key, strict=True)),
                "n": len(part),
                "slope": slope,
                "ci_low": low,
                "ci_high": high,
                "method": SLOPE_METHOD,
            }
        )
    return pd.DataFrame(rows, columns=[*by, "n", "slope", "ci_low", "ci_high", "method"])


def mean_by_position(
    ratings: pd.DataFrame,
    by: Sequence[str] = ("aspect",),
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> pd.DataFrame:
    """Mean rating per group and shown position with clustered bootstrap intervals.

    Columns: the `by` columns, position, n, estimate, ci_low, ci_high, method."""
    frame = _rated(ratings, ["position", *by])
    return grouped_mean_intervals(
        frame,
        "rating",
        "prompt_id",
        [*by, "position"],
        n_resamples=n_resamples,
        seed=seed,
        confidence=confidence,
    )


def length_correlation(
    ratings: pd.DataFrame,
    by: Sequence[str] = ("aspect",),
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> pd.DataFrame:
    """Per group, Spearman's rho between rating and completion length, with a clustered
    bootstrap interval. Rho is Pearson's r of the ranks (average ranks for ties, as
    scipy's spearmanr); the bootstrap keeps the full-sample ranks and recomputes r from
    resampled moment sums, one matrix product per chunk of resamples instead of a re-rank
    per resample (the ranks' change under resampling is of order 1/n).

    Columns: the `by` columns, n, spearman, ci_low, ci_high, method.
    """
    check_bootstrap(n_resamples, confidence)
    frame = _rated(ratings, ["length", *by]).dropna(subset=["length"])
    rows = []
    for key, part in _groups(frame, by):
        rho, low, high = correlation_interval(
            part["rating"],
            part["length"],
            part["prompt_id"],
            "spearman",
            n_resamples=n_resamples,
            seed=seed,
            confidence=confidence,
        )
        rows.append(
            {
                **dict(zip(by, key, strict=True)),
                "n": len(part),
                "spearman": rho,
                "ci_low": low,
                "ci_high": high,
                "method": bootstrap_method(n_resamples),
            }
        )
    return pd.DataFrame(rows, columns=[*by, "n", "spearman", "ci_low", "ci_high", "method"])


def rating_by_length_bins(
    ratings: pd.DataFrame,
    by: Sequence[str] = ("aspect",),
    *,
    n_bins: int = 10,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> pd.DataFrame:
    """Mean rating per group and completion-length decile (quantile bins over all rows;
    fewer bins when lengths repeat), for a figure. length_low / length_high: the bin's
    length range.

    Columns: the `by` columns, length_bin, length_low, length_high, n, estimate, ci_low,
    ci_high, method.
    """
    frame = _rated(ratings, ["length", *by]).dropna(subset=["length"])
    columns = [
        *by,
        "length_bin",
        "length_low",
        "length_high",
        "n",
        "estimate",
        "ci_low",
        "ci_high",
        "method",
    ]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    frame["length_bin"] = pd.qcut(frame["length"], n_bins, labels=False, duplicates="drop")
    table = grouped_mean_intervals(
        frame,
        "rating",
        "prompt_id",
        [*by, "length_bin"],
        n_resamples=n_resamples,
        seed=seed,
        confidence=confidence,
    )
    ranges = frame.groupby("length_bin")["length"].agg(length_low="min", length_high="max")
    return table.merge(ranges, left_on="length_bin", right_index=True).loc[:, columns]


def self_preference(
    ratings: pd.DataFrame,
    by: Sequence[str] = (),
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> pd.DataFrame:
    """For each judge model that also generated completions: the mean rating it gave its
    own completions minus the mean it gave the others', with a clustered bootstrap
    interval (prompts resampled, so own and other completions of a prompt move together).
    A raw difference: a judge that is also the better generator shows a positive one
    without any bias, so read it beside the other judges' ratings of the same model.

    Columns: judge_model, the `by` columns, n_own, n_others, mean_own, mean_others,
    difference, ci_low, ci_high, method. Empty when no judge generated completions.
    """
    check_bootstrap(n_resamples, confidence)
    frame = _rated(ratings, ["model", "judge_model", *by])
    columns = [
        "judge_model",
        *by,
        "n_own",
        "n_others",
        "mean_own",
        "mean_others",
        "difference",
        "ci_low",
        "ci_high",
        "method",
    ]
    rows = []
    for judge in sorted(
        set(frame["judge_model"].dropna().unique()) & set(frame["model"].dropna().unique())
    ):
        judged = frame[frame["judge_model"] == judge]
        for key, part in _groups(judged, by):
            own = (part["model"] == judge).to_numpy()
            rating = part["rating"].to_numpy()
            clusters = pd.factorize(part["prompt_id"])[0]
            sums = cluster_sums(clusters, np.column_stack([own * rating, own, ~own * rating, ~own]))
            total = sums.sum(axis=0)
            if total[1] == 0 or total[3] == 0:
                continue
            totals = resampled_totals(sums, n_resamples, seed)
            with np.errstate(invalid="ignore", divide="ignore"):
                replicates = totals[:, 0] / totals[:, 1] - totals[:, 2] / totals[:, 3]
            replicates[~np.isfinite(replicates)] = np.nan
            low, high = percentile_interval(replicates, confidence)
            mean_own, mean_others = total[0] / total[1], total[2] / total[3]
            rows.append(
                {
                    "judge_model": judge,
                    **dict(zip(by, key, strict=True)),
                    "n_own": int(total[1]),
                    "n_others": int(total[3]),
                    "mean_own": mean_own,
                    "mean_others": mean_others,
                    "difference": mean_own - mean_others,
                    "ci_low": low[0],
                    "ci_high": high[0],
                    "method": bootstrap_method(n_resamples),
                }
            )
    return pd.DataFrame(rows, columns=columns)
