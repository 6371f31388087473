"""The long metric table of judge validation, its rows filled from bootstrap replicates.

The resampling itself is `llm_feedback.stats.intervals` (the one clustered bootstrap every
report uses): every validation statistic is a function of sums over instances
(numerators, denominators, confusion counts, weighted moments), so one resample is a
vector of instance counts and every resampled sum a matrix product, both orders and all
replicates of an instance moving together. The interval is the percentile interval of the
resampled values (NaN resamples, e.g. with no item of a kind, left out).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from llm_feedback.stats.intervals import DEFAULT_CONFIDENCE, percentile_interval
from llm_feedback.storage.schema import JUDGE_VALIDATION_COLUMN_TYPES

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 0
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
    """How an interval was computed, as the table's `ci_method` says it.

    Args:
        resamples: the bootstrap's resamples.
        seed: its seed.

    Returns:
        The description, naming both.
    """
    return f"cluster bootstrap percentile 95% (instances; {resamples} resamples, seed {seed})"


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
    """One row of the metric table; `replicates` None: a count, no interval.

    Args:
        metric: the metric's name.
        value: its value.
        replicates: its bootstrap replicates (None: no interval).
        n: the calls or units it is over.
        resamples: the bootstrap's resamples.
        seed: its seed.
        category: the category (None: all items).
        judge: the judge's name.

    Returns:
        The row, with the interval from the replicates.
    """
    if replicates is None:
        low = high = float("nan")
        method, count = None, 0
    else:
        lows, highs = percentile_interval(replicates, DEFAULT_CONFIDENCE)
        low, high = float(lows[0]), float(highs[0])
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
    """The long metric table, typed.

    Args:
        rows: rows of `metric_row`.

    Returns:
        The table, with its columns typed.
    """
    # The dtypes of judge_validation's columns of the same names: one declaration.
    dtypes = {column: JUDGE_VALIDATION_COLUMN_TYPES[column] for column in METRIC_COLUMNS}
    return pd.DataFrame(rows, columns=list(METRIC_COLUMNS)).astype(dtypes)


def categories(frame: pd.DataFrame) -> list[Any]:
    """None (all items) first, then every category present, in order of appearance.

    Args:
        frame: a frame, with or without a `category` column.

    Returns:
        None, then the categories.
    """
    if "category" not in frame.columns:
        return [None]
    present = [c for c in dict.fromkeys(frame["category"]) if isinstance(c, str)]
    return [None, *present]
