"""Judge-bias diagnostics measurable from one annotate run, with clustered intervals.

Input (`ratings`): one row per rating, with at least
  prompt_id: the cluster (the completions of a prompt are judged together, so they share
    the judge's state, the shown order and the prompt's difficulty);
  rating: the rating (NaN rows are left out);
  and per diagnostic: position (0-based shown position), length (completion length),
  model and judge_model (self-preference); `by` columns (e.g. aspect) group the output.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy.stats import norm

from llm_feedback.core.errors import require_columns
from llm_feedback.stats.correlation_tally import CorrelationTally
from llm_feedback.stats.intervals import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    INTERVAL_COLUMNS,
    GroupedMeans,
    ResampledTotals,
    bootstrap_method,
    check_bootstrap,
    cluster_ids,
    grouped_mean_intervals,
    percentile_interval,
    ratio,
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
    one shuffle suffices. `SlopeTally` gives the same from rows met a chunk at a time.

    Columns: the `by` columns, n, slope, ci_low, ci_high, method.

    Args:
        ratings: one row per rating (module docstring).
        by: the grouping columns.
        confidence: the intervals' confidence level.

    Returns:
        The table (columns above).
    """
    tally = SlopeTally(by, confidence=confidence)
    tally.count(ratings)
    tally.add(ratings)
    return tally.result()


class SlopeTally:
    """`position_slope` in two walks over chunks of whole prompts: `count` sums the
    regression's moments (its fit), `add` the cluster-robust variance's per-prompt scores
    at that fit. statsmodels' OLS needs every row at once; this is its estimate and its
    cluster covariance (with the same small-sample factor), from sums."""

    def __init__(self, by: Sequence[str] = ("aspect",), *, confidence: float = DEFAULT_CONFIDENCE):
        """Start with no rows.

        Args:
            by: the grouping columns.
            confidence: the intervals' confidence level.
        """
        self.by, self.confidence = list(by), confidence
        self._moments: dict[tuple, np.ndarray] = {}  # n, sum x, sum y, sum xx, sum xy
        self._spread: dict[tuple, tuple[float, float]] = {}  # least and greatest position
        self._prompts: Counter = Counter()
        self._meat: dict[tuple, np.ndarray] = {}

    def count(self, ratings: pd.DataFrame) -> None:
        """First walk: add a chunk to the regression's moments.

        Args:
            ratings: a chunk of whole prompts' ratings.
        """
        for key, part in _groups(_rated(ratings, ["position", *self.by]), self.by):
            x, y = part["position"].to_numpy(dtype="float64"), part["rating"].to_numpy()
            sums = np.array([len(x), x.sum(), y.sum(), (x * x).sum(), (x * y).sum()])
            self._moments[key] = self._moments.get(key, 0) + sums
            low, high = self._spread.get(key, (np.inf, -np.inf))
            self._spread[key] = (min(low, x.min()), max(high, x.max()))
            self._prompts[key] += part["prompt_id"].nunique()

    def add(self, ratings: pd.DataFrame) -> None:
        """Second walk: add a chunk's per-prompt scores at the fit.

        Args:
            ratings: a chunk of whole prompts' ratings.
        """
        for key, part in _groups(_rated(ratings, ["position", *self.by]), self.by):
            fit = self._fit(key)
            if fit is None:
                continue
            x, y = part["position"].to_numpy(dtype="float64"), part["rating"].to_numpy()
            residual = y - fit[0] - fit[1] * x
            codes, uniques = pd.factorize(part["prompt_id"])
            scores = np.column_stack(
                [
                    np.bincount(codes, weights=w, minlength=len(uniques))
                    for w in (residual, residual * x)
                ]
            )
            self._meat[key] = self._meat.get(key, 0) + scores.T @ scores

    def _fit(self, key: tuple) -> np.ndarray | None:
        """(intercept, slope), or None where the slope has no cluster-robust interval:
        fewer than 3 ratings, one position only, or one prompt."""
        n, sx, sy, sxx, sxy = self._moments[key]
        low, high = self._spread[key]
        if n < 3 or high <= low or self._prompts[key] < 2:
            return None
        return np.linalg.solve(self._bread_inverse(key), [sy, sxy])

    def _bread_inverse(self, key: tuple) -> np.ndarray:
        n, sx, _, sxx, _ = self._moments[key]
        return np.array([[n, sx], [sx, sxx]])

    def result(self) -> pd.DataFrame:
        z = norm.ppf(0.5 + self.confidence / 2)
        rows = []
        for key in sorted(self._moments):
            fit = self._fit(key)
            slope = low = high = np.nan
            if fit is not None:
                bread = np.linalg.inv(self._bread_inverse(key))
                n, groups = self._moments[key][0], self._prompts[key]
                # statsmodels' cluster default: G / (G - 1) * (N - 1) / (N - K).
                factor = groups / (groups - 1) * (n - 1) / (n - 2)
                covariance = factor * bread @ self._meat.get(key, np.zeros((2, 2))) @ bread
                # Clipped: with a handful of prompts the variance can come out a rounding
                # error below 0.
                error = float(np.sqrt(max(covariance[1, 1], 0.0)))
                slope = float(fit[1])
                low, high = slope - z * error, slope + z * error
            rows.append(
                {
                    **dict(zip(self.by, key, strict=True)),
                    "n": int(self._moments[key][0]),
                    "slope": slope,
                    "ci_low": low,
                    "ci_high": high,
                    "method": SLOPE_METHOD,
                }
            )
        return pd.DataFrame(rows, columns=[*self.by, "n", "slope", "ci_low", "ci_high", "method"])


def mean_by_position(
    ratings: pd.DataFrame,
    by: Sequence[str] = ("aspect",),
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> pd.DataFrame:
    """Mean rating per group and shown position with clustered bootstrap intervals.

    Columns: the `by` columns, position, n, estimate, ci_low, ci_high, method.

    Args:
        ratings: one row per rating (module docstring).
        by: the grouping columns.
        n_resamples: bootstrap resamples of each interval.
        seed: the bootstrap's seed.
        confidence: the intervals' confidence level.

    Returns:
        The table (columns above).
    """
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
    resampled moment sums (the ranks' change under resampling is of order 1/n).
    `LengthCorrelation` gives the same from rows met a chunk at a time.

    Columns: the `by` columns, n, spearman, ci_low, ci_high, method.

    Args:
        ratings: one row per rating (module docstring).
        by: the grouping columns.
        n_resamples: bootstrap resamples of each interval.
        seed: the bootstrap's seed.
        confidence: the intervals' confidence level.

    Returns:
        The table (columns above).
    """
    tally = LengthCorrelation(by, n_resamples=n_resamples, seed=seed, confidence=confidence)
    tally.count(ratings)
    tally.add(ratings)
    return tally.result()


class LengthCorrelation:
    """`length_correlation` in two walks (`count`, then `add`, over the same chunks)."""

    def __init__(self, by: Sequence[str] = ("aspect",), **bootstrap: float) -> None:
        """Start with no rows.

        Args:
            by: the grouping columns.
            **bootstrap: n_resamples, seed and confidence of the intervals.
        """
        self.by = list(by)
        self.method = bootstrap_method(int(bootstrap.get("n_resamples", DEFAULT_RESAMPLES)))
        self._tally = CorrelationTally("spearman", **bootstrap)
        self._keys: dict[str, tuple] = {}

    def _rows(self, ratings: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
        frame = _rated(ratings, ["length", *self.by]).dropna(subset=["length"])
        keys = [tuple(row) for row in frame[self.by].itertuples(index=False, name=None)]
        names = np.array([repr(key) for key in keys], dtype=object)
        self._keys.update(zip(names, keys, strict=True))
        return names, frame

    def count(self, ratings: pd.DataFrame) -> None:
        """First walk: count a chunk's pairs and values.

        Args:
            ratings: a chunk of whole prompts' ratings.
        """
        names, frame = self._rows(ratings)
        self._tally.count(names, frame["rating"].to_numpy(), frame["length"].to_numpy())

    def add(self, ratings: pd.DataFrame) -> None:
        """Second walk: add a chunk to every resample's totals.

        Args:
            ratings: a chunk of whole prompts' ratings.
        """
        names, frame = self._rows(ratings)
        x, y = frame["rating"].to_numpy(), frame["length"].to_numpy()
        self._tally.add(names, x, y, frame["prompt_id"].to_numpy())

    def result(self) -> pd.DataFrame:
        found = self._tally.result()
        rows = [
            {
                **dict(zip(self.by, self._keys[name], strict=True)),
                "n": n,
                "spearman": rho,
                "ci_low": low,
                "ci_high": high,
                "method": self.method,
            }
            for name, (n, rho, low, high) in found.items()
        ]
        table = pd.DataFrame(
            rows, columns=[*self.by, "n", "spearman", "ci_low", "ci_high", "method"]
        )
        return (
            table.sort_values(self.by, kind="stable").reset_index(drop=True) if self.by else table
        )


def rating_by_length_bins(
    ratings: pd.DataFrame,
    by: Sequence[str] = ("aspect",),
    *,
    n_bins: int = 10,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> pd.DataFrame:
    """Mean rating per group and completion-length decile (quantile bins over all rows,
    as `pandas.qcut`; fewer bins when lengths repeat), for a figure. length_low /
    length_high: the bin's length range. `LengthBins` gives the same in two walks.

    Columns: the `by` columns, length_bin, length_low, length_high, n, estimate, ci_low,
    ci_high, method.

    Args:
        ratings: one row per rating (module docstring).
        by: the grouping columns.
        n_bins: how many length bins at most.
        n_resamples: bootstrap resamples of each interval.
        seed: the bootstrap's seed.
        confidence: the intervals' confidence level.

    Returns:
        The table (columns above).
    """
    tally = LengthBins(by, n_bins=n_bins, n_resamples=n_resamples, seed=seed, confidence=confidence)
    tally.count(ratings)
    tally.add(ratings)
    return tally.result()


BIN_COLUMNS = ["length_bin", "length_low", "length_high", "n", *INTERVAL_COLUMNS]


class LengthBins:
    """`rating_by_length_bins` in two walks: `count` counts each length (the quantile
    edges follow from the counts), `add` bins the rows and adds them to the means."""

    def __init__(self, by: Sequence[str] = ("aspect",), *, n_bins: int = 10, **bootstrap) -> None:
        """Start with no rows.

        Args:
            by: the grouping columns.
            n_bins: how many length bins at most.
            **bootstrap: n_resamples, seed and confidence of the intervals.
        """
        self.by, self.n_bins = list(by), n_bins
        self._lengths: Counter = Counter()
        self._edges: np.ndarray | None = None
        self._means = GroupedMeans("rating", "prompt_id", [*self.by, "length_bin"], **bootstrap)
        self._ranges: dict[int, tuple[float, float]] = {}

    def count(self, ratings: pd.DataFrame) -> None:
        """First walk: count each length of a chunk.

        Args:
            ratings: a chunk of whole prompts' ratings.
        """
        frame = _rated(ratings, ["length", *self.by]).dropna(subset=["length"])
        self._lengths.update(frame["length"].value_counts().to_dict())

    def add(self, ratings: pd.DataFrame) -> None:
        """Second walk: bin a chunk's rows and add them to the means.

        Args:
            ratings: a chunk of whole prompts' ratings.
        """
        if not self._lengths:
            return
        if self._edges is None:
            self._edges = _quantile_edges(self._lengths, self.n_bins)
        frame = _rated(ratings, ["length", *self.by]).dropna(subset=["length"])
        if frame.empty:
            return
        frame["length_bin"] = pd.cut(
            frame["length"], self._edges, labels=False, include_lowest=True, duplicates="drop"
        )
        self._means.add(frame)
        ranges = frame.groupby("length_bin")["length"].agg(["min", "max"])
        for bin_, (low, high) in ranges.iterrows():
            old = self._ranges.get(bin_, (np.inf, -np.inf))
            self._ranges[bin_] = (min(old[0], low), max(old[1], high))

    def result(self) -> pd.DataFrame:
        table = self._means.result()
        if table.empty:
            return pd.DataFrame(columns=[*self.by, *BIN_COLUMNS])
        ranges = pd.DataFrame.from_dict(
            self._ranges, orient="index", columns=["length_low", "length_high"]
        )
        return table.merge(ranges, left_on="length_bin", right_index=True).loc[
            :, [*self.by, *BIN_COLUMNS]
        ]


def _quantile_edges(counts: Counter, n_bins: int) -> np.ndarray:
    """`pandas.qcut`'s bin edges (its quantiles, linearly interpolated between order
    statistics) of the values counted in `counts`, from the counts: no value list held."""
    quantiles = np.linspace(0, 1, n_bins + 1)
    # As qcut: a quantile not representable in base 2 is rounded up.
    np.putmask(quantiles, n_bins * quantiles != np.arange(n_bins + 1), np.nextafter(quantiles, 1))
    counted = pd.Series(counts, dtype="float64").sort_index()
    values, ends = counted.index.to_numpy(dtype="float64"), counted.cumsum().to_numpy()
    position = (ends[-1] - 1) * quantiles  # 0-based position among the sorted values
    below, fraction = np.floor(position), position - np.floor(position)
    low = values[np.searchsorted(ends, below, side="right")]
    high = values[np.searchsorted(ends, np.minimum(below + 1, ends[-1] - 1), side="right")]
    return low + fraction * (high - low)


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
    `SelfPreference` gives the same from rows met a chunk at a time.

    Columns: judge_model, the `by` columns, n_own, n_others, mean_own, mean_others,
    difference, ci_low, ci_high, method. Empty when no judge generated completions.

    Args:
        ratings: one row per rating (module docstring).
        by: the grouping columns.
        n_resamples: bootstrap resamples of each interval.
        seed: the bootstrap's seed.
        confidence: the intervals' confidence level.

    Returns:
        The table (columns above).
    """
    tally = SelfPreference(by, n_resamples=n_resamples, seed=seed, confidence=confidence)
    tally.add(ratings)
    return tally.result()


SELF_COLUMNS = ["n_own", "n_others", "mean_own", "mean_others", "difference", "ci_low", "ci_high"]


class SelfPreference:
    """`self_preference` of rows met a chunk at a time (`add`): per (judge model, group),
    each prompt's sums of own and others' ratings and counts into each resample's totals,
    for every judge; those that generated no completion are left out at the end."""

    def __init__(
        self,
        by: Sequence[str] = (),
        *,
        n_resamples: int = DEFAULT_RESAMPLES,
        seed: int = 0,
        confidence: float = DEFAULT_CONFIDENCE,
    ) -> None:
        """Start with no rows.

        Args:
            by: the grouping columns.
            n_resamples: bootstrap resamples of each interval.
            seed: the bootstrap's seed.
            confidence: the intervals' confidence level.
        """
        check_bootstrap(n_resamples, confidence)
        self.by, self.n_resamples, self.confidence = list(by), n_resamples, confidence
        self._column: dict[tuple, int] = {}  # (judge, *group) -> its 4 columns' start / 4
        self._totals = ResampledTotals(n_resamples, seed)
        self._whole = np.zeros(0)
        self._models: set[str] = set()

    def add(self, ratings: pd.DataFrame) -> None:
        """Add a chunk of rows to each judge's sums and resampled totals.

        Args:
            ratings: a chunk of whole prompts' ratings.
        """
        frame = _rated(ratings, ["model", "judge_model", *self.by])
        self._models.update(frame["model"].dropna().unique())
        frame = frame.dropna(subset=["judge_model"])
        if frame.empty:
            return
        keys = [*frame[["judge_model", *self.by]].itertuples(index=False, name=None)]
        for key in dict.fromkeys(keys):
            self._column.setdefault(key, len(self._column))
        column = np.array([self._column[key] for key in keys])
        own = (frame["model"] == frame["judge_model"]).to_numpy()
        rating = frame["rating"].to_numpy()
        codes, uniques = pd.factorize(frame["prompt_id"])
        width = 4 * len(self._column)
        sums = np.zeros((len(uniques), width))
        for k, values in enumerate((own * rating, own, ~own * rating, ~own)):
            cell = codes * width + 4 * column + k
            sums += np.bincount(cell, weights=values, minlength=len(uniques) * width).reshape(
                len(uniques), width
            )
        grown = np.zeros(width)
        grown[: len(self._whole)] = self._whole
        self._whole = grown + sums.sum(axis=0)
        self._totals.add(cluster_ids(uniques), sums)

    def result(self) -> pd.DataFrame:
        rows = []
        for key in sorted(self._column):
            judge, start = key[0], 4 * self._column[key]
            total = self._whole[start : start + 4]
            if judge not in self._models or total[1] == 0 or total[3] == 0:
                continue
            totals = self._totals.totals[:, start : start + 4]
            replicates = ratio(totals[:, 0], totals[:, 1]) - ratio(totals[:, 2], totals[:, 3])
            low, high = percentile_interval(replicates, self.confidence)
            mean_own, mean_others = total[0] / total[1], total[2] / total[3]
            rows.append(
                {
                    "judge_model": judge,
                    **dict(zip(self.by, key[1:], strict=True)),
                    "n_own": int(total[1]),
                    "n_others": int(total[3]),
                    "mean_own": mean_own,
                    "mean_others": mean_others,
                    "difference": mean_own - mean_others,
                    "ci_low": low[0],
                    "ci_high": high[0],
                    "method": bootstrap_method(self.n_resamples),
                }
            )
        return pd.DataFrame(rows, columns=["judge_model", *self.by, *SELF_COLUMNS, "method"])
