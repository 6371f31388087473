"""A binary judge's true positive and true negative rates against the gold, with Wilson
intervals: the card's `tpr` and `tnr` rows, which a judge requirement can name (e.g. both
lower bounds at least 0.7, as calibrated-evaluation kits gate a pass/fail judge).

Where a judge is binary:

- pairwise: positive is "the first response (`A`, LLMBar's output_1) is the better one".
  TPR is the share of calls on gold-`A` items that say `A`, TNR the share on gold-`B` items
  that say `B`; a tie or an unreadable verdict is a miss either way (as the all-items
  accuracy counts it); items whose gold is a tie are left out. With probabilities
  (`p_a`, `p_b`) each call counts its probability of the right verdict.
- pointwise: where every readable judge score and every gold score is 0 or 1 (pass/fail);
  positive is 1. An unreadable score is a miss. Other scales get no rows.

An item's calls (both orders, replicates) are not independent: each item counts once, with
the share of its calls that are right, and the Wilson interval is over items (fractional
counts), so the two orders of one item do not pass for two items. `n` is the items.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from statsmodels.stats.proportion import proportion_confint

from llm_feedback.stats.intervals import DEFAULT_CONFIDENCE
from llm_feedback.validation.metric_table import categories, metric_table
from llm_feedback.validation.metrics import verdict_probabilities
from llm_feedback.validation.verdicts import VERDICTS

BINARY_METRICS = ("tpr", "tnr")
CI_METHOD = "wilson 95% (items)"


def _rows(hits: pd.Series, items: pd.Series, positive: np.ndarray, category: Any, judge: Any):
    """The tpr and tnr rows: `hits` each call's (expected) rightness, `items` its item,
    `positive` whether its gold is positive."""
    rows = []
    for metric, mask in zip(BINARY_METRICS, (positive, ~positive), strict=True):
        per_item = hits[mask].groupby(items[mask], sort=False).mean()
        total = len(per_item)
        value = low = high = float("nan")
        if total:
            count = float(per_item.sum())
            value = count / total
            low, high = proportion_confint(
                count, total, alpha=1 - DEFAULT_CONFIDENCE, method="wilson"
            )
        rows.append(
            {
                "judge": judge,
                "metric": metric,
                "value": value,
                "ci_low": float(low),
                "ci_high": float(high),
                "ci_method": CI_METHOD if total else None,
                "resamples": 0,
                "n": total,
                "category": category,
            }
        )
    return rows


def pairwise_rates(verdicts: pd.DataFrame, *, judge: str | None = None) -> pd.DataFrame:
    """TPR and TNR of a pairwise judge (positive: `A` is better), over all items and per
    category.

    Args:
        verdicts: a verdict frame (`verdicts`: `instance_id`, `verdict` or `p_a` / `p_b` /
            `p_tie`, `gold`, optional `category`), verdicts in the ORIGINAL labels.
        judge: the judge's name for the rows.

    Returns:
        A metric table (`metric_table.METRIC_COLUMNS`), `tpr` and `tnr` per category; none
        when no item has a gold `A` or `B`.
    """
    decided = verdicts[verdicts["gold"].isin(("A", "B"))].reset_index(drop=True)
    if decided.empty:
        return metric_table([])
    probabilities, _ = verdict_probabilities(decided)
    positive = (decided["gold"] == "A").to_numpy()
    # The probability of the gold's verdict; an unreadable call's probabilities are all 0.
    right = np.where(
        positive, probabilities[:, VERDICTS.index("A")], probabilities[:, VERDICTS.index("B")]
    )
    hits = pd.Series(right, index=decided.index)
    rows: list[dict[str, Any]] = []
    for category in categories(decided):
        mask = np.ones(len(decided), bool) if category is None else decided["category"] == category
        mask = np.asarray(mask, dtype=bool)
        rows += _rows(hits[mask], decided["instance_id"][mask], positive[mask], category, judge)
    return metric_table(rows)


def is_binary_scale(scores: pd.DataFrame) -> bool:
    """Whether every readable judge score and every gold score is 0 or 1.

    Args:
        scores: the judge's `score` and the `gold_score` per item.

    Returns:
        True when both are binary (and there is at least one value).
    """
    values = pd.concat(
        [pd.to_numeric(scores["score"], errors="coerce"), scores["gold_score"]]
    ).dropna()
    return bool(len(values)) and bool(values.isin([0.0, 1.0]).all())


def pointwise_rates(scores: pd.DataFrame, *, judge: str | None = None) -> pd.DataFrame:
    """TPR and TNR of a pass/fail judge (positive: 1), over all items and per category.

    Args:
        scores: `instance_id`, `score` (the judge's, NaN when unreadable), `gold_score`,
            optional `category`.
        judge: the judge's name for the rows.

    Returns:
        A metric table of `tpr` and `tnr` per category; none unless the scale is 0/1.
    """
    if scores.empty or not is_binary_scale(scores):
        return metric_table([])
    scores = scores.reset_index(drop=True)
    judged = pd.to_numeric(scores["score"], errors="coerce").to_numpy(dtype="float64")
    positive = (scores["gold_score"] == 1).to_numpy()
    hits = pd.Series((judged == np.where(positive, 1.0, 0.0)).astype("float64"))
    rows: list[dict[str, Any]] = []
    for category in categories(scores):
        mask = np.ones(len(scores), bool) if category is None else scores["category"] == category
        mask = np.asarray(mask, dtype=bool)
        rows += _rows(hits[mask], scores["instance_id"][mask], positive[mask], category, judge)
    return metric_table(rows)
