"""A pointwise run's means corrected by a slice of gold scores: `eval_metrics` rows.

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
"""

from __future__ import annotations

import importlib.util
import logging
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
    binary_estimates,
    mean_estimates,
)
from llm_feedback.storage.schema import EVAL_METRICS_COLUMN_TYPES

logger = logging.getLogger(__name__)

GOLD = "recorded_score"
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
        for estimate in estimates.itertuples():
            if estimate.estimator == JUDGE:
                continue  # compute_metrics' own row
            ok = estimate.status == OK
            wilson = estimate.metric in _RATES
            rows.append(
                {
                    **group,
                    "model": model,
                    "metric": estimate.metric,
                    "estimator": estimate.estimator,
                    "value": estimate.estimate,
                    "ci_low": estimate.ci_low,
                    "ci_high": estimate.ci_high,
                    "ci_method": ("wilson" if wilson else _METHODS[estimate.estimator])
                    if ok
                    else None,
                    "n": estimate.n_labels if wilson else len(part),
                    "n_missing": 0 if wilson else int(part["score"].isna().sum()),
                    "n_labels": estimate.n_labels,
                }
            )
    return rows


def corrected_metrics(judgments: pd.DataFrame, config: EvaluateParams) -> pd.DataFrame:
    """The prediction-powered and labels-only rows of each model's mean (see the module).

    Args:
        judgments: a pointwise run's `eval_judgments`.
        config: the run's evaluate parameters.

    Returns:
        `eval_metrics` rows; none when the run is pairwise, has no gold slice, or the ppi
        extra is not installed.
    """
    empty = pd.DataFrame(columns=list(EVAL_METRICS_COLUMN_TYPES)).astype(EVAL_METRICS_COLUMN_TYPES)
    if config.kind.compares or not has_gold_slice(judgments):
        return empty
    if "criterion" in judgments.columns and judgments["criterion"].notna().any():
        judgments = judgments[judgments["criterion"].isna()]
    if importlib.util.find_spec("ppi_py") is None:
        logger.warning(
            "evaluate: %d responses have gold scores, but the corrected means need the ppi "
            'extra (pip install -e ".[ppi]"): left out',
            int(judgments[GOLD].notna().sum()),
        )
        return empty
    items = _items(judgments)
    rows = _rows(items, {})
    for column in GROUP_COLUMNS:
        if column in items.columns:
            for label, part in items.groupby(column, sort=True):
                rows += _rows(part, {column: label})
    metrics = pd.DataFrame(rows, columns=list(EVAL_METRICS_COLUMN_TYPES))
    metrics["mode"] = config.mode
    return metrics.astype(EVAL_METRICS_COLUMN_TYPES)
