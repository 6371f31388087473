"""Model comparison from pairwise battles, as both pipelines report it (`model_ranking` from
annotate's per-prompt scores, `eval_model_ranking` from pairwise judgments): one table per
model with its Bradley-Terry score, its counts and raw and length-controlled win rates
against the baseline, and its style-controlled score, plus the style coefficients.

Every interval is a clustered bootstrap by instance with one seed and number of resamples,
so the raw and the controlled figures come from the same resamples.
"""

from __future__ import annotations

from typing import NamedTuple

import pandas as pd

from llm_feedback.stats.battles import Battles
from llm_feedback.stats.intervals import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES
from llm_feedback.stats.length_control import STYLE_FEATURES, length_controlled_win_rates
from llm_feedback.stats.ranking import bradley_terry, win_rates
from llm_feedback.stats.style_control import style_controlled_ranking

STYLE_SCORE_COLUMNS = {
    "score": "style_controlled_score",
    "ci_low": "style_controlled_score_ci_low",
    "ci_high": "style_controlled_score_ci_high",
    "method": "style_method",
}


class ModelComparison(NamedTuple):
    ranking: pd.DataFrame  # one row per model, best Bradley-Terry score first
    style_coefficients: pd.DataFrame  # feature, coefficient, ci_low, ci_high, method


def compare_models(
    battles: pd.DataFrame | Battles,
    baseline: str,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> ModelComparison:
    """Every model of `battles` (instance, model_a, model_b, outcome, length_a, length_b
    and, for style control, any `STYLE_FEATURES` as `<feature>_a` / `<feature>_b`; the
    features present are the ones controlled for) compared, against `baseline` where a
    figure needs one.

    ranking columns: model, score, ci_low, ci_high, rank, n_battles, method, resamples
    (`bradley_terry`); baseline; wins, ties, losses, win_rate and its bounds and method,
    lc_win_rate and length_coefficient with theirs and lc_method
    (`length_controlled_win_rates`; the baseline's own row has none of these);
    style_controlled_score with its bounds and style_method (`style_controlled_ranking`).
    `battles` may be a `stats.battles.Battles`, read a batch at a time.

    Args:
        battles: the battles (columns above), or a `Battles`.
        baseline: the model others are compared with.
        n_resamples: bootstrap resamples of each interval.
        seed: the bootstrap's seed.
        confidence: the intervals' confidence level.

    Returns:
        The comparison: the ranking table above, with the style control's fit.
    """
    bootstrap = {"n_resamples": n_resamples, "seed": seed, "confidence": confidence}
    battles = Battles.of(battles)  # a table larger than memory is read a batch at a time
    features = tuple(
        feature
        for feature in STYLE_FEATURES
        if {f"{feature}_a", f"{feature}_b"} <= set(battles.columns)
    )
    ranking = bradley_terry(battles, **bootstrap)
    raw = win_rates(battles, baseline, **bootstrap)  # one walk for the counts and the rates
    counts = raw[["model", "wins", "ties", "losses"]]
    rates = length_controlled_win_rates(battles, baseline, **bootstrap, raw=raw)
    styled = style_controlled_ranking(battles, features, **bootstrap)
    style_scores = styled.scores[["model", *STYLE_SCORE_COLUMNS]].rename(
        columns=STYLE_SCORE_COLUMNS
    )
    table = (
        ranking.assign(baseline=baseline)
        .merge(counts, on="model", how="left")
        .merge(rates.drop(columns=["n_battles", "baseline"]), on="model", how="left")
        .merge(style_scores, on="model", how="left")
    )
    return ModelComparison(table, styled.coefficients)
