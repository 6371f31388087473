"""The report's section of figures corrected by human labels: each model's mean rating per
aspect as the judge gave it and as prediction-powered inference corrects it with the
labelled slice (`validation.annotate_labels.corrected_ratings`), with the labels-only mean
and the number of labels, every figure named by its estimator."""

from __future__ import annotations

import numpy as np
import pandas as pd

from llm_feedback.markdown_escape import code_span, markdown_text

_SHOWN = ("judge", "prediction_powered", "labels_only")


def _cell(row: pd.Series | None) -> str:
    if row is None:
        return ""
    if row["status"] != "ok" or not np.isfinite(row["estimate"]):
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
            f"No score label of {code_span(labels_file)} rates a completion of this run on "
            f"an aspect{note}: no mean rating is corrected."
        )
        return "\n".join(lines) + "\n"
    lines += [
        f"Labels from {code_span(labels_file)}{note}. Each model's mean rating per aspect as "
        "the judge gave it (`judge`: its interval covers sampling noise only), corrected by "
        "the labelled completions (`prediction_powered`: PPI++, the judge's mean plus its "
        "measured error; its interval covers the judge's errors too) and the labels alone "
        "(`labels_only`), with 95% intervals. The corrections assume the labelled "
        "completions were picked at random among the model's.",
        "",
        "| model | aspect | judge | prediction_powered | labels_only | labels | rated |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (model, aspect), group in estimates.groupby(["model", "aspect"], sort=True):
        by = {row["estimator"]: row for _, row in group.iterrows()}
        cells = [_cell(by.get(name)) for name in _SHOWN]
        powered = by.get("prediction_powered")
        judged = by.get("judge")
        n_labels = int(powered["n_labels"]) if powered is not None else 0
        n_rated = int(judged["n_judged"]) if judged is not None else 0
        lines.append(
            f"| {markdown_text(model)} | {markdown_text(aspect)} | "
            + " | ".join(cells)
            + f" | {n_labels} | {n_rated} |"
        )
    return "\n".join(lines) + "\n"
