"""`eval_model_ranking`: models compared from the evaluate pipeline's pairwise judgments.

Each judged pair of one (instance, turn, replicate) is a battle between model_a and model_b
with its outcome (1 A won, 0.5 tie, 0 B won: both orders were asked and folded into one
outcome by the judge kind) and the two responses' lengths in characters. On these
battles (`llm_feedback.stats`, intervals clustered by instance_id, so every turn,
replicate and model pair of an instance is resampled together):
  - a Bradley-Terry ranking by maximum likelihood with bootstrap intervals (`stats.ranking`);
  - wins / ties / losses and the win rate (ties half) against the baseline model;
  - a length-controlled win rate and its length coefficient (`stats.length_control`: the
    form of AlpacaEval's `length_controlled_minimal`, fitted by maximum likelihood without
    penalty), beside the raw one;
  - a style-controlled Bradley-Terry score after Arena-Hard's style control, with the
    style covariates' coefficients.
`alpaca_eval_win_rates` gives AlpacaEval 2's own figures under its own names
(`stats.alpaca_eval`), `arena_hard_win_rates` Arena-Hard-Auto's (`stats.arena_hard`).
The table is built by `llm_feedback.stats.comparison`, as the annotate report's
`model_ranking` is. A comparison without an outcome (an unreadable verdict, a missing
response) is no battle: it is left out with a warning that counts it (eval_metrics counts
it per model as `n_missing`); a baseline with no battle at all leaves the table empty.
"""

from __future__ import annotations

import logging

import pandas as pd

from llm_feedback.core.errors import ConfigError, InputError
from llm_feedback.evaluation.config import EvaluateParams
from llm_feedback.evaluation.metric_intervals import baseline_model
from llm_feedback.evaluation.recorded import PROMPT_KEY
from llm_feedback.stats.alpaca_eval import (
    ALPACA_EVAL_COLUMNS,
    GamedBaselines,
    alpaca_eval_table,
)
from llm_feedback.stats.arena_hard import (
    ARENA_HARD_COLUMNS,
    ARENA_HARD_STYLE,
    arena_hard_battles,
    arena_hard_scores,
    arena_hard_style_counts,
)
from llm_feedback.stats.comparison import ModelComparison, compare_models
from llm_feedback.stats.length_control import STYLE_FEATURES, style_features
from llm_feedback.storage.schema import (
    EVAL_MODEL_RANKING_COLUMN_TYPES,
    STYLE_COEFFICIENTS_COLUMN_TYPES,
)

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
    """instance, model_a, model_b, outcome, probability and per side (`_a`, `_b`) the
    `STYLE_FEATURES` of the two responses judged (length in characters, headers, bold,
    list_items): one row per pairwise judgment with an outcome. The instance is the
    judgment's `prompt_key` where it has one (recorded pairs of one prompt share it), else
    its instance_id; probability is A's probability-weighted win, (1 + prob_margin) / 2,
    where the judgment has one.

    Args:
        judgments: eval_judgments' pairwise rows.
        samples: the samples with the responses judged.

    Returns:
        The battles.
    """
    features = style_features(samples["response"].astype("string").astype(object))
    styled = pd.concat([samples[SAMPLE_KEY], features], axis=1)
    battles = judgments.assign(
        outcome=judgments["outcome"].astype("object").map(OUTCOME_SCORES),
        probability=(1 + judgments["prob_margin"].astype("float64")) / 2
        if "prob_margin" in judgments.columns
        else float("nan"),
    )
    battles = battles.dropna(subset=["outcome"])
    for side in ("a", "b"):
        names = {"model": f"model_{side}"} | {f: f"{f}_{side}" for f in STYLE_FEATURES}
        key = ["instance_id", "turn", "replicate", f"model_{side}"]
        battles = battles.merge(styled.rename(columns=names), on=key, how="left")
    sides = [f"{feature}_{side}" for feature in STYLE_FEATURES for side in ("a", "b")]
    if PROMPT_KEY in battles.columns:
        battles["instance_id"] = battles[PROMPT_KEY].fillna(battles["instance_id"])
    return battles.rename(columns={"instance_id": "instance"})[
        ["instance", "model_a", "model_b", "outcome", "probability", *sides]
    ]


def model_ranking(
    judgments: pd.DataFrame, samples: pd.DataFrame, config: EvaluateParams
) -> ModelComparison:
    """`EVAL_MODEL_RANKING_COLUMN_TYPES` rows, one per model, and the style coefficients
    (`STYLE_COEFFICIENTS_COLUMN_TYPES`); both empty unless the mode compares and the
    judgments hold at least two models with an outcome.

    Args:
        judgments: eval_judgments rows.
        samples: the samples with the responses judged.
        config: the evaluate parameters.

    Returns:
        The ranking and the style coefficients.
    """
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


def gamed_difficulty_by_prompt(gamed: GamedBaselines, samples: pd.DataFrame) -> pd.Series:
    """The gamed-baselines file's instruction difficulty keyed as the battles' instances
    are (`prompt_key`, else instance_id): by the instruction's text where the file names
    it, else by position, the prompts numbered in the order they first appear in `samples`
    (AlpacaEval's own order when a model with every instruction comes first, as in
    its published annotations).

    Args:
        gamed: the gamed-baselines file's contents.
        samples: the samples.

    Returns:
        The difficulty per battle instance.
    """
    keys = samples["instance_id"]
    if PROMPT_KEY in samples.columns:
        keys = samples[PROMPT_KEY].fillna(keys)
    if gamed.difficulty.index.name == "instruction":
        key_of_text = dict(zip(samples["question"], keys, strict=True))
        by_text = gamed.difficulty[gamed.difficulty.index.isin(key_of_text.keys())]
        return pd.Series(by_text.to_numpy(), index=by_text.index.map(key_of_text))
    order = pd.unique(keys)
    position = gamed.difficulty.index.to_numpy(dtype="int64")
    inside = (position >= 0) & (position < len(order))
    return pd.Series(gamed.difficulty.to_numpy()[inside], index=order[position[inside]])


def alpaca_eval_win_rates(
    judgments: pd.DataFrame, samples: pd.DataFrame, config: EvaluateParams
) -> pd.DataFrame:
    """AlpacaEval 2's figures under its names (`stats.alpaca_eval.ALPACA_EVAL_COLUMNS`).

    One row per model against the baseline: from the probability-weighted verdicts where
    the judgments have them (recorded preferences, the judge's `prob_margin`), else from the
    outcomes. With `evaluate.ranking.alpaca_eval_gamed` (AlpacaEval's `df_gamed.csv`) the
    instruction difficulty is the file's and `length_controlled_v1` is computed.

    Args:
        judgments: eval_judgments.
        samples: eval_samples.
        config: the evaluate parameters.

    Returns:
        The table; empty unless the mode compares and two or more models have an outcome.

    Raises:
        InputError: the gamed-baselines file is unreadable.
    """
    empty = _typed(None, ALPACA_EVAL_COLUMNS)
    if not config.kind.compares:
        return empty
    battles = pairwise_battles(judgments, samples)
    models = pd.concat([battles["model_a"], battles["model_b"]])
    if models.nunique() < 2:
        return empty
    baseline = baseline_model(models, config.ranking.baseline)
    gamed = difficulty = None
    if config.ranking.alpaca_eval_gamed:
        try:
            gamed = GamedBaselines.read(config.ranking.alpaca_eval_gamed)
        except InputError as error:
            raise InputError(f"evaluate.ranking.alpaca_eval_gamed: {error}") from None
        difficulty = gamed_difficulty_by_prompt(gamed, samples)
    return alpaca_eval_table(battles, baseline, difficulty, gamed)


def arena_hard_win_rates(
    judgments: pd.DataFrame, samples: pd.DataFrame, config: EvaluateParams
) -> pd.DataFrame:
    """Arena-Hard-Auto's scores (`stats.arena_hard.ARENA_HARD_COLUMNS`) of the pairwise
    judgments against the baseline.

    Both games of each judgment are battles, strong recorded verdicts three times; the
    style-controlled score uses each answer's Arena-Hard style counts (token lengths where
    tiktoken can count them, else characters with a warning).

    Args:
        judgments: eval_judgments.
        samples: eval_samples (the answers whose style is counted).
        config: the evaluate parameters.

    Returns:
        The table; empty unless the mode compares and the baseline met a model in a
        judgment with both games read.
    """
    if not config.kind.compares or judgments.empty:
        return _typed(None, ARENA_HARD_COLUMNS)
    keyed = judgments.assign(
        instance=judgments[PROMPT_KEY].fillna(judgments["instance_id"])
        if PROMPT_KEY in judgments.columns
        else judgments["instance_id"]
    )
    counts, unit = arena_hard_style_counts(samples["response"].astype("string").astype(object))
    styled = pd.concat([samples[SAMPLE_KEY], counts], axis=1).drop_duplicates(SAMPLE_KEY)
    for side in ("a", "b"):
        names = {"model": f"model_{side}"} | {f: f"{f}_{side}" for f in ARENA_HARD_STYLE}
        key = ["instance_id", "turn", "replicate", f"model_{side}"]
        keyed = keyed.merge(styled.rename(columns=names), on=key, how="left")
    battles = arena_hard_battles(keyed, instance="instance")
    models = pd.concat([battles["model_a"], battles["model_b"]])
    baseline = baseline_model(models, config.ranking.baseline)
    return arena_hard_scores(battles, baseline, **config.intervals.kwargs, length_unit=unit)
