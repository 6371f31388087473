"""Thin node: pairwise judgments in; `eval_model_ranking` and its figure out."""

import pandas as pd
from matplotlib.figure import Figure

from llm_feedback.evaluation.config import EvaluateParams
from llm_feedback.evaluation.ranking import model_ranking
from llm_feedback.reporting.ranking_figure import eval_model_ranking_figure


def rank_models(
    eval_judgments: pd.DataFrame, samples: pd.DataFrame, params: EvaluateParams
) -> tuple[pd.DataFrame, Figure]:
    ranking = model_ranking(eval_judgments, samples, params)
    return ranking, eval_model_ranking_figure(ranking)
