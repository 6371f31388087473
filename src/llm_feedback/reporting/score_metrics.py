"""The per-model overall-score table, read a record batch at a time.

Means are ratios of sums (`stats.intervals.GroupedMeans`). A correlation needs two passes
over the table: the first counts each model's paired scores (their means, and each
value's count, from which a value's average rank follows: Spearman's rho of tied scores
without sorting them), the second adds up the centred moments of the scores and of their
ranks, per prompt, into each resample's totals. Memory grows with the models and the
distinct score values, never with the rows.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from llm_feedback.agreement import MIN_CORRELATION_PAIRS
from llm_feedback.parquet_source import table_batches
from llm_feedback.reporting._frames import Table, as_float, require_columns, typed_frame
from llm_feedback.reporting.uncertainty import DEFAULT_BOOTSTRAP, Bootstrap
from llm_feedback.schema import MODEL_SCORE_METRICS_COLUMN_TYPES
from llm_feedback.stats.intervals import (
    GroupedMeans,
    ResampledTotals,
    bootstrap_method,
    cluster_ids,
    cluster_sums,
    pearson_from_sums,
    percentile_interval,
)

MEAN_SCORES = {
    "mean_overall_original": "overall_score_original",
    "mean_overall_fixed": "overall_score_fixed",
    "mean_fine_grained": "fine_grained_score",
}
SCORE_COLUMNS = ["fine_grained_score", "overall_score_original", "overall_score_fixed"]
PAIRED = ("overall_score_fixed", "fine_grained_score")
KINDS = ("pearson", "spearman")
MOMENTS = 6  # n, sum x, sum y, sum x^2, sum y^2, sum xy


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
    """
    require_columns(overall_scores, ["prompt_id", "model", *SCORE_COLUMNS], "overall_scores")
    means = {
        mean: GroupedMeans(column, "prompt_id", ["model"], **bootstrap.kwargs)
        for mean, column in MEAN_SCORES.items()
    }
    rows: Counter = Counter()
    paired: dict[str, _Paired] = {}
    for scores in _batches(overall_scores):
        rows.update(scores["model"].value_counts().to_dict())
        for accumulator in means.values():
            accumulator.add(scores)
        for model, part in _paired(scores).groupby("model", sort=False):
            paired.setdefault(model, _Paired()).count(part)
    if not rows:
        return typed_frame(None, MODEL_SCORE_METRICS_COLUMN_TYPES)
    models = sorted(rows)
    correlations = _correlations(overall_scores, paired, models, bootstrap)
    table = pd.DataFrame(
        {"model": models, "n": [rows[m] for m in models]}
        | {"n_paired": [paired[m].n if m in paired else 0 for m in models]}
    )
    for mean, accumulator in means.items():
        found = accumulator.result().rename(
            columns={"estimate": mean, "ci_low": f"{mean}_ci_low", "ci_high": f"{mean}_ci_high"}
        )
        table = table.merge(found.drop(columns=["n", "method"]), on="model", how="left")
    table = table.merge(correlations, on="model", how="left")
    table["ci_method"] = bootstrap_method(bootstrap.n_resamples)
    return typed_frame(table, MODEL_SCORE_METRICS_COLUMN_TYPES)


def _batches(overall_scores: Table):
    for batch in table_batches(overall_scores, ["prompt_id", "model", *SCORE_COLUMNS]):
        scores = pd.DataFrame({column: as_float(batch[column]) for column in SCORE_COLUMNS})
        scores["model"] = batch["model"].to_numpy()
        scores["prompt_id"] = batch["prompt_id"].to_numpy()
        yield scores


def _paired(scores: pd.DataFrame) -> pd.DataFrame:
    return scores.dropna(subset=list(PAIRED))


class _Paired:
    """A model's paired scores, counted in the first pass: how many, their sums, and each
    value's count (for its average rank)."""

    def __init__(self) -> None:
        self.n = 0
        self.sums = np.zeros(2)
        self.values: tuple[Counter, Counter] = (Counter(), Counter())

    def count(self, part: pd.DataFrame) -> None:
        self.n += len(part)
        for side, column in enumerate(PAIRED):
            self.sums[side] += part[column].sum()
            self.values[side].update(part[column].value_counts().to_dict())

    def ranks(self, side: int) -> pd.Series:
        """Each value's average rank among the model's paired values (ties share it), as
        pandas' `rank()` gives it."""
        counts = pd.Series(self.values[side]).sort_index()
        below = counts.cumsum() - counts
        return below + (counts + 1) / 2

    def centres(self) -> dict[str, tuple[float, float]]:
        mean = self.sums / self.n
        middle = (self.n + 1) / 2  # the mean of ranks 1..n, ties or not
        return {"pearson": (mean[0], mean[1]), "spearman": (middle, middle)}


def _correlations(
    overall_scores: Table, paired: dict[str, _Paired], models: list[str], bootstrap: Bootstrap
) -> pd.DataFrame:
    """Second pass: each model's centred moment sums of its scores (Pearson) and of their
    ranks (Spearman), per prompt, into one set of resampled totals for all models."""
    column = {model: i for i, model in enumerate(models)}
    width = len(models) * len(KINDS) * MOMENTS
    totals = ResampledTotals(bootstrap.n_resamples, bootstrap.seed, width)
    whole = np.zeros(width)
    ranks = {model: (found.ranks(0), found.ranks(1)) for model, found in paired.items()}
    centres = {model: found.centres() for model, found in paired.items()}
    for scores in _batches(overall_scores):
        both = _paired(scores)
        if both.empty:
            continue
        codes, prompts = pd.factorize(both["prompt_id"])
        sums = np.zeros((len(prompts), width))
        for model, part in both.groupby("model", sort=False):
            where = np.flatnonzero((both["model"] == model).to_numpy())
            for k, kind in enumerate(KINDS):
                x, y = part[PAIRED[0]], part[PAIRED[1]]
                if kind == "spearman":
                    x, y = x.map(ranks[model][0]), y.map(ranks[model][1])
                a = x.to_numpy() - centres[model][kind][0]
                b = y.to_numpy() - centres[model][kind][1]
                start = (column[model] * len(KINDS) + k) * MOMENTS
                moments = np.column_stack([np.ones_like(a), a, b, a * a, b * b, a * b])
                sums[:, start : start + MOMENTS] = cluster_sums(codes[where], moments, len(prompts))
        whole += sums.sum(axis=0)
        totals.add(cluster_ids(prompts), sums)
    rows = []
    for model in models:
        row: dict[str, object] = {"model": model}
        for k, kind in enumerate(KINDS):
            start = (column[model] * len(KINDS) + k) * MOMENTS
            name = f"{kind}_overall_vs_fine_grained"
            estimate = pearson_from_sums(whole[None, start : start + MOMENTS])[0]
            low = high = np.nan
            enough = model in paired and paired[model].n >= MIN_CORRELATION_PAIRS
            if enough and not np.isnan(estimate):
                replicates = pearson_from_sums(totals.totals[:, start : start + MOMENTS])
                lows, highs = percentile_interval(replicates, bootstrap.confidence)
                low, high = lows[0], highs[0]
            row[name] = estimate if enough else np.nan
            row[f"{name}_ci_low"], row[f"{name}_ci_high"] = low, high
        rows.append(row)
    return pd.DataFrame(rows)
