"""Confidence intervals: a clustered bootstrap over instances and Wilson's interval.

The bootstrap resamples *clusters* (instances: a prompt, a pair, a question), never rows:
every row of a cluster (its replicates, both pairwise orders, every completion of a
prompt) enters a resample together, with the cluster's weight. A resample is stored as
per-cluster counts (how often each cluster was drawn), so a statistic that is a ratio of
sums (a mean, a rate) is one matrix product per chunk of resamples instead of a re-indexed
frame per resample. Intervals are percentile intervals of the resampled statistic.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pandas as pd
from statsmodels.stats.proportion import proportion_confint

from llm_feedback.errors import ConfigError, require_columns

DEFAULT_RESAMPLES = 1000
DEFAULT_CONFIDENCE = 0.95
# Resamples drawn at once: 100 x 64k clusters of float64 counts is ~50 MB.
CHUNK_ELEMENTS = 6_400_000

INTERVAL_COLUMNS = ("estimate", "ci_low", "ci_high", "method")


def bootstrap_method(n_resamples: int) -> str:
    """The `method` label of a clustered percentile bootstrap."""
    return f"bootstrap-{n_resamples}-cluster"


def check_bootstrap(n_resamples: int, confidence: float) -> None:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 10:
        raise ConfigError(f"n_resamples: expected an integer >= 10, got {n_resamples!r}")
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence: expected a number in (0, 1), got {confidence!r}")


def resample_counts(
    n_clusters: int, n_resamples: int, seed: int | np.random.Generator
) -> Iterator[np.ndarray]:
    """Chunks of bootstrap resamples as (chunk, n_clusters) float64 counts: row r says how
    many times each cluster was drawn in resample r (a multinomial(n_clusters, uniform)
    draw, made as n_clusters uniform indices counted by bincount, which numpy does far
    faster than `Generator.multinomial` over many categories). The same seed gives the
    same resamples, so statistics bootstrapped with one seed share their resamples; for
    an integer seed the draws are made once and kept (as uint8, 64 MB for 1,000 x 64k)
    for the next statistic over the same number of clusters, up to `KEPT_COUNTS`: beyond,
    they are drawn again from the seed, a chunk at a time, rather than held whole."""
    if isinstance(seed, np.random.Generator):
        chunks = list(_draw_counts(n_clusters, n_resamples, seed))  # drawn now, as before
    elif n_clusters * n_resamples <= KEPT_COUNTS:
        chunks = _kept_counts(n_clusters, n_resamples, int(seed))
    else:
        chunks = _draw_counts(n_clusters, n_resamples, np.random.default_rng(int(seed)))
    for chunk in chunks:
        yield chunk.astype("float64")


# Counts kept between statistics, at most (two such sets are kept): 1,000 resamples of
# 128k clusters. At a million prompts the set would be a gigabyte.
KEPT_COUNTS = 128_000_000


@functools.lru_cache(maxsize=2)
def _kept_counts(n_clusters: int, n_resamples: int, seed: int) -> tuple[np.ndarray, ...]:
    return tuple(_draw_counts(n_clusters, n_resamples, np.random.default_rng(seed)))


def _draw_counts(
    n_clusters: int, n_resamples: int, rng: np.random.Generator
) -> Iterator[np.ndarray]:
    chunk = max(1, min(n_resamples, CHUNK_ELEMENTS // max(n_clusters, 1)))
    for start in range(0, n_resamples, chunk):
        size = min(chunk, n_resamples - start)
        draws = rng.integers(0, n_clusters, size=(size, n_clusters))
        draws += (np.arange(size) * n_clusters)[:, None]
        counts = np.bincount(draws.ravel(), minlength=size * n_clusters)
        # A cluster drawn more than 255 times in n draws needs n in the thousands and
        # odds below 1e-300: uint8 holds every count.
        yield counts.reshape(size, n_clusters).astype("uint8")


def cluster_sums(
    codes: np.ndarray, values: np.ndarray, n_clusters: int | None = None
) -> np.ndarray:
    """(n_clusters, K) per-cluster sums of the (n, K) `values` by cluster `codes`
    (bincount per column: much faster than np.add.at); `n_clusters` defaults to the
    largest code + 1 (give it when some clusters have no row here)."""
    values = np.asarray(values, dtype="float64").reshape(len(codes), -1)
    if n_clusters is None:
        n_clusters = int(codes.max()) + 1 if len(codes) else 0
    return np.column_stack(
        [np.bincount(codes, weights=column, minlength=n_clusters) for column in values.T]
    )


def percentile_interval(
    replicates: np.ndarray, confidence: float = DEFAULT_CONFIDENCE
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval per column of (n_resamples, n_statistics) replicates; a
    resample where a statistic is undefined (NaN) is left out of that statistic's
    interval, and a statistic undefined in every resample gets NaN bounds."""
    replicates = np.asarray(replicates, dtype="float64")
    if replicates.ndim == 1:
        replicates = replicates[:, None]
    alpha = (1 - confidence) / 2
    low = np.full(replicates.shape[1], np.nan)
    high = np.full(replicates.shape[1], np.nan)
    defined = ~np.isnan(replicates).all(axis=0)
    if defined.any():
        low[defined], high[defined] = np.nanquantile(
            replicates[:, defined], [alpha, 1 - alpha], axis=0
        )
    return low, high


def ratio_bootstrap(
    numerators: np.ndarray,
    denominators: np.ndarray,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | np.random.Generator = 0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Estimate and clustered percentile interval of sum(numerator) / sum(denominator) for
    each of G statistics, from (n_clusters, G) per-cluster sums: a mean is (sum of values,
    count), a rate (successes, trials), a win rate (wins + ties / 2, battles). A statistic
    with a zero denominator (in the data or a resample) is NaN there."""
    check_bootstrap(n_resamples, confidence)
    numerators = np.atleast_2d(np.asarray(numerators, dtype="float64").T).T
    denominators = np.atleast_2d(np.asarray(denominators, dtype="float64").T).T
    estimate = ratio(numerators.sum(axis=0), denominators.sum(axis=0))
    n_statistics = numerators.shape[1]
    totals = resampled_totals(np.hstack([numerators, denominators]), n_resamples, seed)
    replicates = ratio(totals[:, :n_statistics], totals[:, n_statistics:])
    low, high = percentile_interval(replicates, confidence)
    return estimate, low, high


def resample_matrix(n_clusters: int, n_resamples: int, seed: int) -> np.ndarray:
    """All (n_resamples, n_clusters) counts of `resample_counts` at once, for statistics
    that need each resample's row weights rather than its totals."""
    return np.vstack(list(resample_counts(n_clusters, n_resamples, seed)))


def resampled_totals(
    cluster_sums: np.ndarray, n_resamples: int, seed: int | np.random.Generator = 0
) -> np.ndarray:
    """(n_resamples, K) totals of (n_clusters, K) per-cluster sums in each clustered
    bootstrap resample: the building block of any statistic that is a function of sums
    (a mean, a difference of means, a correlation from its moment sums)."""
    cluster_sums = np.asarray(cluster_sums, dtype="float64")
    return np.vstack(
        [counts @ cluster_sums for counts in resample_counts(len(cluster_sums), n_resamples, seed)]
    )


def bootstrap_replicates(
    cluster_codes: np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray],
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | np.random.Generator = 0,
) -> np.ndarray:
    """(n_resamples, k) replicates of a statistic that is not a ratio of sums (a model
    fit): `statistic(row_weights)` gets each row's weight in the resample (its cluster's
    count, so a cluster's rows move together) and returns k numbers."""
    cluster_codes = np.asarray(cluster_codes)
    n_clusters = int(cluster_codes.max()) + 1 if len(cluster_codes) else 0
    rows = [
        statistic(counts[cluster_codes])
        for chunk in resample_counts(n_clusters, n_resamples, seed)
        for counts in chunk
    ]
    return np.vstack(rows)


def correlation_interval(
    x: pd.Series | np.ndarray,
    y: pd.Series | np.ndarray,
    clusters: pd.Series | np.ndarray,
    kind: str = "spearman",
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | np.random.Generator = 0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> tuple[float, float, float]:
    """Pearson's r (kind="pearson") or Spearman's rho ("spearman": Pearson's r of the
    average ranks, as scipy's spearmanr) of the pairs where both are present, with a
    clustered bootstrap percentile interval. r is recomputed per resample from resampled
    moment sums (n, sum x, sum y, sum x^2, sum y^2, sum xy), a matrix product per chunk of
    resamples; for Spearman the full-sample ranks are kept (a re-rank per resample would
    cost a sort each and changes ranks by O(1/n)). NaN below 3 pairs or when constant."""
    check_bootstrap(n_resamples, confidence)
    frame = pd.DataFrame(
        {
            "x": np.asarray(x, dtype="float64"),
            "y": np.asarray(y, dtype="float64"),
            "cluster": np.asarray(clusters),
        }
    ).dropna(subset=["x", "y"])
    if len(frame) < 3:
        return np.nan, np.nan, np.nan
    if kind == "spearman":
        frame["x"], frame["y"] = frame["x"].rank(), frame["y"].rank()
    elif kind != "pearson":
        raise ConfigError(f"kind: expected 'pearson' or 'spearman', got {kind!r}")
    a, b = frame["x"].to_numpy(), frame["y"].to_numpy()
    # Centred first: the moment sums of large ranks lose digits otherwise.
    a, b = a - a.mean(), b - b.mean()
    moments = np.column_stack([np.ones_like(a), a, b, a * a, b * b, a * b])
    sums = cluster_sums(pd.factorize(frame["cluster"])[0], moments)
    estimate = _pearson_from_sums(sums.sum(axis=0, keepdims=True))[0]
    if np.isnan(estimate):
        return np.nan, np.nan, np.nan
    low, high = percentile_interval(
        _pearson_from_sums(resampled_totals(sums, n_resamples, seed)), confidence
    )
    return float(estimate), float(low[0]), float(high[0])


def _pearson_from_sums(totals: np.ndarray) -> np.ndarray:
    """Pearson's r per row of (n, sum x, sum y, sum x^2, sum y^2, sum xy); NaN if constant."""
    n, sx, sy, sxx, syy, sxy = totals.T
    covariance = n * sxy - sx * sy
    spread = (n * sxx - sx * sx) * (n * syy - sy * sy)
    safe = np.where(spread > 1e-12 * np.maximum(n, 1) ** 2, spread, np.nan)
    return covariance / np.sqrt(safe)


def wilson_interval(
    successes: float | np.ndarray, trials: float | np.ndarray, confidence: float = 0.95
) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of a proportion (statsmodels' `proportion_confint`), NaN where
    there are no trials. For rows that are independent draws (no clustering)."""
    successes = np.asarray(successes, dtype="float64")
    trials = np.asarray(trials, dtype="float64")
    safe = np.where(trials > 0, trials, 1.0)
    low, high = proportion_confint(successes, safe, alpha=1 - confidence, method="wilson")
    return np.where(trials > 0, low, np.nan), np.where(trials > 0, high, np.nan)


def grouped_mean_intervals(
    frame: pd.DataFrame,
    value: str,
    cluster: str | Sequence[str],
    by: Sequence[str] = (),
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | np.random.Generator = 0,
    confidence: float = DEFAULT_CONFIDENCE,
    weight: str | None = None,
) -> pd.DataFrame:
    """Mean of `value` per `by` group with a clustered bootstrap interval.

    frame: one row per observation; `value` numeric (NaN rows are left out; a 0/1 column
    gives a rate); `cluster` the column(s) naming the resampling unit (e.g. prompt_id);
    `by` the grouping columns (e.g. model, aspect); `weight` an optional per-row weight
    (e.g. 0.5 for each of a pair's two orders). All groups share the same resamples of
    clusters, so intervals of different groups come from the same bootstrap draws.

    Returns one row per group: the `by` columns, n (rows used), estimate, ci_low,
    ci_high, method.
    """
    by = list(by)
    clusters = [cluster] if isinstance(cluster, str) else list(cluster)
    require_columns(frame, [value, *clusters, *by, *([weight] if weight else [])], "frame")
    values = pd.to_numeric(frame[value]).to_numpy(dtype="float64", na_value=np.nan)
    used = ~np.isnan(values)
    weights = (
        frame[weight].to_numpy(dtype="float64") if weight else np.ones(len(frame), dtype="float64")
    )
    data = frame.loc[used, [*clusters, *by]]
    values, weights = values[used], weights[used]

    if data.empty:
        return pd.DataFrame(columns=[*by, "n", *INTERVAL_COLUMNS])
    cluster_codes = _codes(data, clusters)
    if by:
        group_codes, groups = pd.MultiIndex.from_frame(data[by]).factorize(sort=True)
        groups = pd.MultiIndex.from_tuples(list(groups), names=by).to_frame(index=False)
    else:
        group_codes, groups = np.zeros(len(data), dtype="int64"), pd.DataFrame(index=[0])
    n_clusters, n_groups = int(cluster_codes.max()) + 1, len(groups)
    cell = cluster_codes * n_groups + group_codes
    size = n_clusters * n_groups
    sums = np.bincount(cell, weights=values * weights, minlength=size).reshape(-1, n_groups)
    counts = np.bincount(cell, weights=weights, minlength=size).reshape(-1, n_groups)
    estimate, low, high = ratio_bootstrap(sums, counts, n_resamples, seed, confidence)
    result = groups.reset_index(drop=True)
    result["n"] = np.bincount(group_codes, minlength=n_groups).astype("int64")
    result["estimate"], result["ci_low"], result["ci_high"] = estimate, low, high
    result["method"] = bootstrap_method(n_resamples)
    return result


def _codes(frame: pd.DataFrame, columns: list[str]) -> np.ndarray:
    if len(columns) == 1:
        return pd.factorize(frame[columns[0]])[0].astype("int64")
    return pd.MultiIndex.from_frame(frame[columns]).factorize()[0].astype("int64")


def ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator, NaN where the denominator is 0."""
    return np.divide(
        numerator,
        denominator,
        out=np.full(np.broadcast(numerator, denominator).shape, np.nan),
        where=denominator != 0,
    )
