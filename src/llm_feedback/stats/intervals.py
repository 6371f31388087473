"""Confidence intervals: a clustered Poisson bootstrap over instances and Wilson's interval.

The bootstrap resamples *clusters* (instances: a prompt, a pair, a question), never rows:
every row of a cluster (its replicates, both pairwise orders, every completion of a
prompt) enters a resample together, with the cluster's weight. The weights are Poisson(1)
draws, one per cluster and resample (the Poisson bootstrap, which approximates the
multinomial one closely from a few dozen clusters up, and is the usual way to bootstrap
data too large to hold): a cluster's weight in resample r depends only on the seed, r and
the cluster's id (its key's hash, or its index), never on the other clusters. So a table
read a chunk at a time gets the weights it would get whole, statistics over the same
clusters share their resamples, and a statistic that is a ratio of sums (a mean, a rate)
is one matrix product per chunk of clusters, its totals summed over chunks
(`ResampledTotals`). Intervals are percentile intervals of the resampled statistic.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pandas as pd
from scipy.stats import poisson
from statsmodels.stats.proportion import proportion_confint

from llm_feedback.core.errors import ConfigError, require_columns

DEFAULT_RESAMPLES = 1000
DEFAULT_CONFIDENCE = 0.95
# Weights made at once: 100 resamples x 64k clusters (6.4 MB of uint8 counts).
CHUNK_ELEMENTS = 6_400_000

INTERVAL_COLUMNS = ("estimate", "ci_low", "ci_high", "method")


def bootstrap_method(n_resamples: int) -> str:
    """The `method` label of a clustered percentile Poisson bootstrap.

    Args:
        n_resamples: the bootstrap's resamples.

    Returns:
        The label.
    """
    return f"poisson-bootstrap-{n_resamples}-cluster"


def check_bootstrap(n_resamples: int, confidence: float) -> None:
    """Raise ConfigError unless the bootstrap's settings can make an interval.

    Args:
        n_resamples: the resamples, an integer >= 10.
        confidence: the confidence level, in (0, 1).
    """
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 10:
        raise ConfigError(f"n_resamples: expected an integer >= 10, got {n_resamples!r}")
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence: expected a number in (0, 1), got {confidence!r}")


# -- the weights -----------------------------------------------------------------------
# Poisson(1) counts by the top `_TABLE_BITS` bits of a 64-bit hash: the table's bucket
# edges move each probability by at most 2^-20. numpy's generators draw from one stream,
# so no library gives a weight addressed by (seed, resample, cluster): hashed by hand.
_TABLE_BITS = 20
_POISSON_TABLE = np.searchsorted(
    poisson.cdf(np.arange(24), 1.0), (np.arange(2**_TABLE_BITS) + 0.5) / 2**_TABLE_BITS, "right"
).astype("uint8")
_GOLDEN, _MIX1, _MIX2 = (
    np.uint64(0x9E3779B97F4A7C15),
    np.uint64(0xBF58476D1CE4E5B9),
    np.uint64(0x94D049BB133111EB),
)


def _mix(values: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser, in place on a fresh uint64 array: every output bit depends
    on every input bit (uint64 arithmetic wraps, as the finaliser means it to)."""
    with np.errstate(over="ignore"):
        values += _GOLDEN
        values ^= values >> np.uint64(30)
        values *= _MIX1
        values ^= values >> np.uint64(27)
        values *= _MIX2
        values ^= values >> np.uint64(31)
    return values


def cluster_ids(keys: pd.Series | pd.DataFrame | np.ndarray) -> np.ndarray:
    """The uint64 id of each cluster key (a column, or a frame of key columns): pandas'
    stable hash of the values, so that a prompt has one id in every table and chunk.

    Args:
        keys: each row's cluster key: a column, or a frame of key columns.

    Returns:
        One uint64 id per row.
    """
    if not isinstance(keys, pd.DataFrame):  # one key column hashes as a frame of one
        keys = pd.DataFrame({"key": np.asarray(keys)})
    return pd.util.hash_pandas_object(keys, index=False).to_numpy(dtype="uint64")


def _seed_key(seed: int | np.random.Generator) -> np.uint64:
    if isinstance(seed, np.random.Generator):
        return np.uint64(seed.integers(0, 2**63))
    return _mix(np.array([seed], dtype="uint64"))[0]


def poisson_weights(
    ids: np.ndarray, first: int, last: int, seed: int | np.random.Generator = 0
) -> np.ndarray:
    """(last - first, len(ids)) uint8: the Poisson(1) weight of each cluster `ids` in the
    resamples numbered first..last - 1 (a Generator seed draws a key from it once).

    Args:
        ids: the clusters' ids.
        first: the first resample's number.
        last: one past the last resample's number.
        seed: the resampling seed, or a generator.

    Returns:
        The weights, one row per resample.
    """
    rows = _mix(np.arange(first, last, dtype="uint64") + _seed_key(seed))
    mixed = _mix(np.asarray(ids, dtype="uint64")[None, :] ^ rows[:, None])
    return _POISSON_TABLE[mixed >> np.uint64(64 - _TABLE_BITS)]


def resample_counts(
    n_clusters: int, n_resamples: int, seed: int | np.random.Generator
) -> Iterator[np.ndarray]:
    """Chunks of bootstrap resamples as (chunk, n_clusters) float64 weights of the clusters
    numbered 0..n_clusters - 1 (row r: each cluster's weight in resample r), for statistics
    that need each resample's row weights (a model fit); the same seed gives the same
    resamples. For an integer seed they are made once and kept, up to `KEPT_COUNTS`, for
    the next statistic over as many clusters.

    Args:
        n_clusters: how many clusters.
        n_resamples: how many resamples.
        seed: the resampling seed, or a generator.

    Returns:
        The weights, a chunk of resamples at a time.
    """
    if isinstance(seed, np.random.Generator):
        seed = int(seed.integers(0, 2**63))
    if n_clusters * n_resamples <= KEPT_COUNTS:
        chunks = _kept_counts(n_clusters, n_resamples, int(seed))
    else:
        chunks = _index_counts(n_clusters, n_resamples, int(seed))
    for chunk in chunks:
        yield chunk.astype("float64")


# Weights kept between statistics, at most (two such sets are kept): 1,000 resamples of
# 128k clusters. At a million prompts the set would be a gigabyte.
KEPT_COUNTS = 128_000_000


@functools.lru_cache(maxsize=2)
def _kept_counts(n_clusters: int, n_resamples: int, seed: int) -> tuple[np.ndarray, ...]:
    return tuple(_index_counts(n_clusters, n_resamples, seed))


def _index_counts(n_clusters: int, n_resamples: int, seed: int) -> Iterator[np.ndarray]:
    ids = np.arange(n_clusters, dtype="uint64")
    chunk = max(1, min(n_resamples, CHUNK_ELEMENTS // max(n_clusters, 1)))
    for start in range(0, n_resamples, chunk):
        yield poisson_weights(ids, start, min(start + chunk, n_resamples), seed)


class ResampledTotals:
    """Each resample's totals of per-cluster sums, added a chunk of clusters at a time
    (`add(ids, sums)`: the chunk's cluster ids and their (m, K) sums). A cluster's weight
    depends on its id alone, so chunks may come in any order and a cluster's rows may be
    split between chunks (their sums add up): `totals` is what all clusters at once give."""

    def __init__(
        self, n_resamples: int, seed: int | np.random.Generator = 0, width: int = 0
    ) -> None:
        """Start with zero totals.

        Args:
            n_resamples: how many resamples.
            seed: the resampling seed, or a generator (drawn from once).
            width: how many sums per cluster at the start (more may come with `add`).
        """
        self.n_resamples = n_resamples
        # A Generator is drawn from once here, so that every chunk gets the same resamples.
        self.seed = int(_seed_key(seed)) if isinstance(seed, np.random.Generator) else seed
        self.totals = np.zeros((n_resamples, width))

    def add(self, ids: np.ndarray, sums: np.ndarray) -> ResampledTotals:
        """Add a chunk of clusters' sums, weighted in each resample.

        Args:
            ids: the chunk's cluster ids (`cluster_ids`).
            sums: their (m, K) sums.

        Returns:
            This object, for chaining.
        """
        if len(ids) == 0:  # no cluster: nothing to weigh
            return self
        sums = np.asarray(sums, dtype="float64").reshape(len(ids), -1)
        if sums.shape[1] > self.totals.shape[1]:  # statistics met for the first time
            grown = np.zeros((self.n_resamples, sums.shape[1]))
            grown[:, : self.totals.shape[1]] = self.totals
            self.totals = grown
        width = sums.shape[1]
        # Blocks of clusters x resamples of CHUNK_ELEMENTS weights at most.
        clusters = max(1, min(len(ids), CHUNK_ELEMENTS // max(self.n_resamples, 1)))
        for start in range(0, len(ids), clusters):
            block_ids, block = ids[start : start + clusters], sums[start : start + clusters]
            resamples = max(1, CHUNK_ELEMENTS // len(block_ids))
            for first in range(0, self.n_resamples, resamples):
                last = min(first + resamples, self.n_resamples)
                weights = poisson_weights(block_ids, first, last, self.seed)
                self.totals[first:last, :width] += weights.astype("float64") @ block
        return self


def cluster_sums(
    codes: np.ndarray, values: np.ndarray, n_clusters: int | None = None
) -> np.ndarray:
    """(n_clusters, K) per-cluster sums of the (n, K) `values` by cluster `codes`
    (bincount per column: much faster than np.add.at); `n_clusters` defaults to the
    largest code + 1 (give it when some clusters have no row here).

    Args:
        codes: each row's cluster code.
        values: the (n, K) values.
        n_clusters: how many clusters (default: the largest code + 1).

    Returns:
        The (n_clusters, K) sums.
    """
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
    interval, and a statistic undefined in every resample gets NaN bounds.

    Args:
        replicates: (n_resamples, n_statistics) replicates.
        confidence: the interval's confidence level.

    Returns:
        (lows, highs), one per statistic.
    """
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


def resample_matrix(n_clusters: int, n_resamples: int, seed: int) -> np.ndarray:
    """All (n_resamples, n_clusters) counts of `resample_counts` at once, for statistics
    that need each resample's row weights rather than its totals.

    Args:
        n_clusters: how many clusters.
        n_resamples: how many resamples.
        seed: the resampling seed.

    Returns:
        The (n_resamples, n_clusters) counts.
    """
    return np.vstack(list(resample_counts(n_clusters, n_resamples, seed)))


def resampled_totals(
    cluster_sums: np.ndarray, n_resamples: int, seed: int | np.random.Generator = 0
) -> np.ndarray:
    """(n_resamples, K) totals of (n_clusters, K) per-cluster sums in each clustered
    bootstrap resample (cluster i's id is i): the building block of any statistic that is a
    function of sums (a mean, a difference of means, a correlation from its moment sums).

    Args:
        cluster_sums: the (n_clusters, K) per-cluster sums.
        n_resamples: how many resamples.
        seed: the resampling seed, or a generator.

    Returns:
        The (n_resamples, K) totals.
    """
    cluster_sums = np.asarray(cluster_sums, dtype="float64")
    ids = np.arange(len(cluster_sums), dtype="uint64")
    sums = cluster_sums.reshape(len(ids), -1)
    return ResampledTotals(n_resamples, seed, sums.shape[1]).add(ids, sums).totals


def bootstrap_replicates(
    cluster_codes: np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray],
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | np.random.Generator = 0,
) -> np.ndarray:
    """(n_resamples, k) replicates of a statistic that is not a ratio of sums (a model
    fit): `statistic(row_weights)` gets each row's weight in the resample (its cluster's
    count, so a cluster's rows move together) and returns k numbers. A resample that
    weighs no row (every weight 0, as a Poisson draw of a few clusters can be) is NaN.

    Args:
        cluster_codes: each row's cluster code.
        statistic: the statistic of the row weights, k numbers.
        n_resamples: how many resamples.
        seed: the resampling seed, or a generator.

    Returns:
        The (n_resamples, k) replicates.
    """
    cluster_codes = np.asarray(cluster_codes)
    n_clusters = int(cluster_codes.max()) + 1 if len(cluster_codes) else 0
    weights = [
        counts[cluster_codes]
        for chunk in resample_counts(n_clusters, n_resamples, seed)
        for counts in chunk
    ]
    rows = [statistic(w) if w.any() else None for w in weights]
    width = next((len(np.atleast_1d(row)) for row in rows if row is not None), 1)
    return np.vstack([np.full(width, np.nan) if row is None else row for row in rows])


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
    cost a sort each and changes ranks by O(1/n)). NaN below 3 pairs or when constant.

    Args:
        x: the first values.
        y: the second values.
        clusters: each pair's cluster.
        kind: "spearman" or "pearson".
        n_resamples: bootstrap resamples of each interval.
        seed: the bootstrap's seed, or a generator.
        confidence: the intervals' confidence level.

    Returns:
        (estimate, ci_low, ci_high).
    """
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
    codes, uniques = pd.factorize(frame["cluster"])
    sums = cluster_sums(codes, moments, len(uniques))
    estimate = pearson_from_sums(sums.sum(axis=0, keepdims=True))[0]
    if np.isnan(estimate):
        return np.nan, np.nan, np.nan
    totals = ResampledTotals(n_resamples, seed).add(cluster_ids(uniques), sums).totals
    low, high = percentile_interval(pearson_from_sums(totals), confidence)
    return float(estimate), float(low[0]), float(high[0])


def pearson_from_sums(totals: np.ndarray) -> np.ndarray:
    """Pearson's r per row of (n, sum x, sum y, sum x^2, sum y^2, sum xy); NaN if constant.

    Args:
        totals: rows of (n, sum x, sum y, sum x^2, sum y^2, sum xy).

    Returns:
        Pearson's r per row.
    """
    n, sx, sy, sxx, syy, sxy = totals.T
    covariance = n * sxy - sx * sy
    spread = (n * sxx - sx * sx) * (n * syy - sy * sy)
    safe = np.where(spread > 1e-12 * np.maximum(n, 1) ** 2, spread, np.nan)
    return covariance / np.sqrt(safe)


def wilson_interval(
    successes: float | np.ndarray, trials: float | np.ndarray, confidence: float = 0.95
) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of a proportion (statsmodels' `proportion_confint`), NaN where
    there are no trials. For rows that are independent draws (no clustering).

    Args:
        successes: the successes.
        trials: the trials.
        confidence: the interval's confidence level.

    Returns:
        (lows, highs).
    """
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

    All groups share the same resamples of clusters, so intervals of different groups
    come from the same bootstrap draws. `GroupedMeans` gives the same table from the rows a
    chunk at a time.

    Args:
        frame: one row per observation.
        value: the numeric column averaged (NaN rows are left out; a 0/1 column gives a
            rate).
        cluster: the column(s) naming the resampling unit (e.g. prompt_id).
        by: the grouping columns (e.g. model, aspect).
        n_resamples: bootstrap resamples of each interval.
        seed: the bootstrap's seed, or a generator.
        confidence: the intervals' confidence level.
        weight: an optional per-row weight column (e.g. 0.5 for each of a pair's two
            orders).

    Returns:
        One row per group (sorted): the `by` columns, n (rows used), estimate, ci_low,
        ci_high, method.
    """
    means = GroupedMeans(
        value, cluster, by, n_resamples=n_resamples, seed=seed, confidence=confidence
    )
    return means.add(frame, weight=weight).result()


class GroupedMeans:
    """`grouped_mean_intervals` of rows met a chunk at a time (`add`, then `result`): it
    holds per group a sum, a count and each resample's totals, never the rows, and gives
    what the rows at once give (up to float rounding) however they are chunked."""

    def __init__(
        self,
        value: str,
        cluster: str | Sequence[str],
        by: Sequence[str] = (),
        *,
        n_resamples: int = DEFAULT_RESAMPLES,
        seed: int | np.random.Generator = 0,
        confidence: float = DEFAULT_CONFIDENCE,
    ) -> None:
        """Start with no rows.

        Args:
            value: the column averaged.
            cluster: the column(s) naming the resampling unit.
            by: the grouping columns.
            n_resamples: bootstrap resamples of each interval.
            seed: the bootstrap's seed, or a generator.
            confidence: the intervals' confidence level.
        """
        check_bootstrap(n_resamples, confidence)
        self.value, self.by = value, list(by)
        self.clusters = [cluster] if isinstance(cluster, str) else list(cluster)
        self.n_resamples, self.confidence = n_resamples, confidence
        self._groups: dict[tuple, int] = {}
        # Per group: value sum, weight sum and rows; per resample: (sum, weight) of each
        # group side by side, so a group met later adds columns at the end.
        self._sums, self._weights, self._rows = (np.zeros(0) for _ in range(3))
        self._resampled = ResampledTotals(n_resamples, seed)

    def add(self, frame: pd.DataFrame, weight: str | None = None) -> GroupedMeans:
        """Add a chunk of rows.

        Args:
            frame: rows with the value, cluster and grouping columns.
            weight: an optional per-row weight column.

        Returns:
            This object, for chaining.
        """
        required = [self.value, *self.clusters, *self.by, *([weight] if weight else [])]
        require_columns(frame, required, "frame")
        values = pd.to_numeric(frame[self.value]).to_numpy(dtype="float64", na_value=np.nan)
        used = ~np.isnan(values)
        weights = frame[weight].to_numpy(dtype="float64") if weight else np.ones(len(frame))
        data = frame.loc[used, [*self.clusters, *self.by]]
        values, weights = values[used], weights[used]
        if data.empty:
            return self
        group_codes = self._group_codes(data)
        cluster_codes, uniques = _factorized(data, self.clusters)
        n_groups = len(self._groups)
        cell = cluster_codes * n_groups + group_codes
        size = len(uniques) * n_groups
        sums = np.bincount(cell, weights=values * weights, minlength=size)
        counts = np.bincount(cell, weights=weights, minlength=size)
        paired = np.stack([sums.reshape(-1, n_groups), counts.reshape(-1, n_groups)], axis=2)
        self._resampled.add(cluster_ids(uniques), paired.reshape(len(uniques), -1))
        self._sums += np.bincount(group_codes, weights=values * weights, minlength=n_groups)
        self._weights += np.bincount(group_codes, weights=weights, minlength=n_groups)
        self._rows += np.bincount(group_codes, minlength=n_groups)
        return self

    def _group_codes(self, data: pd.DataFrame) -> np.ndarray:
        if not self.by:
            local, keys = np.zeros(len(data), dtype="int64"), [()]
        else:
            local, found = pd.MultiIndex.from_frame(data[self.by]).factorize()
            keys = list(found)
        for key in keys:
            self._groups.setdefault(key, len(self._groups))
        grown = len(self._groups) - len(self._sums)
        if grown:
            self._sums, self._weights, self._rows = (
                np.concatenate([a, np.zeros(grown)])
                for a in (self._sums, self._weights, self._rows)
            )
        return np.array([self._groups[key] for key in keys], dtype="int64")[local]

    def result(self) -> pd.DataFrame:
        if not self._groups:
            return pd.DataFrame(columns=[*self.by, "n", *INTERVAL_COLUMNS])
        keys = list(self._groups)
        totals = self._resampled.totals
        estimate = ratio(self._sums, self._weights)
        low, high = percentile_interval(ratio(totals[:, 0::2], totals[:, 1::2]), self.confidence)
        if self.by:
            index = pd.MultiIndex.from_tuples(keys, names=self.by)
            order = index.argsort()
            result = index[order].to_frame(index=False)
        else:
            order, result = np.array([0]), pd.DataFrame(index=[0])
        result["n"] = self._rows[order].astype("int64")
        result["estimate"], result["ci_low"], result["ci_high"] = (
            estimate[order],
            low[order],
            high[order],
        )
        result["method"] = bootstrap_method(self.n_resamples)
        return result


def _factorized(frame: pd.DataFrame, columns: list[str]) -> tuple[np.ndarray, pd.DataFrame]:
    """Codes of `frame`'s rows by `columns` and the distinct keys, as a frame."""
    if len(columns) == 1:
        codes, uniques = pd.factorize(frame[columns[0]])
        return codes.astype("int64"), pd.DataFrame({columns[0]: uniques})
    codes, uniques = pd.MultiIndex.from_frame(frame[columns]).factorize()
    return codes.astype("int64"), uniques.to_frame(index=False)


def ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator, NaN where the denominator is 0.

    Args:
        numerator: the numerators.
        denominator: the denominators.

    Returns:
        The ratios.
    """
    return np.divide(
        numerator,
        denominator,
        out=np.full(np.broadcast(numerator, denominator).shape, np.nan),
        where=denominator != 0,
    )
