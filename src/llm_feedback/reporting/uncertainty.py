"""The report's intervals, model ranking and judge-bias tables, built on `llm_feedback.stats`.

Every interval here is clustered by prompt: a prompt's completions, shuffles and pairs
enter a bootstrap resample together.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from llm_feedback.reporting._frames import (
    as_float,
    attach_model,
    ordered_aspects,
    ratings_per_completion_aspect,
    require_columns,
    typed_frame,
)
from llm_feedback.schema import (
    COMPLETION_KEY,
    JUDGE_BIAS_COLUMN_TYPES,
    MODEL_RANKING_COLUMN_TYPES,
    RATING_BY_LENGTH_COLUMN_TYPES,
)
from llm_feedback.stats.bias import (
    length_correlation,
    position_slope,
    rating_by_length_bins,
    self_preference,
)
from llm_feedback.stats.intervals import grouped_mean_intervals
from llm_feedback.stats.length_control import length_controlled_win_rates
from llm_feedback.stats.ranking import bradley_terry


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
    no prefix) of the per-group mean of `value`, clustered by prompt_id."""
    table = grouped_mean_intervals(frame, value, "prompt_id", by, **bootstrap.kwargs)
    renamed = {"ci_low": f"{prefix}ci_low", "ci_high": f"{prefix}ci_high", "method": "ci_method"}
    return table.rename(columns=renamed).drop(columns=["n", "estimate"])


def annotate_battles(completions: pd.DataFrame, scores: pd.DataFrame) -> pd.DataFrame:
    """Annotate's per-prompt scores as pairwise battles: every two usable completions of a
    prompt (no generation error, a non-blank response, a score) from different models,
    the higher score winning, equal scores a tie. `scores`: (prompt_id, completion_idx,
    score), the report's `pairs.score` kind (fixed overall score or mean aspect rating).

    Columns: instance (prompt_id), model_a, model_b, outcome (1 / 0.5 / 0 for A), length_a,
    length_b (response characters).
    """
    require_columns(completions, [*COMPLETION_KEY, "model", "response", "error"], "completions")
    scored = completions.loc[:, [*COMPLETION_KEY, "model", "response", "error"]].merge(
        scores, on=list(COMPLETION_KEY), how="inner"
    )
    response = scored["response"].fillna("").astype(str)
    usable = scored["error"].isna() & response.str.strip().ne("") & scored["score"].notna()
    scored = scored.loc[usable, ["prompt_id", "completion_idx", "model", "score"]].assign(
        length=response[usable].str.len().astype("float64")
    )
    both = scored.merge(scored, on="prompt_id", suffixes=("_a", "_b"))
    both = both[
        (both["completion_idx_a"] < both["completion_idx_b"]) & (both["model_a"] != both["model_b"])
    ]
    outcome = np.sign(both["score_a"].to_numpy() - both["score_b"].to_numpy()) / 2 + 0.5
    return pd.DataFrame(
        {
            "instance": both["prompt_id"].to_numpy(),
            "model_a": both["model_a"].to_numpy(),
            "model_b": both["model_b"].to_numpy(),
            "outcome": outcome,
            "length_a": both["length_a"].to_numpy(),
            "length_b": both["length_b"].to_numpy(),
        }
    )


def model_ranking(
    battles: pd.DataFrame, baseline: str | None, bootstrap: Bootstrap
) -> pd.DataFrame:
    """Bradley-Terry scores (Elo-like scale, see `llm_feedback.stats.ranking`) of every
    model in `battles`, with the raw and length-controlled win rates against `baseline`
    (None: the first model by name) and the length coefficient; the baseline's own row
    has no win rate.

    Columns: `MODEL_RANKING_COLUMN_TYPES` (schema.py).
    """
    models = sorted(set(battles["model_a"]) | set(battles["model_b"]))
    if not models:
        return typed_frame(None, MODEL_RANKING_COLUMN_TYPES)
    baseline = baseline if baseline is not None else models[0]
    ranking = bradley_terry(battles, **bootstrap.kwargs)
    rates = length_controlled_win_rates(battles, baseline, **bootstrap.kwargs)
    table = ranking.merge(rates.drop(columns=["n_battles"]), on="model", how="left")
    table["baseline"] = baseline
    return typed_frame(table, MODEL_RANKING_COLUMN_TYPES)


def bias_ratings(aspect_annotations: pd.DataFrame, completions: pd.DataFrame) -> pd.DataFrame:
    """One row per judgment (every shuffle) with prompt_id, aspect, position, rating,
    model, judge_model and the completion's response length."""
    require_columns(aspect_annotations, ["judge_model", "position"], "aspect_annotations")
    ratings = aspect_annotations.loc[
        :, [*COMPLETION_KEY, "aspect", "position", "judge_model"]
    ].assign(rating=as_float(aspect_annotations["rating"]))
    ratings = attach_model(ratings, completions, "aspect_annotations")
    lengths = completions.loc[:, list(COMPLETION_KEY)].assign(
        length=completions["response"].fillna("").astype(str).str.len().astype("float64")
    )
    return ratings.merge(lengths, on=list(COMPLETION_KEY), how="left")


def judge_bias(
    aspect_annotations: pd.DataFrame, completions: pd.DataFrame, bootstrap: Bootstrap
) -> pd.DataFrame:
    """The judge-bias diagnostics of one run, per aspect, as (diagnostic, scope, n,
    estimate, ci_low, ci_high, ci_method):
      position_slope: rating points per position further down the shown order (every
        shuffle's judgment; positions are random, so a slope is position bias);
      length_spearman: Spearman's rho of rating vs completion length (shuffles averaged);
      self_preference: where the judge also generated completions, the mean rating of its
        own minus the others' (scope `judge_model / aspect`).
    """
    ratings = bias_ratings(aspect_annotations, completions)
    rows = []
    slope = position_slope(ratings, confidence=bootstrap.confidence)
    rows.append(slope.rename(columns={"slope": "estimate"}).assign(diagnostic="position_slope"))
    folded = _folded_with_lengths(aspect_annotations, completions, ratings)
    spearman = length_correlation(folded, **bootstrap.kwargs)
    rows.append(
        spearman.rename(columns={"spearman": "estimate"}).assign(diagnostic="length_spearman")
    )
    own = self_preference(folded, ["aspect"], **bootstrap.kwargs)
    if not own.empty:
        own["aspect"] = own["judge_model"] + " / " + own["aspect"]
        own["n"] = own["n_own"] + own["n_others"]
        rows.append(
            own.rename(columns={"difference": "estimate"}).assign(diagnostic="self_preference")
        )
    found = [frame for frame in rows if not frame.empty]
    if not found:
        return typed_frame(None, JUDGE_BIAS_COLUMN_TYPES)
    table = pd.concat(found).rename(columns={"aspect": "scope", "method": "ci_method"})
    # Aspects in the paper's order within each diagnostic, as in the other tables.
    rank = {aspect: i for i, aspect in enumerate(ordered_aspects(ratings["aspect"].unique()))}
    table["order"] = table["scope"].map(lambda scope: rank.get(scope.split(" / ")[-1], len(rank)))
    table = table.sort_values(["diagnostic", "order"], kind="stable", key=_diagnostic_order)
    return typed_frame(table, JUDGE_BIAS_COLUMN_TYPES)


def _diagnostic_order(column: pd.Series) -> pd.Series:
    if column.name == "diagnostic":
        return column.map(DIAGNOSTICS.index)
    return column


DIAGNOSTICS = ["position_slope", "length_spearman", "self_preference"]


def rating_by_length(
    aspect_annotations: pd.DataFrame, completions: pd.DataFrame, bootstrap: Bootstrap
) -> pd.DataFrame:
    """Mean rating per aspect and completion-length decile, with intervals (the figure's
    data). Columns: `RATING_BY_LENGTH_COLUMN_TYPES`."""
    ratings = bias_ratings(aspect_annotations, completions)
    folded = _folded_with_lengths(aspect_annotations, completions, ratings)
    table = rating_by_length_bins(folded, **bootstrap.kwargs)
    return typed_frame(table.rename(columns={"method": "ci_method"}), RATING_BY_LENGTH_COLUMN_TYPES)


def _folded_with_lengths(
    aspect_annotations: pd.DataFrame, completions: pd.DataFrame, ratings: pd.DataFrame
) -> pd.DataFrame:
    """One rating per completion and aspect (shuffles averaged) with model, judge_model and
    length: each completion counts once in the length and self-preference diagnostics."""
    folded = ratings_per_completion_aspect(aspect_annotations)
    folded = folded[folded["status"] == "rated"].drop(columns="status")
    keys = [*COMPLETION_KEY, "aspect"]
    extra = ratings.drop_duplicates(keys).loc[:, [*keys, "model", "judge_model", "length"]]
    return folded.merge(extra, on=keys, how="left")
