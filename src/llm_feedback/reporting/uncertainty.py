"""The report's intervals, model ranking and judge-bias tables, built on `llm_feedback.stats`.

Every interval here is clustered by prompt: a prompt's completions, shuffles and pairs
enter a bootstrap resample together.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from llm_feedback.core.errors import require_columns
from llm_feedback.reporting._frames import (
    Table,
    as_float,
    attach_model,
    completion_chunks,
    ordered_aspects,
    ratings_per_completion_aspect,
    typed_frame,
)
from llm_feedback.reporting.pairs import completion_scores
from llm_feedback.stats.battles import Battles
from llm_feedback.stats.bias import LengthBins, LengthCorrelation, SelfPreference, SlopeTally
from llm_feedback.stats.comparison import ModelComparison, compare_models
from llm_feedback.stats.intervals import grouped_mean_intervals
from llm_feedback.stats.length_control import STYLE_FEATURES, style_features
from llm_feedback.storage.parquet_source import CHUNK_PROMPTS, ParquetSource
from llm_feedback.storage.schema import (
    COMPLETION_KEY,
    JUDGE_BIAS_COLUMN_TYPES,
    MODEL_RANKING_COLUMN_TYPES,
    RATING_BY_LENGTH_COLUMN_TYPES,
    STYLE_COEFFICIENTS_COLUMN_TYPES,
)


@dataclass(frozen=True)
class Bootstrap:
    """How intervals are drawn: resamples, seed and confidence (report.intervals)."""

    n_resamples: int = 1000
    seed: int = 0
    confidence: float = 0.95

    @property
    def kwargs(self) -> dict[str, float]:
        return {"n_resamples": self.n_resamples, "seed": self.seed, "confidence": self.confidence}


DEFAULT_BOOTSTRAP = Bootstrap()


def mean_intervals(
    frame: pd.DataFrame, value: str, by: list[str], bootstrap: Bootstrap, prefix: str = ""
) -> pd.DataFrame:
    """`by` columns plus `<prefix>ci_low`, `<prefix>ci_high` (and `ci_method` when there is
    no prefix) of the per-group mean of `value`, clustered by prompt_id.

    Args:
        frame: The rows, with prompt_id, `value` and the `by` columns.
        value: The column averaged.
        by: The grouping columns.
        bootstrap: The bootstrap settings of the intervals.
        prefix: Put before the interval columns' names.

    Returns:
        One row per group: the `by` columns and the interval's.
    """
    table = grouped_mean_intervals(frame, value, "prompt_id", by, **bootstrap.kwargs)
    renamed = {"ci_low": f"{prefix}ci_low", "ci_high": f"{prefix}ci_high", "method": "ci_method"}
    return table.rename(columns=renamed).drop(columns=["n", "estimate"])


def annotate_battles(completions: pd.DataFrame, scores: pd.DataFrame) -> pd.DataFrame:
    """Annotate's per-prompt scores as pairwise battles: every two usable completions of a
    prompt (no generation error, a non-blank response, a score) from different models,
    the higher score winning, equal scores a tie. `scores`: (prompt_id, completion_idx,
    score), the report's `pairs.score` kind (fixed overall score or mean aspect rating).

    Columns: instance (prompt_id), model_a, model_b, outcome (1 / 0.5 / 0 for A), and per
    side (`_a`, `_b`) the responses' `STYLE_FEATURES`: length (characters), headers, bold,
    list_items.

    Args:
        completions: The completions, with model, response and error.
        scores: The score of each completion.

    Returns:
        The battles, one row per two usable completions of a prompt.

    Raises:
        InputError: A required column is missing.
    """
    require_columns(completions, [*COMPLETION_KEY, "model", "response", "error"], "completions")
    scored = completions.loc[:, [*COMPLETION_KEY, "model", "response", "error"]].merge(
        scores, on=list(COMPLETION_KEY), how="inner"
    )
    response = scored["response"].fillna("").astype(str)
    usable = scored["error"].isna() & response.str.strip().ne("") & scored["score"].notna()
    scored = pd.concat(
        [
            scored.loc[usable, ["prompt_id", "completion_idx", "model", "score"]],
            style_features(response[usable]),
        ],
        axis=1,
    )
    both = scored.merge(scored, on="prompt_id", suffixes=("_a", "_b"))
    both = both[
        (both["completion_idx_a"] < both["completion_idx_b"]) & (both["model_a"] != both["model_b"])
    ]
    sides = [f"{feature}_{side}" for feature in STYLE_FEATURES for side in ("a", "b")]
    battles = both.loc[:, ["prompt_id", "model_a", "model_b", *sides]]
    battles.insert(3, "outcome", np.sign(both["score_a"] - both["score_b"]) / 2 + 0.5)
    return battles.rename(columns={"prompt_id": "instance"}).reset_index(drop=True)


def ranking_battles(
    completions: Table,
    overall_scores: Table,
    aspect_annotations: Table,
    score: str,
    folder: Path,
    *,
    prompts_per_chunk: int = CHUNK_PROMPTS,
) -> Battles:
    """`annotate_battles` of each chunk of prompts (battles are prompt-local), spooled to a
    Parquet file in `folder` (their covariates, no texts) and read back a row group at a
    time: the ranking's fits pass over them several times without holding them.

    Args:
        completions: The completions, in memory or on disk.
        overall_scores: The overall scores per completion (read when `score` is "overall").
        aspect_annotations: The aspect ratings (read for any other `score`).
        score: The score that decides a battle: "overall" (the fixed overall score) or
            "mean_aspects" (the mean aspect rating).
        folder: Where the battles' Parquet file is written.
        prompts_per_chunk: How many prompts a chunk read from disk holds.

    Returns:
        The battles, read back from the file (or in memory when there are none).

    Raises:
        InputError: A required column is missing, or the inputs come from different runs.
    """
    if score == "overall":
        others = {"overall_scores": (overall_scores, [*COMPLETION_KEY, "overall_score_fixed"])}
    else:
        others = {
            "aspect_annotations": (
                aspect_annotations,
                [*COMPLETION_KEY, "aspect", "rating", "is_na"],
            )
        }
    columns = [*COMPLETION_KEY, "model", "response", "error"]
    path, writer, empty = folder / "battles.parquet", None, None
    try:
        walk = completion_chunks(
            completions, columns, others, prompts_per_chunk, unmatched_ok=["overall_scores"]
        )
        for chunk, rows in walk:
            scores = completion_scores(
                rows.get("overall_scores"), rows.get("aspect_annotations"), score
            )
            battles = annotate_battles(chunk, scores)
            if battles.empty:
                empty = battles
                continue
            table = pa.Table.from_pandas(battles, preserve_index=False)
            writer = writer or pq.ParquetWriter(path, table.schema)
            writer.write_table(table.cast(writer.schema))
    finally:
        if writer is not None:
            writer.close()
    if writer is None:
        return Battles.of(empty)
    source = ParquetSource(str(path))
    return Battles(source.row_batches, source.columns)


def model_ranking(
    battles: pd.DataFrame | Battles, baseline: str | None, bootstrap: Bootstrap
) -> ModelComparison:
    """Bradley-Terry scores (Elo-like scale, see `llm_feedback.stats.ranking`) of every
    model in `battles`, with the counts and the raw and length-controlled win rates against
    `baseline` (None: the first model by name), the length coefficient and the
    style-controlled score; and the style coefficients (`llm_feedback.stats.comparison`).

    Columns: `MODEL_RANKING_COLUMN_TYPES` and `STYLE_COEFFICIENTS_COLUMN_TYPES` (schema.py).

    Args:
        battles: The battles (`annotate_battles`' columns), in memory or spooled.
        baseline: The model the win rates are against (None: the first by name).
        bootstrap: The bootstrap settings of the intervals.

    Returns:
        The ranking and the style coefficients (empty tables when there are no battles).
    """
    models = Battles.of(battles).models()
    if not models:
        return ModelComparison(
            typed_frame(None, MODEL_RANKING_COLUMN_TYPES),
            typed_frame(None, STYLE_COEFFICIENTS_COLUMN_TYPES),
        )
    baseline = baseline if baseline is not None else models[0]
    ranking, coefficients = compare_models(battles, baseline, **bootstrap.kwargs)
    return ModelComparison(
        typed_frame(ranking, MODEL_RANKING_COLUMN_TYPES),
        typed_frame(
            coefficients.rename(columns={"method": "ci_method"}), STYLE_COEFFICIENTS_COLUMN_TYPES
        ),
    )


def bias_ratings(aspect_annotations: pd.DataFrame, completions: pd.DataFrame) -> pd.DataFrame:
    """One row per judgment (every shuffle) with prompt_id, aspect, position, rating,
    model, judge_model and the completion's response length.

    Args:
        aspect_annotations: The aspect ratings, one row per shuffle.
        completions: The completions of those ratings, with model and response.

    Returns:
        The judgments, with their completion's model and length.

    Raises:
        InputError: A required column is missing, or the inputs come from different runs.
    """
    require_columns(aspect_annotations, ["judge_model", "position"], "aspect_annotations")
    ratings = aspect_annotations.loc[
        :, [*COMPLETION_KEY, "aspect", "position", "judge_model"]
    ].assign(rating=as_float(aspect_annotations["rating"]))
    ratings = attach_model(ratings, completions, "aspect_annotations")
    lengths = completions.loc[:, list(COMPLETION_KEY)].assign(
        length=completions["response"].fillna("").astype(str).str.len().astype("float64")
    )
    return ratings.merge(lengths, on=list(COMPLETION_KEY), how="left")


BIAS_ASPECT_COLUMNS = (*COMPLETION_KEY, "aspect", "position", "rating", "is_na", "judge_model")


def _bias_chunks(
    aspect_annotations: Table, completions: Table, prompts_per_chunk: int
) -> Iterator[tuple[pd.DataFrame, pd.DataFrame]]:
    """(every judgment, one rating per completion and aspect) of each chunk of prompts."""
    require_columns(aspect_annotations, BIAS_ASPECT_COLUMNS, "aspect_annotations")
    require_columns(completions, [*COMPLETION_KEY, "model", "response"], "completions")
    others = {"aspect_annotations": (aspect_annotations, BIAS_ASPECT_COLUMNS)}
    columns = [*COMPLETION_KEY, "model", "response"]
    for chunk, rows in completion_chunks(completions, columns, others, prompts_per_chunk):
        aspects = rows["aspect_annotations"]
        ratings = bias_ratings(aspects, chunk)
        yield ratings, _folded_with_lengths(aspects, ratings)


def judge_bias(
    aspect_annotations: Table,
    completions: Table,
    bootstrap: Bootstrap,
    *,
    prompts_per_chunk: int = CHUNK_PROMPTS,
) -> pd.DataFrame:
    """The judge-bias diagnostics of one run, per aspect, as (diagnostic, scope, n,
    estimate, ci_low, ci_high, ci_method):
      position_slope: rating points per position further down the shown order (every
        shuffle's judgment; positions are random, so a slope is position bias);
      length_spearman: Spearman's rho of rating vs completion length (shuffles averaged);
      self_preference: where the judge also generated completions, the mean rating of its
        own minus the others' (scope `judge_model / aspect`).
    Tables on disk are walked twice, a chunk of prompts at a time (the fits' sums, then
    the spreads around them).

    Args:
        aspect_annotations: The aspect ratings, one row per shuffle.
        completions: The completions, with model and response.
        bootstrap: The bootstrap settings of the intervals.
        prompts_per_chunk: How many prompts a chunk read from disk holds.

    Returns:
        The diagnostics, ordered by diagnostic and then aspect.

    Raises:
        InputError: A required column is missing, or the inputs come from different runs.
    """
    slope = SlopeTally(confidence=bootstrap.confidence)
    lengths = LengthCorrelation(**bootstrap.kwargs)
    own = SelfPreference(["aspect"], **bootstrap.kwargs)
    aspects: set[str] = set()
    for ratings, folded in _bias_chunks(aspect_annotations, completions, prompts_per_chunk):
        slope.count(ratings)
        lengths.count(folded)
        own.add(folded)
        aspects.update(ratings["aspect"].unique())
    for ratings, folded in _bias_chunks(aspect_annotations, completions, prompts_per_chunk):
        slope.add(ratings)
        lengths.add(folded)
    rows = []
    found = slope.result()
    rows.append(found.rename(columns={"slope": "estimate"}).assign(diagnostic="position_slope"))
    spearman = lengths.result()
    rows.append(
        spearman.rename(columns={"spearman": "estimate"}).assign(diagnostic="length_spearman")
    )
    preference = own.result()
    if not preference.empty:
        preference["aspect"] = preference["judge_model"] + " / " + preference["aspect"]
        preference["n"] = preference["n_own"] + preference["n_others"]
        rows.append(
            preference.rename(columns={"difference": "estimate"}).assign(
                diagnostic="self_preference"
            )
        )
    found = [frame for frame in rows if not frame.empty]
    if not found:
        return typed_frame(None, JUDGE_BIAS_COLUMN_TYPES)
    table = pd.concat(found).rename(columns={"aspect": "scope", "method": "ci_method"})
    # Aspects in the paper's order within each diagnostic, as in the other tables.
    rank = {aspect: i for i, aspect in enumerate(ordered_aspects(aspects))}
    table["order"] = table["scope"].map(lambda scope: rank.get(scope.split(" / ")[-1], len(rank)))
    table = table.sort_values(["diagnostic", "order"], kind="stable", key=_diagnostic_order)
    return typed_frame(table, JUDGE_BIAS_COLUMN_TYPES)


def _diagnostic_order(column: pd.Series) -> pd.Series:
    if column.name == "diagnostic":
        return column.map(DIAGNOSTICS.index)
    return column


DIAGNOSTICS = ["position_slope", "length_spearman", "self_preference"]


def rating_by_length(
    aspect_annotations: Table,
    completions: Table,
    bootstrap: Bootstrap,
    *,
    prompts_per_chunk: int = CHUNK_PROMPTS,
) -> pd.DataFrame:
    """Mean rating per aspect and completion-length decile, with intervals (the figure's
    data); tables on disk walked twice (the lengths' deciles, then the means). Columns:
    `RATING_BY_LENGTH_COLUMN_TYPES`.

    Args:
        aspect_annotations: The aspect ratings, one row per shuffle.
        completions: The completions, with model and response.
        bootstrap: The bootstrap settings of the intervals.
        prompts_per_chunk: How many prompts a chunk read from disk holds.

    Returns:
        The table, one row per aspect and length decile.

    Raises:
        InputError: A required column is missing, or the inputs come from different runs.
    """
    bins = LengthBins(**bootstrap.kwargs)
    for _, folded in _bias_chunks(aspect_annotations, completions, prompts_per_chunk):
        bins.count(folded)
    for _, folded in _bias_chunks(aspect_annotations, completions, prompts_per_chunk):
        bins.add(folded)
    table = bins.result()
    return typed_frame(table.rename(columns={"method": "ci_method"}), RATING_BY_LENGTH_COLUMN_TYPES)


def _folded_with_lengths(aspect_annotations: pd.DataFrame, ratings: pd.DataFrame) -> pd.DataFrame:
    """One rating per completion and aspect (shuffles averaged) with model, judge_model and
    length: each completion counts once in the length and self-preference diagnostics."""
    folded = ratings_per_completion_aspect(aspect_annotations)
    folded = folded[folded["status"] == "rated"].drop(columns="status")
    keys = [*COMPLETION_KEY, "aspect"]
    extra = ratings.drop_duplicates(keys).loc[:, [*keys, "model", "judge_model", "length"]]
    return folded.merge(extra, on=keys, how="left")
