"""Report library: metrics tables, preference pairs, figures and the Markdown report.

Pure pandas/matplotlib, no Kedro: the `report` pipeline's nodes call these functions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llm_feedback.core.lazy import lazy_exports

if TYPE_CHECKING:
    from llm_feedback.reporting.figures import (
        aspect_heatmap_figure,
        model_ranking_figure,
        position_bias_figure,
        rating_by_length_figure,
        rating_distribution_figure,
        score_scatter_figure,
    )
    from llm_feedback.reporting.markdown import (
        describe_run,
        markdown_table,
        render_markdown_report,
    )
    from llm_feedback.reporting.metrics import (
        cost_table,
        judge_health,
        model_aspect_metrics,
        model_score_metrics,
        position_consistency,
        rating_by_position,
        shuffle_agreement,
        source_aspect_metrics,
        to_0_100,
    )
    from llm_feedback.reporting.pairs import PreferencePairs, binarize, normalise_instruction

# Each name is imported from its module when first used (llm_feedback/core/lazy.py).
_MODULE_OF = {
    "aspect_heatmap_figure": "figures",
    "model_ranking_figure": "figures",
    "position_bias_figure": "figures",
    "rating_by_length_figure": "figures",
    "rating_distribution_figure": "figures",
    "score_scatter_figure": "figures",
    "describe_run": "markdown",
    "markdown_table": "markdown",
    "render_markdown_report": "markdown",
    "cost_table": "metrics",
    "judge_health": "metrics",
    "model_aspect_metrics": "metrics",
    "model_score_metrics": "metrics",
    "position_consistency": "metrics",
    "rating_by_position": "metrics",
    "shuffle_agreement": "metrics",
    "source_aspect_metrics": "metrics",
    "to_0_100": "metrics",
    "PreferencePairs": "pairs",
    "binarize": "pairs",
    "normalise_instruction": "pairs",
}

__all__ = [
    "PreferencePairs",
    "aspect_heatmap_figure",
    "model_ranking_figure",
    "rating_by_length_figure",
    "binarize",
    "cost_table",
    "describe_run",
    "judge_health",
    "markdown_table",
    "model_aspect_metrics",
    "source_aspect_metrics",
    "model_score_metrics",
    "normalise_instruction",
    "position_bias_figure",
    "position_consistency",
    "rating_by_position",
    "rating_distribution_figure",
    "render_markdown_report",
    "score_scatter_figure",
    "shuffle_agreement",
    "to_0_100",
]


__getattr__, __dir__ = lazy_exports(__name__, _MODULE_OF)
