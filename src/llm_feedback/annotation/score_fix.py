"""The overall-score fix: catch critiques that gave 10 to completions the aspects rate poorly.

The published UltraFeedback overall scores carried a bug that left some weak completions with
a 10. The fix compares each overall score with the completion's fine-grained score (the mean of
its non-N/A aspect ratings, each aspect averaged over its shuffles first): a 10 with
fine-grained <= flip threshold is flipped to 1; a 10 with fine-grained <= re-annotate
threshold goes back to the judge for a new score; anything else is kept. Everything here is
vectorised over DataFrames and pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from llm_feedback.core.errors import ConfigError, InputError, require_columns
from llm_feedback.storage.schema import COMPLETION_KEY

FIX_ACTIONS = (
    "kept",
    "reannotate",  # planned, waiting for the judge's new score
    "reannotated",
    "reannotate_failed",  # the judge's new score could not be read; fixed score left null
    "flipped",
    "no_overall_score",
)
FLIPPED_SCORE = 1.0
SUSPICIOUS_OVERALL_SCORE = 10.0
DEFAULT_FLIP_THRESHOLD = 2.0
DEFAULT_REANNOTATE_THRESHOLD = 4.0
# What the fix reads of the judge tables: a caller holding them on disk loads only these.
ASPECT_COLUMNS_READ = (*COMPLETION_KEY, "aspect", "rating")
CRITIQUE_COLUMNS_READ = (*COMPLETION_KEY, "overall_score", "critique")


def _require_unique_keys(df: pd.DataFrame, dataset: str) -> None:
    duplicated = df.duplicated(list(COMPLETION_KEY), keep=False)
    if duplicated.any():
        first = df.loc[duplicated, list(COMPLETION_KEY)].iloc[0].tolist()
        raise InputError(f"{dataset} has several rows for (prompt_id, completion_idx) {first}")


def fine_grained_scores(
    aspect_df: pd.DataFrame, aspects: Sequence[str] | None = None
) -> pd.DataFrame:
    """Mean aspect rating per completion; N/A and failed ratings are null and skipped.

    Each aspect first averages its shuffles, then the aspects are averaged, so every aspect
    weighs the same however many of its shuffles came back, and the score is the mean of
    the ratings the export shows. Completions whose every rating is null get a null score
    rather than disappearing.

    Args:
        aspect_df: the aspect annotations.
        aspects: the aspects averaged (default: all present).

    Returns:
        One row per completion with `fine_grained_score`.
    """
    require_columns(aspect_df, [*COMPLETION_KEY, "aspect", "rating"], "aspect_annotations")
    # Only the key and rating columns: filtering the whole table would copy its texts.
    narrow = aspect_df[[*COMPLETION_KEY, "aspect", "rating"]]
    rows = narrow if aspects is None else narrow[narrow["aspect"].isin(aspects)]
    ratings = rows[[*COMPLETION_KEY, "aspect"]].assign(rating=rows["rating"].astype("Float64"))
    per_aspect = ratings.groupby([*COMPLETION_KEY, "aspect"], sort=True)["rating"].mean()
    scores = per_aspect.groupby(level=list(COMPLETION_KEY), sort=True).mean().astype("Float64")
    return scores.rename("fine_grained_score").reset_index()


def collect_scores(
    completions_df: pd.DataFrame,
    aspect_df: pd.DataFrame,
    critiques_df: pd.DataFrame,
    aspects: Sequence[str] | None = None,
) -> pd.DataFrame:
    """One row per completion with its model, fine-grained and original overall score.

    Args:
        completions_df: the completions.
        aspect_df: the aspect annotations.
        critiques_df: the critiques.
        aspects: the aspects averaged (default: all present).

    Returns:
        The rows.
    """
    require_columns(completions_df, [*COMPLETION_KEY, "model"], "completions")
    require_columns(critiques_df, [*COMPLETION_KEY, "overall_score"], "critiques")
    _require_unique_keys(completions_df, "completions")
    _require_unique_keys(critiques_df, "critiques")
    base = completions_df[[*COMPLETION_KEY, "model"]].astype({"completion_idx": "int64"})
    critiques = critiques_df[[*COMPLETION_KEY, "overall_score"]].astype(
        {"completion_idx": "int64", "overall_score": "Float64"}
    )
    fine = fine_grained_scores(aspect_df, aspects).astype({"completion_idx": "int64"})
    merged = base.merge(fine, on=list(COMPLETION_KEY), how="left").merge(
        critiques.rename(columns={"overall_score": "overall_score_original"}),
        on=list(COMPLETION_KEY),
        how="left",
    )
    return merged.astype({"fine_grained_score": "Float64", "overall_score_original": "Float64"})


def validate_thresholds(flip_threshold: float, reannotate_threshold: float) -> None:
    """Raise ConfigError unless both thresholds lie on the 1-5 scale, the flip one not
    above the other.

    Args:
        flip_threshold: at most this fine-grained score flips a suspicious overall score.
        reannotate_threshold: at most this (above `flip_threshold`) asks the judge again.
    """
    for name, value in (
        ("flip_threshold", flip_threshold),
        ("reannotate_threshold", reannotate_threshold),
    ):
        if not 1 <= value <= 5:
            raise ConfigError(f"{name} must lie within the 1-5 aspect scale, got {value}")
    if reannotate_threshold < flip_threshold:
        raise ConfigError(
            f"reannotate_threshold ({reannotate_threshold}) must be >= flip_threshold "
            f"({flip_threshold})"
        )


def plan_score_fix(
    overall_scores_df: pd.DataFrame,
    flip_threshold: float = DEFAULT_FLIP_THRESHOLD,
    reannotate_threshold: float = DEFAULT_REANNOTATE_THRESHOLD,
) -> pd.DataFrame:
    """Add `overall_score_fixed`, `fix_action` and `no_fine_grained` to `collect_scores` output.

    Rows planned for re-annotation have action "reannotate" and a null fixed score until
    `apply_reannotated_scores` fills them in.

    Args:
        overall_scores_df: `collect_scores`' rows.
        flip_threshold: at most this fine-grained score flips a suspicious overall score.
        reannotate_threshold: at most this (above `flip_threshold`) asks the judge again.

    Returns:
        The rows with the planned fix.
    """
    validate_thresholds(flip_threshold, reannotate_threshold)
    require_columns(
        overall_scores_df,
        [*COMPLETION_KEY, "fine_grained_score", "overall_score_original"],
        "overall_scores",
    )
    overall = overall_scores_df["overall_score_original"].astype("Float64")
    fine = overall_scores_df["fine_grained_score"].astype("Float64")
    no_fine_grained = fine.isna().to_numpy(dtype=bool)
    missing_overall = overall.isna().to_numpy(dtype=bool)
    suspicious = (overall == SUSPICIOUS_OVERALL_SCORE).fillna(False).to_numpy(dtype=bool)
    flip = suspicious & (fine <= flip_threshold).fillna(False).to_numpy(dtype=bool)
    reannotate = (
        suspicious & ~flip & (fine <= reannotate_threshold).fillna(False).to_numpy(dtype=bool)
    )
    actions = np.select(
        [missing_overall, flip, reannotate],
        ["no_overall_score", "flipped", "reannotate"],
        default="kept",
    )
    fixed = overall.copy()
    fixed[flip] = FLIPPED_SCORE
    fixed[reannotate] = pd.NA
    return overall_scores_df.assign(
        overall_score_original=overall,
        fine_grained_score=fine,
        overall_score_fixed=fixed,
        fix_action=pd.array(actions, dtype="string"),
        no_fine_grained=no_fine_grained,
    )


def pending_reannotation(plan_df: pd.DataFrame) -> list[tuple[str, int]]:
    """Keys of the completions whose score the judge must give again.

    Args:
        plan_df: `plan_score_fix`'s rows.

    Returns:
        (prompt_id, completion_idx) of each.
    """
    pending = plan_df.loc[plan_df["fix_action"] == "reannotate", list(COMPLETION_KEY)]
    return [(str(prompt), int(idx)) for prompt, idx in pending.itertuples(index=False)]


def apply_reannotated_scores(
    plan_df: pd.DataFrame, new_scores: Mapping[tuple[str, int], float | None]
) -> pd.DataFrame:
    """Fill in the judge's new scores; None marks a reply that could not be read.

    Every planned row needs an entry (a missing one is a wiring bug, not a judge failure);
    entries for other rows are ignored.

    Args:
        plan_df: `plan_score_fix`'s rows.
        new_scores: the judge's new score per planned row.

    Returns:
        The rows with their fixed scores.
    """
    require_columns(
        plan_df, [*COMPLETION_KEY, "fix_action", "overall_score_fixed"], "overall_scores"
    )
    pending = pending_reannotation(plan_df)
    missing = [key for key in pending if key not in new_scores]
    if missing:
        raise InputError(
            f"no re-annotated score given for {len(missing)} row(s), e.g. {missing[0]}"
        )
    out_of_range = {
        key: score
        for key in pending
        if (score := new_scores[key]) is not None and not 1 <= score <= 10
    }
    if out_of_range:
        raise InputError(f"re-annotated scores outside 1-10: {out_of_range}")

    is_pending = (plan_df["fix_action"] == "reannotate").to_numpy(dtype=bool)
    scores = pd.array([new_scores[key] for key in pending], dtype="Float64")
    fixed = plan_df["overall_score_fixed"].astype("Float64").copy()
    fixed[is_pending] = scores
    actions = plan_df["fix_action"].astype("string").copy()
    actions[is_pending] = np.where(scores.isna(), "reannotate_failed", "reannotated")
    return plan_df.assign(overall_score_fixed=fixed, fix_action=actions)


def fix_counts(df: pd.DataFrame) -> dict[str, int]:
    """How many completions each action applied to, plus `no_fine_grained` and `total`.

    Args:
        df: the fixed rows.

    Returns:
        Action -> count.
    """
    require_columns(df, ["fix_action", "no_fine_grained"], "overall_scores")
    observed = df["fix_action"].value_counts()
    counts = {action: int(observed.get(action, 0)) for action in FIX_ACTIONS}
    counts["no_fine_grained"] = int(df["no_fine_grained"].sum())
    counts["total"] = len(df)
    return counts
