from kedro.pipeline import Pipeline, node, pipeline

from llm_feedback.pipelines.evaluate.nodes import (
    generate,
    judge,
    judgment_viewer,
    prepare,
    summarise,
    validate_judge,
)
from llm_feedback.pipelines.evaluate.ranking_nodes import rank_models

PARAMS = ["params:evaluate", "params:endpoints"]


def create_pipeline(**kwargs) -> Pipeline:
    return pipeline(
        [
            node(
                prepare,
                ["eval_samples", *PARAMS],
                "eval_samples_checked",
                name="check_eval_samples",
            ),
            node(
                generate,
                ["eval_samples_checked", *PARAMS, "params:request_cache"],
                "eval_samples_answered",
                name="generate_missing_responses",
            ),
            node(
                judge,
                ["eval_samples_answered", *PARAMS, "params:request_cache"],
                ["eval_judgments", "eval_panel_judgments"],
                name="judge_eval_samples",
            ),
            node(
                validate_judge,
                [
                    "eval_judgments",
                    "eval_samples_answered",
                    *PARAMS,
                    "judge_validation_history",
                    "eval_samples",
                ],
                [
                    "judge_validation",
                    "eval_annotator_agreement",
                    "eval_judge_validation_metrics",
                    "eval_judge_card",
                    "judge_accuracy_figure",
                ],
                name="validate_judge",
            ),
            node(
                summarise,
                # judge_validation: evaluate.judge_requirement is checked on the cards
                # before eval_metrics is written (and before the ranking, below).
                ["eval_judgments", *PARAMS, "eval_judge_validation_metrics", "judge_validation"],
                "eval_metrics",
                name="compute_eval_metrics",
            ),
            node(
                judgment_viewer,
                ["eval_samples_answered", "eval_judgments"],
                "eval_judgment_viewer",
                name="build_eval_judgment_viewer",
            ),
            node(
                rank_models,
                ["eval_judgments", "eval_samples_answered", *PARAMS, "judge_validation"],
                [
                    "eval_model_ranking",
                    "eval_style_coefficients",
                    "eval_model_ranking_figure",
                    "eval_alpaca_eval",
                    "eval_arena_hard",
                ],
                name="rank_eval_models",
            ),
        ],
        tags="evaluate",
    )
