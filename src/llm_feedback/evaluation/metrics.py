"""The long-format `eval_metrics` table from the judgments."""

from __future__ import annotations

from typing import Any

import pandas as pd

from llm_feedback.evaluation.judging import EXACT_MATCH, INVALID
from llm_feedback.judges import (
    aggregate_scores,
    pairwise_win_rates,
    pass_at_k_table,
    weighted_accuracy,
)
from llm_feedback.params.evaluate import REFERENCE_MODES, EvaluateParams
from llm_feedback.schema import EVAL_METRICS_COLUMN_TYPES, EVAL_SAMPLE_KEY


def _metric(
    model: str,
    metric: str,
    value: float,
    *,
    n: int,
    n_missing: int = 0,
    criterion: str | None = None,
    k: int | None = None,
) -> dict[str, Any]:
    return {
        "model": model,
        "metric": metric,
        "criterion": criterion,
        "k": k,
        "value": value,
        "n": n,
        "n_missing": n_missing,
    }


def _weighted_metrics(
    part: pd.DataFrame, config: EvaluateParams, criterion: str | None
) -> list[dict[str, Any]]:
    """Accuracy (binary) or normalised mean (0-100) with each response's weight."""
    low, high = config.scale
    fraction = (part["score"] - low) / (high - low)
    if config.missing == "zero":
        fraction = fraction.fillna(0.0)
    weights = part["weight"].fillna(1.0)
    binary = config.mode == "binary"
    rows = []
    for model, index in part.groupby("model", sort=True).groups.items():
        value = weighted_accuracy(fraction[index], weights[index])
        rows.append(
            _metric(
                model,
                "weighted_accuracy" if binary else "weighted_normalised_mean",
                value if binary else 100.0 * value,
                n=int(fraction[index].notna().sum()),
                n_missing=int(part.loc[index, "score"].isna().sum()),
                criterion=criterion,
            )
        )
    return rows


def _pass_at_k_metrics(judged: pd.DataFrame, config: EvaluateParams) -> list[dict[str, Any]]:
    items = judged.assign(item=judged["instance_id"] + "#" + judged["turn"].astype("string"))
    table = pass_at_k_table(items, "item", "score", config.ks, missing=config.missing)
    return [
        _metric(
            row.model,
            "pass_at_k",
            row.pass_at_k,
            n=row.n_instances,
            n_missing=row.n_missing,
            k=row.k,
        )
        for row in table.itertuples()
    ]


def _pointwise_metrics(judgments: pd.DataFrame, config: EvaluateParams) -> list[dict[str, Any]]:
    low, high = config.scale
    invalid = judgments["parse_status"] == INVALID
    rows = []
    if config.mode in REFERENCE_MODES:
        rows += [
            _metric(model, "n_invalid", float(group_invalid.sum()), n=len(group_invalid))
            for model, group_invalid in invalid.groupby(judgments["model"], sort=True)
        ]
    judged = judgments[~invalid]
    if config.mode == "binary":
        exact = judged["parse_status"] == EXACT_MATCH
        rows += [
            _metric(model, "n_exact_match", float(group.sum()), n=len(group))
            for model, group in exact.groupby(judged["model"], sort=True)
        ]
    parts = [(None, judged)]
    if config.mode == "rubric":
        parts = [(name, judged[judged["criterion"] == name]) for name in config.rubric] + parts
    for criterion, part in parts:
        if part.empty:
            continue
        summary = aggregate_scores(part, "score", low=low, high=high, missing=config.missing)
        for row in summary.itertuples():
            for metric in ("mean", "normalised_mean"):
                rows.append(
                    _metric(
                        row.model,
                        metric,
                        getattr(row, metric),
                        n=row.n,
                        n_missing=row.n_missing,
                        criterion=criterion,
                    )
                )
        if part["weight"].notna().any():
            rows += _weighted_metrics(part, config, criterion)
    if config.mode == "binary" and not judged.empty:
        rows += _pass_at_k_metrics(judged, config)
    # A rubric call makes one row per criterion, each with the call's re-asks: count it once.
    calls = judgments.drop_duplicates(list(EVAL_SAMPLE_KEY))
    rows += [
        _metric(model, "n_reasks", float(group.sum()), n=len(group))
        for model, group in calls["reasks"].groupby(calls["model"], sort=True)
    ]
    return rows


def _pairwise_metrics(judgments: pd.DataFrame) -> list[dict[str, Any]]:
    rows = []
    table = pairwise_win_rates(judgments, "model_a", "model_b", "outcome")
    for row in table.itertuples():
        rows.append(_metric(row.model, "win_rate", row.win_rate, n=row.n, n_missing=row.n_missing))
        rows += [
            _metric(row.model, name, float(getattr(row, name)), n=row.n, n_missing=row.n_missing)
            for name in ("wins", "losses", "ties")
        ]
        involved = (judgments["model_a"] == row.model) | (judgments["model_b"] == row.model)
        inconsistent = involved & (judgments["consistent"] == False)  # noqa: E712 - nullable
        rows.append(
            _metric(
                row.model,
                "n_inconsistent",
                float(inconsistent.sum()),
                n=int(involved.sum()),
                n_missing=row.n_missing,
            )
        )
        rows.append(
            _metric(
                row.model,
                "n_reasks",
                float(judgments.loc[involved, "reasks"].sum()),
                n=int(involved.sum()),
            )
        )
    return rows


def compute_metrics(judgments: pd.DataFrame, config: EvaluateParams) -> pd.DataFrame:
    """Long-format metrics: one row per (model, metric, criterion, k).

    Pointwise modes: `mean` and `normalised_mean` (0-100) per model (and per criterion
    in rubric mode), `weighted_accuracy` / `weighted_normalised_mean` when weights are
    given; binary and score_0_5 add `n_invalid` (unknown references), binary also
    `n_exact_match` and `pass_at_k` for each k (default 1..replicates). Pairwise:
    `win_rate`, `wins`, `losses`, `ties`, `n_inconsistent`. Every mode: `n_reasks`, the
    judge's re-asks of unreadable replies over the model's judgments (pairwise: over the
    pairs it is in, both orders).
    `n_missing` counts the judgments without a usable value (unparsed replies, failed
    calls, missing responses): as the scale minimum with `missing: zero`, left out with
    `exclude`; invalid judgments are never counted.
    """
    if config.mode == "pairwise":
        rows = _pairwise_metrics(judgments)
    else:
        rows = _pointwise_metrics(judgments, config)
    metrics = pd.DataFrame(rows, columns=list(EVAL_METRICS_COLUMN_TYPES))
    metrics["mode"] = config.mode
    return metrics.astype(EVAL_METRICS_COLUMN_TYPES)
