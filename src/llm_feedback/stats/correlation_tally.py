"""Pearson's r or Spearman's rho per group, with clustered bootstrap intervals, over rows
met a chunk at a time in two walks.

The first walk (`count`) keeps per group the number of pairs, their sums and each value's
count; the second (`add`) the centred moment sums (n, sum x, sum y, sum x^2, sum y^2,
sum xy) of the values or of their average ranks, per cluster, into each resample's totals
(`intervals.ResampledTotals`). Ranks come from the value counts (ties share their average
rank, as scipy's `spearmanr` and pandas' `rank` give them), so nothing is sorted and memory
grows with the groups and the distinct values, never with the rows: for the report's
scores, ratings and lengths (integers or a few fractions) the values repeat a lot.
scipy's and pandas' correlations need every row at once, hence this tally.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable

import numpy as np
import pandas as pd

from llm_feedback.core.errors import ConfigError
from llm_feedback.stats.intervals import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    ResampledTotals,
    check_bootstrap,
    cluster_ids,
    pearson_from_sums,
    percentile_interval,
)

MOMENTS = 6
MIN_PAIRS = 3  # below, a correlation is NaN (as validation.agreement.pearson)


class CorrelationTally:
    """`count(groups, x, y)` every chunk, then `add(groups, x, y, clusters)` every chunk
    again, then `result()`: per group (n, estimate, ci_low, ci_high). Rows where x or y is
    NaN are left out; a group with fewer than 3 pairs or a constant side gets NaN."""

    def __init__(
        self,
        kind: str = "spearman",
        *,
        n_resamples: int = DEFAULT_RESAMPLES,
        seed: int | np.random.Generator = 0,
        confidence: float = DEFAULT_CONFIDENCE,
    ) -> None:
        """Start an empty tally.

        Args:
            kind: "spearman" or "pearson".
            n_resamples: bootstrap resamples of each interval.
            seed: the bootstrap's seed, or a generator.
            confidence: the intervals' confidence level.
        """
        if kind not in ("pearson", "spearman"):
            raise ConfigError(f"kind: expected 'pearson' or 'spearman', got {kind!r}")
        check_bootstrap(n_resamples, confidence)
        self.kind, self.n_resamples, self.seed = kind, n_resamples, seed
        self.confidence = confidence
        self._n: Counter = Counter()
        self._sums: dict[Hashable, np.ndarray] = {}
        self._values: dict[Hashable, tuple[Counter, Counter]] = {}
        self._centres: dict[Hashable, tuple[pd.Series | float, pd.Series | float]] = {}
        self._totals: ResampledTotals | None = None
        self._whole = np.zeros(0)

    def count(self, groups: np.ndarray, x: np.ndarray, y: np.ndarray) -> None:
        """First pass over a chunk: count the pairs (and, for ranks, the values) per group.

        Args:
            groups: each row's group.
            x: each row's first value.
            y: each row's second value.
        """
        for group, a, b in _pairs(groups, x, y):
            self._n[group] += len(a)
            self._sums[group] = self._sums.get(group, np.zeros(2)) + [a.sum(), b.sum()]
            if self.kind == "spearman":
                counts = self._values.setdefault(group, (Counter(), Counter()))
                counts[0].update(pd.Series(a).value_counts().to_dict())
                counts[1].update(pd.Series(b).value_counts().to_dict())

    def add(
        self, groups: np.ndarray, x: np.ndarray, y: np.ndarray, clusters: pd.Series | np.ndarray
    ) -> None:
        """Second pass over the same chunk: add its sums to every resample's totals.

        Args:
            groups: each row's group.
            x: each row's first value.
            y: each row's second value.
            clusters: each row's cluster (the bootstrap resamples clusters).
        """
        if self._totals is None:
            self._start()
        present = ~(pd.isna(x) | pd.isna(y))
        clusters = np.asarray(clusters)[present]
        codes, uniques = pd.factorize(clusters)
        sums = np.zeros((len(uniques), self._width))
        where = np.flatnonzero(present)
        for group, first, second, rows in _pairs(groups[where], x[where], y[where], True):
            start = self._column[group] * MOMENTS
            a, b = self._centred(group, first, second)
            moments = np.column_stack([np.ones_like(a), a, b, a * a, b * b, a * b])
            for k in range(MOMENTS):
                sums[:, start + k] = np.bincount(
                    codes[rows], weights=moments[:, k], minlength=len(uniques)
                )
        self._whole += sums.sum(axis=0)
        self._totals.add(cluster_ids(uniques), sums)

    def _start(self) -> None:
        self._column = {group: i for i, group in enumerate(self._n)}
        self._width = len(self._column) * MOMENTS
        self._totals = ResampledTotals(self.n_resamples, self.seed, self._width)
        self._whole = np.zeros(self._width)
        for group, n in self._n.items():
            if self.kind == "spearman":
                self._centres[group] = tuple(_average_ranks(c) for c in self._values[group])
            else:
                self._centres[group] = tuple(self._sums[group] / n)

    def _centred(self, group: Hashable, a: np.ndarray, b: np.ndarray):
        first, second = self._centres[group]
        if self.kind == "spearman":  # ranks centred on the mean rank, (n + 1) / 2
            middle = (self._n[group] + 1) / 2
            return first.loc[a].to_numpy() - middle, second.loc[b].to_numpy() - middle
        return a - first, b - second

    def result(self) -> dict[Hashable, tuple[int, float, float, float]]:
        if self._totals is None:
            self._start()
        found = {}
        for group, n in self._n.items():
            start = self._column[group] * MOMENTS
            estimate = pearson_from_sums(self._whole[None, start : start + MOMENTS])[0]
            low = high = np.nan
            if n < MIN_PAIRS:
                estimate = np.nan
            elif not np.isnan(estimate):
                replicates = pearson_from_sums(self._totals.totals[:, start : start + MOMENTS])
                lows, highs = percentile_interval(replicates, self.confidence)
                low, high = lows[0], highs[0]
            found[group] = (n, float(estimate), float(low), float(high))
        return found


def _pairs(groups: np.ndarray, x: np.ndarray, y: np.ndarray, positions: bool = False):
    """Per group, its rows' (x, y) where both are present (and their positions)."""
    x, y = np.asarray(x, dtype="float64"), np.asarray(y, dtype="float64")
    present = ~(np.isnan(x) | np.isnan(y))
    codes, uniques = pd.factorize(np.asarray(groups, dtype=object))
    for code, group in enumerate(uniques):
        rows = np.flatnonzero((codes == code) & present)
        if len(rows):
            yield (group, x[rows], y[rows], rows) if positions else (group, x[rows], y[rows])


def _average_ranks(counts: Counter) -> pd.Series:
    """Each value's average rank among all the counted values (1-based, ties sharing)."""
    counted = pd.Series(counts, dtype="float64").sort_index()
    return counted.cumsum() - counted + (counted + 1) / 2
