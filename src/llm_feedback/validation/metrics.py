"""Meta-evaluation metrics of pairwise judging in both orders, as LLMBar defines them.

Input: a verdict frame (see `verdicts`): `instance_id`, `order` ("original" | "swapped"),
`verdict` ("A" | "B" | "tie" | None, ORIGINAL labels) or `p_a` / `p_b` / `p_tie`,
optional `replicate`, and `gold`, `len_a`, `len_b`, optional `category`. A unit is one
replicate of an instance, judged in one order or both; a verdict is unreadable when its
call failed or its reply could not be read (None, or NaN probabilities).

Metrics (`metric` column; shares in [0, 1]):

- `accuracy_original_order`: share of original-order verdicts equal to the gold (an
  unreadable verdict is a verdict that is not right, so the denominator is every call);
- `accuracy_swapped_order`: the same for the swapped order;
- `accuracy`: the average of the two (LLMBar's "correct_average");
- `accuracy_both_orders`: share of units right in both orders;
- `positional_agreement`: share of units with the same verdict in both orders (LLMBar's
  "equal"; a tie in both counts, an unreadable order does not);
- `first_shown_share`: share of readable verdicts for the response shown first (A in the
  original order, B in the swapped), and `gold_first_shown_share`: the gold's own share
  over the same calls (0.5 when both orders are present and there are no gold ties);
- `longer_share`: share of readable verdicts, on items whose responses differ in length
  (characters), for the longer response; `gold_longer_share`: how often the gold is the
  longer one on the same calls, so a length bias is judged against the data;
- `tie_rate`: share of readable verdicts that are "tie";
- `unreadable_share` (and `unreadable_count`, no interval): calls without a verdict;
- `cohen_kappa`: Cohen's kappa of the readable verdicts (both orders) against the gold.

Two conventions for unreadable verdicts, named apart. The five accuracy and agreement
metrics above are LLMBar's own figures, over ALL items: a call without a verdict counts as
wrong, a unit with an unreadable order as not position-consistent (LLaMA2 on GPTInst: 67
of 92 with one verdict-less item). Each also comes over the readable verdicts only, with
the suffix `_readable`: `accuracy_original_order_readable`,
`accuracy_swapped_order_readable` (right over readable calls of the order), `accuracy_readable`
(their average), `accuracy_both_orders_readable` and `positional_agreement_readable` (over
the units readable in both orders). With no unreadable verdict the two are equal; with no
readable one the readable-only figures are NaN (n 0).

With probabilities, each count is its expectation (orders independent). `n` is the number
of calls (or units, for the both-order metrics) a rate is over. Intervals: the clustered
bootstrap of `llm_feedback.stats.intervals`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from llm_feedback.core.errors import InputError, require_columns
from llm_feedback.stats.intervals import cluster_sums, ratio, resample_matrix
from llm_feedback.validation.kappa import cohen_kappa_of_tables
from llm_feedback.validation.metric_table import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    categories,
    metric_row,
    metric_table,
)
from llm_feedback.validation.verdicts import ORIGINAL, SWAPPED, VERDICTS

READABLE = "_readable"
# LLMBar's all-items figures that also come over the readable verdicts only.
ALL_ITEMS_METRICS = (
    "accuracy_original_order",
    "accuracy_swapped_order",
    "accuracy",
    "accuracy_both_orders",
    "positional_agreement",
)
READABLE_METRICS = tuple(f"{metric}{READABLE}" for metric in ALL_ITEMS_METRICS)
PAIRWISE_METRICS = (
    "accuracy_original_order",
    "accuracy_swapped_order",
    "accuracy",
    "accuracy_both_orders",
    "positional_agreement",
    "first_shown_share",
    "gold_first_shown_share",
    "longer_share",
    "gold_longer_share",
    "tie_rate",
    "unreadable_share",
    "unreadable_count",
    "cohen_kappa",
    *READABLE_METRICS,
)
_A, _B, _TIE = range(3)
_K = len(VERDICTS)


def verdict_probabilities(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(rows x 3 probabilities of A, B, tie; readable mask): one-hot for `verdict`.

    Args:
        frame: verdicts with a `verdict` column, or `p_a`, `p_b`, `p_tie`.

    Returns:
        (the probabilities, rows x 3; whether each row is readable).
    """
    if "verdict" in frame.columns:
        labels = frame["verdict"].astype(object).tolist()
        probabilities = np.zeros((len(labels), _K))
        for row, label in enumerate(labels):
            if label in VERDICTS:
                probabilities[row, VERDICTS.index(label)] = 1.0
        return probabilities, probabilities.sum(axis=1) > 0
    require_columns(frame, ["p_a", "p_b", "p_tie"], "verdicts (without a verdict column)")
    probabilities = frame[["p_a", "p_b", "p_tie"]].to_numpy(dtype="float64")
    readable = np.isfinite(probabilities).all(axis=1)
    return np.where(readable[:, None], probabilities, 0.0), readable


class _Units:
    """Per-unit arrays: probabilities, readable and present masks for each order; gold and
    longer response one-hot; the cluster (instance) code of each unit."""

    def __init__(self, verdicts: pd.DataFrame) -> None:
        frame = verdicts.copy()
        if "replicate" not in frame.columns:
            frame["replicate"] = 0
        duplicated = frame.duplicated(["instance_id", "replicate", "order"])
        if duplicated.any():
            row = frame[duplicated].iloc[0]
            raise InputError(
                f"verdicts: instance_id {row['instance_id']!r}, replicate {row['replicate']}, "
                f"order {row['order']!r} appears twice"
            )
        units = frame[["instance_id", "replicate"]].drop_duplicates().reset_index(drop=True)
        unit_of = {
            key: n
            for n, key in enumerate(zip(units["instance_id"], units["replicate"], strict=True))
        }
        codes = np.array(
            [unit_of[key] for key in zip(frame["instance_id"], frame["replicate"], strict=True)]
        )
        probabilities, readable = verdict_probabilities(frame)
        self.n = len(units)
        self.p, self.readable, self.present = {}, {}, {}
        for order in (ORIGINAL, SWAPPED):
            rows = (frame["order"] == order).to_numpy()
            self.p[order] = np.zeros((self.n, _K))
            self.p[order][codes[rows]] = probabilities[rows]
            self.readable[order] = np.zeros(self.n)
            self.readable[order][codes[rows]] = readable[rows]
            self.present[order] = np.zeros(self.n)
            self.present[order][codes[rows]] = 1.0
        first = frame.drop_duplicates(["instance_id", "replicate"]).reset_index(drop=True)
        gold = first["gold"].astype(object).tolist()
        bad = [g for g in gold if g not in VERDICTS]
        if bad:
            raise InputError(f"verdicts, column 'gold': must be A, B or tie, got {bad[0]!r}")
        self.gold = np.eye(_K)[[VERDICTS.index(g) for g in gold]]
        len_a = first["len_a"].to_numpy(dtype="float64")
        len_b = first["len_b"].to_numpy(dtype="float64")
        self.longer = np.zeros((self.n, _K))
        self.longer[len_a > len_b, _A] = 1.0
        self.longer[len_b > len_a, _B] = 1.0
        self.cluster, instances = pd.factorize(first["instance_id"])
        self.n_clusters = len(instances)


def _sums(units: _Units) -> tuple[list[str], np.ndarray]:
    """Names and the (units x k) matrix of every numerator and denominator."""
    p, readable, present = units.p, units.readable, units.present
    o, s = ORIGINAL, SWAPPED
    gold, longer = units.gold, units.longer
    both = present[o] * present[s]
    unequal = longer.sum(axis=1)
    columns = {
        "right_o": (p[o] * gold).sum(axis=1),
        "calls_o": present[o],
        "right_s": (p[s] * gold).sum(axis=1),
        "calls_s": present[s],
        "right_both": (p[o] * gold).sum(axis=1) * (p[s] * gold).sum(axis=1) * both,
        "agree": (p[o] * p[s]).sum(axis=1) * both,
        "both": both,
        "first": p[o][:, _A] + p[s][:, _B],
        "readable": readable[o] + readable[s],
        "gold_first": gold[:, _A] * present[o] + gold[:, _B] * present[s],
        "calls": present[o] + present[s],
        "longer": ((p[o] + p[s]) * longer).sum(axis=1),
        "readable_unequal": (readable[o] + readable[s]) * unequal,
        "gold_longer": (gold * longer).sum(axis=1) * (readable[o] + readable[s]),
        "ties": p[o][:, _TIE] + p[s][:, _TIE],
        "unreadable": present[o] - readable[o] + present[s] - readable[s],
        "readable_o": readable[o],
        "readable_s": readable[s],
        "readable_both": readable[o] * readable[s],
    }
    # Expected confusion counts (gold x verdict) of the readable calls, for kappa.
    confusion = gold[:, :, None] * (p[o] + p[s])[:, None, :]
    names = [*columns, *(f"confusion_{g}{k}" for g in range(_K) for k in range(_K))]
    matrix = np.column_stack([*columns.values(), confusion.reshape(units.n, _K * _K)])
    return names, matrix


def _values(names: list[str], sums: np.ndarray) -> dict[str, np.ndarray]:
    """Every metric from (..., k) sums, vectorised over resamples."""
    get = dict(zip(names, np.moveaxis(sums, -1, 0), strict=True))
    original = ratio(get["right_o"], get["calls_o"])
    swapped = ratio(get["right_s"], get["calls_s"])
    original_readable = ratio(get["right_o"], get["readable_o"])
    swapped_readable = ratio(get["right_s"], get["readable_s"])
    confusion = np.stack([get[f"confusion_{g}{k}"] for g in range(_K) for k in range(_K)], -1)
    return {
        "accuracy_original_order": original,
        "accuracy_swapped_order": swapped,
        "accuracy": _average(original, swapped),
        "accuracy_both_orders": ratio(get["right_both"], get["both"]),
        "positional_agreement": ratio(get["agree"], get["both"]),
        "first_shown_share": ratio(get["first"], get["readable"]),
        "gold_first_shown_share": ratio(get["gold_first"], get["calls"]),
        "longer_share": ratio(get["longer"], get["readable_unequal"]),
        "gold_longer_share": ratio(get["gold_longer"], get["readable_unequal"]),
        "tie_rate": ratio(get["ties"], get["readable"]),
        "unreadable_share": ratio(get["unreadable"], get["calls"]),
        "cohen_kappa": cohen_kappa_of_tables(confusion.reshape(*confusion.shape[:-1], _K, _K)),
        "accuracy_original_order_readable": original_readable,
        "accuracy_swapped_order_readable": swapped_readable,
        "accuracy_readable": _average(original_readable, swapped_readable),
        "accuracy_both_orders_readable": ratio(get["right_both"], get["readable_both"]),
        "positional_agreement_readable": ratio(get["agree"], get["readable_both"]),
    }


def _average(original: np.ndarray, swapped: np.ndarray) -> np.ndarray:
    """The mean of the two orders' rates, the one present where the other is NaN."""
    return np.where(
        np.isnan(original), swapped, np.where(np.isnan(swapped), original, (original + swapped) / 2)
    )


_DENOMINATORS = {
    "accuracy_original_order": "calls_o",
    "accuracy_swapped_order": "calls_s",
    "accuracy": "calls",
    "accuracy_both_orders": "both",
    "positional_agreement": "both",
    "first_shown_share": "readable",
    "gold_first_shown_share": "calls",
    "longer_share": "readable_unequal",
    "gold_longer_share": "readable_unequal",
    "tie_rate": "readable",
    "unreadable_share": "calls",
    "cohen_kappa": "readable",
    "accuracy_original_order_readable": "readable_o",
    "accuracy_swapped_order_readable": "readable_s",
    "accuracy_readable": "readable",
    "accuracy_both_orders_readable": "readable_both",
    "positional_agreement_readable": "readable_both",
}


def _table_rows(verdicts: pd.DataFrame, resamples: int, seed: int, category: Any, judge: Any):
    units = _Units(verdicts)
    names, per_unit = _sums(units)
    per_cluster = cluster_sums(units.cluster, per_unit, units.n_clusters)
    point = _values(names, per_cluster.sum(axis=0))
    replicates = _values(names, resample_matrix(units.n_clusters, resamples, seed) @ per_cluster)
    totals = dict(zip(names, per_cluster.sum(axis=0), strict=True))
    rows = []
    for metric in PAIRWISE_METRICS:
        options = {"resamples": resamples, "seed": seed, "category": category, "judge": judge}
        if metric == "unreadable_count":
            rows.append(metric_row(metric, totals["unreadable"], None, totals["calls"], **options))
            continue
        n = round(totals[_DENOMINATORS[metric]])
        rows.append(metric_row(metric, point[metric], replicates[metric], n, **options))
    return rows


def pairwise_metrics(
    verdicts: pd.DataFrame,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    judge: str | None = None,
) -> pd.DataFrame:
    """The long metric table of `verdicts`: every metric over all items (`category` null)
    and per category, each with its clustered bootstrap interval.

    Args:
        verdicts: the verdict frame (module docstring).
        resamples: bootstrap resamples of each interval.
        seed: the bootstrap's seed.
        judge: the judge's name for the `judge` column.

    Returns:
        The long metric table (`metric_table`).
    """
    require_columns(verdicts, ["instance_id", "order", "gold", "len_a", "len_b"], "verdicts")
    if verdicts.empty:
        raise InputError("verdicts: no rows")
    rows: list[dict[str, Any]] = []
    for category in categories(verdicts):
        subset = verdicts if category is None else verdicts[verdicts["category"] == category]
        rows += _table_rows(subset, resamples, seed, category, judge)
    return metric_table(rows)


def metric_value(table: pd.DataFrame, metric: str, category: str | None = None) -> float:
    """The value of one metric of a metric table (over all items by default).

    Args:
        table: a metric table.
        metric: the metric's name.
        category: the category (None: over all items).

    Returns:
        The value; KeyError unless exactly one row matches.
    """
    rows = table[table["metric"] == metric]
    rows = rows[rows["category"].isna()] if category is None else rows[rows["category"] == category]
    if len(rows) != 1:
        raise KeyError(f"{metric} ({category}): {len(rows)} rows")
    return float(rows["value"].iloc[0])
