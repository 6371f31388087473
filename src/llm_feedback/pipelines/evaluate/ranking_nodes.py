"""Thin node: pairwise judgments in; `eval_model_ranking`, the style coefficients, the
ranking's figure and the anchors' figures under their names (`eval_alpaca_eval`,
`eval_arena_hard`) out."""

from collections.abc import Mapping
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from llm_feedback.evaluation.judge_validation import check_judge_requirement
from llm_feedback.evaluation.ranking import (
    alpaca_eval_win_rates,
    arena_hard_win_rates,
    model_ranking,
)
from llm_feedback.pipelines.parsed_params import evaluate_params
from llm_feedback.reporting.figures import model_ranking_figure

TITLE = "Model ranking (Bradley-Terry, from pairwise judgments)"


def rank_models(
    eval_judgments: pd.DataFrame,
    samples: pd.DataFrame,
    evaluate: Mapping[str, Any],
    endpoints: Mapping[str, Any],
    judge_cards: pd.DataFrame,
) -> tuple[pd.DataFrame, pd.DataFrame, Figure, pd.DataFrame, pd.DataFrame]:
    config = evaluate_params(evaluate, endpoints)
    check_judge_requirement(judge_cards, config)  # the gate, as before eval_metrics
    ranking, coefficients = model_ranking(eval_judgments, samples, config)
    alpaca_eval = alpaca_eval_win_rates(eval_judgments, samples, config)
    arena_hard = arena_hard_win_rates(eval_judgments, samples, config)
    figure = model_ranking_figure(ranking, TITLE)
    return ranking, coefficients, figure, alpaca_eval, arena_hard
