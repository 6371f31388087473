"""The per-model overall-score table, read a record batch at a time.

Means are ratios of sums (`stats.intervals.GroupedMeans`); the correlations take a second
pass over the table (`stats.correlation_tally`). Memory grows with the models and the
distinct score values, never with the rows.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from llm_feedback.core.errors import require_columns
from llm_feedback.reporting._frames import (
    Table,
    as_float,
    typed_frame,
)
from llm_feedback.reporting.uncertainty import DEFAULT_BOOTSTRAP, Bootstrap
from llm_feedback.stats.correlation_tally import CorrelationTally
from llm_feedback.stats.intervals import GroupedMeans, bootstrap_method
from llm_feedback.storage.parquet_source import table_batches
from llm_feedback.storage.schema import MODEL_SCORE_METRICS_COLUMN_TYPES

MEAN_SCORES = {
    "mean_overall_original": "overall_score_original",
    "mean_overall_fixed": "overall_score_fixed",
    "mean_fine_grained": "fine_grained_score",
}
SCORE_COLUMNS = ["fine_grained_score", "overall_score_original", "overall_score_fixed"]
PAIRED = ("overall_score_fixed", "fine_grained_score")
KINDS = ("pearson", "spearman")


def model_score_metrics(
    overall_scores: Table, bootstrap: Bootstrap = DEFAULT_BOOTSTRAP
) -> pd.DataFrame:
    """Per model: the overall score before and after the score fix, the fine-grained score,
    and how well the (fixed) overall score agrees with the fine-grained one.

    Correlations use the completions that have both scores (`n_paired`); they are NaN with
    fewer than 3 pairs or when either score is constant. Every mean and correlation has
    its interval in `<column>_ci_low` / `<column>_ci_high`, bootstrapped over prompts
    (`ci_method`). A table on disk is read a record batch at a time.

    Columns: model, n, mean_overall_original, mean_overall_fixed, mean_fine_grained,
    n_paired, pearson_overall_vs_fine_grained, spearman_overall_vs_fine_grained, their
    intervals, ci_method.

    Args:
        overall_scores: The scores per completion, in memory or on disk.
        bootstrap: The bootstrap settings of the intervals.

    Returns:
        The table, one row per model.

    Raises:
        InputError: A required column is missing.
    """
    require_columns(overall_scores, ["prompt_id", "model", *SCORE_COLUMNS], "overall_scores")
    means = {
        mean: GroupedMeans(column, "prompt_id", ["model"], **bootstrap.kwargs)
        for mean, column in MEAN_SCORES.items()
    }
    rows: Counter = Counter()
    correlations = {kind: CorrelationTally(kind, **bootstrap.kwargs) for kind in KINDS}
    for scores in _batches(overall_scores):
        rows.update(scores["model"].value_counts().to_dict())
        for accumulator in means.values():
            accumulator.add(scores)
        for tally in correlations.values():
            tally.count(scores["model"].to_numpy(), *_paired(scores))
    if not rows:
        return typed_frame(None, MODEL_SCORE_METRICS_COLUMN_TYPES)
    for scores in _batches(overall_scores):
        for tally in correlations.values():
            tally.add(scores["model"].to_numpy(), *_paired(scores), scores["prompt_id"])
    models = sorted(rows)
    table = pd.DataFrame({"model": models, "n": [rows[m] for m in models]})
    for mean, accumulator in means.items():
        found = accumulator.result().rename(
            columns={"estimate": mean, "ci_low": f"{mean}_ci_low", "ci_high": f"{mean}_ci_high"}
        )
        table = table.merge(found.drop(columns=["n", "method"]), on="model", how="left")
    for kind, tally in correlations.items():
        found = tally.result()
        name = f"{kind}_overall_vs_fine_grained"
        none = (0, np.nan, np.nan, np.nan)
        values = [found.get(model, none) for model in models]
        table["n_paired"] = [value[0] for value in values]
        table[name] = [value[1] for value in values]
        table[f"{name}_ci_low"] = [value[2] for value in values]
        table[f"{name}_ci_high"] = [value[3] for value in values]
    table["ci_method"] = bootstrap_method(bootstrap.n_resamples)
    return typed_frame(table, MODEL_SCORE_METRICS_COLUMN_TYPES)


def _batches(overall_scores: Table):
    for batch in table_batches(overall_scores, ["prompt_id", "model", *SCORE_COLUMNS]):
        scores = pd.DataFrame({column: as_float(batch[column]) for column in SCORE_COLUMNS})
        scores["model"] = batch["model"].to_numpy()
        scores["prompt_id"] = batch["prompt_id"].to_numpy()
        yield scores


def _paired(scores: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    return tuple(scores[column].to_numpy(dtype="float64") for column in PAIRED)
