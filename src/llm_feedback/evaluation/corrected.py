"""A run's means and win rates corrected by a slice of gold labels: `eval_metrics` rows.

When some, not all, of the responses of a pointwise run carry a gold score (the samples'
`recorded_score` / `gold_score`, e.g. people's scores from the viewer on a random slice),
each model's `mean` (over all samples and per category / level, as `compute_metrics`
breaks it down) gets two more rows: `prediction_powered`, the judge's mean corrected by its
error on the slice (PPI++, `stats.prediction_powered`), and `labels_only`, the slice's own
mean, each with its 95% interval and `n_labels`, the gold scores used. The judge's own rows
read `judge` in the `estimator` column (the agreement and validation rows leave it null),
so a reader takes one estimator at a time. The slice is assumed drawn uniformly at random
from the responses.

An item is one response (instance, turn, model): its judge score the mean of its readable
replicates' scores, its gold score the recorded one. A response with no readable score
is left out of the judge's side. Without the `ppi` extra the rows are left out, with a
warning. A run whose every response has a gold score gets none of these rows: there is
nothing for a judge to add. Where every score is 0 or 1 (a pass/fail judge), the rows
add the Rogan-Gladen-corrected pass rate (`mean`, estimator `rogan_gladen`) and the judge's
`tpr` and `tnr` on the slice (estimator `labels_only`, Wilson intervals, `n` the gold
positives or negatives).

A pairwise run whose samples carry gold (`gold`: "A", "B" or "tie") on some, not all, of
its pairs gets the same rows for each model's `win_rate`: an item is one comparison
(instance, turn, model_a, model_b), worth 1 to the model if it won, 0.5 for a tie, 0 if it
lost, by the judge (its replicates' mean) and by the gold, seen from the model's side (the
row's model_a is the pair's first response, "A", as the gold reads it). Where every
instance is one comparison of two responses, the share of pairs whose first response (A,
LLMBar's output_1) is the better, `a_better` (no model), gets its rows too, its judge-only
one among them. With no tie by judge or gold the judge is binary: the Rogan-Gladen rate,
TPR and TNR come as above. Where the labelled pairs carry unequal `selection_probability`
values (a review queue ordered by worth), the uniform estimates are replaced by the
probability-weighted prediction-powered one (`stats.prediction_powered.weighted_estimate`,
`ci_method` `ppi++-weighted`), as the annotate labels' win rates are.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Callable
from typing import Any

import pandas as pd

from llm_feedback.evaluation.config import EvaluateParams
from llm_feedback.evaluation.metrics import GROUP_COLUMNS
from llm_feedback.stats.prediction_powered import (
    JUDGE,
    LABELS_ONLY,
    OK,
    PREDICTION_POWERED,
    ROGAN_GLADEN,
    WEIGHTED,
    binary_estimates,
    mean_estimates,
    weighted_estimate,
)
from llm_feedback.storage.schema import EVAL_METRICS_COLUMN_TYPES

logger = logging.getLogger(__name__)

GOLD = "recorded_score"
PAIR_GOLD = "gold"  # a pairwise run's gold verdict: "A", "B" or "tie"
SELECTION = "selection_probability"  # how a review queue drew a labelled item
A_BETTER = "a_better"  # the share of pairs whose first response (A) is the better
_WON = {"A": 1.0, "tie": 0.5, "B": 0.0}  # model_a's worth in a comparison
_ITEM = ("instance_id", "turn", "model")
_METHODS = {PREDICTION_POWERED: "ppi++", LABELS_ONLY: "t", ROGAN_GLADEN: "delta"}
_RATES = ("tpr", "tnr")  # a binary judge's rates on the slice, with Wilson intervals


def has_gold_slice(judgments: pd.DataFrame) -> bool:
    """Whether some, not all, of the judged responses carry a gold score.

    Args:
        judgments: eval_judgments rows.

    Returns:
        True when the gold covers a part of them.
    """
    if GOLD not in judgments.columns or "score" not in judgments.columns:
        return False
    labelled = judgments[GOLD].notna()
    return bool(labelled.any() and not labelled.all())


def _items(judgments: pd.DataFrame) -> pd.DataFrame:
    keys = [column for column in (*_ITEM, *GROUP_COLUMNS) if column in judgments.columns]
    scores = judgments.assign(score=pd.to_numeric(judgments["score"], errors="coerce"))
    return (
        scores.groupby(keys, dropna=False, sort=True)
        .agg(score=("score", "mean"), gold=(GOLD, "first"))
        .reset_index()
    )


def _is_binary(items: pd.DataFrame) -> bool:
    """Whether every judge score and gold score is 0 or 1 (a pass/fail judge)."""
    values = pd.concat([items["score"], items["gold"]]).dropna()
    return bool(len(values)) and bool(values.isin([0.0, 1.0]).all())


def _estimate_rows(
    estimates: pd.DataFrame, fields: dict[str, Any], n: int, n_missing: int, *, keep_judge: bool
) -> list[dict[str, Any]]:
    """`stats.prediction_powered` estimates as `eval_metrics` rows (`n`, `n_missing`: the
    judged items and those without a judge value; a TPR's or TNR's `n` is its gold count)."""
    # A binary judge's own rate has Wilson's interval (`binary_estimates`), else normal.
    judge_method = "wilson" if (estimates["estimator"] == ROGAN_GLADEN).any() else "normal"
    rows = []
    for estimate in estimates.itertuples():
        if estimate.estimator == JUDGE and not keep_judge:
            continue  # compute_metrics' own row
        ok = estimate.status == OK
        wilson = estimate.metric in _RATES
        if not ok:
            method = None
        elif wilson:
            method = "wilson"
        elif estimate.estimator == JUDGE:
            method = judge_method
        elif estimate.selection == WEIGHTED:
            method = "ppi++-weighted"
        else:
            method = _METHODS[estimate.estimator]
        rows.append(
            {
                **fields,
                "metric": estimate.metric,
                "estimator": estimate.estimator,
                "value": estimate.estimate,
                "ci_low": estimate.ci_low,
                "ci_high": estimate.ci_high,
                "ci_method": method,
                "n": estimate.n_labels if wilson else n,
                "n_missing": 0 if wilson else n_missing,
                "n_labels": None if estimate.estimator == JUDGE else estimate.n_labels,
            }
        )
    return rows


def _rows(items: pd.DataFrame, group: dict[str, Any]) -> list[dict[str, Any]]:
    binary = _is_binary(items)
    rows = []
    for model, part in items.groupby("model", sort=True):
        labelled = part[part["gold"].notna()]
        estimate_with = binary_estimates if binary else mean_estimates
        estimates = estimate_with(
            part["score"].to_numpy(dtype=float),
            labelled["score"].to_numpy(dtype=float),
            labelled["gold"].to_numpy(dtype=float),
            metric="mean",
        )
        rows += _estimate_rows(
            estimates,
            {**group, "model": model},
            len(part),
            int(part["score"].isna().sum()),
            keep_judge=False,
        )
    return rows


def has_pair_gold_slice(judgments: pd.DataFrame) -> bool:
    """Whether some, not all, of a pairwise run's comparisons carry a gold verdict.

    Args:
        judgments: eval_judgments rows.

    Returns:
        True when the gold is a slice.
    """
    if PAIR_GOLD not in judgments.columns or "outcome" not in judgments.columns:
        return False
    labelled = judgments[PAIR_GOLD].notna()
    return bool(labelled.any() and not labelled.all())


def _selection(judgments: pd.DataFrame) -> pd.Series:
    """Each comparison's recorded selection probability (NaN where none was given)."""
    for column in (SELECTION, f"{SELECTION}_a"):
        if column in judgments.columns:
            return pd.to_numeric(judgments[column], errors="coerce")
    return pd.Series(float("nan"), index=judgments.index)


def _comparisons(judgments: pd.DataFrame) -> pd.DataFrame:
    """One row per comparison: model_a's worth in it by the judge (its replicates' mean)
    and by the gold, and the comparison's selection probability."""
    keys = [
        column
        for column in ("instance_id", "turn", "model_a", "model_b", *GROUP_COLUMNS)
        if column in judgments.columns
    ]
    worth = judgments.assign(
        judge=judgments["outcome"].astype(object).map(_WON).astype("float64"),
        gold=judgments[PAIR_GOLD].astype(object).map(_WON).astype("float64"),
        selection=_selection(judgments),
    )
    return (
        worth.groupby(keys, dropna=False, sort=True)
        .agg(judge=("judge", "mean"), gold=("gold", "first"), selection=("selection", "first"))
        .reset_index()
    )


def _pair_estimates(part: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The estimates of the mean worth of `part`'s comparisons (see the module)."""
    labelled = part[part["gold"].notna()]
    values = pd.concat([part["judge"], labelled["gold"]]).dropna()
    binary = bool(len(values)) and bool(values.isin([0.0, 1.0]).all())
    estimate_with = binary_estimates if binary else mean_estimates
    estimates = estimate_with(
        part["judge"].to_numpy(dtype=float),
        labelled["judge"].to_numpy(dtype=float),
        labelled["gold"].to_numpy(dtype=float),
        metric=metric,
    )
    drawn = labelled["selection"]
    if not (len(drawn) and drawn.notna().all() and drawn.nunique() > 1):
        return estimates  # a uniform draw (equal probabilities are one too)
    # Labels drawn unequally: only the weighted estimate stays unbiased.
    weighted = weighted_estimate(
        part["judge"].to_numpy(dtype=float),
        part["gold"].to_numpy(dtype=float),
        part["gold"].notna().to_numpy(),
        part["selection"].where(part["gold"].notna(), 1.0).to_numpy(dtype=float),
        metric=metric,
    )
    return pd.concat([estimates[estimates["estimator"] == JUDGE], weighted], ignore_index=True)


def _pair_rows(comparisons: pd.DataFrame, group: dict[str, Any]) -> list[dict[str, Any]]:
    flipped = comparisons.assign(
        model_a=comparisons["model_b"],
        model_b=comparisons["model_a"],
        judge=1 - comparisons["judge"],
        gold=1 - comparisons["gold"],
    )
    sides = pd.concat([comparisons, flipped], ignore_index=True)
    rows = []
    for model, part in sides.groupby("model_a", sort=True):
        estimates = _pair_estimates(part, "win_rate")
        missing = int(part["judge"].isna().sum())
        rows += _estimate_rows(
            estimates, {**group, "model": model}, len(part), missing, keep_judge=False
        )
    per_instance = comparisons.groupby(["instance_id", "turn"], sort=False).size()
    if len(per_instance) and (per_instance == 1).all():  # two responses an instance
        estimates = _pair_estimates(comparisons, A_BETTER)
        missing = int(comparisons["judge"].isna().sum())
        rows += _estimate_rows(
            estimates, {**group, "model": None}, len(comparisons), missing, keep_judge=True
        )
    return rows


def _overall_and_by_group(
    frame: pd.DataFrame, rows_of: Callable[[pd.DataFrame, dict[str, Any]], list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """`rows_of` over the whole frame, then over each group of every `GROUP_COLUMNS` column
    the frame has."""
    rows = rows_of(frame, {})
    for column in GROUP_COLUMNS:
        if column in frame.columns:
            for label, part in frame.groupby(column, sort=True):
                rows += rows_of(part, {column: label})
    return rows


def corrected_metrics(judgments: pd.DataFrame, config: EvaluateParams) -> pd.DataFrame:
    """The prediction-powered and labels-only rows of each model's mean or win rate (see
    the module).

    Args:
        judgments: a run's `eval_judgments`.
        config: the run's evaluate parameters.

    Returns:
        `eval_metrics` rows; none when the run has no gold slice or the ppi extra is not
        installed.
    """
    empty = pd.DataFrame(columns=list(EVAL_METRICS_COLUMN_TYPES)).astype(EVAL_METRICS_COLUMN_TYPES)
    sliced = has_pair_gold_slice(judgments) if config.kind.compares else has_gold_slice(judgments)
    if not sliced:
        return empty
    if "criterion" in judgments.columns and judgments["criterion"].notna().any():
        judgments = judgments[judgments["criterion"].isna()]
    if importlib.util.find_spec("ppi_py") is None:
        logger.warning(
            "evaluate: %d judgments have gold, but the corrected figures need the ppi extra "
            '(pip install -e ".[ppi]"): left out',
            int(judgments[PAIR_GOLD if config.kind.compares else GOLD].notna().sum()),
        )
        return empty
    if config.kind.compares:
        rows = _overall_and_by_group(_comparisons(judgments), _pair_rows)
    else:
        rows = _overall_and_by_group(_items(judgments), _rows)
    metrics = pd.DataFrame(rows, columns=list(EVAL_METRICS_COLUMN_TYPES))
    metrics["mode"] = config.mode
    return metrics.astype(EVAL_METRICS_COLUMN_TYPES)
