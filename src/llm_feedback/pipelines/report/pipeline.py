from kedro.pipeline import Pipeline, node, pipeline

from llm_feedback.pipelines.report.nodes import (
    WithBootstrap,
    estimate_costs,
    judgment_viewer,
    preference_pairs,
    rank_models,
    render_report,
    validate_annotate_judge,
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

# report_input_versions is filled by llm_feedback.hooks.ReportProvenanceHooks; catalog_report.yml
# declares it empty so that the pipeline still runs (saying "no versions recorded") where the
# hook is not registered.


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
    "style_coefficients",
    "judge_bias",
    "rating_by_length",
    "cost_table",
    "pair_counts",  # the pairs' line: the report never reads the pairs themselves
    "pair_drops",
)


def create_pipeline(**kwargs) -> Pipeline:
    return pipeline(
        [
            node(
                WithBootstrap(
                    model_aspect_metrics
                ),  # reads its tables a chunk of prompts at a time
                ["aspect_annotations", "completions", "params:report"],
                "model_aspect_metrics",
                name="compute_model_aspect_metrics",
            ),
            node(
                WithBootstrap(source_aspect_metrics),  # as model_aspect_metrics
                ["aspect_annotations", "completions", "params:report"],
                "source_aspect_metrics",
                name="compute_source_aspect_metrics",
            ),
            node(
                WithBootstrap(model_score_metrics),  # reads the table a record batch at a time
                ["overall_scores", "params:report"],
                "model_score_metrics",
                name="compute_model_score_metrics",
            ),
            node(
                judge_health,  # counts the tables a record batch at a time
                ["aspect_annotations", "critiques", "overall_scores"],
                "judge_health",
                name="compute_judge_health",
            ),
            node(
                WithBootstrap(position_consistency),  # a chunk of prompts at a time
                ["aspect_annotations", "params:report"],
                "position_consistency",
                name="compute_position_consistency",
            ),
            node(
                WithBootstrap(shuffle_agreement),  # twice, a chunk of prompts at a time
                ["aspect_annotations", "params:report"],
                "shuffle_agreement",
                name="compute_shuffle_agreement",
            ),
            node(
                WithBootstrap(rating_by_position),  # reads the table a record batch at a time
                ["aspect_annotations", "params:report"],
                "rating_by_position",
                name="compute_rating_by_position",
            ),
            node(
                estimate_costs,  # reads its tables a chunk of prompts at a time
                [
                    "completions",
                    "aspect_annotations",
                    "critiques",
                    "overall_scores",
                    "params:report",
                    "parameters",
                ],
                "cost_table",
                name="estimate_costs",
            ),
            node(
                preference_pairs,  # the pairs are built a chunk of prompts at a time when saved
                [
                    "completions",
                    "overall_scores",
                    "aspect_annotations",
                    "decontamination_questions",
                    "params:report",
                ],
                ["preference_pairs", "pair_drops", "pair_counts"],
                name="binarize_preference_pairs",
            ),
            node(
                rank_models,  # spools the battles a chunk of prompts at a time
                ["completions", "overall_scores", "aspect_annotations", "params:report"],
                ["model_ranking", "style_coefficients"],
                name="rank_models",
            ),
            node(
                WithBootstrap(judge_bias),  # walks its tables twice, a chunk of prompts at a time
                ["aspect_annotations", "completions", "params:report"],
                "judge_bias",
                name="compute_judge_bias",
            ),
            node(
                WithBootstrap(rating_by_length),  # as judge_bias
                ["aspect_annotations", "completions", "params:report"],
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
                rating_distribution_figure,  # counts its tables a chunk of prompts at a time
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
                score_scatter_figure,  # as model_score_metrics
                "overall_scores",
                "score_scatter_figure",
                name="plot_score_scatter",
            ),
            node(
                position_bias_figure,  # as rating_by_position
                "aspect_annotations",
                "position_bias_figure",
                name="plot_position_bias",
            ),
            node(
                judgment_viewer,
                ["completions", "aspect_annotations", "critiques", "overall_scores"],
                "judgment_viewer",
                name="build_judgment_viewer",
            ),
            node(
                validate_annotate_judge,  # nothing new unless report.labels.path is set
                [
                    "completions",
                    "aspect_annotations",
                    "annotate_judge_validation_history",
                    "params:report",
                    # The judge that rated the data, from its run record (RunRecordHooks).
                    "run_lineage",
                ],
                ["annotate_judge_validation", "corrected_ratings"],
                name="validate_annotate_judge",
            ),
            node(
                render_report,
                {
                    "input_versions": "report_input_versions",
                    "report": "params:report",
                    "completions": "completions",
                    "judgment_viewer": "judgment_viewer",  # linked: built first
                    # The card of annotate's judge (as recorded), when judge_validation has one.
                    # report.judge_requirement is checked on these before the report is made.
                    "judge_cards": "judge_validation_history",
                    # The cards and corrected ratings of the viewer's labels, if any.
                    "annotate_cards": "annotate_judge_validation",
                    "corrected_ratings": "corrected_ratings",
                    # The judge that rated the data, from its run record, not the current
                    # configuration (RunRecordHooks fills it when the run starts).
                    "run_lineage": "run_lineage",
                    "contamination_counts": "contamination_counts",
                    **{table: table for table in REPORT_TABLES},
                },
                "report",
                name="render_report",
            ),
        ],
        tags="report",
    )
