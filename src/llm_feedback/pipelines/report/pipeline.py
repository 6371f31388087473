from kedro.pipeline import Pipeline, node, pipeline

from llm_feedback.pipelines.report.nodes import (
    estimate_costs,
    preference_pairs,
    rank_models,
    read_params,
    reading_tables,
    render_report,
    with_bootstrap,
)
from llm_feedback.reporting import (
    aspect_heatmap_figure,
    judge_health,
    model_aspect_metrics,
    model_ranking_figure,
    model_score_metrics,
    position_bias_figure,
    position_consistency,
    rating_by_length_figure,
    rating_by_position,
    rating_distribution_figure,
    score_scatter_figure,
    shuffle_agreement,
    source_aspect_metrics,
)
from llm_feedback.reporting.uncertainty import judge_bias, rating_by_length

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
    "model_ranking",
    "judge_bias",
    "rating_by_length",
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
                reading_tables(with_bootstrap(model_aspect_metrics)),
                ["aspect_annotations", "completions", "report_params"],
                "model_aspect_metrics",
                name="compute_model_aspect_metrics",
            ),
            node(
                reading_tables(with_bootstrap(source_aspect_metrics)),
                ["aspect_annotations", "completions", "report_params"],
                "source_aspect_metrics",
                name="compute_source_aspect_metrics",
            ),
            node(
                with_bootstrap(model_score_metrics),
                ["overall_scores", "report_params"],
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
                reading_tables(with_bootstrap(position_consistency)),
                ["aspect_annotations", "report_params"],
                "position_consistency",
                name="compute_position_consistency",
            ),
            node(
                reading_tables(with_bootstrap(shuffle_agreement)),
                ["aspect_annotations", "report_params"],
                "shuffle_agreement",
                name="compute_shuffle_agreement",
            ),
            node(
                reading_tables(with_bootstrap(rating_by_position)),
                ["aspect_annotations", "report_params"],
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
                reading_tables(rank_models),
                ["completions", "overall_scores", "aspect_annotations", "report_params"],
                "model_ranking",
                name="rank_models",
            ),
            node(
                reading_tables(with_bootstrap(judge_bias)),
                ["aspect_annotations", "completions", "report_params"],
                "judge_bias",
                name="compute_judge_bias",
            ),
            node(
                reading_tables(with_bootstrap(rating_by_length)),
                ["aspect_annotations", "completions", "report_params"],
                "rating_by_length",
                name="compute_rating_by_length",
            ),
            node(
                model_ranking_figure,
                "model_ranking",
                "model_ranking_figure",
                name="plot_model_ranking",
            ),
            node(
                rating_by_length_figure,
                "rating_by_length",
                "rating_by_length_figure",
                name="plot_rating_by_length",
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
                render_report,
                {
                    "input_versions": INPUT_VERSIONS,
                    "params": "report_params",
                    "completions": "completions",
                    **{table: table for table in REPORT_TABLES},
                },
                "report",
                name="render_report",
            ),
        ],
        tags="report",
    )
