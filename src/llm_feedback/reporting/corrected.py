"""The report's section of figures corrected by human labels: each model's mean rating per
aspect, and its win rate against the baseline, as the judge gave it and as
prediction-powered inference corrects it with the labelled slice
(`validation.annotate_labels.corrected_ratings`), with the labels-only figure and the
number of labels, every figure named by its estimator."""

from __future__ import annotations

import numpy as np
import pandas as pd

from llm_feedback.reporting.markdown_escape import code_span, markdown_text

_SHOWN = ("judge", "prediction_powered", "labels_only")


def _cell(row: pd.Series | None) -> str:
    if row is None:
        return ""
    if row["status"] != "ok" or not np.isfinite(float(row["estimate"])):
        return f"— ({markdown_text(row['status'])})"
    return f"{row['estimate']:.2f} [{row['ci_low']:.2f}, {row['ci_high']:.2f}]"


def corrected_section(
    estimates: pd.DataFrame, labels_file: str | None, unmatched: int = 0, no_aspect: int = 0
) -> str:
    """The section as Markdown; empty when no labels were given.

    Args:
        estimates: `corrected_ratings` rows (model, aspect, estimator, estimate, ...).
        labels_file: the labels file (`report.labels.path`), None when none is set.
        unmatched: labels that named no completion of this run.
        no_aspect: score labels without an aspect (not the annotate judge's figure).

    Returns:
        The section, with a blank line before it.
    """
    if labels_file is None:
        return ""
    lines = ["", "## Corrected by human labels", ""]
    notes = []
    if unmatched:
        notes.append(f"{unmatched} labels name no completion of this run and are left out")
    if no_aspect:
        notes.append(f"{no_aspect} scores without an aspect are left out")
    note = f" ({'; '.join(notes)})" if notes else ""
    if estimates.empty:
        lines.append(
            f"No label of {code_span(labels_file)} matches this run's ratings{note}: no "
            "figure is corrected."
        )
        return "\n".join(lines) + "\n"
    ratings = estimates[estimates["metric"] == "mean_rating"]
    lines += [
        f"Labels from {code_span(labels_file)}{note}. Each figure as the judge gave it "
        "(`judge`: its interval covers sampling noise only), corrected by the labelled "
        "items (`prediction_powered`: PPI++, the judge's figure plus its measured error; "
        "its interval covers the judge's errors too) and from the labels alone "
        "(`labels_only`), with 95% intervals. The corrections assume the labelled items "
        "were picked at random among the model's.",
        "",
    ]
    if (estimates["selection"] == "probability_weighted").any():
        lines += [
            "Where the viewer's review queue drew the labelled prompts with unequal "
            "probabilities, `prediction_powered` weights each label by one over its "
            "probability (active inference), which assumes every completion drawn was "
            "scored and every prompt drawn compared; no labels-only, Rogan-Gladen, TPR or "
            "TNR figure is given there (they assume a uniform draw).",
            "",
        ]
    if len(ratings):
        lines += [
            "Mean rating per model and aspect (labels: the completions scored on it; rated: "
            "the completions the judge rated):",
            "",
            "| model | aspect | judge | prediction_powered | labels_only | labels | rated |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for (model, aspect), group in ratings.groupby(["model", "aspect"], sort=True):
            by = _by_estimator(group)
            cells = " | ".join(_cell(by.get(name)) for name in _SHOWN)
            lines.append(
                f"| {markdown_text(model)} | {markdown_text(aspect)} | {cells} | "
                f"{_count(by, 'prediction_powered', 'n_labels')} | "
                f"{_count(by, 'judge', 'n_judged')} |"
            )
        lines.append("")
    lines += _win_lines(estimates)
    return "\n".join(lines).rstrip() + "\n"


def _by_estimator(group: pd.DataFrame) -> dict[str, pd.Series]:
    return {row["estimator"]: row for _, row in group.iterrows()}


def _count(by: dict[str, pd.Series], estimator: str, column: str) -> int:
    row = by.get(estimator)
    return int(row[column]) if row is not None else 0


def _win_lines(estimates: pd.DataFrame) -> list[str]:
    wins = estimates[estimates["metric"].isin(("win_rate", "tpr", "tnr"))]
    if wins.empty:
        return []
    lines = [
        "Win rate against the baseline, a prompt won, tied (half) or lost by the mean "
        "rating over aspects (labels: the prompts where reviewers compared the two; "
        "rogan_gladen, TPR and TNR where neither the judge nor the reviewers saw a tie: "
        "the rate corrected by the judge's true positive and true negative rates, Wilson "
        "intervals):",
        "",
        "| model | baseline | judge | prediction_powered | labels_only | rogan_gladen | TPR "
        "| TNR | labels | prompts |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (model, baseline), group in wins.groupby(["model", "baseline"], sort=True):
        rate = _by_estimator(group[group["metric"] == "win_rate"])
        cells = [_cell(rate.get(name)) for name in (*_SHOWN, "rogan_gladen")]
        for metric in ("tpr", "tnr"):
            found = group[group["metric"] == metric]
            cells.append(_cell(found.iloc[0]) if len(found) else "")
        lines.append(
            f"| {markdown_text(model)} | {markdown_text(baseline)} | "
            + " | ".join(cells)
            + f" | {_count(rate, 'prediction_powered', 'n_labels')} | "
            f"{_count(rate, 'judge', 'n_judged')} |"
        )
    lines.append("")
    return lines
