from kedro.pipeline import Pipeline, node, pipeline

from llm_feedback.pipelines.report.nodes import (
    annotate_judge,
    estimate_costs,
    preference_pairs,
    read_params,
    reading_tables,
    render_report,
)
from llm_feedback.reporting import (
    aspect_heatmap_figure,
    judge_health,
    model_aspect_metrics,
    model_score_metrics,
    position_bias_figure,
    position_consistency,
    rating_by_position,
    rating_distribution_figure,
    score_scatter_figure,
    shuffle_agreement,
    source_aspect_metrics,
)

# Filled by llm_feedback.hooks.ReportProvenanceHooks; catalog_report.yml declares it empty
# so that the pipeline still runs (saying "no versions recorded") where the hook is not
# registered.
INPUT_VERSIONS = "report_input_versions"

# Tables the report renders; each is also a versioned Parquet dataset of the same name.
REPORT_TABLES = (
    "model_aspect_metrics",
    "source_aspect_metrics",
    "model_score_metrics",
    "judge_health",
    "position_consistency",
    "shuffle_agreement",
    "rating_by_position",
    "cost_table",
    "preference_pairs",
    "pair_drops",
)


def create_pipeline(**kwargs) -> Pipeline:
    return pipeline(
        [
            node(
                read_params,
                "params:report",
                "report_params",
                name="read_report_params",
                tags="params",
            ),
            node(
                reading_tables(model_aspect_metrics),
                ["aspect_annotations", "completions"],
                "model_aspect_metrics",
                name="compute_model_aspect_metrics",
            ),
            node(
                reading_tables(source_aspect_metrics),
                ["aspect_annotations", "completions"],
                "source_aspect_metrics",
                name="compute_source_aspect_metrics",
            ),
            node(
                model_score_metrics,
                "overall_scores",
                "model_score_metrics",
                name="compute_model_score_metrics",
            ),
            node(
                reading_tables(judge_health),
                ["aspect_annotations", "critiques", "overall_scores"],
                "judge_health",
                name="compute_judge_health",
            ),
            node(
                reading_tables(position_consistency),
                "aspect_annotations",
                "position_consistency",
                name="compute_position_consistency",
            ),
            node(
                reading_tables(shuffle_agreement),
                "aspect_annotations",
                "shuffle_agreement",
                name="compute_shuffle_agreement",
            ),
            node(
                reading_tables(rating_by_position),
                "aspect_annotations",
                "rating_by_position",
                name="compute_rating_by_position",
            ),
            node(
                reading_tables(estimate_costs),
                ["completions", "aspect_annotations", "critiques", "report_params"],
                "cost_table",
                name="estimate_costs",
            ),
            node(
                reading_tables(preference_pairs),
                [
                    "completions",
                    "overall_scores",
                    "aspect_annotations",
                    "decontamination_questions",
                    "report_params",
                ],
                ["preference_pairs", "pair_drops"],
                name="binarize_preference_pairs",
            ),
            node(
                reading_tables(rating_distribution_figure),
                ["aspect_annotations", "completions"],
                "rating_distribution_figure",
                name="plot_rating_distribution",
            ),
            node(
                aspect_heatmap_figure,
                "model_aspect_metrics",
                "aspect_heatmap_figure",
                name="plot_aspect_heatmap",
            ),
            node(
                score_scatter_figure,
                "overall_scores",
                "score_scatter_figure",
                name="plot_score_scatter",
            ),
            node(
                reading_tables(position_bias_figure),
                "aspect_annotations",
                "position_bias_figure",
                name="plot_position_bias",
            ),
            node(
                annotate_judge,
                ["params:annotate", "params:endpoints"],
                "annotate_judge_key",
                name="key_annotate_judge",
                tags="params",
            ),
            node(
                render_report,
                {
                    "input_versions": INPUT_VERSIONS,
                    "params": "report_params",
                    "completions": "completions",
                    # The card of annotate's judge, when judge_validation has one.
                    "judge_cards": "judge_validation_history",
                    "judge_key": "annotate_judge_key",
                    **{table: table for table in REPORT_TABLES},
                },
                "report",
                name="render_report",
            ),
        ],
        tags="report",
    )
