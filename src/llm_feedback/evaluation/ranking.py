"""`eval_model_ranking`: models compared from the evaluate pipeline's pairwise judgments.

Each judged pair of one (instance, turn, replicate) is a battle between model_a and model_b
with its outcome (1 A won, 0.5 tie, 0 B won: both orders were asked and folded into one
outcome by the judge kind) and the two responses' lengths in characters. On these
battles (`llm_feedback.stats`, intervals clustered by instance_id, so every turn,
replicate and model pair of an instance is resampled together):
  - a Bradley-Terry ranking by maximum likelihood with bootstrap intervals (`stats.ranking`);
  - wins / ties / losses and the win rate (ties half) against the baseline model;
  - AlpacaEval 2's length-controlled win rate and its length coefficient
    (`stats.length_control`), beside the raw one;
  - Arena-Hard's style-controlled score, with the style covariates' coefficients.
The table is built by `llm_feedback.stats.comparison`, as the annotate report's
`model_ranking` is. A comparison without an outcome (an unreadable verdict, a missing
response) is no battle: it is left out with a warning that counts it (eval_metrics counts
it per model as `n_missing`); a baseline with no battle at all leaves the table empty.
"""

from __future__ import annotations

import logging

import pandas as pd

from llm_feedback.errors import ConfigError
from llm_feedback.evaluation.config import EvaluateParams
from llm_feedback.evaluation.metric_intervals import baseline_model
from llm_feedback.schema import EVAL_MODEL_RANKING_COLUMN_TYPES, STYLE_COEFFICIENTS_COLUMN_TYPES
from llm_feedback.stats.comparison import ModelComparison, compare_models
from llm_feedback.stats.length_control import STYLE_FEATURES, style_features

logger = logging.getLogger(__name__)

OUTCOME_SCORES = {"A": 1.0, "tie": 0.5, "B": 0.0}
SAMPLE_KEY = ["instance_id", "turn", "replicate", "model"]


def _typed(frame: pd.DataFrame | None, types: dict[str, str]) -> pd.DataFrame:
    if frame is None:
        return pd.DataFrame({column: pd.Series(dtype=kind) for column, kind in types.items()})
    return frame[list(types)].astype(types).reset_index(drop=True)


def _empty() -> ModelComparison:
    return ModelComparison(
        _typed(None, EVAL_MODEL_RANKING_COLUMN_TYPES), _typed(None, STYLE_COEFFICIENTS_COLUMN_TYPES)
    )


def pairwise_battles(judgments: pd.DataFrame, samples: pd.DataFrame) -> pd.DataFrame:
    """instance, model_a, model_b, outcome and per side (`_a`, `_b`) the `STYLE_FEATURES`
    of the two responses judged (length in characters, headers, bold, list_items): one
    row per pairwise judgment with an outcome."""
    features = style_features(samples["response"].astype("string").astype(object))
    styled = pd.concat([samples[SAMPLE_KEY], features], axis=1)
    battles = judgments.assign(outcome=judgments["outcome"].astype("object").map(OUTCOME_SCORES))
    battles = battles.dropna(subset=["outcome"])
    for side in ("a", "b"):
        names = {"model": f"model_{side}"} | {f: f"{f}_{side}" for f in STYLE_FEATURES}
        key = ["instance_id", "turn", "replicate", f"model_{side}"]
        battles = battles.merge(styled.rename(columns=names), on=key, how="left")
    sides = [f"{feature}_{side}" for feature in STYLE_FEATURES for side in ("a", "b")]
    return battles.rename(columns={"instance_id": "instance"})[
        ["instance", "model_a", "model_b", "outcome", *sides]
    ]


def model_ranking(
    judgments: pd.DataFrame, samples: pd.DataFrame, config: EvaluateParams
) -> ModelComparison:
    """`EVAL_MODEL_RANKING_COLUMN_TYPES` rows, one per model, and the style coefficients
    (`STYLE_COEFFICIENTS_COLUMN_TYPES`); both empty unless the mode compares and the
    judgments hold at least two models with an outcome."""
    if not config.kind.compares:
        return _empty()
    battles = pairwise_battles(judgments, samples)
    if len(battles) < len(judgments):
        logger.warning(
            "evaluate ranking: %d of %d comparisons have no outcome (unreadable verdicts or a "
            "missing response) and are left out",
            len(judgments) - len(battles),
            len(judgments),
        )
    models = pd.concat([battles["model_a"], battles["model_b"]])
    if models.nunique() < 2:
        return _empty()
    baseline = baseline_model(models, config.ranking.baseline)
    if baseline not in set(models):
        if baseline in set(judgments["model_a"]) | set(judgments["model_b"]):
            logger.warning(
                "evaluate ranking: the baseline %r has no comparison with an outcome; "
                "eval_model_ranking is empty",
                baseline,
            )
            return _empty()
        raise ConfigError(
            f"evaluate.ranking.baseline: {baseline!r} is not among the judged models "
            f"({', '.join(sorted(set(models)))})"
        )
    ranking, coefficients = compare_models(battles, baseline, **config.intervals.kwargs)
    return ModelComparison(
        _typed(ranking, EVAL_MODEL_RANKING_COLUMN_TYPES),
        _typed(
            coefficients.rename(columns={"method": "ci_method"}), STYLE_COEFFICIENTS_COLUMN_TYPES
        ),
    )
