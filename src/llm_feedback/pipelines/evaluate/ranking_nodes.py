"""Thin node: pairwise judgments in; `eval_model_ranking`, the style coefficients and the
ranking's figure out."""

from collections.abc import Mapping
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from llm_feedback.evaluation.ranking import model_ranking
from llm_feedback.pipelines.parsed_params import evaluate_params
from llm_feedback.reporting.figures import model_ranking_figure

TITLE = "Model ranking (Bradley-Terry, from pairwise judgments)"


def rank_models(
    eval_judgments: pd.DataFrame,
    samples: pd.DataFrame,
    evaluate: Mapping[str, Any],
    endpoints: Mapping[str, Any],
) -> tuple[pd.DataFrame, pd.DataFrame, Figure]:
    ranking, coefficients = model_ranking(
        eval_judgments, samples, evaluate_params(evaluate, endpoints)
    )
    return ranking, coefficients, model_ranking_figure(ranking, TITLE)
