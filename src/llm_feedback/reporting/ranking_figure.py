"""The evaluate pipeline's model-ranking figure: Bradley-Terry scores with their intervals.

The annotate report's `model_ranking_figure` (reporting/figures.py on main) draws the same
table with a title of its own; this one is for `eval_model_ranking`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from llm_feedback.reporting.figures import NO_DATA, message_figure, new_figure

TITLE = "Model ranking (Bradley-Terry, from pairwise judgments)"


def eval_model_ranking_figure(ranking: pd.DataFrame) -> Figure:
    """Scores with their intervals as error bars, best model on top, and each model's raw
    and length-controlled win rate against the baseline in its label."""
    if ranking.empty:
        return message_figure(TITLE, NO_DATA)
    ordered = ranking.sort_values("score")
    labels = [
        row.model
        if pd.isna(row.win_rate)
        else f"{row.model}\nwin {row.win_rate:.0%}, LC {row.lc_win_rate:.0%} vs {row.baseline}"
        for row in ordered.itertuples()
    ]
    figure = new_figure(7, 1.2 + 0.6 * len(ordered))
    axes = figure.add_subplot()
    score = ordered["score"].to_numpy(dtype="float64")
    errors = np.vstack([score - ordered["ci_low"], ordered["ci_high"] - score])
    axes.errorbar(score, labels, xerr=np.nan_to_num(errors), fmt="o", capsize=4, color="C0")
    axes.axvline(1000, color="0.7", linestyle="--", linewidth=1)
    axes.set_xlabel("score (Elo-like; 1000 = average model), 95% interval")
    axes.set_title(TITLE)
    return figure
