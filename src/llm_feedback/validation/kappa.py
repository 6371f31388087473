"""The project's one Cohen's and Fleiss' kappa, from the libraries: scikit-learn's
`cohen_kappa_score` for two raters' verdicts, statsmodels' `cohens_kappa` for confusion
tables (a bootstrap's thousands of resampled tables, where scikit-learn would rebuild each
from labels at about 1 ms a table) and statsmodels' `fleiss_kappa` for m raters.

Each is NaN where kappa is undefined (no items, or chance agreement of 1: every verdict one
category) rather than a warning or an exception. Categorical values are compared as Python
objects (1 and 1.0 are one category).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats import inter_rater


def _category_codes(verdicts: pd.DataFrame) -> np.ndarray:
    """The verdicts as integer category codes, one column per rater: values equal as Python
    objects share a code (the libraries would sort mixed types, or tell 1 from 1.0)."""
    codes, _ = pd.factorize(pd.Series(verdicts.to_numpy(dtype=object).ravel()))
    return codes.reshape(verdicts.shape)


def cohen_kappa(
    x: pd.Series | np.ndarray,
    y: pd.Series | np.ndarray,
    sample_weight: np.ndarray | None = None,
    weights: str | None = None,
) -> float:
    """Cohen's kappa of two raters' categorical verdicts on the same items.

    Args:
        x: the first rater's verdicts, one per item, no missing values.
        y: the second rater's verdicts on the same items, in the same order.
        sample_weight: each item's weight (a bootstrap resample's counts); None: 1 each.
        weights: None for categories, or "linear" / "quadratic" for ordinal ratings
            (numbers: a disagreement weighs by how far apart the two are).

    Returns:
        scikit-learn's `cohen_kappa_score`; NaN without items or when both raters gave
        one and the same category throughout (chance agreement 1: kappa is 0/0).
    """
    if weights is None:
        codes = _category_codes(
            pd.DataFrame({"x": np.asarray(x, dtype=object), "y": np.asarray(y, dtype=object)})
        )
    else:  # ordinal: codes in the ratings' numeric order, so distances mean something
        values = np.column_stack([np.asarray(x, dtype=float), np.asarray(y, dtype=float)])
        codes = np.unique(values, return_inverse=True)[1].reshape(values.shape)
    if sample_weight is not None:
        weighted = np.asarray(sample_weight, dtype="float64") > 0
        codes = codes[weighted]
        sample_weight = np.asarray(sample_weight, dtype="float64")[weighted]
    if len(codes) == 0 or (codes == codes[0, 0]).all():
        return float("nan")
    return float(
        cohen_kappa_score(codes[:, 0], codes[:, 1], weights=weights, sample_weight=sample_weight)
    )


def cohen_kappa_of_tables(tables: np.ndarray) -> np.ndarray:
    """Cohen's kappa of each (k x k) confusion table of a stack (a bootstrap's resamples).

    Args:
        tables: (..., k, k) counts, one rater in rows and the other in columns; counts may
            be expected (fractional) counts.

    Returns:
        An array of the leading shape: statsmodels' `cohens_kappa` of each table; NaN for
        a table without counts or with chance agreement 1.
    """
    tables = np.asarray(tables, dtype="float64")
    flat = tables.reshape(-1, *tables.shape[-2:])
    # An empty table fails statsmodels' own check, so it is NaN without a call; chance
    # agreement 1 is 0/0, NaN here rather than a RuntimeWarning.
    with np.errstate(divide="ignore", invalid="ignore"):
        values = [
            inter_rater.cohens_kappa(table, return_results=False) if table.sum() > 0 else np.nan
            for table in flat
        ]
    result = np.array(values, dtype="float64").reshape(tables.shape[:-2])
    return np.where(np.isfinite(result), result, np.nan)


def fleiss_kappa(verdicts: pd.DataFrame) -> float:
    """Fleiss' kappa of m >= 2 raters (columns) over items (rows) that every rater rated.

    Args:
        verdicts: one row per item, one column per rater, no missing values.

    Returns:
        statsmodels' `fleiss_kappa` (method "fleiss"); NaN without items, with fewer than
        two raters, or when every verdict is one category (chance agreement 1).
    """
    n_items, n_raters = verdicts.shape
    if n_items == 0 or n_raters < 2:
        return float("nan")
    codes = _category_codes(verdicts)
    if (codes == codes[0, 0]).all():
        return float("nan")
    counts, _ = inter_rater.aggregate_raters(codes)
    return float(inter_rater.fleiss_kappa(counts, method="fleiss"))
