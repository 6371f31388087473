"""`eval_model_ranking`: models compared from the evaluate pipeline's pairwise judgments.

Each judged pair of one (instance, turn, replicate) is a battle between model_a and model_b
with its outcome (1 A won, 0.5 tie, 0 B won: both orders were asked and folded into one
outcome by the judge kind) and the two responses' lengths in characters. On these
battles (`llm_feedback.stats`, intervals clustered by instance_id, so every turn,
replicate and model pair of an instance is resampled together):
  - a Bradley-Terry ranking by maximum likelihood with bootstrap intervals (`stats.ranking`);
  - wins / ties / losses and the win rate (ties half) against the baseline model;
  - AlpacaEval 2's length-controlled win rate and its length coefficient
    (`stats.length_control`), beside the raw one.
"""

from __future__ import annotations

import pandas as pd

from llm_feedback.errors import ConfigError
from llm_feedback.evaluation.config import EvaluateParams
from llm_feedback.evaluation.metric_intervals import baseline_model
from llm_feedback.schema import EVAL_MODEL_RANKING_COLUMN_TYPES
from llm_feedback.stats.length_control import length_controlled_win_rates
from llm_feedback.stats.ranking import bradley_terry, win_rates

OUTCOME_SCORES = {"A": 1.0, "tie": 0.5, "B": 0.0}
SAMPLE_KEY = ["instance_id", "turn", "replicate", "model"]


def _empty() -> pd.DataFrame:
    return pd.DataFrame(
        {column: pd.Series(dtype=kind) for column, kind in EVAL_MODEL_RANKING_COLUMN_TYPES.items()}
    )


def pairwise_battles(judgments: pd.DataFrame, samples: pd.DataFrame) -> pd.DataFrame:
    """instance, model_a, model_b, outcome, length_a, length_b: one row per pairwise
    judgment with an outcome, the lengths those of the two responses judged."""
    lengths = samples[SAMPLE_KEY].assign(
        length=samples["response"].astype("string").fillna("").str.len().astype("float64")
    )
    battles = judgments.assign(outcome=judgments["outcome"].astype("object").map(OUTCOME_SCORES))
    battles = battles.dropna(subset=["outcome"])
    for side in ("a", "b"):
        names = {"model": f"model_{side}", "length": f"length_{side}"}
        key = ["instance_id", "turn", "replicate", f"model_{side}"]
        battles = battles.merge(lengths.rename(columns=names), on=key, how="left")
    return battles.rename(columns={"instance_id": "instance"})[
        ["instance", "model_a", "model_b", "outcome", "length_a", "length_b"]
    ]


def model_ranking(
    judgments: pd.DataFrame, samples: pd.DataFrame, config: EvaluateParams
) -> pd.DataFrame:
    """`EVAL_MODEL_RANKING_COLUMN_TYPES` rows, one per model; empty unless the mode compares
    and the judgments hold at least two models with an outcome."""
    if not config.kind.compares:
        return _empty()
    battles = pairwise_battles(judgments, samples)
    models = pd.concat([battles["model_a"], battles["model_b"]])
    if models.nunique() < 2:
        return _empty()
    baseline = baseline_model(models, config.ranking.baseline)
    if baseline not in set(models):
        raise ConfigError(
            f"evaluate.ranking.baseline: {baseline!r} is not among the judged models "
            f"({', '.join(sorted(set(models)))})"
        )
    bootstrap = config.intervals.kwargs
    ranking = bradley_terry(battles, **bootstrap)
    counts = win_rates(battles, baseline, **bootstrap)[["model", "wins", "ties", "losses"]]
    rates = length_controlled_win_rates(battles, baseline, **bootstrap)
    table = ranking.merge(counts, on="model", how="left").merge(
        rates.drop(columns=["n_battles", "baseline"]), on="model", how="left"
    )
    table["baseline"] = baseline
    return table[list(EVAL_MODEL_RANKING_COLUMN_TYPES)].astype(EVAL_MODEL_RANKING_COLUMN_TYPES)
