"""The per-model and per-source aspect tables, folded a chunk of prompts at a time.

A chunk of completions meets its prompts' aspect rows (`_frames.completion_chunks`); its
shuffles are folded per completion and aspect, and what the table reports is added up: the
rated / N/A / failed counts, the ratings' sum and squared deviations, and the bootstrap's
per-resample totals (`stats.intervals.GroupedMeans`). Nothing grows with the prompts but
the groups (models x aspects), so a million prompts cost what one chunk does.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from llm_feedback.core.errors import require_columns
from llm_feedback.reporting._frames import (
    Table,
    attach_model,
    completion_chunks,
    ordered_aspects,
    ratings_per_completion_aspect,
    typed_frame,
)
from llm_feedback.reporting.positions import ANNOTATION_COLUMNS
from llm_feedback.reporting.uncertainty import DEFAULT_BOOTSTRAP, Bootstrap
from llm_feedback.stats.intervals import GroupedMeans, bootstrap_method
from llm_feedback.storage.parquet_source import CHUNK_PROMPTS
from llm_feedback.storage.schema import (
    COMPLETION_KEY,
    MODEL_ASPECT_METRICS_COLUMN_TYPES,
    SOURCE_ASPECT_METRICS_COLUMN_TYPES,
)

RATING_MIN, RATING_MAX = 1.0, 5.0
# Ratings are summed as deviations from the scale's middle, so that the variance of a
# million of them loses no digits to cancellation.
_RATING_SHIFT = (RATING_MIN + RATING_MAX) / 2
STATUSES = {"rated": "n_rated", "na": "n_na", "failed": "n_failed"}


def to_0_100(mean_rating: pd.Series | float) -> pd.Series | float:
    """Map the judge's 1-5 scale onto 0-100 so that the worst rating is 0 and the best 100.

    (mean - 1) / 4 * 100 rather than the seeds' x20 (which suits a 0-5 scale): with x20 a
    uniformly worst-rated model would still score 20.

    Args:
        mean_rating: Mean ratings on the 1-5 scale.

    Returns:
        The same ratings on 0-100, of the same type.
    """
    return (mean_rating - RATING_MIN) / (RATING_MAX - RATING_MIN) * 100.0


def model_aspect_metrics(
    aspect_annotations: Table,
    completions: Table,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    *,
    prompts_per_chunk: int = CHUNK_PROMPTS,
) -> pd.DataFrame:
    """Per model x aspect: how many completions were rated, N/A or failed, and their mean.

    Each completion counts once per aspect: shuffles are folded first (mean of the
    shuffles' ratings). Every model in `completions` gets a row for every aspect seen in
    the annotations, so a model whose generations all failed shows up with zero counts.
    std_error is the standard error of the mean (sample std / sqrt(n)), NaN below n = 2;
    ci_low / ci_high the mean's interval, bootstrapped over prompts (`ci_method`). Tables
    on disk are read a chunk of prompts at a time.

    Columns: model, aspect, n_rated, n_na, n_failed, mean_rating, mean_rating_0_100,
    std_error, ci_low, ci_high, ci_method.

    Args:
        aspect_annotations: The aspect ratings, one row per shuffle.
        completions: The completions, with their model.
        bootstrap: The bootstrap settings of the intervals.
        prompts_per_chunk: How many prompts a chunk read from disk holds.

    Returns:
        The table, one row per model and aspect.

    Raises:
        InputError: A required column is missing, or the inputs come from different runs.
    """
    tally = _tally(aspect_annotations, completions, ("model",), bootstrap, prompts_per_chunk)
    return typed_frame(tally.table(), MODEL_ASPECT_METRICS_COLUMN_TYPES)


def source_aspect_metrics(
    aspect_annotations: Table,
    completions: Table,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    *,
    prompts_per_chunk: int = CHUNK_PROMPTS,
) -> pd.DataFrame:
    """`model_aspect_metrics` per prompt source (`completions.source`), with the same
    counts; completions without a source are left out. A source's rows list the models of
    its completions and the aspects of its annotations.

    Columns: source, then those of `model_aspect_metrics`.

    Args:
        aspect_annotations: The aspect ratings, one row per shuffle.
        completions: The completions, with their model and source.
        bootstrap: The bootstrap settings of the intervals.
        prompts_per_chunk: How many prompts a chunk read from disk holds.

    Returns:
        The table, one row per source, model and aspect.

    Raises:
        InputError: A required column is missing, or the inputs come from different runs.
    """
    require_columns(completions, [*COMPLETION_KEY, "model", "source"], "completions")
    by = ("source", "model")
    tally = _tally(aspect_annotations, completions, by, bootstrap, prompts_per_chunk)
    return typed_frame(tally.table(), SOURCE_ASPECT_METRICS_COLUMN_TYPES)


def _tally(
    aspect_annotations: Table,
    completions: Table,
    by: tuple[str, ...],
    bootstrap: Bootstrap,
    prompts_per_chunk: int,
) -> _AspectTally:
    require_columns(aspect_annotations, ANNOTATION_COLUMNS, "aspect_annotations")
    require_columns(completions, [*COMPLETION_KEY, *by], "completions")
    tally = _AspectTally(by, bootstrap)
    others = {"aspect_annotations": (aspect_annotations, ANNOTATION_COLUMNS)}
    columns = [*COMPLETION_KEY, *by]
    for chunk, rows in completion_chunks(completions, columns, others, prompts_per_chunk):
        tally.add(rows["aspect_annotations"], chunk)
    return tally


class _AspectTally:
    """The sums behind an aspect table, per `by` group (model, or source and model) and
    aspect, added a chunk of prompts at a time."""

    def __init__(self, by: tuple[str, ...], bootstrap: Bootstrap) -> None:
        self.by, self.bootstrap = list(by), bootstrap
        self.scope = self.by[:-1]  # what a row's models and aspects are listed within
        self.models: set[tuple] = set()  # (*scope, model) of every completion
        self.aspects: set[tuple] = set()  # (*scope, aspect) of every folded annotation
        self.counts = pd.Series(dtype="float64")
        self.moments = pd.DataFrame(columns=["n", "sum", "squares"], dtype="float64")
        self.means = GroupedMeans("rating", "prompt_id", [*self.by, "aspect"], **bootstrap.kwargs)

    def add(self, aspect_rows: pd.DataFrame, completions: pd.DataFrame) -> None:
        listed = completions.dropna(subset=self.by)
        self.models.update(listed[self.by].itertuples(index=False, name=None))
        folded = attach_model(
            ratings_per_completion_aspect(aspect_rows), completions, "aspect_annotations", self.by
        ).dropna(subset=self.by)
        if folded.empty:
            return
        keys = [*self.by, "aspect"]
        self.aspects.update(folded[[*self.scope, "aspect"]].itertuples(index=False, name=None))
        counts = folded.groupby([*keys, "status"], sort=False).size()
        self.counts = counts if self.counts.empty else self.counts.add(counts, fill_value=0)
        rated = folded[folded["status"] == "rated"]
        shifted = rated["rating"] - _RATING_SHIFT
        moments = (
            rated.assign(n=1.0, sum=shifted, squares=shifted * shifted)
            .groupby(keys, sort=False)[["n", "sum", "squares"]]
            .sum()
        )
        self.moments = moments if self.moments.empty else self.moments.add(moments, fill_value=0)
        self.means.add(rated)

    def table(self) -> pd.DataFrame:
        keys = [*self.by, "aspect"]
        grid = self._grid()
        if not grid:
            return pd.DataFrame(columns=keys)
        index = pd.MultiIndex.from_tuples(grid, names=keys)
        counts = self.counts.unstack("status") if len(self.counts) else pd.DataFrame(index=index)
        table = (
            counts.reindex(index=index, columns=list(STATUSES))
            .fillna(0)
            .astype("int64")
            .rename(columns=STATUSES)
        )
        moments = self.moments.reindex(index)
        n = moments["n"]
        table["mean_rating"] = moments["sum"] / n.where(n > 0) + _RATING_SHIFT
        variance = (moments["squares"] - moments["sum"] ** 2 / n.where(n > 0)) / (n - 1).where(
            n > 1
        )
        table["std_rating"] = np.sqrt(variance.clip(lower=0))
        table["mean_rating_0_100"] = to_0_100(table["mean_rating"])
        rated = table["n_rated"].where(table["n_rated"] > 0)
        table["std_error"] = table["std_rating"] / np.sqrt(rated)
        intervals = self.means.result().rename(columns={"method": "ci_method"})
        table = table.reset_index().merge(
            intervals.loc[:, [*keys, "ci_low", "ci_high", "ci_method"]], on=keys, how="left"
        )
        table["ci_method"] = table["ci_method"].fillna(bootstrap_method(self.bootstrap.n_resamples))
        return table

    def _grid(self) -> list[tuple]:
        """Every listed model x every aspect seen, within each scope (a source): models and
        scopes sorted by name, aspects in the paper's order."""
        aspects_of: dict[tuple, list[str]] = {}
        for *scope, aspect in self.aspects:
            aspects_of.setdefault(tuple(scope), []).append(aspect)
        return [
            (*model, aspect)
            for model in sorted(self.models)
            for aspect in ordered_aspects(aspects_of.get(tuple(model[:-1]), []))
        ]
